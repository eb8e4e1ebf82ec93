#!/usr/bin/env python3
"""What metadata damage means (issue 17, item 6), against real borg 1.2.4 and borg2 2.0.0b5,
repositories made at test time.

Phases (both generations side by side, built in parallel):

  1. setUpModule: an input tree of 8,000 small files (so that the item metadata stream has
     at least three chunks), `init` a repokey repository, `create` a1 then a2. borg runs on each copy
     with a base folder of its own (copies share the repository id).
  2. The manifest's segment entry damaged (one byte of its data): exit 90, the manifest's
     finding says what that means and what borg offers; the summary says the archives were not
     checked (text and JSON). borg's own view on copies: `borg list` fails, `borg check
     --repair` rebuilds the manifest ("Rebuilding missing manifest") and lists both archives.
  3. An item metadata chunk of a1 deleted (`borg debug delete-obj`): its `affected` record
     names the last path read before it and the first after it; `borg check --repair` on a
     copy drops exactly the items between them (borg list before and after), so the two
     paths are borg's own.
  4. The COMMIT of the last transaction damaged (its CRC bytes): the finding says which
     transaction, that borg rolls it back, and what to do; `borg list` on a copy then shows a2
     gone (the roll-back the finding announces).
  5. borg 1.x only: `borg rename` of borg 1.2.4 keeps the old archive TAM (borg #7791): the
     renamed archive's TAM finding tells a wrong TAM, gives borg's remedy, and its items are
     walked all the same (a file chunk deleted from it is still named).
  6. A keyless run over a deleted file chunk: exit 0, and the summary line itself says that
     contents and archives were not verified.
Every borgcheck run leaves the repository unchanged.

Run: metadata_damage_test.py --borgcheck PATH [--borg PATH] [--borg2 PATH] [unittest args].
Python 3 standard library only.
"""

import argparse
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
import repo_files  # noqa: E402
from borg_generations import snapshot, write  # noqa: E402

BORGCHECK = None
BORG1 = "borg"
BORG2 = "borg2"
SCRATCH = None
GENS = {}
SUMMARY_TIME = re.compile(r", \d[\dhms.]*s\n")

MANIFEST_ADVICE = ("this is the manifest, the list of archives: no archive could be checked, and borg can list, "
                   "extract or mount no archive until it is rebuilt; borg check --repair rebuilds it from the archive "
                   "objects in the repository (they are intact unless a finding names them)")
ITEMS_ADVICE = ("borg check --repair keeps the archive without the items of this chunk (borg list and borg extract "
                "then skip them, and every other item of the archive restores); take the lost files from another "
                "archive that has them")
TAM_ADVICE = ("if the archive is genuine (its name, time and files are what you backed up), borg upgrade "
              "--archives-tam REPO (borg 1.2.6+) gives it a valid TAM; do not run borg check --repair before: it "
              "deletes archives without a valid TAM")


def entries(repo):
    """[(segment, path, offset, size, tag, id)] of every segment file, in log order."""
    out = []
    data = os.path.join(repo, "data")
    for d in sorted(os.listdir(data), key=int):
        for s in sorted(os.listdir(os.path.join(data, d)), key=int):
            p = os.path.join(data, d, s)
            out += [(int(s), p) + e for e in repo_files.segment_entries(p)]
    return out


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


class Generation(borg_generations.Generation):
    # borg runs on each copy with a base folder of its own: the copies share the repository id
    # (a roll-back or a repair on one copy must not change borg's view of the next).
    PER_COPY_BASE_DIR = True

    def build(self):
        src = os.path.join(self.dir, "src")
        # 8,000 files: an item metadata stream of about 1.3 MB. borg cuts it at 512 KiB at most,
        # so it has at least three chunks, and the third one holds items, wherever the cuts fall
        # (they move with the files' times and inode numbers).
        for i in range(8000):
            write(f"{src}/d{i // 100:02d}/f{i:04d}.txt", f"small file {i}\n".encode() * (1 + i % 5))
        self.borg(self.repo, ["init" if self.name == "borg1" else "rcreate", "-e",
                              "repokey" if self.name == "borg1" else "repokey-aes-ocb"])
        for name in ("a1", "a2"):
            self.borg(self.repo, ["create"], archive=name, tail=["."], cwd=src)
        items = os.path.join(self.dir, "items-a1")
        os.makedirs(items)
        self.borg(self.repo, ["debug", "dump-archive-items"], archive="a1", cwd=items)
        self.stream = [n.split("_", 1)[1][:64] for n in sorted(os.listdir(items)) if n.endswith(".items")]
        self.paths = self.list_paths(self.repo, "a1")

    def list_paths(self, repo, archive):
        fmt = "{path}{NL}"
        words = ["list", "--format", fmt] if self.name == "borg1" else ["list", "--format", fmt]
        return self.borg(repo, words, archive=archive).stdout.decode().splitlines()

    def archives(self, repo, check=True):
        p = self.borg(repo, ["list" if self.name == "borg1" else "rlist", "--format", "{archive}{NL}"], check=check)
        return p.returncode, p.stdout.decode().split()


