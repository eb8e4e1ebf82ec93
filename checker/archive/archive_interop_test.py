#!/usr/bin/env python3
"""Interop test of the archive decoders and walker against real borg 1.2.4 and borg2 2.0.0b5.

Phases (both generations side by side):

  1. setUpModule: write a deterministic input tree (900 small files in 6 directories, a 4 MiB
     file of 1024 chunks, two 24 MiB files of zeros - 6144 references each to one chunk, their
     items push the item stream past the item chunker's 512 KiB maximum, so it is always cut
     into several chunks -, a file shared by every archive, a hard link pair, a symlink, a
     file that changes), `init` a repokey repository and `create` three archives with
     --chunker-params fixed,4096: a1, then a2 after the changing file changed, then a3 with
     nothing changed (its item stream equals a2's). `borg debug dump-repo-objs` writes every
     object's decrypted, decompressed plaintext (`borg debug get-obj` would give the stored,
     encrypted bytes); archive_probe reads those. `borg list` and `borg debug dump-archive`
     give borg's own view of a1 and a2.
  2. Decoding: for a1 and a2, archive_probe --items yields exactly the paths, types,
     sizes and chunk lists (ids, sizes, in order) that borg lists, and the item-stream ids of
     the archive object (1.x `items`; b5 `item_ptrs`, resolved).
  3. Walking, clean: no problem, no bad reference, every stored object except the manifest
     referenced (borg check: no orphans), a3 costs no decode (all memo hits).
  4. Damage, each on its own copy: `borg debug delete-obj` of (a) three file chunks at once:
     one shared by all archives, one of the 1024-chunk file, one of a hard link master, (b)
     an item metadata chunk, (c) an archive object; `borg check -v` on the copy, archive_probe
     --walk with --missing on the dump. What borg names equals what the walker names:
     (archive, path, byte range, chunk) for missing file chunks, (archive, chunk number,
     chunk id) for item metadata chunks, the missing archive object, and the orphan count.
     (d, b5) an item_ptrs chunk: borg2 fails; the walker names the gap.

Run: archive_interop_test.py --probe PATH [--borg PATH] [--borg2 PATH] [unittest args].
Python 3 standard library only. Needs < 60 s on two cores.
"""

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "interop"))

import borg_generations  # noqa: E402
from borg_generations import run, write  # noqa: E402

PROBE = None
BORG1 = "borg"
BORG2 = "borg2"
SCRATCH = None
GENS = {}  # "borg1" / "b5" -> Generation


def prng(label, n):
    return hashlib.shake_256(("archive-interop/" + label).encode()).digest(n)


def make_tree(root):
    """The input tree; `changing.txt` is rewritten between a1 and a2 (see Generation.build)."""
    for d in range(6):
        for i in range(150):
            write(f"{root}/dir{d}/file{i:03d}.txt", f"file {d}/{i}\n".encode() * (1 + i % 7))
    write(f"{root}/big.bin", prng("big", 4 << 20))
    # 6144 references each to one all-zero chunk: cheap to store, but together with the small
    # files the item stream exceeds the item chunker's 512 KiB maximum, so it is always cut
    # into several chunks (and items straddle the cuts).
    write(f"{root}/zeros/a.img", bytes(24 << 20))
    write(f"{root}/zeros/b.img", bytes(24 << 20))
    write(f"{root}/shared.bin", prng("shared", 100_000))
    write(f"{root}/links/hl_a.txt", prng("hardlink", 9000))
    os.link(f"{root}/links/hl_a.txt", f"{root}/links/hl_b.txt")
    os.symlink("../shared.bin", f"{root}/links/sym")
    write(f"{root}/changing.txt", b"version 1\n" * 1000)
    # One mtime for everything, so that a2/a3 see no change except where we make one.
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + dirnames:
            os.utime(os.path.join(dirpath, n), (1767225600, 1767225600), follow_symlinks=False)


def unhex_dump(value):
    """A byte string from `borg debug dump-archive` (prepare_dump_dict): DEL + hex, or text."""
    if value.startswith("\x7f"):
        return value[1:]
    return value.encode("utf-8", "surrogateescape").hex()


