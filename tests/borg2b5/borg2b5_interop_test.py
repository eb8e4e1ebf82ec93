#!/usr/bin/env python3
"""Interop tests: borgcheck against repositories made by real borg2 2.0.0b5 at test time.

The fixtures in shared/fixtures/borg2b5 were made once, elsewhere; these tests make fresh
repositories with the borg2 installed here (Debian's borgbackup2 = 2.0.0b5), so every run
exercises new keys, salts, session ids and obfuscation padding. Phases:

  1. setUpModule: one repository per encryption mode `borg2 rcreate` offers (the test asks
     borg2 for its list and compares), each with one archive per compression (none, lz4,
     zstd, zlib, lzma, obfuscation); each archive gets its own deterministic input so nothing
     deduplicates across archives. Repositories are built in parallel. Key files land where
     b5 puts them: $BORG_BASE_DIR/.config/keys.
  2. Clean matrix: `borgcheck --verify-data --json` on every repository: exit 0, no finding,
     objects_verified == objects_total == the current objects this file finds by replaying the
     segments itself (spec §A.1.3, checked against index.T), == the count of borg2's own
     `check --verify-data`; the keyless check passes without a passphrase.
  3. Key sources: key files found through BORG_BASE_DIR (b5's quirk), BORG_KEY_FILE,
     BORG_KEYS_DIR; missing key (42), wrong passphrase (52), BORG_PASSCOMMAND.
  4. Damage: copies of repositories, each damaged one way (payload byte with xxh64 and CRC
     repaired, data envelope type byte repaired, payload byte with the xxh64 left stale,
     truncated segment, deleted segment). borgcheck runs on one copy and
     `borg2 check --verify-data` on ANOTHER copy (borg writes into the repositories it
     checks). The chunk ids and locations each reports are compared with each other and with
     what this file knows it damaged.

Every borgcheck run also asserts that the repository it read is unchanged: same paths, same
bytes, same mtimes.

Run: borg2b5_interop_test.py --borgcheck PATH [--borg2 PATH] [unittest args]. Python 3 stdlib.
"""

import argparse
import collections
import configparser
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib
from concurrent.futures import ThreadPoolExecutor

# XXH64 (for repairing damaged entries): the one Python copy, in tests/interop/repo_files.py;
# every entry of the repositories made here is checked with it against borg2's own digests.
# snapshot() (borgcheck must not change the repository: every path's kind, size, mtime and
# sha256) and clean_environment() (no BORG_* / XDG_* of the caller's): borg_generations.py there.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "interop"))
from borg_generations import clean_environment, snapshot  # noqa: E402
from repo_files import xxh64  # noqa: E402

BORGCHECK = None  # set by main()
BORG2 = "borg2"

# (borg2 rcreate -e, type byte of the manifest's data envelope; spec §A.3.1)
MODES = [
    ("none", 0x02),
    ("authenticated", 0x07),
    ("authenticated-blake2", 0x06),
    ("repokey-aes-ocb", 0x11),
    ("keyfile-aes-ocb", 0x10),
    ("repokey-chacha20-poly1305", 0x21),
    ("keyfile-chacha20-poly1305", 0x20),
    ("repokey-blake2-aes-ocb", 0x31),
    ("keyfile-blake2-aes-ocb", 0x30),
    ("repokey-blake2-chacha20-poly1305", 0x41),
    ("keyfile-blake2-chacha20-poly1305", 0x40),
]
AEAD_MODES = {m for m, t in MODES if t >= 0x10}
KEYFILE_MODES = {m for m, _ in MODES if m.startswith("keyfile")}

# (archive name, borg2 create --compression). lzma at level 1: the stored format is the same at
# every level and level 1 is much faster.
COMPRESSIONS = [
    ("c-none", "none"),
    ("c-lz4", "lz4"),
    ("c-zstd", "zstd,3"),
    ("c-zlib", "zlib,6"),
    ("c-lzma", "lzma,1"),
    ("c-obf", "obfuscate,3,zstd,3"),
]

PASSPHRASE = "test"
MANIFEST_ID = "00" * 32

EXIT_OK = 0
EXIT_KEY_FILE_NOT_FOUND = 42
EXIT_WRONG_PASSPHRASE = 52
EXIT_INTEGRITY_ERRORS = 90

WORK = None      # temporary directory holding everything
REPOS = {}       # mode -> pristine repository (never checked by borg2, never damaged)
BORG_ENV = None  # environment for borg2 and borgcheck


