#!/usr/bin/env python3
"""Issue 13 against repositories made by real borg at test time, borg 1.2.4 and borg2 2.0.0b5:
never "ok" about lost data, and faults told from damage.

For each generation, one repokey repository (two archives of random files, so that one segment
holds most chunks) and one keyfile repository are made; every case damages a copy and asserts
borgcheck's exact exit code, stages, ids and messages:

  1. every record of what should exist (segment_log/segment_records.h): with index.T deleted or
     failing its integrity check, a deleted, emptied or half-truncated committed segment is an
     error naming the segment and the count from hints.T and, from the damaged index, every
     lost id; a transaction hints.T and integrity.T record whose COMMIT segment is gone is an
     error; objects_total counts the lost objects;
  2. a FIFO or a directory where a segment should be is damage naming what it is (never a hang);
  3. the config's id changed to another valid id: repokey is verified with its key and warned
     about with both ids (exit 1); keyfile: no key file for that id (exit 42);
  5. an index entry pointing at another chunk's entry (index.T rewritten with its integrity.T
     digests recomputed): borg 1.x reports the index inconsistency (error) and verifies the
     chunk from the log; 2.0.0b5 warns (its index is only cross-checked) naming the other chunk;
  6. a key that cannot be loaded (most segments deleted, the manifest's among them, so the mode
     cannot be told; a wrong passphrase): the repository layer is still checked; with damage the
     key's problem is one more finding (stage key) and the exit is 90, without it the key's own
     code (52).

Run: repo_records_test.py --borgcheck PATH [--borg PATH] [--borg2 PATH] [unittest args].
Python 3 standard library only; repo_files.py (beside this file) rewrites index and config.
"""

import argparse
import json
import os
import random
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import repo_files  # noqa: E402

BORGCHECK = None
BORG1 = "borg"
BORG2 = "borg2"
PASSPHRASE = "test"
WORK = None
ENV = None

EXIT_OK, EXIT_WARNINGS, EXIT_KEY_FILE_NOT_FOUND, EXIT_WRONG_PASSPHRASE, EXIT_INTEGRITY_ERRORS = 0, 1, 42, 52, 90


def make_env(work):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BORG_") and not k.startswith("XDG_")}
    env.update({"HOME": os.path.join(work, "home"), "BORG_BASE_DIR": os.path.join(work, "base"),
                "BORG_PASSPHRASE": PASSPHRASE, "BORG_DISPLAY_PASSPHRASE": "no",
                "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "yes", "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes",
                "LC_ALL": "C.UTF-8"})
    os.makedirs(env["HOME"], exist_ok=True)
    os.makedirs(env["BORG_BASE_DIR"], exist_ok=True)
    return env