class Generation(borg_generations.Generation):
    # borg runs on each damaged copy with a base folder of its own: the copies share the
    # repository id, and borg 1.x keeps its nonce reservation per id in the base folder, so two
    # copies checked at once in one folder made `borg check` fail with "nonce space reservation
    # with mismatched previous state" (it encrypts the all-zero replacement of a missing chunk).
    PER_COPY_BASE_DIR = True

    def __init__(self, name, exe, probe_gen):
        super().__init__(name, exe, SCRATCH)
        self.probe_gen = probe_gen
        self.archives = ["a1", "a2", "a3"]

    def build(self):
        os.makedirs(self.dir)
        src = os.path.join(self.dir, "src")
        make_tree(src)
        self.borg(self.repo, ["init" if self.name == "borg1" else "rcreate", "-e",
                              "repokey" if self.name == "borg1" else "repokey-aes-ocb"])
        for n, name in enumerate(self.archives):
            if n == 1:
                write(f"{src}/changing.txt", b"version 2\n" * 1000)
                os.utime(f"{src}/changing.txt", (1767225700, 1767225700))
            self.borg(self.repo, ["create", "--chunker-params", "fixed,4096"], archive=name, tail=["."], cwd=src)
        self.dump = os.path.join(self.dir, "dump")
        os.makedirs(self.dump)
        self.borg(self.repo, ["debug", "dump-repo-objs"], cwd=self.dump)
        self.listing = {}
        self.dumped = {}
        for name in self.archives[:2]:  # a3 is a2 again (asserted by CleanWalk)
            out = self.borg(self.repo, ["list", "--format", "{type}{TAB}{path}{TAB}{size}{NL}"],
                            archive=name).stdout.decode()
            self.listing[name] = [line.split("\t") for line in out.splitlines()]
            dumpfile = os.path.join(self.dir, f"dump-{name}.json")
            self.borg(self.repo, ["debug", "dump-archive"], archive=name, tail=[dumpfile])
            with open(dumpfile) as f:
                self.dumped[name] = json.load(f)
        self.items = {j["archive"]: j for j in self.probe("--items") if "archive" in j}
        self.clean_walk = self.probe("--walk")
        self.damage = {}

    def probe(self, *args):
        p = run([PROBE, "--generation", self.probe_gen, "--objects", self.dump, *args])
        return [json.loads(line) for line in p.stdout.decode().splitlines()]

    def object_ids(self):
        ids = set()
        for n in os.listdir(self.dump):
            m = re.fullmatch(r"\d{8}_([0-9a-f]{64})\.obj", n)
            if m:
                ids.add(m.group(1))
        return ids

    def damaged_check(self, label, ids):
        """borg check -v on a copy without `ids`, and the walker without them on the dump."""
        copy = self.copy(label)
        self.borg(copy, ["debug", "delete-obj"], tail=ids)
        p = self.borg(copy, ["check", "-v"], check=False)
        args = ["--walk"]
        for i in ids:
            args += ["--missing", i]
        self.damage[label] = (p.returncode, p.stderr.decode(errors="replace"), self.probe(*args))


def setUpModule():
    global SCRATCH
    SCRATCH = tempfile.mkdtemp(prefix="borgcheck-archive-interop-")
    GENS["borg1"] = Generation("borg1", BORG1, "borg1")
    GENS["b5"] = Generation("b5", BORG2, "b5")
    with ThreadPoolExecutor(2) as ex:
        for f in [ex.submit(g.build) for g in GENS.values()]:
            f.result()
    # The damage scenarios (phase 4), all prepared in parallel.
    jobs = []
    for g in GENS.values():
        items = g.items
        shared = item_of(items["a1"], "shared.bin")["chunks"][3][0]
        big = item_of(items["a1"], "big.bin")["chunks"][700][0]
        master = next(it for it in items["a1"]["items"] if it["path"].startswith("links/hl_") and it.get("chunks"))
        jobs.append((g, "files", [shared, big, master["chunks"][1][0]]))
        jobs.append((g, "item-chunk", [items["a1"]["stream"][1]]))
        jobs.append((g, "archive", [items["a1"]["id"]]))
        if g.name == "b5":
            ptrs = g.dumped["a1"]["_meta"]["item_ptrs"]
            jobs.append((g, "item-ptrs", [unhex_dump(ptrs[0])]))
    with ThreadPoolExecutor(2) as ex:
        for f in [ex.submit(g.damaged_check, label, ids) for g, label, ids in jobs]:
            f.result()


def tearDownModule():
    borg_generations.remove_scratch(SCRATCH)


def item_of(archive_json, path):
    return next(it for it in archive_json["items"] if it["path"] == path)


def walk_archives(lines):
    return {j["archive"]: j for j in lines if "failure" in j}


def walk_totals(lines):
    return next(j for j in lines if "orphans" in j)