def setUpModule():
    global SCRATCH
    SCRATCH = tempfile.mkdtemp(prefix="borgcheck-metadata-damage-")
    GENS.update(borg_generations.build_generations(Generation, SCRATCH, BORG1, BORG2))


def tearDownModule():
    borg_generations.remove_scratch(SCRATCH)


class MetadataDamage(unittest.TestCase):
    def borgcheck(self, g, repo, *args):
        """(rc, findings, summary) of a --json run, and the text run's stdout (times masked)."""
        before = snapshot(repo)
        p = subprocess.run([BORGCHECK, "--json", *args, repo], env=g.env, capture_output=True)
        records = [json.loads(line) for line in p.stdout.decode().splitlines()]
        t = subprocess.run([BORGCHECK, *args, repo], env=g.env, capture_output=True)
        self.assertEqual(t.returncode, p.returncode)
        self.assertEqual(snapshot(repo), before, "borgcheck changed the repository")
        return (p.returncode, [r for r in records if r["type"] == "finding"], records[-1],
                SUMMARY_TIME.sub(", <T>\n", t.stdout.decode()))

    def test_manifest_entry_damaged(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                ours, theirs = g.copy("manifest"), g.copy("manifest")
                for c in (ours, theirs):
                    seg, path, off, size, tag, cid = [e for e in entries(c) if e[4] in (0, 3) and e[5] == bytes(32)][-1]
                    flip(path, off + size - 1)
                rc, findings, summary, text = self.borgcheck(g, ours, "--verify-data")
                self.assertEqual(rc, 90)
                [f] = findings
                self.assertEqual((f["chunk_id"], f["stage"], f["segment"], f["offset"], f["advice"], f["affected"]),
                                 ("00" * 32, "entry-crc", seg, off, MANIFEST_ADVICE, None))
                self.assertEqual((summary["archives_total"], summary["archives_checked"],
                                  summary["archives_not_checked"]),
                                 (None, None, "the manifest (the list of archives) is damaged"))
                self.assertEqual(text.splitlines()[-1],
                                 f"{ours}: integrity-errors: {summary['objects_verified']:,} of {summary['objects_total']:,} "
                                 f"objects verified ({summary_bytes(summary)}), archives not checked (the manifest "
                                 "(the list of archives) is damaged), 1 error, 0 warnings, <T>")
                self.assertIn("  advice: " + MANIFEST_ADVICE + "\n", text)
                # What the advice says of borg: nothing can be listed, --repair rebuilds it.
                self.assertEqual(g.archives(theirs, check=False)[0], 2)
                p = g.borg(theirs, ["check", "-v", "--repair"], check=False)
                self.assertIn("Rebuilding missing manifest", p.stderr.decode())
                self.assertEqual(sorted(g.archives(theirs)[1]), ["a1", "a2"])

    def test_item_metadata_chunk_deleted(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                self.assertGreaterEqual(len(g.stream), 3)
                cid = g.stream[1]  # a chunk in the middle: items before and after it
                ours, theirs = g.copy("items"), g.copy("items")
                for c in (ours, theirs):
                    g.borg(c, ["debug", "delete-obj"], tail=[cid])
                rc, findings, summary, text = self.borgcheck(g, ours, "--verify-data")
                self.assertEqual(rc, 90)
                f = next(x for x in findings if x["chunk_id"] == cid)
                self.assertEqual(f["advice"], ITEMS_ADVICE)
                [u] = [u for u in f["affected"] if u["archive"] == "a1"]
                # borg's repair drops the lost items: the paths around the gap are borg's own.
                g.borg(theirs, ["check", "--repair"], check=False)
                kept = g.list_paths(theirs, "a1")
                gap = next(i for i, p in enumerate(g.paths) if i >= len(kept) or kept[i] != p)
                lost = len(g.paths) - len(kept)
                self.assertGreater(lost, 0)
                self.assertEqual(g.paths[:gap] + g.paths[gap + lost:], kept)
                self.assertEqual((u["use"], u["items_read"], u["path_before"], u["path_after"]),
                                 ("items", gap, g.paths[gap - 1], g.paths[gap + lost]))
                self.assertIn(f"  affects archive a1: an item metadata chunk at item stream byte {u['begin']:,}: "
                              f"read up to item {gap:,}, the items in it are lost (lost between "
                              f"{g.paths[gap - 1]} and {g.paths[gap + lost]})\n", text)
                self.assertIn("  advice: " + ITEMS_ADVICE + "\n", text)

    def test_last_commit_damaged(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                ours, theirs = g.copy("commit"), g.copy("commit")
                for c in (ours, theirs):
                    commits = [e for e in entries(c) if e[4] == 2]
                    last, before = commits[-1], commits[-2]
                    flip(last[1], last[2])  # the entry's CRC
                t, p = last[0], before[0]
                names = [f"{n}.{t}" for n in ("index", "hints", "integrity") if os.path.exists(f"{ours}/{n}.{t}")]
                by = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
                rc, findings, summary, text = self.borgcheck(g, ours, "--verify-data")
                self.assertEqual(rc, 90)
                # borg 1.x: the COMMIT entry is found where it belongs and its CRC fails (the
                # entry has its own entry-crc finding); 2.0.0b5's probe checks the entry hash and
                # finds no COMMIT.
                stage, what = (("segment", f"ends transaction {t} (recorded by {by}) with a COMMIT entry that is "
                                           "damaged") if g.name == "borg1" else
                               ("truncated", f"should end transaction {t} (recorded by {by}) but holds no COMMIT: it "
                                             "is truncated or damaged"))
                f = next(x for x in findings if x["stage"] == stage and x["segment"] == t)
                self.assertEqual((f["severity"], f["message"], f["advice"]), (
                    "error",
                    f"segment {t} {what}; borg takes transaction {p} as the last one when it next opens the repository: what "
                    f"transaction {t} wrote (segments {p + 1} to {t}: a backup, prune, delete or rename) is rolled "
                    "back, its archives vanish from the archive list, and borg's next write deletes those segments",
                    f"this check verified transaction {t} as recorded; no borg command repairs a COMMIT: to keep that "
                    f"transaction, copy the repository before running borg on it, else let borg roll back to "
                    f"transaction {p}, run borg check, and make the lost backup again"))
                self.assertEqual(summary["transaction"], t)
                self.assertIn("  advice: " + f["advice"] + "\n", text)
                # The roll-back it announces: a2, made by the last transaction, is gone for borg.
                self.assertEqual(g.archives(theirs, check=False)[1], ["a1"])

    def test_borg1_renamed_archive_with_a_wrong_tam_is_walked(self):
        g = GENS["borg1"]
        ours = g.copy("tam")
        g.borg(ours, ["rename"], archive="a1", tail=["a1r"])  # borg 1.2.4 keeps a1's TAM (borg #7791)
        victim = next(c for c in chunks_of(g, ours, "a1r", "d00/f0007.txt"))
        g.borg(ours, ["debug", "delete-obj"], tail=[victim])
        rc, findings, summary, text = self.borgcheck(g, ours, "--verify-data")
        self.assertEqual(rc, 90)
        tam = next(x for x in findings if x["stage"] == "authentication")
        self.assertEqual((tam["location"], tam["message"], tam["advice"]), (
            "[archive a1r]",
            "Archive TAM authentication issue for archive a1r: Archive authentication did not verify (a wrong TAM: "
            "borg 1.2.4 and older wrote such TAMs in borg rename, recreate and check --repair, borg #7791; or the "
            "archive was altered); borg 1.2.5+ and 1.4 refuse it; its items and data were checked all the same (each "
            "chunk carries its own MAC; any damage has its own finding)",
            TAM_ADVICE))
        self.assertEqual((summary["archives_total"], summary["archives_checked"]), (2, 2))
        missing = next(x for x in findings if x["chunk_id"] == victim)
        self.assertEqual([(u["archive"], u["path"]) for u in missing["affected"]],
                         [("a1r", "d00/f0007.txt"), ("a2", "d00/f0007.txt")])

    def test_keyless_run_says_what_it_did_not_verify(self):
        for g in GENS.values():
            with self.subTest(gen=g.name):
                ours = g.copy("keyless")
                victim = next(c for c in chunks_of(g, ours, "a1", "d00/f0011.txt"))
                g.borg(ours, ["debug", "delete-obj"], tail=[victim])
                rc, findings, summary, text = self.borgcheck(g, ours)
                self.assertEqual((rc, findings, summary["archives_not_checked"]), (0, [], "keyless run"))
                self.assertEqual(text, f"{ours}: ok: {summary['objects_verified']:,} of {summary['objects_total']:,} "
                                       f"objects CRC-checked ({summary_bytes(summary)}, keyless: contents and "
                                       "archives not verified), 0 errors, 0 warnings, <T>\n")


def summary_bytes(s):
    n, units, u = float(s["stored_bytes"]), ["B", "KiB", "MiB", "GiB"], 0
    while n >= 1024 and u < 3:
        n /= 1024
        u += 1
    return f"{s['stored_bytes']} B" if u == 0 else f"{n:.1f} {units[u]}"


def chunks_of(g, repo, archive, path):
    """The chunk ids of a file, from `borg debug dump-archive`."""
    out = os.path.join(g.dir, f"dump-{os.path.basename(repo)}-{archive}.json")
    g.borg(repo, ["debug", "dump-archive"], archive=archive, tail=[out])
    with open(out) as f:
        dump = json.load(f)
    item = next(i for i in dump["_items"] if i["path"] == path)
    return [c[0][1:] if c[0].startswith("\x7f") else c[0].encode("utf-8", "surrogateescape").hex()
            for c in item["chunks"]]


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