def run(cmd, env=None, check=True):
    r = subprocess.run(cmd, env=env or ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if check and r.returncode != 0:
        raise RuntimeError("%s -> %d\n%s%s" % (cmd, r.returncode, r.stdout.decode(), r.stderr.decode()))
    return r


def make_source(path, seed):
    os.makedirs(path)
    rnd = random.Random(seed)
    for i in range(30):
        with open(os.path.join(path, "f%02d" % i), "wb") as f:
            f.write(rnd.randbytes(rnd.randint(2000, 200000)))


class Gen:
    """The command lines of one borg generation."""
    name = None

    def init(self, repo, mode):
        raise NotImplementedError

    def create(self, repo, archive, src):
        raise NotImplementedError


class Borg1(Gen):
    name = "borg1"

    def init(self, repo, mode):
        run([BORG1, "init", "--encryption", mode, repo])

    def create(self, repo, archive, src):
        run([BORG1, "create", "%s::%s" % (repo, archive), src])


class Borg2b5(Gen):
    name = "borg2-b5"

    def init(self, repo, mode):
        run([BORG2, "-r", repo, "rcreate", "--encryption", mode])

    def create(self, repo, archive, src):
        run([BORG2, "-r", repo, "create", archive, src])


def snapshot(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            data = None
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    data = f.read()
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, data)
    return out


class Records:
    """The cases of one generation; subclasses set GEN, REPOKEY, KEYFILE (pristine repositories)."""
    GEN = None
    REPOKEY_MODE = None
    KEYFILE_MODE = None
    REPOS = None

    @classmethod
    def setUpClass(cls):
        cls.REPOS = {}
        base = os.path.join(WORK, cls.GEN.name)
        os.makedirs(base)
        for kind, mode in (("repokey", cls.REPOKEY_MODE), ("keyfile", cls.KEYFILE_MODE)):
            repo = os.path.join(base, kind)
            cls.GEN.init(repo, mode)
            src = os.path.join(base, "src-" + kind)
            make_source(src, zlib.crc32((cls.GEN.name + kind).encode()) & 0xffff)  # not hash(): salted per process
            cls.GEN.create(repo, "a1", src)
            make_source(src + "2", 7)
            cls.GEN.create(repo, "a2", src + "2")
            cls.REPOS[kind] = repo

    # -- helpers --------------------------------------------------------------------------------

    def copy(self, kind="repokey"):
        d = tempfile.mkdtemp(dir=WORK)
        dest = os.path.join(d, "repo")
        shutil.copytree(self.REPOS[kind], dest, symlinks=True)
        return dest

    def borgcheck(self, repo, verify_data=False, env=None, timeout=120):
        before = snapshot(repo)
        cmd = [BORGCHECK, "--json"] + (["--verify-data"] if verify_data else []) + [repo]
        r = subprocess.run(cmd, env=env or ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        self.assertEqual(snapshot(repo), before, "borgcheck changed the repository")
        records = [json.loads(x) for x in r.stdout.decode().splitlines() if x.strip()]
        return r.returncode, [x for x in records if x["type"] == "finding"], records[-1] if records else None, r

    def data_segment(self, repo):
        """The committed segment holding most live objects, and the ids the index lists in it."""
        ix = repo_files.Index(repo_files.index_path(repo))
        by_seg = {}
        for cid, (_, seg, off) in ix.entries().items():
            by_seg.setdefault(seg, {})[cid.hex()] = off
        seg = max(by_seg, key=lambda s: len(by_seg[s]))
        return seg, by_seg[seg]

    def seg_path(self, repo, n):
        return repo_files.segment_path(repo, n)

    def t(self, repo):
        return repo_files.transaction(repo)

    # -- 1. every record of what should exist -------------------------------------------------------

    def test_no_index_deleted_or_empty_segment_is_an_error_with_the_count(self):
        for how in ("deleted", "empty"):
            with self.subTest(how):
                repo = self.copy()
                seg, ids = self.data_segment(repo)
                t = self.t(repo)
                os.remove(repo_files.index_path(repo))
                if how == "deleted":
                    os.remove(self.seg_path(repo, seg))
                else:
                    open(self.seg_path(repo, seg), "wb").close()
                rc, findings, summary, r = self.borgcheck(repo)
                self.assertEqual(rc, EXIT_INTEGRITY_ERRORS, r)
                what = "is missing" if how == "deleted" else "is empty (0 bytes)"
                self.assertEqual([(f["severity"], f["stage"], f["segment"], f["chunk_id"], f["message"]) for f in findings], [
                    ("error", "missing", seg, None,
                     "committed segment file %s %s; hints.%d records %d live objects in it: %d objects lost (their "
                     "ids are not known: no usable index names them)" % (self.seg_path(repo, seg), what, t, len(ids),
                                                                          len(ids)))], r)
                self.assertEqual(summary["objects_total"] - summary["objects_verified"], len(ids), summary)
                # --verify-data: the same repository-layer finding decides (the archives name their own).
                rc, findings, summary, r = self.borgcheck(repo, verify_data=True)
                self.assertEqual(rc, EXIT_INTEGRITY_ERRORS, r)
                self.assertIn("committed segment file %s %s; hints.%d records %d live objects in it" %
                              (self.seg_path(repo, seg), what, t, len(ids)),
                              [f["message"].split(":")[0] for f in findings if f["stage"] == "missing"][0], r)

    def test_damaged_index_names_every_lost_id(self):
        repo = self.copy()
        seg, ids = self.data_segment(repo)
        t = self.t(repo)
        ix = repo_files.index_path(repo)
        # One bit of an empty bucket's key: the index fails its integrity check, and what a
        # salvage reads of the used buckets stays exact (which bucket an id lands in depends on
        # the run's random key, so a bit of a used bucket could change an offset it names).
        index = repo_files.Index(ix)
        empty = [i for i in range((len(index.data) - index.header) // index.bucket)
                 if struct.unpack_from("<I", index.data, index.header + i * index.bucket + 32)[0] == 0xFFFFFFFF]
        self.assertTrue(empty)
        index.data[index.header + empty[-1] * index.bucket] ^= 0x40
        with open(ix, "wb") as f:
            f.write(index.data)
        os.remove(self.seg_path(repo, seg))
        rc, findings, summary, r = self.borgcheck(repo)
        self.assertEqual(rc, EXIT_INTEGRITY_ERRORS, r)
        named = {f["chunk_id"]: (f["stage"], f["segment"], f["offset"], f["message"]) for f in findings if f["chunk_id"]}
        self.assertEqual(named, {cid: ("missing", seg, off, "lost with segment %d (named by index.%d, which fails its "
                                                            "integrity check)" % (seg, t))
                                 for cid, off in ids.items()}, r)
        plain = sorted(f["message"] for f in findings if not f["chunk_id"])
        self.assertEqual(len(plain), 2, r)
        self.assertEqual(plain[0], "committed segment file %s is missing; hints.%d records %d live objects in it; "
                                   "index.%d, which fails its integrity check, names %d of them: %d objects lost"
                         % (self.seg_path(repo, seg), t, len(ids), t, len(ids), len(ids)), r)
        self.assertTrue(plain[1].startswith("index.%d cannot be used (index digest " % t), r)

    def test_no_index_half_truncated_segment_counts_what_is_lost(self):
        repo = self.copy()
        seg, ids = self.data_segment(repo)
        t = self.t(repo)
        os.remove(repo_files.index_path(repo))
        p = self.seg_path(repo, seg)
        os.truncate(p, os.path.getsize(p) // 2)
        rc, findings, summary, r = self.borgcheck(repo)
        self.assertEqual(rc, EXIT_INTEGRITY_ERRORS, r)
        lost = summary["objects_total"] - summary["objects_verified"]
        self.assertGreater(lost, 0, r)
        self.assertEqual(summary["objects_total"],
                         len(repo_files.Index(repo_files.index_path(self.REPOS["repokey"])).entries()), r)
        counts = [f["message"] for f in findings if f["message"].startswith("hints.")]
        # 2.0.0b5's plan reports the cut entry's header itself (one lost object it accounts for);
        # borg 1.x's reader reports the truncation without a count.
        ids_known = ("the damage reported in this segment accounts for 1 of them; the ids of the others are not known"
                     if self.DAMAGE_FINDING_PER_CUT else "their ids are not known")
        self.assertEqual(counts, ["hints.%d records %d live objects in segment %d; the log gives %d: %d %s lost (in a "
                                  "damaged or truncated part of the segment; %s)"
                                  % (t, len(ids), seg, len(ids) - lost, lost,
                                     "object is" if lost == 1 else "objects are", ids_known)], r)
        self.assertEqual([f["stage"] for f in findings], ["truncated", "missing"], r)

    def test_recorded_transaction_whose_commit_segment_is_gone(self):
        repo = self.copy()
        t = self.t(repo)
        os.remove(repo_files.index_path(repo))
        os.remove(self.seg_path(repo, t))
        rc, findings, summary, r = self.borgcheck(repo)
        self.assertEqual(rc, EXIT_INTEGRITY_ERRORS, r)
        self.assertEqual([(f["stage"], f["segment"], f["message"]) for f in findings], [
            ("missing", t, "segment %d holding the COMMIT of transaction %d (recorded by hints.%d and integrity.%d) is "
                           "missing" % (t, t, t, t))], r)
        self.assertEqual(summary["transaction"], t, summary)
        self.assertEqual(summary["objects_verified"], summary["objects_total"], summary)

    # -- 2. not a regular file where a segment should be ------------------------------------------

    def test_fifo_or_directory_where_a_segment_should_be(self):
        for what in ("FIFO", "directory"):
            with self.subTest(what):
                repo = self.copy()
                seg, ids = self.data_segment(repo)
                p = self.seg_path(repo, seg)
                os.remove(p)
                os.mkfifo(p) if what == "FIFO" else os.mkdir(p)
                rc, findings, summary, r = self.borgcheck(repo, timeout=60)  # a FIFO must never block
                self.assertEqual(rc, EXIT_INTEGRITY_ERRORS, r)
                self.assertEqual({f["chunk_id"] for f in findings if f["chunk_id"]}, set(ids), r)
                self.assertTrue(all(f["stage"] == "missing" for f in findings), r)
                self.assertTrue(any(("%s is a %s, not a segment file" % (p, what)) in f["message"] for f in findings), r)

    # -- 3. the config's id changed --------------------------------------------------------------------

    def test_config_id_changed(self):
        new = "ab" * 32
        repo = self.copy("repokey")
        old = repo_files.set_config_id(repo, new)
        rc, findings, summary, r = self.borgcheck(repo, verify_data=True)
        self.assertEqual(rc, EXIT_WARNINGS, r)
        self.assertEqual([(f["severity"], f["stage"]) for f in findings], [("warning", "key")], r)
        self.assertIn("the repository key in config was made for repository %s, but config says the repository id is "
                      "%s" % (old, new), findings[0]["message"], r)
        self.assertEqual(summary["objects_verified"], summary["objects_total"], summary)
        self.assertEqual(summary["repository_id"], new, summary)
        repo = self.copy("keyfile")
        repo_files.set_config_id(repo, new)
        rc, findings, summary, r = self.borgcheck(repo, verify_data=True)
        self.assertEqual(rc, EXIT_KEY_FILE_NOT_FOUND, r)
        # The message names the id the config has now: the one no key file names.
        self.assertIn("No key file for repository %s (id %s) found in " % (repo, new), r.stdout.decode() + r.stderr.decode())

    # -- 5. an index entry pointing at another chunk's entry ---------------------------------------

    def test_index_entry_pointing_at_another_chunks_entry(self):
        repo = self.copy()
        seg, ids = self.data_segment(repo)
        t = self.t(repo)
        by_off = sorted((off, cid) for cid, off in ids.items())
        (a_off, a), (b_off, b) = by_off[2], by_off[7]
        ix = repo_files.Index(repo_files.index_path(repo))
        v = ix.value(bytes.fromhex(b))
        ix.set_value(bytes.fromhex(a), *v)
        ix.save()  # integrity.T's digests recomputed: the index is intact but wrong
        rc, findings, summary, r = self.borgcheck(repo, verify_data=True)
        self.expect_misplaced(rc, findings, summary, r, t, seg, a, a_off, b, b_off)

    # -- 6. the key cannot be loaded ---------------------------------------------------------------

    def test_wrong_passphrase_intact_repository_exits_52(self):
        repo = self.copy()
        env = dict(ENV, BORG_PASSPHRASE="wrong")
        rc, findings, summary, r = self.borgcheck(repo, verify_data=True, env=env)
        self.assertEqual(rc, EXIT_WRONG_PASSPHRASE, r)
        self.assertEqual(findings, [], r)

    def test_wrong_passphrase_and_lost_segment_exits_90_with_the_key_finding(self):
        repo = self.copy()
        seg, ids = self.data_segment(repo)
        os.remove(self.seg_path(repo, seg))
        env = dict(ENV, BORG_PASSPHRASE="wrong")
        rc, findings, summary, r = self.borgcheck(repo, verify_data=True, env=env)
        self.assertEqual(rc, EXIT_INTEGRITY_ERRORS, r)
        key = [f for f in findings if f["stage"] == "key"]
        self.assertEqual(len(key), 1, r)
        self.assertEqual(key[0]["severity"], "error")
        self.assertIn("is incorrect", key[0]["message"])
        self.assertIn("(the objects were checked keyless, so the damage above was found; without it this run would "
                      "have ended with the key's own exit code)", key[0]["message"])
        self.assertEqual({f["chunk_id"] for f in findings if f["chunk_id"]}, set(ids), r)
        self.assertFalse(summary["verify_data"])
        self.assertIsNone(summary["mode"])
        self.assertIn("the key could not be loaded: only the repository layer was checked (keyless: CRCs, the index "
                      "and the log); archives not checked", summary["notes"])

    def test_mode_unknown_after_most_segments_are_lost(self):
        # Every segment that holds a PUT is deleted, the manifest's among them: nothing tells the
        # mode; the index still names every lost object.
        repo = self.copy()
        ix = repo_files.Index(repo_files.index_path(repo))
        segs = {seg for _, seg, _ in ix.entries().values()}
        for s in segs:
            os.remove(self.seg_path(repo, s))
        rc, findings, summary, r = self.borgcheck(repo, verify_data=True)
        self.assertEqual(rc, EXIT_INTEGRITY_ERRORS, r)
        key = [f for f in findings if f["stage"] == "key"]
        self.assertEqual(len(key), 1, r)
        self.assertTrue(key[0]["message"].startswith("cannot tell the encryption mode: no readable object has a "), r)
        self.assertEqual({f["chunk_id"] for f in findings if f["chunk_id"] and f["stage"] == "missing"},
                         {cid.hex() for cid in ix.entries()}, r)
        self.assertEqual(summary["objects_verified"], 0, summary)


class Borg1Records(Records, unittest.TestCase):
    GEN = Borg1()
    DAMAGE_FINDING_PER_CUT = False
    REPOKEY_MODE = "repokey"
    KEYFILE_MODE = "keyfile"

    def expect_misplaced(self, rc, findings, summary, r, t, seg, a, a_off, b, b_off):
        # An intact index that is wrong: an error (borg's check reports index/log differences as
        # errors); the chunk's own PUT in the log is verified.
        self.assertEqual(rc, EXIT_INTEGRITY_ERRORS, r)
        self.assertEqual([(f["severity"], f["stage"], f["chunk_id"], f["segment"], f["offset"], f["message"])
                          for f in findings], [
            ("error", "index", a, seg, b_off,
             "index.%d places this chunk at [segment %d, offset %d], where the log holds the PUT entry of chunk %s (an "
             "index entry that points at another entry); the log's own copy of this chunk, at [segment %d, offset %d], "
             "is verified instead" % (t, seg, b_off, b, seg, a_off))], r)
        self.assertEqual(summary["objects_verified"], summary["objects_total"], summary)


class Borg2b5Records(Records, unittest.TestCase):
    GEN = Borg2b5()
    DAMAGE_FINDING_PER_CUT = True
    REPOKEY_MODE = "repokey-aes-ocb"
    KEYFILE_MODE = "keyfile-aes-ocb"

    def expect_misplaced(self, rc, findings, summary, r, t, seg, a, a_off, b, b_off):
        # 2.0.0b5's index is only cross-checked with the log (borg rebuilds it from the log): a
        # warning naming the other chunk; the object is verified where the log has it.
        self.assertEqual(rc, EXIT_WARNINGS, r)
        self.assertEqual(len(findings), 1, r)
        f = findings[0]
        self.assertEqual((f["severity"], f["stage"], f["chunk_id"], f["segment"], f["offset"]),
                         ("warning", "index", a, seg, a_off), r)
        self.assertTrue(f["message"].startswith("index.%d lists this chunk at [segment %d, offset %d], the PUT entry of "
                                                "chunk %s with " % (t, seg, b_off, b)), r)
        self.assertEqual(summary["objects_verified"], summary["objects_total"], summary)


def main():
    global BORGCHECK, BORG1, BORG2, WORK, ENV
    ap = argparse.ArgumentParser()
    ap.add_argument("--borgcheck", required=True)
    ap.add_argument("--borg", default="borg")
    ap.add_argument("--borg2", default="borg2")
    args, rest = ap.parse_known_args()
    BORGCHECK, BORG1, BORG2 = os.path.abspath(args.borgcheck), args.borg, args.borg2
    with tempfile.TemporaryDirectory(prefix="borgcheck-records-") as work:
        WORK = work
        ENV = make_env(work)
        unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
