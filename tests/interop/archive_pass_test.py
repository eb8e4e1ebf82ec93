#!/usr/bin/env python3
"""The archive pass against real borg 1.2.4 and borg2 2.0.0b5, repositories made at test time.

Phases (both generations side by side, built in parallel):

  1. setUpModule: write an input tree - shared.bin (in every archive unchanged), big.bin
     (3 MiB, spread over several segment files: the repository's max_segment_size is set to
     1 MiB), zeros/a.img and zeros/b.img (24 MiB of zeros each: 12,288 uses of one chunk per
     archive, and an item stream of several chunks), day.txt (new content for every archive), 300 small files -,
     `init` a repokey repository and `create` five archives a1..a5 with --chunker-params
     fixed,4096, changing day.txt before each. `borg debug dump-archive` and
     `dump-archive-items` give borg's own view of every archive.
  2. Clean: `borgcheck --verify-data --json`: exit 0, no finding, 5 of 5 archives checked.
  3. Damage, each on two copies of the repository: `borg debug delete-obj` of (a) day.txt's
     chunk in a1 (one file of one archive), (b) a chunk of shared.bin (the same file in all five
     archives), (c) an item metadata chunk of a1, (d) a1's archive object, (e) the zero chunk
     (61,440 uses: the JSON cap and the text's "and N more"; borg names only the first, see
     the test), (f) b5 only: a1's first item_ptrs
     chunk; and (g) the deletion of a segment file that holds part of big.bin. borgcheck reads
     one copy; borg check -v (for (g) borg check --repair, which alone names the chunks of a lost
     segment) the other. Asserted: exit 90, exact findings (stage, chunk id, affected records
     with archive, path and byte range, totals), and that the (archive, path, byte range, chunk)
     uses borg names as "New missing file chunk detected" equal ours; borg's
     "item metadata chunk missing", "Archive metadata block ... is missing!" and orphan counts
     equal ours.
  4. Selection: --last 1, --first 1, -a, REPO::ARCHIVE and --archives-only on the copy of (a):
     only the selected archives are walked and exactly the objects they reference are verified
     (their number computed from borg's dumps); the selection that leaves a1 out is "ok".
  5. Text output and docs/json.md's `affected` records; every borgcheck run leaves the
     repository unchanged (paths, sizes, mtimes, sha256).

Run: archive_pass_test.py --borgcheck PATH [--borg PATH] [--borg2 PATH] [unittest args].
Python 3 standard library only.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import borg_generations  # noqa: E402
from borg_generations import snapshot, write  # noqa: E402

BORGCHECK = None
BORG1 = "borg"
BORG2 = "borg2"
SCRATCH = None
GENS = {}
ARCHIVES = ["a1", "a2", "a3", "a4", "a5"]
ZERO_USES = 2 * 6144 * len(ARCHIVES)

BAD_ADVICE = ("borg check --repair replaces the missing chunk in these files by an all-zero chunk of the same size "
              "and keeps the original reference (chunks_healthy); if a later borg create stores the same data again, "
              "another borg check --repair puts it back and the files are whole again")


def prng(label, n):
    return hashlib.shake_256(("archive-pass/" + label).encode()).digest(n)


def segment_of_ids(repo):
    """chunk id (hex) -> segment number, from the PUT entries of every segment file (borg 1.x
    PUT and b5 PUT2 headers share crc | size | tag | id)."""
    out = {}
    data = os.path.join(repo, "data")
    for d in os.listdir(data):
        for s in os.listdir(os.path.join(data, d)):
            with open(os.path.join(data, d, s), "rb") as f:
                buf = f.read()
            pos = 8
            while pos + 9 <= len(buf):
                size = int.from_bytes(buf[pos + 4:pos + 8], "little")
                tag = buf[pos + 8]
                if size < 9 or pos + size > len(buf):
                    break
                if tag in (0, 3):
                    out[buf[pos + 9:pos + 41].hex()] = int(s)
                pos += size
    return out


def unhex_dump(value):
    """A byte string from `borg debug dump-archive`: DEL + hex, or text."""
    if value.startswith("\x7f"):
        return value[1:]
    return value.encode("utf-8", "surrogateescape").hex()


MISSING_FILE_CHUNK = re.compile(
    r"^(?P<archive>[^:\n]+): (?P<path>.+?): New missing file chunk detected "
    r"\(Byte (?P<begin>\d+)-(?P<end>\d+), Chunk (?P<chunk>[0-9a-f]{64})\)", re.M)
ANALYZING = re.compile(r"^Analyzing archive (?P<name>\S+) \(\d+/\d+\)$")
ITEM_CHUNK_MISSING = re.compile(r"^item metadata chunk missing \[chunk: (?P<no>\d{6})_(?P<chunk>[0-9a-f]{64})\]$")
ORPHANS = re.compile(r"^(?P<n>\d+) orphaned objects found!$", re.M)


def borg_missing(stderr):
    return {(m["archive"], m["path"], int(m["begin"]), int(m["end"]), m["chunk"])
            for m in MISSING_FILE_CHUNK.finditer(stderr)}


def borg_orphans(stderr):
    m = ORPHANS.search(stderr)
    return int(m["n"]) if m else 0


def borg_item_chunks(stderr):
    out, archive = set(), None
    for line in stderr.splitlines():
        if m := ANALYZING.match(line):
            archive = m["name"]
        elif m := ITEM_CHUNK_MISSING.match(line):
            out.add((archive, m["chunk"]))
    return out


class Generation(borg_generations.Generation):
    def build(self):
        os.makedirs(self.dir)
        src = os.path.join(self.dir, "src")
        write(f"{src}/shared.bin", prng("shared", 40960))
        write(f"{src}/big.bin", prng("big", 3 << 20))
        # Two files of zeros: 12,288 uses of one chunk per archive, and item metadata of more
        # than the item chunker's 512 KiB maximum, so that every item stream has several chunks.
        write(f"{src}/zeros/a.img", bytes(24 << 20))
        write(f"{src}/zeros/b.img", bytes(24 << 20))
        for i in range(300):
            write(f"{src}/small/f{i:03d}.txt", f"small file {i}\n".encode() * (1 + i % 5))
        self.borg(self.repo, ["init" if self.name == "borg1" else "rcreate", "-e",
                              "repokey" if self.name == "borg1" else "repokey-aes-ocb"])
        self.borg(self.repo, ["config"], tail=["max_segment_size", "1048576"])
        for n, name in enumerate(ARCHIVES):
            write(f"{src}/day.txt", f"day {n + 1}\n".encode() * 50)
            self.borg(self.repo, ["create", "--chunker-params", "fixed,4096"], archive=name, tail=["."], cwd=src)
        self.dump = {}
        self.stream = {}
        for name in ARCHIVES:
            path = os.path.join(self.dir, f"dump-{name}.json")
            self.borg(self.repo, ["debug", "dump-archive"], archive=name, tail=[path])
            with open(path) as f:
                self.dump[name] = json.load(f)
            items = os.path.join(self.dir, f"items-{name}")
            os.makedirs(items)
            self.borg(self.repo, ["debug", "dump-archive-items"], archive=name, cwd=items)
            self.stream[name] = [n.split("_", 1)[1][:64] for n in sorted(os.listdir(items)) if n.endswith(".items")]
        listing = self.borg(self.repo, ["list" if self.name == "borg1" else "rlist", "--format",
                                        "{archive} {id}{NL}"]).stdout.decode()
        self.archive_ids = dict(line.split() for line in listing.splitlines())

    def item(self, archive, path):
        return next(i for i in self.dump[archive]["_items"] if i["path"] == path)

    def chunks(self, archive, path):
        """[(id hex, begin, end)] of a file in an archive, from borg's dump."""
        out, pos = [], 0
        for c in self.item(archive, path).get("chunks", []):
            out.append((unhex_dump(c[0]), pos, pos + c[1]))
            pos += c[1]
        return out

    def referenced(self, archive):
        """Every object an archive references, as borg's dumps show it, and the manifest."""
        refs = {"00" * 32, self.archive_ids[archive]}
        meta = self.dump[archive]["_meta"]
        refs |= {unhex_dump(i) for i in meta.get("items", []) + meta.get("item_ptrs", [])}
        refs |= set(self.stream[archive])
        for it in self.dump[archive]["_items"]:
            refs |= {unhex_dump(c[0]) for c in it.get("chunks", [])}
        return refs

    def damaged(self, label, ids=(), segment=None):
        """Two copies without `ids` (or without segment file `segment`): ours and borg's."""
        pair = []
        for _ in range(2):
            c = self.copy(label)
            if ids:
                self.borg(c, ["debug", "delete-obj"], tail=list(ids))
            if segment is not None:
                os.unlink(os.path.join(c, "data", str(segment // 1000), str(segment)))
            pair.append(c)
        return pair


def setUpModule():
    global SCRATCH
    SCRATCH = tempfile.mkdtemp(prefix="borgcheck-archive-pass-")
    GENS.update(borg_generations.build_generations(Generation, SCRATCH, BORG1, BORG2))


def tearDownModule():
    borg_generations.remove_scratch(SCRATCH)


class ArchivePassCase(unittest.TestCase):
    def borgcheck(self, g, repo, *args, json_out=True):
        before = snapshot(repo)
        cmd = [BORGCHECK, "--verify-data", *(["--json"] if json_out else []), *args, repo]
        p = subprocess.run(cmd, env=g.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(snapshot(repo), before, "borgcheck changed the repository")
        if not json_out:
            return p.returncode, p.stdout.decode(), p.stderr.decode()
        records = [json.loads(line) for line in p.stdout.decode().splitlines()]
        return p.returncode, [r for r in records if r["type"] == "finding"], records[-1]

    def uses(self, findings, kinds=("chunks",)):
        """Our (archive, path, begin, end, chunk) uses of file content, from every finding."""
        return {(u["archive"], u["path"], u["begin"], u["end"], f["chunk_id"])
                for f in findings for u in (f["affected"] or []) if u["use"] in kinds}

    def borg_check(self, g, repo, repair=False):
        p = g.borg(repo, ["check", "-v", *(["--repair"] if repair else [])], check=False)
        return p.returncode, p.stderr.decode(errors="replace")


class Clean(ArchivePassCase):
    def test_clean_repositories_verify_with_every_archive(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                rc, findings, summary = self.borgcheck(g, g.repo)
                self.assertEqual((rc, findings), (0, []))
                self.assertEqual((summary["archives_total"], summary["archives_checked"]), (5, 5))
                self.assertEqual(summary["objects_verified"], summary["objects_total"])
                # Several item metadata chunks, some shared between archives.
                self.assertGreaterEqual(len(g.stream["a1"]), 2)


class FileChunks(ArchivePassCase):
    def test_a_file_chunk_of_one_archive(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                (cid, b, e), = g.chunks("a1", "day.txt")
                ours, theirs = g.damaged("file", [cid])
                rc, findings, summary = self.borgcheck(g, ours)
                self.assertEqual(rc, 90)
                self.assertEqual(len(findings), 1, findings)
                f = findings[0]
                self.assertEqual((f["severity"], f["stage"], f["chunk_id"], f["location"]),
                                 ("error", "reference", cid, ""))
                self.assertEqual(f["message"], "chunk is not in the repository: 1 use by a file in 1 archive "
                                               "cannot be restored (missing file chunk)")
                self.assertEqual(f["affected"], [{"archive": "a1", "archive_id": g.archive_ids["a1"], "use": "chunks",
                                                  "path": "day.txt", "begin": b, "end": e, "via": None,
                                                  "items_read": None, "path_before": None, "path_after": None}])
                self.assertEqual(f["affected_total"], 1)
                self.assertEqual(f["advice"], BAD_ADVICE)
                self.assertEqual(summary["findings_by_stage"]["reference"], 1)
                brc, stderr = self.borg_check(g, theirs)
                self.assertNotEqual(brc, 0)
                self.assertEqual(self.uses(findings), borg_missing(stderr))
                self.assertEqual(borg_missing(stderr), {("a1", "day.txt", b, e, cid)})

    def test_one_chunk_shared_by_a_file_in_five_archives(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                cid, b, e = g.chunks("a1", "shared.bin")[3]
                self.assertEqual(all(g.chunks(a, "shared.bin")[3] == (cid, b, e) for a in ARCHIVES), True)
                ours, theirs = g.damaged("shared", [cid])
                rc, findings, summary = self.borgcheck(g, ours)
                self.assertEqual(rc, 90)
                self.assertEqual(len(findings), 1, findings)
                f = findings[0]
                self.assertEqual(f["affected_total"], 5)
                self.assertEqual([(u["archive"], u["path"], u["begin"], u["end"]) for u in f["affected"]],
                                 [(a, "shared.bin", b, e) for a in ARCHIVES])
                brc, stderr = self.borg_check(g, theirs)
                self.assertEqual(self.uses(findings), borg_missing(stderr))
                # Text: the finding, its five uses, the advice, the summary line.
                rc, out, err = self.borgcheck(g, ours, json_out=False)
                lines = out.splitlines()
                self.assertEqual(lines[0], "error: reference chunk " + cid + ": chunk is not in the repository: 5 "
                                           "uses by files in 5 archives cannot be restored (missing file chunk)")
                self.assertEqual(lines[1:6], [f"  affects {a}: shared.bin [bytes {b}-{e}]" for a in ARCHIVES])
                self.assertEqual(lines[6], "  advice: " + BAD_ADVICE)
                self.assertRegex(lines[7], r": integrity-errors: [\d,]+ of [\d,]+ objects verified \(.*\), 5 of 5 "
                                           r"archives checked, 1 error, 0 warnings, ")
                self.assertEqual((len(lines), err), (8, ""))

    def test_the_zero_chunk_used_61440_times(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                zero = {c for c, b, e in g.chunks("a1", "zeros/a.img")}
                self.assertEqual(len(zero), 1)
                zero = zero.pop()
                ours, theirs = g.damaged("zero", [zero])
                rc, findings, summary = self.borgcheck(g, ours)
                self.assertEqual(rc, 90)
                f = next(x for x in findings if x["chunk_id"] == zero)
                self.assertEqual(f["affected_total"], ZERO_USES)
                self.assertEqual(len(f["affected"]), 1000)  # docs/json.md: the first 1000 uses
                # The first use is in whichever zero file comes first in a1's item stream: borg
                # stores a directory's entries in inode order (scandir_inorder), not by name, and
                # the inodes of a.img and b.img depend on the file system.
                paths = [i["path"] for i in g.dump["a1"]["_items"]]
                first = min(("zeros/a.img", "zeros/b.img"), key=paths.index)
                self.assertEqual(f["affected"][:2], [
                    {"archive": "a1", "archive_id": g.archive_ids["a1"], "use": "chunks", "path": first,
                     "begin": 0, "end": 4096, "via": None, "items_read": None, "path_before": None, "path_after": None},
                    {"archive": "a1", "archive_id": g.archive_ids["a1"], "use": "chunks", "path": first,
                     "begin": 4096, "end": 8192, "via": None, "items_read": None, "path_before": None, "path_after": None}])
                # borg names the first use only: its all-zero replacement for the missing chunk is
                # the same all-zero chunk, so it counts the id as present from then on.
                brc, stderr = self.borg_check(g, theirs)
                self.assertEqual(borg_missing(stderr), {("a1", first, 0, 4096, zero)})
                rc, out, err = self.borgcheck(g, ours, json_out=False)
                lines = out.splitlines()
                self.assertEqual(lines[1], "  affects a1: %s [bytes 0-4096]" % first)
                self.assertEqual(lines[6], "  and 61,435 more (--json lists the first 1,000 of them)")


class Metadata(ArchivePassCase):
    def test_an_item_metadata_chunk(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                cid = g.stream["a1"][1]
                users = [a for a in ARCHIVES if cid in g.stream[a]]
                ours, theirs = g.damaged("item-chunk", [cid])
                rc, findings, summary = self.borgcheck(g, ours)
                self.assertEqual(rc, 90)
                f = next(x for x in findings if x["chunk_id"] == cid)
                self.assertEqual((f["stage"], f["severity"], f["location"]), ("reference", "error", ""))
                self.assertEqual(f["message"], "an item metadata chunk is not in the repository: the items in it are "
                                               f"lost from {len(users)} archive" + ("s" if len(users) > 1 else ""))
                self.assertEqual([u["archive"] for u in f["affected"]], users)
                for u in f["affected"]:
                    self.assertEqual((u["use"], u["path"], u["end"]), ("items", None, None))
                    self.assertGreater(u["items_read"], 0)  # how far the archive could be read
                    self.assertGreater(u["begin"], 0)       # the stream offset the chunk starts at
                brc, stderr = self.borg_check(g, theirs)
                self.assertEqual({(u["archive"], cid) for u in f["affected"]}, borg_item_chunks(stderr))
                self.assertEqual(self.uses(findings), borg_missing(stderr))
                orphans = [x for x in findings if x["stage"] == "reference" and x["chunk_id"] is None]
                want = borg_orphans(stderr)
                self.assertEqual([x["message"].split()[0] for x in orphans], [str(want)] if want else [])

    def test_an_archive_object(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                aid = g.archive_ids["a1"]
                ours, theirs = g.damaged("archive", [aid])
                rc, findings, summary = self.borgcheck(g, ours)
                self.assertEqual(rc, 90)
                f = next(x for x in findings if x["chunk_id"] == aid)
                self.assertEqual((f["stage"], f["severity"], f["message"]),
                                 ("reference", "error", "Archive metadata block is missing: archive a1 cannot be read"))
                self.assertEqual(f["affected"], [{"archive": "a1", "archive_id": aid, "use": "archive", "path": None,
                                                  "begin": None, "end": None, "via": None, "items_read": 0, "path_before": None, "path_after": None}])
                self.assertEqual(f["advice"], "borg check --repair removes this archive from the manifest")
                brc, stderr = self.borg_check(g, theirs)
                self.assertIn(f"Archive metadata block {aid} is missing!", stderr)
                orphans = [x for x in findings if x["stage"] == "reference" and x["chunk_id"] is None]
                self.assertGreater(borg_orphans(stderr), 0)
                self.assertEqual([(x["severity"], x["message"].split()[0]) for x in orphans],
                                 [("warning", str(borg_orphans(stderr)))])

    def test_b5_item_ptrs_chunk(self):
        g = GENS["b5"]
        ptr = unhex_dump(g.dump["a1"]["_meta"]["item_ptrs"][0])
        users = [a for a in ARCHIVES if ptr in [unhex_dump(p) for p in g.dump[a]["_meta"]["item_ptrs"]]]
        ours, theirs = g.damaged("item-ptrs", [ptr])
        rc, findings, summary = self.borgcheck(g, ours)
        self.assertEqual(rc, 90)
        f = next(x for x in findings if x["chunk_id"] == ptr)
        self.assertEqual(f["stage"], "reference")
        self.assertEqual([(u["archive"], u["use"], u["items_read"]) for u in f["affected"]],
                         [(a, "item_ptrs", 0) for a in users])
        # borg2 2.0.0b5 cannot tell: its check fails (archive_get_items raises ObjectNotFound).
        brc, stderr = self.borg_check(g, theirs)
        self.assertNotEqual(brc, 0)
        self.assertIn("ObjectNotFound", stderr)


class LostSegment(ArchivePassCase):
    def test_a_file_whose_chunks_are_in_two_segments_one_missing(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                where = segment_of_ids(g.repo)
                big = g.chunks("a1", "big.bin")
                segments = sorted({where[c] for c, b, e in big})
                self.assertGreaterEqual(len(segments), 2)
                lost = segments[len(segments) // 2]
                ours, theirs = g.damaged("segment", segment=lost)
                rc, findings, summary = self.borgcheck(g, ours)
                self.assertEqual(rc, 90)
                want = {(a, "big.bin", b, e, c) for a in ARCHIVES for c, b, e in g.chunks(a, "big.bin")
                        if where[c] == lost}
                self.assertTrue(want)
                got = self.uses(findings)
                self.assertEqual({u for u in got if u[1] == "big.bin"}, want)
                for f in findings:
                    if f["affected"]:
                        self.assertEqual((f["stage"], f["segment"]), ("missing", lost), f)
                # borg's check stops at the repository part; its repair rebuilds the index from
                # the segments left and names every use of the chunks that went with the segment.
                brc, stderr = self.borg_check(g, theirs, repair=True)
                self.assertEqual(got, borg_missing(stderr))


class Selection(ArchivePassCase):
    def test_selections_verify_exactly_what_the_archives_reference(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                (cid, b, e), = g.chunks("a1", "day.txt")
                ours, _ = g.damaged("select", [cid])
                for args, archives, rc_want in [(["--last", "1"], ["a5"], 0), (["--last", "2"], ["a4", "a5"], 0),
                                                (["--first", "1"], ["a1"], 90), (["-a", "a1"], ["a1"], 90),
                                                (["-a", "sh:a[2-5]"], ["a2", "a3", "a4", "a5"], 0),
                                                (["-a", "re:a[13]"], ["a1", "a3"], 90)]:
                    with self.subTest(args=args):
                        rc, findings, summary = self.borgcheck(g, ours, *args)
                        self.assertEqual(rc, rc_want, findings)
                        self.assertEqual((summary["archives_total"], summary["archives_checked"]),
                                         (5, len(archives)))
                        want = set().union(*(g.referenced(a) for a in archives)) - {cid}
                        self.assertEqual(summary["objects_total"], len(want))
                        self.assertEqual(summary["objects_verified"], len(want))
                        self.assertIn("orphaned objects not counted: not every archive was checked", summary["notes"])
                        if rc_want == 90:
                            self.assertEqual([(f["chunk_id"], [u["archive"] for u in f["affected"]]) for f in findings],
                                             [(cid, ["a1"])])
                rc, findings, summary = self.borgcheck(g, f"{ours}::a1")
                self.assertEqual((rc, summary["archives_checked"]), (90, 1))
                rc, findings, summary = self.borgcheck(g, ours, "--archives-only")
                self.assertEqual((rc, summary["archives_checked"], len(findings)), (90, 5, 1))
                # An archive named that does not exist stops the run (borg check only warns; issue 17).
                rc, findings, error = self.borgcheck(g, f"{ours}::nope")
                self.assertEqual((rc, findings, error["type"], error["code"], error["message"]),
                                 (2, [], "error", "invalid-argument",
                                  "archive 'nope' does not exist in the repository (5 archives): nothing was checked "
                                  "(borg list shows the archive names)"))
                # A keyless run cannot read the archives: a selection without --verify-data is refused.
                p = subprocess.run([BORGCHECK, "--last", "1", ours], env=g.env, capture_output=True, text=True)
                self.assertEqual(p.returncode, 2)
                self.assertIn("needs --verify-data", p.stderr)


def main():
    global BORGCHECK, BORG1, BORG2
    ap = argparse.ArgumentParser()
    ap.add_argument("--borgcheck", required=True)
    ap.add_argument("--borg", default="borg")
    ap.add_argument("--borg2", default="borg2")
    args, rest = ap.parse_known_args()
    BORGCHECK, BORG1, BORG2 = args.borgcheck, args.borg, args.borg2
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
