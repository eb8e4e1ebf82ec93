#!/usr/bin/env python3
"""Interop tests: borgcheck against repositories made by real borg 1.x at test time.

The fixtures in shared/fixtures were made once, on another machine; these tests make fresh
repositories with the borg installed here (Debian's borg 1.2.4), so every run exercises new
keys, salts, IVs and obfuscation padding. Phases:

  1. setUpModule: write a small deterministic input tree per archive (text, bytes from a seeded
     PRNG, zeros; different per archive so nothing dedups across archives and every
     compression really stores chunks), then `borg init` one repository per encryption mode
     and `borg create` one archive per compression into it (--chunker-params fixed,4096, so
     every file is cut into many 4 KiB chunks). The seven repositories are built in parallel.
  2. Clean matrix: `borgcheck --verify-data --json` on every repository: exit 0, no finding,
     objects_verified == objects_total == the live objects this file finds by parsing index.T
     itself (spec section 3.2), and the same count as borg's own verify-data pass.
  3. Key sources: a keyfile repository verified through BORG_KEY_FILE alone, and passphrases
     from BORG_PASSCOMMAND, including the failures (no key: 42, another repository's key: 41,
     wrong passphrase: 52).
  4. Damage: copies of a repository, each damaged one way (byte flip with and without CRC
     repair, truncated segment, deleted segment, another object's bytes under an id). borgcheck
     runs on one copy and `borg check --verify-data` on ANOTHER copy (borg writes into the
     repositories it checks). The chunk ids each reports are compared with each other and with
     the set of objects this file knows it damaged.

Every borgcheck run also asserts that the repository it read is unchanged: same paths, same
bytes, same mtimes (files and directories).

Run: borg1_interop_test.py --borgcheck PATH [--borg PATH] [unittest args]. Python 3 stdlib.
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

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# snapshot(): borgcheck must not change the repository (every path's kind, size, mtime, sha256).
from borg_generations import clean_environment, snapshot  # noqa: E402

BORGCHECK = None  # set by main()
BORG = "borg"

# (borg init -e, TYPE byte of every stored object; spec section 4.0)
MODES = [
    ("none", 0x02),
    ("authenticated", 0x07),
    ("authenticated-blake2", 0x06),
    ("repokey", 0x03),
    ("keyfile", 0x00),
    ("repokey-blake2", 0x05),
    ("keyfile-blake2", 0x04),
]
ENCRYPTED_MODES = {"repokey", "keyfile", "repokey-blake2", "keyfile-blake2"}

# (archive name, borg create --compression). lzma runs at level 1 rather than 6: the stored
# format (`02 00` + an xz stream) is the same at every level and level 1 is much faster.
COMPRESSIONS = [
    ("c-none", "none"),
    ("c-lz4", "lz4"),
    ("c-zstd3", "zstd,3"),
    ("c-zlib6", "zlib,6"),
    ("c-lzma1", "lzma,1"),
    ("c-autozstd", "auto,zstd"),
    ("c-obf", "obfuscate,3,zstd,3"),
]

PASSPHRASE = "test"
MANIFEST_ID = "00" * 32

# Exit codes (checker/report/exit_codes.h).
EXIT_OK = 0
EXIT_KEY_FILE_MISMATCH = 41
EXIT_KEY_FILE_NOT_FOUND = 42
EXIT_WRONG_PASSPHRASE = 52
EXIT_INTEGRITY_ERRORS = 90

# Filled by setUpModule, read-only afterwards.
WORK = None       # temporary directory holding everything
REPOS = {}        # mode -> pristine repository path (never checked by borg, never damaged)
BORG_ENV = None   # environment for borg and borgcheck


# --- environment ----------------------------------------------------------------------------

def make_env(work):
    """An environment with no BORG_* or XDG_* settings from the caller, a HOME and a
    BORG_BASE_DIR inside `work` (so key files land there and nothing touches the real home),
    and the answers to borg's interactive questions."""
    env = clean_environment()
    env.update({
        "HOME": os.path.join(work, "home"),
        "BORG_BASE_DIR": os.path.join(work, "base"),
        "BORG_PASSPHRASE": PASSPHRASE,
        "BORG_DISPLAY_PASSPHRASE": "no",
        "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "yes",
        "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes",
        "BORG_CHECK_I_KNOW_WHAT_I_AM_DOING": "YES",
        "LC_ALL": "C.UTF-8",
    })
    os.makedirs(env["HOME"], exist_ok=True)
    os.makedirs(env["BORG_BASE_DIR"], exist_ok=True)
    return env