MISSING_FILE_CHUNK = re.compile(
    r"^(?P<archive>[^:\n]+): (?P<path>.+?): New missing file chunk detected "
    r"\(Byte (?P<begin>\d+)-(?P<end>\d+), Chunk (?P<chunk>[0-9a-f]{64})\)", re.M)
ANALYZING = re.compile(r"^Analyzing archive (?P<name>\S+) \(\d+/\d+\)$")
ITEM_CHUNK_MISSING = re.compile(r"^item metadata chunk missing \[chunk: (?P<no>\d{6})_(?P<chunk>[0-9a-f]{64})\]$")
ORPHANS = re.compile(r"^(?P<n>\d+) orphaned objects found!$", re.M)


def borg_missing_file_chunks(stderr):
    return {(m["archive"], m["path"], int(m["begin"]), int(m["end"]), m["chunk"])
            for m in MISSING_FILE_CHUNK.finditer(stderr)}


def our_missing_file_chunks(lines, lists=("chunks",)):
    return {(b["archive"], b["path"], b["begin"], b["end"], b["chunk"])
            for a in walk_archives(lines).values() for b in a["bad_refs"] if b["list"] in lists}


def borg_orphans(stderr):
    m = ORPHANS.search(stderr)
    return int(m["n"]) if m else 0


def msgpack_skip(b, i):
    """The offset just past the msgpack value at b[i] (the standard library has no msgpack)."""
    t = b[i]
    if t <= 0x7F or t >= 0xE0 or t in (0xC0, 0xC2, 0xC3):
        return i + 1
    if 0x80 <= t <= 0x8F:
        n, i = 2 * (t & 0x0F), i + 1
    elif 0x90 <= t <= 0x9F:
        n, i = t & 0x0F, i + 1
    elif 0xA0 <= t <= 0xBF:
        return i + 1 + (t & 0x1F)
    elif t in (0xC4, 0xD9):
        return i + 2 + b[i + 1]
    elif t in (0xC5, 0xDA):
        return i + 3 + int.from_bytes(b[i + 1:i + 3], "big")
    elif t in (0xC6, 0xDB):
        return i + 5 + int.from_bytes(b[i + 1:i + 5], "big")
    elif t in (0xC7, 0xC8, 0xC9):
        w = {0xC7: 1, 0xC8: 2, 0xC9: 4}[t]
        return i + 2 + w + int.from_bytes(b[i + 1:i + 1 + w], "big")
    elif t in (0xCA, 0xCB, 0xCC, 0xCD, 0xCE, 0xCF, 0xD0, 0xD1, 0xD2, 0xD3):
        return i + 1 + {0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8,
                        0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}[t]
    elif 0xD4 <= t <= 0xD8:
        return i + 2 + (1 << (t - 0xD4))
    elif t in (0xDC, 0xDE):
        n, i = int.from_bytes(b[i + 1:i + 3], "big") * (2 if t == 0xDE else 1), i + 3
    elif t in (0xDD, 0xDF):
        n, i = int.from_bytes(b[i + 1:i + 5], "big") * (2 if t == 0xDF else 1), i + 5
    else:
        raise AssertionError(f"not msgpack: 0x{t:02x} at {i}")
    for _ in range(n):
        i = msgpack_skip(b, i)
    return i


def item_spans(g, stream):
    """From borg's dump of an archive's item-stream chunks: the byte offset at which each item
    starts in the concatenated stream, and the end offset of each chunk in it."""
    names = {}
    for n in os.listdir(g.dump):
        m = re.fullmatch(r"\d{8}_([0-9a-f]{64})\.obj", n)
        if m:
            names[m.group(1)] = n
    data, ends = b"", []
    for cid in stream:
        with open(os.path.join(g.dump, names[cid]), "rb") as f:
            data += f.read()
        ends.append(len(data))
    starts, i = [], 0
    while i < len(data):
        starts.append(i)
        i = msgpack_skip(data, i)
    if i != len(data):
        raise AssertionError("the item stream does not end on an item")
    return starts, ends


def chunk_at(ends, offset):
    """The index of the chunk that holds byte `offset` of the stream."""
    return next(k for k, e in enumerate(ends) if offset < e)