# --- environment ----------------------------------------------------------------------------

def make_env(work):
    """No BORG_* / XDG_* settings from the caller; HOME and BORG_BASE_DIR inside `work` (so
    key files land there and nothing touches the real home); answers to borg's questions."""
    env = clean_environment()
    env.update({
        "HOME": os.path.join(work, "home"),
        "BORG_BASE_DIR": os.path.join(work, "base"),
        "BORG_PASSPHRASE": PASSPHRASE,
        "BORG_DISPLAY_PASSPHRASE": "no",
        "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "yes",
        "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes",
        "LC_ALL": "C.UTF-8",
    })
    os.makedirs(env["HOME"], exist_ok=True)
    os.makedirs(env["BORG_BASE_DIR"], exist_ok=True)
    return env


def b5_keys_dir(env):
    """Where borg2 2.0.0b5 puts key files when BORG_BASE_DIR is set (spec §A.2.1)."""
    return os.path.join(env["BORG_BASE_DIR"], ".config", "keys")


def with_cache(env, name):
    """env with a cache directory of its own, so parallel borg2 processes never race on it."""
    env = dict(env)
    env["BORG_CACHE_DIR"] = os.path.join(WORK, "cache", name)
    return env


def run_borg2(args, env, cwd=None, check=True):
    p = subprocess.run([BORG2] + args, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError("borg2 %s failed (rc %d):\n%s" % (" ".join(args), p.returncode, p.stderr))
    return p


# --- input tree -----------------------------------------------------------------------------

def write_input(root, k):
    """Input for archive number k: text (compressible), seeded random bytes (stored as ctype 0
    by every compressor), zeros, a tiny file and an empty one; all but the zeros differ per k."""
    os.makedirs(root, exist_ok=True)
    rng = random.Random(2000 + k)
    words = ["borg2", "segment", "put2", "xxh64", "session", "argon2", "chacha20", "ocb",
             "blake2", "manifest", "archive", "zstd", "lzma", "lz4", "zlib", "obfuscate"]
    lines = ["%d %d %s" % (k, i, " ".join(rng.choice(words) for _ in range(8))) for i in range(400)]
    with open(os.path.join(root, "text.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(root, "random.bin"), "wb") as f:
        f.write(rng.randbytes(4 * 4096 + 777 + k))
    with open(os.path.join(root, "zeros.bin"), "wb") as f:
        f.write(bytes(2 * 4096 + 100 + k))
    with open(os.path.join(root, "tiny.txt"), "w") as f:
        f.write("tiny file of archive %d\n" % k)
    open(os.path.join(root, "empty"), "w").close()


def make_repo(mode, env):
    repo = os.path.join(WORK, "repos", mode)
    env = with_cache(env, "create-" + mode)
    run_borg2(["-r", repo, "rcreate", "--encryption", mode], env)
    for name, compression in COMPRESSIONS:
        run_borg2(["-r", repo, "create", "--chunker-params", "fixed,4096", "--compression",
                   compression, name, "."], env, cwd=os.path.join(WORK, "input", name))
    return repo


# --- reading a repository (spec §A.1) -------------------------------------------------------

Entry = collections.namedtuple("Entry", "tag id segment offset size path")


def segments_per_dir(repo):
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(os.path.join(repo, "config"))
    return cfg.getint("repository", "segments_per_dir", fallback=1000)


def segment_path(repo, segment):
    return os.path.join(repo, "data", str(segment // segments_per_dir(repo)), str(segment))


def segment_numbers(repo):
    return sorted(int(n) for d in os.listdir(os.path.join(repo, "data"))
                  for n in os.listdir(os.path.join(repo, "data", d)) if n.isdigit())


def walk_segment(repo, seg):
    """All entries of an undamaged segment; asserts every CRC and xxh64 (this also checks the
    xxh64 above against borg2's own digests)."""
    path = segment_path(repo, seg)
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:8] == b"BORG_SEG", path
    off, out = 8, []
    while off < len(raw):
        crc, size, tag = struct.unpack_from("<IIB", raw, off)
        covered = 49 if tag == 3 else size
        assert zlib.crc32(raw[off + 4:off + covered]) == crc, (path, off)
        if tag == 3:
            stored = struct.unpack_from(">Q", raw, off + 41)[0]
            assert xxh64(raw[off + 4:off + 41] + raw[off + 49:off + size]) == stored, (path, off)
        out.append(Entry(tag, raw[off + 9:off + 41].hex() if tag in (1, 3) else None, seg, off, size, path))
        off += size
    return out


def read_index(repo):
    """index.T with the highest T, as {id hex: (segment, offset)} (BORG2IDX, spec §A.1.4)."""
    ts = [int(n[6:]) for n in os.listdir(repo) if n.startswith("index.") and n[6:].isdigit()]
    with open(os.path.join(repo, "index.%d" % max(ts)), "rb") as f:
        raw = f.read()
    magic, version, entries, buckets, _empty, ksize, vsize = struct.unpack_from("<8siiiiii", raw, 0)
    assert magic == b"BORG2IDX" and version == 2 and ksize == 32 and vsize == 16
    assert len(raw) == 1024 + buckets * 48
    out = {}
    for b in range(buckets):
        pos = 1024 + b * 48
        seg, off = struct.unpack_from("<II", raw, pos + 32)
        if seg in (0xFFFFFFFF, 0xFFFFFFFE):
            continue
        out[raw[pos:pos + 32].hex()] = (seg, off)
    assert len(out) == entries
    return out


def current_objects(repo):
    """{id hex: Entry} of the current objects: a replay of the committed log, which must agree
    with index.T (or the repository this test built is not what the test thinks it is)."""
    replay = {}
    for seg in segment_numbers(repo):
        for e in walk_segment(repo, seg):
            if e.tag in (0, 3):
                replay[e.id] = e
            elif e.tag == 1:
                replay.pop(e.id, None)
    index = read_index(repo)
    assert {i: (e.segment, e.offset) for i, e in replay.items()} == index, "index.T disagrees with the log"
    return replay


def envelopes(entry):
    """(meta envelope offset, data envelope offset, data envelope length) in the segment file."""
    with open(entry.path, "rb") as f:
        f.seek(entry.offset + 49)
        meta_len = struct.unpack("<H", f.read(2))[0]
    meta = entry.offset + 49 + 2
    data = meta + meta_len
    return meta, data, entry.offset + entry.size - data


def plain_meta(entry):
    """The meta envelope bytes (readable msgpack after the type byte in the plain modes)."""
    meta, data, _ = envelopes(entry)
    with open(entry.path, "rb") as f:
        f.seek(meta)
        return f.read(data - meta)


def random_file_chunk(objs, mode):
    """A file chunk of 4 KiB of seeded random bytes, stored uncompressed: of the entry size most
    common among the chunks (those of random.bin in the five archives without obfuscation), the
    one with the largest id. Never the archive object or an item_ptrs chunk: an AEAD failure there
    makes borg2 b5 crash rather than report (the archive object's size varies with obfuscation's
    random padding elsewhere, so "the largest entry" could be it). In the plain modes no entry
    with obfuscation padding qualifies (a flipped padding byte is invisible to borg2: nothing
    authenticates it there)."""
    def eligible(e):
        return e.id != MANIFEST_ID and (mode in AEAD_MODES or b"psize" not in plain_meta(e))
    chunks = [e for e in objs.values() if eligible(e)]
    counts = collections.Counter(e.size for e in chunks)
    size = max(counts, key=lambda s: (counts[s], s))
    if counts[size] < 5:
        raise AssertionError("no entry size shared by the random file chunks: %r" % counts.most_common(3))
    return max((e for e in chunks if e.size == size), key=lambda e: e.id)


# --- running the two checkers ---------------------------------------------------------------

class BorgcheckResult:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.stderr = proc.stderr
        self.records = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        self.findings = [r for r in self.records if r["type"] == "finding"]
        summaries = [r for r in self.records if r["type"] == "summary"]
        self.summary = summaries[0] if summaries else None

    def error_ids(self):
        return {f["chunk_id"] for f in self.findings if f["severity"] == "error" and f["chunk_id"]}

    def describe(self):
        return "rc %d\nstdout:\n%s\nstderr:\n%s" % (
            self.rc, "\n".join(json.dumps(r, sort_keys=True) for r in self.records), self.stderr)


class Borg2Result:
    """`borg2 check --verify-data` output (spec §A.6.2): `chunk <id>, integrity error: ...` /
    `chunk <id>: Data integrity error: ...` (verify-data), `ID: <id> rebuilt index: <not found>
    ...` (repository index check), locations `[segment S, offset O]`."""

    def __init__(self, proc):
        self.rc = proc.returncode
        self.stderr = proc.stderr
        self.chunk_ids = set(re.findall(r"^chunk ([0-9a-f]{64})[,:]", proc.stderr, re.M))
        self.lost_ids = set(re.findall(r"^ID: ([0-9a-f]{64}) rebuilt index: <not found>", proc.stderr, re.M))
        self.locations = {(int(s), int(o)) for s, o in
                          re.findall(r"\[segment (\d+), offset (\d+)\]", proc.stderr)}
        m = re.search(r"verified (\d+) chunks with (\d+) integrity errors", proc.stderr)
        self.verified = (int(m.group(1)), int(m.group(2))) if m else None


def run_borgcheck(test, repo, env=None, args=("--verify-data", "--json")):
    """Runs borgcheck on `repo` and asserts that the repository is unchanged afterwards."""
    before = snapshot(repo)
    proc = subprocess.run([BORGCHECK] + list(args) + [repo], env=env or BORG_ENV,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    after = snapshot(repo)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    test.assertEqual(changed, [], "borgcheck changed %s: %s" % (repo, changed))
    return BorgcheckResult(proc)


def run_borg2_check(repo, env=None):
    return Borg2Result(run_borg2(["-r", repo, "check", "--verify-data", "--info"],
                                 with_cache(env or BORG_ENV, "check-" + os.path.basename(repo)),
                                 check=False))


def copy_repo(src, name):
    dst = os.path.join(WORK, "copies", name)
    shutil.copytree(src, dst, copy_function=shutil.copy2)
    return dst


# --- damage ---------------------------------------------------------------------------------

def flip(path, pos, xor=0x01):
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([b ^ xor]))


def put_byte(path, pos, value):
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(bytes([value]))


def repair_put2(entry):
    """Recomputes the xxh64 and the header CRC of a PUT2 entry after its payload changed."""
    with open(entry.path, "r+b") as f:
        f.seek(entry.offset)
        raw = bytearray(f.read(entry.size))
        struct.pack_into(">Q", raw, 41, xxh64(bytes(raw[4:41] + raw[49:])))
        struct.pack_into("<I", raw, 0, zlib.crc32(bytes(raw[4:49])))
        f.seek(entry.offset)
        f.write(raw[:49])


# --- module setup ---------------------------------------------------------------------------

def setUpModule():
    global WORK, BORG_ENV
    WORK = tempfile.mkdtemp(prefix="borgcheck-b5-interop-")
    BORG_ENV = make_env(WORK)
    for k, (name, _) in enumerate(COMPRESSIONS):
        write_input(os.path.join(WORK, "input", name), k)
    os.makedirs(os.path.join(WORK, "repos"))
    with ThreadPoolExecutor(max_workers=4) as ex:
        futures = {m: ex.submit(make_repo, m, BORG_ENV) for m, _ in MODES}
        for m, fut in futures.items():
            REPOS[m] = fut.result()


def tearDownModule():
    if WORK and not os.environ.get("BORGCHECK_KEEP_WORK"):
        shutil.rmtree(WORK, ignore_errors=True)


# --- tests ----------------------------------------------------------------------------------

class ModesTest(unittest.TestCase):
    def test_every_mode_borg2_offers_is_covered(self):
        p = run_borg2(["-r", os.path.join(WORK, "nope"), "rcreate", "--encryption", "bogus"],
                      BORG_ENV, check=False)
        self.assertNotEqual(p.returncode, 0)
        m = re.search(r"invalid choice: 'bogus' \(choose from (.*)\)", p.stderr)
        self.assertIsNotNone(m, p.stderr)
        offered = set(re.findall(r"'([^']+)'", m.group(1)))
        self.assertEqual(offered, {mode for mode, _ in MODES})

    def test_type_bytes(self):
        for mode, type_byte in MODES:
            objs = current_objects(REPOS[mode])
            _, data, _ = envelopes(objs[MANIFEST_ID])
            with open(objs[MANIFEST_ID].path, "rb") as f:
                f.seek(data)
                self.assertEqual(f.read(1)[0], type_byte, mode)


class CleanMatrixTest(unittest.TestCase):
    def test_every_mode_and_compression_verifies_like_borg2(self):
        copies = {m: copy_repo(REPOS[m], "clean-" + m) for m, _ in MODES}
        with ThreadPoolExecutor(max_workers=4) as ex:
            borg = {m: ex.submit(run_borg2_check, copies[m]) for m, _ in MODES}
            for mode, _ in MODES:
                with self.subTest(mode=mode):
                    objs = current_objects(REPOS[mode])
                    r = run_borgcheck(self, REPOS[mode])
                    self.assertEqual(r.rc, EXIT_OK, r.describe())
                    self.assertEqual(r.findings, [], r.describe())
                    self.assertEqual(r.summary["mode"], mode)
                    self.assertEqual(r.summary["format"], "borg2-b5")
                    self.assertEqual(r.summary["objects_total"], len(objs))
                    self.assertEqual(r.summary["objects_verified"], len(objs))
                    if mode in AEAD_MODES:
                        self.assertTrue(any("HKDF-SHA512" in n for n in r.summary["notes"]), r.summary["notes"])
                    b = borg[mode].result()
                    self.assertEqual(b.rc, 0, b.stderr)
                    self.assertEqual(b.verified, (len(objs), 0), b.stderr)
                    # the keyless check: no passphrase, no key file needed
                    env = dict(BORG_ENV)
                    del env["BORG_PASSPHRASE"]
                    env["BORG_BASE_DIR"] = os.path.join(WORK, "empty-base")
                    k = run_borgcheck(self, REPOS[mode], env=env, args=("--json",))
                    self.assertEqual(k.rc, EXIT_OK, k.describe())
                    self.assertEqual(k.summary["objects_verified"], len(objs))

    def test_compressions_are_really_there(self):
        # Every archive's compressor left objects of its ctype: decrypting is borgcheck's job,
        # but in mode none the meta is plain msgpack and can be read here.
        objs = current_objects(REPOS["none"])
        ctypes = collections.Counter()
        for e in objs.values():
            meta, _, _ = envelopes(e)
            with open(e.path, "rb") as f:
                f.seek(meta)
                raw = f.read(64)
            m = re.search(rb"\xa5ctype([\x00-\x7f])", raw)
            self.assertIsNotNone(m, raw)
            ctypes[m.group(1)[0]] += 1
            if re.search(rb"\xa5psize", raw):
                ctypes["psize"] += 1
        for ctype in (0, 1, 2, 3, 5):
            self.assertGreater(ctypes[ctype], 0, ctypes)
        self.assertGreater(ctypes["psize"], 0, ctypes)


class KeySourcesTest(unittest.TestCase):
    def test_key_file_in_b5_keys_dir(self):
        for mode in sorted(KEYFILE_MODES):
            self.assertTrue(os.listdir(b5_keys_dir(BORG_ENV)))
            r = run_borgcheck(self, REPOS[mode])  # found through BORG_BASE_DIR only
            self.assertEqual(r.rc, EXIT_OK, r.describe())
            self.assertTrue(any(b5_keys_dir(BORG_ENV) in n for n in r.summary["notes"]), r.summary["notes"])

    def _key_file_of(self, repo):
        with open(os.path.join(repo, "config")) as f:
            repo_id = re.search(r"^id = ([0-9a-f]{64})", f.read(), re.M).group(1)
        for name in os.listdir(b5_keys_dir(BORG_ENV)):
            path = os.path.join(b5_keys_dir(BORG_ENV), name)
            with open(path) as f:
                if f.readline().strip() == "BORG_KEY " + repo_id:
                    return path
        self.fail("no key file for " + repo)

    def test_borg_key_file_and_keys_dir(self):
        repo = REPOS["keyfile-blake2-chacha20-poly1305"]
        key = self._key_file_of(repo)
        env = dict(BORG_ENV, BORG_BASE_DIR=os.path.join(WORK, "empty-base"), BORG_KEY_FILE=key)
        self.assertEqual(run_borgcheck(self, repo, env=env).rc, EXIT_OK)
        keys = os.path.join(WORK, "keys-elsewhere")
        os.makedirs(keys, exist_ok=True)
        shutil.copy(key, os.path.join(keys, "whatever"))
        env = dict(BORG_ENV, BORG_BASE_DIR=os.path.join(WORK, "empty-base"), BORG_KEYS_DIR=keys)
        self.assertEqual(run_borgcheck(self, repo, env=env).rc, EXIT_OK)

    def test_failures(self):
        repo = REPOS["keyfile-aes-ocb"]
        env = dict(BORG_ENV, BORG_BASE_DIR=os.path.join(WORK, "empty-base"))
        r = run_borgcheck(self, repo, env=env)
        self.assertEqual(r.rc, EXIT_KEY_FILE_NOT_FOUND, r.describe())
        env = dict(BORG_ENV, BORG_PASSPHRASE="wrong")
        self.assertEqual(run_borgcheck(self, repo, env=env).rc, EXIT_WRONG_PASSPHRASE)
        self.assertEqual(run_borgcheck(self, REPOS["repokey-aes-ocb"], env=env).rc, EXIT_WRONG_PASSPHRASE)
        env = dict(BORG_ENV)
        del env["BORG_PASSPHRASE"]
        env["BORG_PASSCOMMAND"] = "echo " + PASSPHRASE
        self.assertEqual(run_borgcheck(self, REPOS["repokey-blake2-aes-ocb"], env=env).rc, EXIT_OK)


class DamageTest(unittest.TestCase):
    """Each case damages two copies the same way: borgcheck reads one, borg2 the other."""

    def _copies(self, mode, name):
        return (copy_repo(REPOS[mode], "%s-%s-a" % (name, mode)),
                copy_repo(REPOS[mode], "%s-%s-b" % (name, mode)))

    def _compare(self, mine, theirs, want_ids):
        """borgcheck names exactly want_ids; borg2 (verify-data lines) names the same ids."""
        with ThreadPoolExecutor(max_workers=1) as ex:
            fut = ex.submit(run_borg2_check, theirs)
            r = run_borgcheck(self, mine)
            b = fut.result()
        self.assertEqual(r.rc, EXIT_INTEGRITY_ERRORS, r.describe())
        self.assertEqual(r.error_ids(), want_ids, r.describe())
        # The damaged chunk is always a file chunk (random_file_chunk): borg2 reports it in
        # verify-data and as a missing file chunk, exit 1. (A damaged archive object or item
        # metadata chunk makes borg2 b5 crash with a traceback, exit 2: not what this compares.)
        self.assertEqual(b.rc, 1, b.stderr)
        return r, b

    def test_payload_flip_with_checksums_repaired(self):
        for mode in ("repokey-chacha20-poly1305", "keyfile-blake2-aes-ocb", "authenticated-blake2", "none"):
            with self.subTest(mode=mode):
                mine, theirs = self._copies(mode, "payload")
                e = random_file_chunk(current_objects(mine), mode)
                _, data, length = envelopes(e)
                for repo in (mine, theirs):
                    target = [x for x in current_objects(repo).values() if x.id == e.id][0]
                    flip(target.path, data + length - 7, 0x20)
                    repair_put2(target)
                r, b = self._compare(mine, theirs, {e.id})
                self.assertEqual(b.chunk_ids, {e.id}, b.stderr)
                self.assertEqual(r.findings[0]["offset"], e.offset)
                if mode in AEAD_MODES:
                    self.assertEqual(r.findings[0]["stage"], "authentication")
                    self.assertIn("Authentication / EVP_DecryptFinal_ex failed", b.stderr)

    def test_type_byte_with_checksums_repaired(self):
        mode = "repokey-aes-ocb"
        mine, theirs = self._copies(mode, "type")
        e = random_file_chunk(current_objects(mine), mode)
        _, data, _ = envelopes(e)
        for repo in (mine, theirs):
            target = [x for x in current_objects(repo).values() if x.id == e.id][0]
            put_byte(target.path, data, 0x02)
            repair_put2(target)
        r, b = self._compare(mine, theirs, {e.id})
        self.assertEqual(b.chunk_ids, {e.id}, b.stderr)
        self.assertIn("Invalid encryption envelope", b.stderr)
        self.assertEqual(r.findings[0]["stage"], "envelope")

    def test_stale_xxh64_keyless(self):
        mode = "keyfile-chacha20-poly1305"
        mine, theirs = self._copies(mode, "stale")
        e = random_file_chunk(current_objects(mine), mode)
        for repo in (mine, theirs):
            flip(segment_path(repo, e.segment), e.offset + e.size - 3)
        with ThreadPoolExecutor(max_workers=1) as ex:
            fut = ex.submit(run_borg2_check, theirs)
            env = dict(BORG_ENV)
            del env["BORG_PASSPHRASE"]
            r = run_borgcheck(self, mine, env=env, args=("--json",))
            b = fut.result()
        self.assertEqual(r.rc, EXIT_INTEGRITY_ERRORS, r.describe())
        self.assertEqual(r.error_ids(), {e.id})
        self.assertEqual([(f["segment"], f["offset"], f["stage"]) for f in r.findings],
                         [(e.segment, e.offset, "entry-crc")])
        # borg2 names the entry by its location, then drops the whole segment (spec §A.6.1)
        self.assertEqual(b.rc, 1, b.stderr)
        self.assertIn("Segment entry hash mismatch [segment %d, offset %d]" % (e.segment, e.offset), b.stderr)
        self.assertIn(e.id, b.lost_ids)

    def _segment_with_most_objects(self, objs):
        per_seg = collections.Counter(e.segment for e in objs.values())
        return per_seg.most_common(1)[0][0]

    def test_truncated_segment(self):
        mode = "repokey-blake2-chacha20-poly1305"
        mine, theirs = self._copies(mode, "trunc")
        objs = current_objects(mine)
        seg = self._segment_with_most_objects(objs)
        in_seg = sorted((e for e in objs.values() if e.segment == seg), key=lambda e: e.offset)
        cut = in_seg[len(in_seg) // 2]
        lost = {e.id for e in in_seg if e.offset >= cut.offset}
        for repo in (mine, theirs):
            os.truncate(segment_path(repo, seg), cut.offset + 30)
        r, b = self._compare(mine, theirs, lost)
        # Every error is a truncation; where the cut took an archive object, the archive pass
        # also warns once about the objects only that archive referenced (orphans now).
        self.assertTrue(all(f["stage"] == "truncated" for f in r.findings if f["severity"] == "error"), r.describe())
        archive_lost = any(u["use"] == "archive" for f in r.findings if f["severity"] == "error"
                           for u in f["affected"] or [])
        warnings = [(f["severity"], f["stage"], f["chunk_id"]) for f in r.findings if f["severity"] != "error"]
        self.assertEqual(warnings, [("warning", "reference", None)] if archive_lost else [], r.describe())
        self.assertEqual(r.summary["objects_verified"], len(objs) - len(lost))
        # borg2 loses the whole segment: everything before the cut as well (spec §A.6.3)
        self.assertEqual(b.lost_ids, {e.id for e in in_seg}, b.stderr)
        # The text report rolls the segment's truncation findings up: one header per message
        # (the offset is in the location, not the message), then the chunks; no line per chunk.
        t = subprocess.run([BORGCHECK, "--verify-data", mine], env=BORG_ENV, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(t.returncode, EXIT_INTEGRITY_ERRORS, t.stdout + t.stderr)
        groups = collections.Counter(f["message"] for f in r.findings if f["stage"] == "truncated")
        self.assertGreaterEqual(max(groups.values()), 3, groups)  # a segment with few objects proves nothing
        rolled, listed = set(), 0
        for msg, n in groups.items():
            if n >= 3:
                self.assertIn("error: truncated [segment %d]: %d objects: %s\n" % (seg, n, msg), t.stdout)
                rolled |= {f["chunk_id"] for f in r.findings if f["message"] == msg}
                listed += min(n, 20)
                if n > 20:
                    self.assertIn("  and %d more (--json lists every one)\n" % (n - 20), t.stdout)
        for cid in rolled:
            self.assertNotIn("error: truncated chunk %s" % cid, t.stdout)
        members = [l for l in t.stdout.splitlines() if l.startswith("  chunk ") and "[segment %d, offset " % seg in l]
        self.assertEqual(len(members), listed, t.stdout)

    def test_deleted_segment(self):
        mode = "authenticated"
        mine, theirs = self._copies(mode, "deleted")
        objs = current_objects(mine)
        seg = self._segment_with_most_objects(objs)
        lost = {e.id for e in objs.values() if e.segment == seg}
        for repo in (mine, theirs):
            os.remove(segment_path(repo, seg))
        r, b = self._compare(mine, theirs, lost)
        self.assertEqual(b.lost_ids, lost, b.stderr)
        self.assertEqual(r.summary["objects_verified"], len(objs) - len(lost))


def main():
    global BORGCHECK, BORG2
    ap = argparse.ArgumentParser()
    ap.add_argument("--borgcheck", required=True)
    ap.add_argument("--borg2", default="borg2")
    args, rest = ap.parse_known_args()
    BORGCHECK = os.path.abspath(args.borgcheck)
    BORG2 = args.borg2
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