def keys_dir(env):
    """Where borg 1.2 puts key files: $BORG_BASE_DIR/.config/borg/keys."""
    return os.path.join(env["BORG_BASE_DIR"], ".config", "borg", "keys")


def run_borg(args, env, cwd=None, check=True):
    p = subprocess.run([BORG] + args, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError("borg %s failed (rc %d):\n%s" % (" ".join(args), p.returncode, p.stderr))
    return p


# --- input tree -----------------------------------------------------------------------------

def write_input(root, k):
    """Input for archive number k: ~24 KiB of text, ~22 KiB of seeded random bytes (stored
    uncompressed by every compressor except zlib and obfuscate: they do not shrink), zeros
    (one all-zero 4 KiB chunk, deduplicated, plus a tail whose length depends on k), a tiny
    file and an empty one. Everything except the full zero chunk differs between archives."""
    os.makedirs(root, exist_ok=True)
    rng = random.Random(1000 + k)
    words = ["borg", "check", "segment", "chunk", "index", "archive", "key", "lz4", "zstd",
             "zlib", "lzma", "repository", "commit", "manifest", "object", "verify"]
    lines = ["%d %d %s" % (k, i, " ".join(rng.choice(words) for _ in range(8))) for i in range(500)]
    with open(os.path.join(root, "text.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(root, "random.bin"), "wb") as f:
        f.write(rng.randbytes(5 * 4096 + 1234 + k))
    with open(os.path.join(root, "zeros.bin"), "wb") as f:
        f.write(bytes(4 * 4096 + 100 + k))
    with open(os.path.join(root, "tiny.txt"), "w") as f:
        f.write("tiny file of archive %d\n" % k)
    open(os.path.join(root, "empty"), "w").close()


def with_cache(env, name):
    """env with a cache directory of its own: borg processes that run in parallel then never
    race on creating the same cache folder or tag file (config and keys stay shared)."""
    env = dict(env)
    env["BORG_CACHE_DIR"] = os.path.join(WORK, "cache", name)
    return env


def make_repo(mode, env):
    repo = os.path.join(WORK, "repos", mode)
    env = with_cache(env, "create-" + mode)
    run_borg(["init", "--encryption", mode, repo], env)
    for name, compression in COMPRESSIONS:
        run_borg(["create", "--chunker-params", "fixed,4096", "--compression", compression,
                  "%s::%s" % (repo, name), "."], env, cwd=os.path.join(WORK, "input", name))
    return repo


# --- reading a repository (spec sections 1-3) -----------------------------------------------

Obj = collections.namedtuple("Obj", "id segment offset size path")  # size: whole entry


def segment_path(repo, segment):
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(os.path.join(repo, "config"))
    per_dir = cfg.getint("repository", "segments_per_dir", fallback=1000)
    return os.path.join(repo, "data", str(segment // per_dir), str(segment))


def read_index(repo):
    """index.T with the highest T, as {id hex: (segment, offset)} (spec section 3.2)."""
    ts = [int(n[6:]) for n in os.listdir(repo) if n.startswith("index.") and n[6:].isdigit()]
    with open(os.path.join(repo, "index.%d" % max(ts)), "rb") as f:
        raw = f.read()
    magic, entries, buckets, ksize, vsize = struct.unpack_from("<8siibb", raw, 0)
    assert magic == b"BORG_IDX" and ksize == 32 and vsize == 8, (magic, ksize, vsize)
    assert len(raw) == 18 + buckets * 40, "index length"
    out = {}
    for b in range(buckets):
        pos = 18 + b * 40
        seg, off = struct.unpack_from("<II", raw, pos + 32)
        if seg in (0xFFFFFFFF, 0xFFFFFFFE):
            continue
        out[raw[pos:pos + 32].hex()] = (seg, off)
    assert len(out) == entries, "index num_entries %d, used buckets %d" % (entries, len(out))
    return out


def walk_segment(path):
    """All entries of a segment file as (tag, key hex or None, offset, size); asserts every
    CRC (only used on undamaged repositories)."""
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:8] == b"BORG_SEG", path
    off, out = 8, []
    while off < len(raw):
        crc, size, tag = struct.unpack_from("<IIB", raw, off)
        assert zlib.crc32(raw[off + 4:off + size]) == crc, (path, off)
        key = raw[off + 9:off + 41].hex() if tag in (0, 1) else None
        out.append((tag, key, off, size))
        off += size
    return out


def live_objects(repo):
    """The live objects of an undamaged repository, {id hex: Obj}. Taken from index.T and
    checked against a replay of the whole log (spec section 3.1): they must agree, or the
    repository this test built is not what the test thinks it is."""
    index = read_index(repo)
    replay = {}
    segs = sorted(int(n) for d in os.listdir(os.path.join(repo, "data"))
                  for n in os.listdir(os.path.join(repo, "data", d)) if n.isdigit())
    sizes = {}
    for seg in segs:
        for tag, key, off, size in walk_segment(segment_path(repo, seg)):
            if tag == 0:
                replay[key] = (seg, off)
                sizes[(seg, off)] = size
            elif tag == 1:
                replay.pop(key, None)
    assert replay == index, "index.T disagrees with the log"
    return {i: Obj(i, s, o, sizes[(s, o)], segment_path(repo, s)) for i, (s, o) in index.items()}


def stored_data(obj):
    with open(obj.path, "rb") as f:
        f.seek(obj.offset + 41)
        return f.read(obj.size - 41)


# --- running the two checkers ---------------------------------------------------------------

class BorgcheckResult:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.stderr = proc.stderr
        self.records = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        self.findings = [r for r in self.records if r["type"] == "finding"]
        summaries = [r for r in self.records if r["type"] == "summary"]
        self.summary = summaries[0] if summaries else None
        self.errors = [r for r in self.records if r["type"] == "error"]

    def error_ids(self):
        """Chunk ids of the error findings (findings without an id are not in the set)."""
        return {f["chunk_id"] for f in self.findings if f["severity"] == "error" and f["chunk_id"]}

    def describe(self):
        return "rc %d\nstdout:\n%s\nstderr:\n%s" % (
            self.rc, "\n".join(json.dumps(r, sort_keys=True) for r in self.records), self.stderr)


class BorgResult:
    """`borg check --verify-data` output. borg names chunks in three ways (spec section 6):
    `chunk <id>, integrity error: ...` / `chunk <id>: Data integrity error: ...` (verify-data),
    `ID: <id> rebuilt index: ... committed index: ...` (repository index check); a bad entry
    in the segment walk is named only by its location `[segment S, offset O]`."""

    def __init__(self, proc):
        self.rc = proc.returncode
        self.stderr = proc.stderr
        self.chunk_ids = set(re.findall(r"^chunk ([0-9a-f]{64})[,:]", proc.stderr, re.M))
        self.index_ids = set(re.findall(r"^ID: ([0-9a-f]{64}) ", proc.stderr, re.M))
        self.locations = {(int(s), int(o)) for s, o in
                          re.findall(r"\[segment (\d+), offset (\d+)\]", proc.stderr)}
        m = re.search(r"verified (\d+) chunks with (\d+) integrity errors", proc.stderr)
        self.verified = (int(m.group(1)), int(m.group(2))) if m else None

    def ids(self):
        return self.chunk_ids | self.index_ids

    def clean(self):
        return self.rc == 0


def run_borgcheck(test, repo, env=None, args=("--verify-data", "--json")):
    """Runs borgcheck on `repo` and asserts that the repository is unchanged afterwards."""
    before = snapshot(repo)
    proc = subprocess.run([BORGCHECK] + list(args) + [repo], env=env or BORG_ENV,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    after = snapshot(repo)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    test.assertEqual(changed, [], "borgcheck changed these paths of %s (before -> after): %s" % (
        repo, "; ".join("%s: %s -> %s" % (p, before.get(p), after.get(p)) for p in changed)))
    return BorgcheckResult(proc)


def run_borg_check(repo, env=None, verbose=False):
    args = ["check", "--verify-data"] + (["--info"] if verbose else []) + [repo]
    return BorgResult(run_borg(args, with_cache(env or BORG_ENV, "check-" + os.path.basename(repo)),
                               check=False))


def copy_repo(src, name):
    dst = os.path.join(WORK, "copies", name)
    shutil.copytree(src, dst, copy_function=shutil.copy2)
    return dst


# --- damage (spec section 2.2: crc LE32 | size LE32 | tag | key 32 | data) ------------------

def fix_crc(f, obj):
    f.seek(obj.offset + 4)
    rest = f.read(obj.size - 4)
    f.seek(obj.offset)
    f.write(struct.pack("<I", zlib.crc32(rest)))


def flip_byte(repo, obj, fix):
    """XORs the middle byte of obj's stored data with 0xff; recomputes the entry CRC if fix."""
    with open(segment_path(repo, obj.segment), "r+b") as f:
        pos = obj.offset + 41 + (obj.size - 41) // 2
        f.seek(pos)
        b = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([b ^ 0xFF]))
        if fix:
            fix_crc(f, obj)


def put_other_data(repo, victim, donor):
    """Writes donor's stored bytes into victim's entry and recomputes the victim's CRC.
    The two entries have the same size, so every offset after the victim and therefore index.T
    stay valid: only the object layer can tell. (With different sizes the segment would have to
    be rewritten with new offsets and the index with it, which no longer tests what borg and
    borgcheck make of a consistent index pointing at wrong content.)"""
    assert victim.size == donor.size
    data = stored_data(donor)
    with open(segment_path(repo, victim.segment), "r+b") as f:
        f.seek(victim.offset + 41)
        f.write(data)
        fix_crc(f, victim)


def pick_victims(objects):
    """Deterministic choice of two data objects of the same entry size (A, B), A in the middle
    of a segment that holds live objects before and after it. The most common entry size among
    the data objects is that of a full 4 KiB chunk of random bytes stored uncompressed (`00 00`):
    flipping a byte of it changes ciphertext (encrypted modes: the MAC fails) or plaintext
    (unencrypted modes: the id hash fails)."""
    data_objs = [o for o in objects.values() if o.id != MANIFEST_ID]
    size = collections.Counter(o.size for o in data_objs).most_common(1)[0][0]
    by_seg = collections.defaultdict(list)
    for o in objects.values():
        by_seg[o.segment].append(o)
    for v in by_seg.values():
        v.sort(key=lambda o: o.offset)
    candidates = sorted((o for o in data_objs if o.size == size), key=lambda o: (o.segment, o.offset))
    for a in candidates:
        seg = by_seg[a.segment]
        if seg[0] is not a and seg[-1] is not a:
            b = next(o for o in candidates if o is not a)
            return a, b, seg
    raise AssertionError("no object with neighbours on both sides")


# --- module fixture -------------------------------------------------------------------------

def setUpModule():
    global WORK, BORG_ENV
    WORK = tempfile.mkdtemp(prefix="borgcheck-interop-")
    BORG_ENV = make_env(WORK)
    version = run_borg(["--version"], BORG_ENV).stdout.strip()
    if not re.match(r"borg 1\.", version):
        raise AssertionError("these tests need borg 1.x as %r, found %r" % (BORG, version))
    for k, (name, _) in enumerate(COMPRESSIONS):
        write_input(os.path.join(WORK, "input", name), k)
    os.makedirs(os.path.join(WORK, "repos"))
    os.makedirs(os.path.join(WORK, "copies"))
    # Each repository is a separate borg process chain; borg mostly waits on fsync and Python
    # start-up, so a few at a time overlap well even on two cores.
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {mode: pool.submit(make_repo, mode, BORG_ENV) for mode, _ in MODES}
        for mode, fut in futures.items():
            REPOS[mode] = fut.result()


def tearDownModule():
    if WORK and not os.environ.get("BORGCHECK_INTEROP_KEEP"):
        shutil.rmtree(WORK, ignore_errors=True)


# --- 2. clean matrix ------------------------------------------------------------------------

class CleanRepositoriesTest(unittest.TestCase):
    """Every mode x every compression, as written by borg, verifies clean."""

    def test_every_mode_verifies_clean(self):
        for mode, type_byte in MODES:
            with self.subTest(mode=mode):
                repo = REPOS[mode]
                objects = live_objects(repo)
                # 7 archives of ~14 chunks each, plus archive metadata, item streams, manifest.
                self.assertGreater(len(objects), 7 * 12)
                for o in objects.values():
                    self.assertEqual(stored_data(o)[0], type_byte, o)
                r = run_borgcheck(self, repo)
                self.assertEqual(r.rc, EXIT_OK, r.describe())
                self.assertEqual(r.findings, [], r.describe())
                self.assertEqual(r.errors, [], r.describe())
                s = r.summary
                self.assertEqual(s["mode"], mode)
                self.assertTrue(s["verify_data"])
                self.assertEqual(s["objects_total"], len(objects))
                self.assertEqual(s["objects_verified"], s["objects_total"])
                self.assertEqual((s["errors"], s["warnings"]), (0, 0))

                # The keyless repository-layer check needs no passphrase and finds nothing.
                env = dict(BORG_ENV)
                del env["BORG_PASSPHRASE"]
                r = run_borgcheck(self, repo, env, args=("--json",))
                self.assertEqual(r.rc, EXIT_OK, r.describe())
                self.assertEqual(r.findings, [], r.describe())
                self.assertFalse(r.summary["verify_data"])
                self.assertEqual(r.summary["objects_total"], len(objects))

    def test_every_compression_is_stored(self):
        """The matrix is real: in the unencrypted modes the compression header of each object
        is visible (TYPE byte, then C, spec section 5), and every codec appears."""
        for mode in ("none", "authenticated", "authenticated-blake2"):
            with self.subTest(mode=mode):
                seen = set()
                for o in live_objects(REPOS[mode]).values():
                    c = stored_data(o)[1:]
                    if c[0] & 0x0F == 8 and (c[0] * 256 + c[1]) % 31 == 0:
                        seen.add("zlib")
                    else:
                        seen.add({b"\0\0": "none", b"\1\0": "lz4", b"\2\0": "lzma",
                                  b"\3\0": "zstd", b"\4\0": "obfuscate"}[c[:2]])
                self.assertEqual(seen, {"none", "lz4", "lzma", "zstd", "zlib", "obfuscate"})

    def test_borg_agrees_on_clean_and_count(self):
        """borg's own verify-data on a copy: exit 0 and the same number of chunks verified."""
        def one(mode):
            return mode, run_borg_check(copy_repo(REPOS[mode], "clean-" + mode), verbose=True)
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = list(pool.map(one, [m for m, _ in MODES]))
        for mode, b in results:
            with self.subTest(mode=mode):
                self.assertEqual(b.rc, 0, b.stderr)
                self.assertEqual(b.verified, (len(live_objects(REPOS[mode])), 0), b.stderr)


# --- 3. key sources -------------------------------------------------------------------------

class KeySourcesTest(unittest.TestCase):

    def key_file_of(self, mode):
        repo_id = configparser.ConfigParser(interpolation=None)
        repo_id.read(os.path.join(REPOS[mode], "config"))
        want = "BORG_KEY " + repo_id.get("repository", "id")
        for name in os.listdir(keys_dir(BORG_ENV)):
            p = os.path.join(keys_dir(BORG_ENV), name)
            with open(p) as f:
                if f.readline().strip() == want:
                    return p
        raise AssertionError("no key file for " + mode)

    def env_without_keys(self, name):
        """BORG_BASE_DIR and HOME pointing at empty folders: no keys dir holds the key."""
        env = dict(BORG_ENV)
        env["BORG_BASE_DIR"] = os.path.join(WORK, "empty-base-" + name)
        env["HOME"] = os.path.join(WORK, "empty-home-" + name)
        os.makedirs(env["BORG_BASE_DIR"], exist_ok=True)
        os.makedirs(env["HOME"], exist_ok=True)
        return env

    def test_keyfile_through_borg_key_file(self):
        for mode in ("keyfile", "keyfile-blake2"):
            with self.subTest(mode=mode):
                # The key file moved away from any keys dir; only BORG_KEY_FILE names it.
                elsewhere = os.path.join(WORK, "elsewhere-" + mode)
                os.makedirs(elsewhere)
                key = shutil.copy2(self.key_file_of(mode), os.path.join(elsewhere, "my.key"))
                env = self.env_without_keys(mode)

                r = run_borgcheck(self, REPOS[mode], env)
                self.assertEqual(r.rc, EXIT_KEY_FILE_NOT_FOUND, r.describe())
                self.assertEqual([e["code"] for e in r.errors], ["key-not-found"], r.describe())

                env["BORG_KEY_FILE"] = key
                r = run_borgcheck(self, REPOS[mode], env)
                self.assertEqual(r.rc, EXIT_OK, r.describe())
                self.assertEqual(r.findings, [])
                self.assertEqual(r.summary["mode"], mode)
                self.assertEqual(r.summary["objects_verified"], len(live_objects(REPOS[mode])))

                # borg itself accepts the same setting (on a copy).
                b = run_borg(["list", "--short", copy_repo(REPOS[mode], "keyfile-env-" + mode)], env)
                self.assertEqual(b.stdout.split(), [n for n, _ in COMPRESSIONS])

    def test_borg_key_file_wrong_or_missing(self):
        env = self.env_without_keys("wrong-key")
        # Another repository's key is borg's KeyfileMismatchError (41); a missing one 42.
        for key, rc, code in ((self.key_file_of("keyfile-blake2"), EXIT_KEY_FILE_MISMATCH, "key-file-mismatch"),
                              (os.path.join(WORK, "no-such.key"), EXIT_KEY_FILE_NOT_FOUND, "key-not-found")):
            with self.subTest(key=key):
                env["BORG_KEY_FILE"] = key
                r = run_borgcheck(self, REPOS["keyfile"], env)
                self.assertEqual(r.rc, rc, r.describe())
                self.assertEqual([e["code"] for e in r.errors], [code], r.describe())

    def test_passcommand(self):
        secret = os.path.join(WORK, "secret.txt")
        with open(secret, "w") as f:
            f.write(PASSPHRASE + "\n")  # borg strips one trailing newline
        wrong = os.path.join(WORK, "wrong.txt")
        with open(wrong, "w") as f:
            f.write("not-" + PASSPHRASE + "\n")
        for mode in ("repokey", "keyfile-blake2", "authenticated"):
            with self.subTest(mode=mode):
                env = dict(BORG_ENV)
                del env["BORG_PASSPHRASE"]
                env["BORG_PASSCOMMAND"] = "cat " + secret
                r = run_borgcheck(self, REPOS[mode], env)
                self.assertEqual(r.rc, EXIT_OK, r.describe())
                self.assertEqual(r.findings, [])
                self.assertEqual(r.summary["objects_verified"], len(live_objects(REPOS[mode])))

                env["BORG_PASSCOMMAND"] = "cat " + wrong
                r = run_borgcheck(self, REPOS[mode], env)
                self.assertEqual(r.rc, EXIT_WRONG_PASSPHRASE, r.describe())
                self.assertEqual([e["code"] for e in r.errors], ["wrong-passphrase"], r.describe())

        # borg reads the same command the same way.
        env = dict(BORG_ENV)
        del env["BORG_PASSPHRASE"]
        env["BORG_PASSCOMMAND"] = "cat " + secret
        b = run_borg(["list", "--short", copy_repo(REPOS["repokey"], "passcommand")], env)
        self.assertEqual(b.stdout.split(), [n for n, _ in COMPRESSIONS])


# --- 4. damage ------------------------------------------------------------------------------

class DamageTest(unittest.TestCase):
    """Each case damages two copies the same way; borgcheck reads one, borg check the other.

    Divergences by design, asserted below:
    * After a bad entry (CRC mismatch, short read) borg's repository check drops the whole
      segment from its rebuilt index, so every live object of that segment, intact ones
      included, is listed as `rebuilt index: <not found>`; and it stops before verify-data.
      borgcheck reports only the objects that are really damaged (reading later objects at the
      offsets index.T gives). There we assert: borgcheck's set == the truly damaged set, and it
      is a subset of borg's.
    * borg names a bad entry header/CRC only by its location; borgcheck adds the chunk id.
    """

    MODE = "repokey"

    @classmethod
    def setUpClass(cls):
        cls.repo = REPOS[cls.MODE]
        cls.objects = live_objects(cls.repo)
        cls.a, cls.b, cls.segment_objs = pick_victims(cls.objects)
        cls.segment_ids = {o.id for o in cls.segment_objs}

    def damaged_pair(self, name, damage, mode=None):
        """Two copies of the repository, both damaged by damage(copy); returns
        (borgcheck result, borg result)."""
        src = REPOS[mode or self.MODE]
        mine = copy_repo(src, name + "-borgcheck")
        theirs = copy_repo(src, name + "-borg")
        damage(mine)
        damage(theirs)
        self.assertEqual(snapshot(mine).keys(), snapshot(theirs).keys())
        r = run_borgcheck(self, mine)
        b = run_borg_check(theirs)
        # Both say "not clean".
        self.assertEqual(r.rc, EXIT_INTEGRITY_ERRORS, r.describe())
        self.assertEqual(b.rc, 1, b.stderr)
        self.assertFalse(b.clean())
        return r, b

    def assert_findings(self, r, expected, reread=None, orphans=False):
        """expected: {chunk id: stage}. The error findings that carry a chunk id must be exactly
        one per expected id, with that stage, at the object's (segment, offset); the summary
        must count every other live object as verified. orphans: the damage took an archive
        object, so the archive pass also warns once about the objects only it referenced
        (stored, now referenced by nothing: borg check counts them too); nothing else is a
        warning."""
        objects = live_objects(REPOS[r.summary["mode"]])  # the undamaged original
        got = sorted((f["chunk_id"], f["stage"], f["segment"], f["offset"]) for f in r.findings
                     if f["severity"] == "error" and f["chunk_id"])
        want = sorted((i, stage, objects[i].segment, objects[i].offset) for i, stage in expected.items())
        self.assertEqual(got, want, r.describe())
        warnings = [f for f in r.findings if f["severity"] != "error"]
        if orphans:
            self.assertEqual([(f["severity"], f["stage"], f["chunk_id"]) for f in warnings],
                             [("warning", "reference", None)], r.describe())
            self.assertRegex(warnings[0]["message"], r"^[1-9]\d* orphaned objects? found: ")
        else:
            self.assertEqual(warnings, [], r.describe())
        if reread:
            # The object was read a second time and the bytes on disk failed again.
            self.assertEqual({f["reread"] for f in r.findings}, {reread}, r.describe())
        self.assertEqual(r.summary["objects_total"], len(objects))
        self.assertEqual(r.summary["objects_verified"], len(objects) - len(expected), r.describe())

    @staticmethod
    def archive_lost(r):
        """Whether one of r's error findings is an archive object's (its use is "archive")."""
        return any(u["use"] == "archive" for f in r.findings if f["severity"] == "error" for u in f["affected"] or [])

    def test_a_flip_without_crc_repair(self):
        r, b = self.damaged_pair("flip-crc", lambda repo: flip_byte(repo, self.a, fix=False))
        self.assert_findings(r, {self.a.id: "entry-crc"}, reread="agreed")
        # borg: `Segment entry checksum mismatch [segment S, offset O]` for A, then every live
        # object of the segment as `<not found>` (A and its intact neighbours); no verify-data.
        self.assertEqual(b.locations, {(self.a.segment, self.a.offset)}, b.stderr)
        self.assertIn("Segment entry checksum mismatch", b.stderr)
        self.assertEqual(b.index_ids, self.segment_ids, b.stderr)
        self.assertEqual(b.chunk_ids, set(), b.stderr)
        self.assertLess(r.error_ids(), b.ids())  # strictly: borg also names intact objects
        self.assertIsNone(b.verified)

    def test_b_flip_with_crc_repaired(self):
        r, b = self.damaged_pair("flip", lambda repo: flip_byte(repo, self.a, fix=True))
        self.assert_findings(r, {self.a.id: "authentication"}, reread="agreed")
        self.assertEqual(b.ids(), {self.a.id}, b.stderr)
        self.assertIn("chunk %s, integrity error: MAC Authentication failed" % self.a.id, b.stderr)
        self.assertEqual(r.error_ids(), b.ids())

    def test_b_flip_with_crc_repaired_every_mode(self):
        """The same damage in every mode: the MAC catches it in the encrypted modes, the id hash
        in the others (the victim holds uncompressed random bytes, so the flip is in the
        plaintext)."""
        for mode, _ in MODES:
            with self.subTest(mode=mode):
                objects = live_objects(REPOS[mode])
                a, _, _ = pick_victims(objects)
                r, b = self.damaged_pair("flip-" + mode, lambda repo: flip_byte(repo, a, fix=True), mode)
                stage = "authentication" if mode in ENCRYPTED_MODES else "id-hash"
                self.assert_findings(r, {a.id: stage}, reread="agreed")
                self.assertEqual(b.ids(), {a.id}, b.stderr)
                self.assertEqual(r.error_ids(), b.ids())
                self.assertEqual(b.verified, (len(objects), 1), b.stderr)

    def test_c_truncated_segment(self):
        """The segment is cut in the middle of A's data: A and everything after it in the
        segment are damaged, the objects before A are intact."""
        cut = self.a.offset + 41 + (self.a.size - 41) // 2

        def damage(repo):
            os.truncate(segment_path(repo, self.a.segment), cut)
        r, b = self.damaged_pair("truncate", damage)
        damaged = {o.id for o in self.segment_objs if o.offset + o.size > cut}
        self.assertIn(self.a.id, damaged)
        self.assertLess(damaged, self.segment_ids)  # some objects before the cut survive
        # A (cut in its data) and every later object of the segment (gone): stage "truncated",
        # each at its own (segment, offset).
        self.assert_findings(r, {i: "truncated" for i in damaged}, orphans=self.archive_lost(r))
        # borg: `Segment entry data short read [segment S, offset O]` at A ends the segment
        # walk; the whole segment is dropped and every live object in it, including the intact
        # ones before the cut, is `<not found>`.
        self.assertIn("short read", b.stderr)
        self.assertEqual(b.locations, {(self.a.segment, self.a.offset)}, b.stderr)
        self.assertEqual(b.index_ids, self.segment_ids, b.stderr)
        self.assertEqual(b.chunk_ids, set(), b.stderr)
        self.assertLess(r.error_ids(), b.ids())
        self.assertIsNone(b.verified)

    def test_d_deleted_segment(self):
        def damage(repo):
            os.unlink(segment_path(repo, self.a.segment))
        r, b = self.damaged_pair("unlink", damage)
        self.assert_findings(r, {i: "missing" for i in self.segment_ids}, orphans=self.archive_lost(r))
        # Plus one segment-level finding (no chunk id) naming the missing file.
        seg_level = [f for f in r.findings if not f["chunk_id"] and f["severity"] == "error"]
        self.assertEqual([(f["severity"], f["stage"], f["segment"]) for f in seg_level],
                         [("error", "missing", self.a.segment)], r.describe())
        # Here every object of the segment really is gone, so the sets agree exactly.
        self.assertEqual(b.index_ids, self.segment_ids, b.stderr)
        self.assertEqual(r.error_ids(), b.ids())

    def test_e_other_objects_data_under_an_id(self):
        """B's stored bytes under A's id: a valid envelope (the MAC does not cover the id), so
        only the id hash can tell."""
        r, b = self.damaged_pair("swap", lambda repo: put_other_data(repo, self.a, self.b))
        self.assert_findings(r, {self.a.id: "id-hash"}, reread="agreed")
        self.assertIn("chunk %s, integrity error: Data integrity error: Chunk %s: id verification failed"
                      % (self.a.id, self.a.id), b.stderr)
        self.assertEqual(b.ids(), {self.a.id}, b.stderr)
        self.assertEqual(r.error_ids(), b.ids())

    def test_e_other_objects_data_under_an_id_every_mode(self):
        for mode, _ in MODES:
            with self.subTest(mode=mode):
                objects = live_objects(REPOS[mode])
                a, donor, _ = pick_victims(objects)
                r, b = self.damaged_pair("swap-" + mode, lambda repo: put_other_data(repo, a, donor), mode)
                self.assert_findings(r, {a.id: "id-hash"}, reread="agreed")
                self.assertEqual(b.ids(), {a.id}, b.stderr)
                self.assertEqual(r.error_ids(), b.ids())


def main():
    global BORGCHECK, BORG
    ap = argparse.ArgumentParser()
    ap.add_argument("--borgcheck", required=True)
    ap.add_argument("--borg", default="borg")
    args, rest = ap.parse_known_args()
    BORGCHECK = os.path.abspath(args.borgcheck)
    BORG = args.borg
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