class Decoding(unittest.TestCase):
    def test_items_equal_borg_list_and_dump_archive(self):
        for g in GENS.values():
            for name in g.archives[:2]:
                with self.subTest(gen=g.name, archive=name):
                    ours = g.items[name]
                    self.assertEqual(ours["issues"], [])
                    self.assertFalse(ours["ends_inside_item"])
                    self.assertEqual([it["path"] for it in ours["items"]], [row[1] for row in g.listing[name]])
                    for it, row in zip(ours["items"], g.listing[name]):
                        if row[0] == "-":
                            self.assertEqual(it["type"], "file", it["path"])
                            self.assertEqual(it["size"], int(row[2]), it["path"])
                        elif row[0] == "d":
                            self.assertEqual(it["type"], "directory", it["path"])
                        elif row[0] == "l":
                            self.assertEqual(it["type"], "symlink", it["path"])
                    theirs = g.dumped[name]["_items"]
                    self.assertEqual(len(theirs), len(ours["items"]))
                    for it, d in zip(ours["items"], theirs):
                        self.assertEqual(it["path"], d["path"])
                        want = [[unhex_dump(c[0]), c[1]] for c in d.get("chunks", [])]
                        self.assertEqual([[c[0], c[1]] for c in it.get("chunks", [])], want, it["path"])
                        offsets = [sum(c[1] for c in want[:i]) for i in range(len(want))]
                        self.assertEqual([c[2] for c in it.get("chunks", [])], offsets)
                    meta = g.dumped[name]["_meta"]
                    if g.name == "borg1":
                        self.assertEqual(ours["stream"], [unhex_dump(i) for i in meta["items"]])
                        self.assertEqual(ours["item_ptrs"], 0)
                    else:
                        self.assertEqual(ours["item_ptrs"], len(meta["item_ptrs"]))
                        # b5 writes item_ptrs chunks of 3 ids (IDS_PER_CHUNK = 3 in 2.0.0b5)
                        self.assertEqual(len(meta["item_ptrs"]), (len(ours["stream"]) + 2) // 3)
                    self.assertTrue(ours["has_tam"])  # 1.2.4 and b5 write archive TAMs

    def test_items_straddle_item_stream_chunks(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                a1 = g.items["a1"]
                self.assertGreaterEqual(len(a1["stream"]), 2)
                # Where borg's item chunker cut the packed items depends on per-run metadata
                # (ctime, inode), so a cut may fall inside an item or exactly between two. The
                # truth comes from borg's own dump of the item-stream chunks: each item's byte
                # range in the concatenated stream, hence the chunk it ends in and whether it
                # began in an earlier one.
                starts, ends = item_spans(g, a1["stream"])
                self.assertEqual(len(starts), len(a1["items"]))
                want = [(chunk_at(ends, e - 1), chunk_at(ends, s) != chunk_at(ends, e - 1))
                        for s, e in zip(starts, starts[1:] + [ends[-1]])]
                self.assertEqual([(it["chunk"], it["started_in_earlier_chunk"]) for it in a1["items"]], want)
                big = item_of(g.items["a1"], "big.bin")
                self.assertEqual(len(big["chunks"]), 1024)
                self.assertEqual(big["size"], 4 << 20)

    def test_hard_links_per_generation(self):
        g = GENS["borg1"]
        a = g.items["a1"]
        master = next(it for it in a["items"] if it["path"].startswith("links/hl_") and "chunks" in it)
        slave = next(it for it in a["items"] if it["path"].startswith("links/hl_") and "chunks" not in it)
        self.assertTrue(master["hardlink_master"])
        self.assertEqual(slave["source"], master["path"])
        b5 = [it for it in GENS["b5"].items["a1"]["items"] if it["path"].startswith("links/hl_")]
        self.assertEqual(len(b5), 2)
        self.assertTrue(all("hlid" in it and len(it["chunks"]) == 3 for it in b5))
        self.assertEqual(b5[0]["hlid"], b5[1]["hlid"])


class CleanWalk(unittest.TestCase):
    def test_clean_repositories(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                archives = walk_archives(g.clean_walk)
                self.assertEqual(sorted(archives), g.archives)
                for a in archives.values():
                    self.assertEqual(a["failure"], "none")
                    self.assertEqual(a["problems"], [])
                    self.assertEqual(a["bad_refs"], [])
                    self.assertEqual(a["items"], len(g.listing[a["archive"] if a["archive"] != "a3" else "a2"]))
                totals = walk_totals(g.clean_walk)
                self.assertEqual(totals["orphans"], 0)
                self.assertEqual(set(totals["marked"]), g.object_ids() - {"00" * 32})
                # a3 equals a2 item for item: its stream is all memo hits.
                self.assertEqual(g.items["a3"]["stream"], g.items["a2"]["stream"])
                self.assertEqual(archives["a3"]["steps_decoded"], 0)
                self.assertEqual(archives["a3"]["memo_hits"], archives["a3"]["stream_chunks"])


class Damage(unittest.TestCase):
    def test_missing_file_chunks(self):
        """A chunk shared by all archives, one of the 1024-chunk file, a hard link master's."""
        for g in GENS.values():
            with self.subTest(gen=g.name):
                rc, stderr, lines = g.damage["files"]
                self.assertEqual(rc, 1, stderr)
                theirs = borg_missing_file_chunks(stderr)
                self.assertEqual(our_missing_file_chunks(lines), theirs)
                self.assertEqual(walk_totals(lines)["orphans"], borg_orphans(stderr))
                shared = item_of(g.items["a1"], "shared.bin")["chunks"][3]
                self.assertEqual({(a, p, b, e) for a, p, b, e, c in theirs if c == shared[0]},
                                 {(a, "shared.bin", shared[2], shared[2] + shared[1]) for a in g.archives})
                big = item_of(g.items["a1"], "big.bin")["chunks"][700]
                self.assertEqual({(p, b, e) for a, p, b, e, c in theirs if c == big[0]},
                                 {("big.bin", 700 * 4096, 701 * 4096)})
                links = {p for a, p, b, e, c in theirs if p.startswith("links/")}
                if g.name == "borg1":
                    # borg 1.x names the master only; the walker adds the slave, via the master.
                    self.assertEqual(len(links), 1)
                    master = next(iter(links))
                    slaves = [b for a in walk_archives(lines).values() for b in a["bad_refs"] if b["list"] == "hardlink"]
                    self.assertEqual(len(slaves), 3)  # one per archive
                    self.assertTrue(all(b["via"] == master and b["path"] != master and b["path"].startswith("links/hl_")
                                        for b in slaves))
                else:
                    self.assertEqual(links, {"links/hl_a.txt", "links/hl_b.txt"})  # every b5 link has chunks

    def test_item_metadata_chunk(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                rc, stderr, lines = g.damage["item-chunk"]
                self.assertEqual(rc, 1, stderr)
                theirs = set()
                archive = None
                for line in stderr.splitlines():
                    if m := ANALYZING.match(line):
                        archive = m["name"]
                    elif m := ITEM_CHUNK_MISSING.match(line):
                        theirs.add((archive, int(m["no"]), m["chunk"]))
                ours = {(a["archive"], p["chunk_index"], p["chunk"]) for a in walk_archives(lines).values()
                        for p in a["problems"] if p["kind"] == "chunk-missing"}
                self.assertTrue(theirs, stderr)
                self.assertEqual(ours, theirs)
                a1 = walk_archives(lines)["a1"]
                p = next(p for p in a1["problems"] if p["kind"] == "chunk-missing")
                self.assertGreater(p["items_before"], 0)
                self.assertGreater(p["stream_offset"], 0)
                self.assertEqual(walk_totals(lines)["orphans"], borg_orphans(stderr))
                self.assertEqual(our_missing_file_chunks(lines), borg_missing_file_chunks(stderr))

    def test_archive_object(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                rc, stderr, lines = g.damage["archive"]
                self.assertEqual(rc, 1, stderr)
                aid = g.items["a1"]["id"]
                self.assertIn(f"Archive metadata block {aid} is missing!", stderr)
                a1 = walk_archives(lines)["a1"]
                self.assertEqual(a1["failure"], "object-missing")
                self.assertEqual(a1["message"], f"Archive metadata block {aid} is missing!")
                orphans = borg_orphans(stderr)
                self.assertGreater(orphans, 0)
                self.assertEqual(walk_totals(lines)["orphans"], orphans)

    def test_b5_item_ptrs_chunk(self):
        g = GENS["b5"]
        rc, stderr, lines = g.damage["item-ptrs"]
        # borg2 2.0.0b5 does not survive it (archive_get_items raises ObjectNotFound).
        self.assertNotEqual(rc, 0)
        a1 = walk_archives(lines)["a1"]
        p = a1["problems"][0]
        self.assertEqual(p["kind"], "item-ptrs-missing")
        self.assertEqual(p["chunk_index"], 0)
        # The lost chunk listed the first (up to) 3 item-stream chunk ids.
        self.assertEqual(a1["stream_chunks"], max(0, len(g.items["a1"]["stream"]) - 3))


def main():
    global PROBE, BORG1, BORG2
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True)
    ap.add_argument("--borg", default="borg")
    ap.add_argument("--borg2", default="borg2")
    args, rest = ap.parse_known_args()
    PROBE, BORG1, BORG2 = args.probe, args.borg, args.borg2
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
