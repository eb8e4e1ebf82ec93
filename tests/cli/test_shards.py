"""--shard K/N and `borgcheck merge` end to end (docs/distributed.md, issue 20): on every fixture
of every generation (borg 1.x, 2.0.0b5, borg 2 master), clean and damaged, the shards' merge
gives the verdict of the unsharded run: the same exit code, the same finding records (every
field, the archive pass's affected uses and advice included), the same counts and notes. N = 3
for every fixture; 1, 2 and 7 (more shards than units) for one of each generation. The merge's
refusals: a shard missing, a shard twice, shards of two repositories, a shard that did not
finish, a file that is no run's output; --shard's own refusals. A fleet of whole runs: one
verdict per repository and one exit code.

The Slurm job scripts that run this on a cluster are tested in tests/slurm/."""

import json
import os
import shutil
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "interop"))
import repo_files  # noqa: E402

# Summary fields that say when and how long, or which process: not the verdict.
TIMING = {"elapsed_s", "throughput_bytes_per_s", "started_at", "finished_at", "threads", "shard", "merged_shards"}
COVERAGE_TIMES = {"full_verification_at", "oldest_unit_verified_at", "oldest_unit_age_s"}


def fixtures():
    """(generation, repository folder relative to fixtures/<generation>) of every EXPECTED.tsv row."""
    out = []
    for gen in ("borg1", "borg2b5", "borg2master"):
        with open(os.path.join(cs.SHARED, "fixtures", gen, "EXPECTED.tsv"), encoding="utf-8") as f:
            next(f)
            for line in f:
                rel = line.split("\t")[0]
                if os.path.isdir(os.path.join(cs.SHARED, "fixtures", gen, rel)):
                    out.append((gen, rel))
    return out


class ShardCase(cs.CliTestCase):
    """Helpers: the keys of every fixture, shard runs, comparable records."""

    def setUp(self):
        super().setUp()
        # Every fixture's key file in one folder: borgcheck finds a repository's by its id.
        self.keys = os.path.join(self.tmp, "keys")
        os.mkdir(self.keys)
        root = os.path.join(cs.SHARED, "fixtures")
        count = 0
        for dirpath, _, names in sorted(os.walk(root)):
            for n in sorted(names):
                p = os.path.join(dirpath, n)
                if n.endswith(".key") or (os.path.basename(dirpath) == "keys" and "borg2master" in dirpath):
                    count += 1
                    shutil.copy(p, os.path.join(self.keys, "%d_%s" % (count, n)))
        self.env = {"BORG_PASSPHRASE": cs.PASSPHRASE, "BORG_KEYS_DIR": self.keys}

    def copy(self, gen, rel):
        return self.copy_generation(os.path.join(gen, rel), (gen + "_" + rel).replace("/", "_"))

    def records(self, result):
        return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]

    def shard_files(self, repo, n, extra=()):
        """Runs shards 1..n of `repo` (two at a time) and writes each one's output to a file."""
        folder = os.path.join(self.tmp, "shards-%s-%d" % (os.path.basename(repo), n))
        os.makedirs(folder, exist_ok=True)
        args = lambda k: ["--verify-data", "--threads", "1", "--json", "--shard", "%d/%d" % (k, n)] + list(extra) + [repo]
        procs = {}
        files = []
        for k in range(1, n + 1):
            procs[k] = self.start(args(k), self.env)
        results = {k: self.finish(procs[k], timeout=120) for k in range(1, n + 1)}
        for k in range(1, n + 1):
            r = results[k]
            self.assertIn(r.rc, (cs.EXIT_OK, cs.EXIT_WARNINGS, cs.EXIT_INTEGRITY_ERRORS), r)
            recs = self.records(r)
            self.assertEqual([x["type"] for x in recs[-2:]], ["shard", "summary"], r)
            self.assertEqual(recs[-1]["shard"], "%d/%d" % (k, n))
            self.assertFalse(recs[-1]["complete"])
            path = os.path.join(folder, "shard-%d-of-%d.jsonl" % (k, n))
            with open(path, "w") as f:
                f.write(r.stdout)
            files.append(path)
        return files

    def comparable(self, records):
        findings = [r for r in records if r["type"] == "finding"]
        summary = dict(records[-1])
        self.assertEqual(summary["type"], "summary")
        for k in TIMING:
            summary.pop(k, None)
        if summary.get("coverage"):
            summary["coverage"] = {k: v for k, v in summary["coverage"].items() if k not in COVERAGE_TIMES}
        return findings, summary

    def assert_merge_equals_unsharded(self, gen, rel, ns):
        repo = self.copy(gen, rel)
        whole = self.run_borgcheck(["--verify-data", "--threads", "2", "--json", repo], self.env, timeout=120)
        self.assertNotEqual(whole.rc, cs.EXIT_COULD_NOT_RUN, whole)
        self.assert_merge_equals_unsharded_repo(repo, whole, ns)

    def assert_merge_equals_unsharded_repo(self, repo, whole, ns):
        want = self.comparable(self.records(whole))
        for n in ns:
            with self.subTest(repository=os.path.basename(repo), n=n):
                files = self.shard_files(repo, n)
                merged = self.run_borgcheck(["merge", "--json", "--threads", "2"] + files, self.env, timeout=120)
                self.assertEqual(merged.rc, whole.rc, merged)
                recs = self.records(merged)
                self.assertEqual(recs[-1]["merged_shards"], n)
                got = self.comparable(recs)
                self.assertEqual(got[0], want[0])  # every finding, every field
                self.assertEqual(got[1], want[1])  # counts, notes, verdict
                # Every unit in exactly one shard.
                units = []
                for path in files:
                    with open(path) as f:
                        for rec in map(json.loads, f):
                            if rec["type"] == "shard":
                                units += rec["units"]
                self.assertEqual(len(units), len(set(units)))



class Shards(ShardCase):
    def test_every_fixture_merges_to_the_unsharded_verdict(self):
        cases = fixtures()
        self.assertGreaterEqual(len(cases), 60)
        for gen, rel in cases:
            self.assert_merge_equals_unsharded(gen, rel, [3])

    def test_index_inconsistencies_across_shards(self):
        # borg 1.x's index-vs-log comparison spans segments: index.N places chunk A at chunk B's
        # entry in another segment, so A's own PUT is a dead entry of one shard and the
        # misplaced index entry another's. With a shard per segment the merge must put the two
        # together as the unsharded walk does: A verified from its PUT, one index error.
        repo = self.copy("borg1", "v1.2.4/repos/repokey")
        ix = repo_files.Index(repo_files.index_path(repo))
        entries = ix.entries()
        by_segment = {}
        for cid, (_, seg, off) in sorted(entries.items(), key=lambda e: e[1][1:]):
            if cid != bytes(32):
                by_segment.setdefault(seg, []).append((cid, off))
        (seg_a, [(a, _), *_]), (seg_b, [(b, b_off), *_]) = list(by_segment.items())[:2]
        self.assertNotEqual(seg_a, seg_b)
        ix.set_value(a, seg_b, b_off)
        ix.save()
        whole = self.run_borgcheck(["--verify-data", "--json", repo], self.env)
        self.assertEqual(whole.rc, cs.EXIT_INTEGRITY_ERRORS, whole)
        index = [f for f in self.records(whole) if f["type"] == "finding" and f["stage"] == "index"]
        self.assertEqual([(f["chunk_id"], f["segment"], f["offset"]) for f in index], [(a.hex(), seg_b, b_off)])
        self.assertIn("is verified instead", index[0]["message"])
        self.assert_merge_equals_unsharded_repo(repo, whole, [64])

    def test_one_two_and_more_shards_than_units(self):
        for gen, rel in (("borg1", "v1.2.4/repos/repokey"), ("borg2b5", "corrupt/chpo-data-authfail"),
                         ("borg2master", "corrupt/aes256-ocb_sha256_repokey__bitflip")):
            self.assert_merge_equals_unsharded(gen, rel, [1, 2, 7])


class Refusals(ShardCase):
    def setUp(self):
        super().setUp()
        self.repo = self.copy("borg1", "v1.2.4/repos/repokey")
        self.files = self.shard_files(self.repo, 3)

    def merge(self, files, rc=cs.EXIT_COULD_NOT_RUN):
        r = self.run_borgcheck(["merge"] + files, self.env)
        self.assertEqual(r.rc, rc, r)
        return r

    def test_a_missing_shard_is_named(self):
        r = self.merge([self.files[0], self.files[2]])
        self.assertIn("shard 2 of 3 is missing", r.stderr)
        self.assertIn("--shard K/3", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_a_shard_twice(self):
        r = self.merge(self.files + [self.files[1]])
        self.assertIn("shard 2 of 3 is in two files", r.stderr)

    def test_a_shard_that_did_not_finish(self):
        cut = os.path.join(self.tmp, "cut.jsonl")
        with open(self.files[1]) as f:
            lines = f.readlines()
        with open(cut, "w") as f:
            f.writelines(lines[:-2])  # killed before its shard record and summary
        r = self.merge([self.files[0], cut, self.files[2]])
        self.assertIn("holds no summary: the run did not finish", r.stderr)

    def test_a_shard_that_could_not_start(self):
        # A wrong passphrase: the shard's output is one error record (exit 52), no shard record.
        failed = os.path.join(self.tmp, "failed.jsonl")
        r = self.run_borgcheck(["--verify-data", "--json", "--shard", "2/3", self.repo], {"BORG_PASSPHRASE": "wrong"})
        self.assertEqual(r.rc, 52, r)
        with open(failed, "w") as f:
            f.write(r.stdout)
        r = self.merge([self.files[0], failed, self.files[2]])
        self.assertIn("failed.jsonl: the run could not start (exit 52", r.stderr)

    def test_shards_of_two_repositories(self):
        other = self.copy("borg1", "v1.4.4/repos/repokey")
        theirs = self.shard_files(other, 3)
        r = self.merge([self.files[0], self.files[1], theirs[2]])
        self.assertIn("shards of different repositories", r.stderr)

    def test_shards_and_whole_runs_do_not_mix(self):
        whole = os.path.join(self.tmp, "whole.jsonl")
        r = self.run_borgcheck(["--verify-data", "--json", self.repo], self.env)
        with open(whole, "w") as f:
            f.write(r.stdout)
        r = self.merge(self.files + [whole])
        self.assertIn("mix shards", r.stderr)

    def test_evidence_of_another_plan(self):
        # A shard record edited (or of another plan) names a segment the repository does not
        # have: the merge refuses instead of merging what it cannot place.
        bad = os.path.join(self.tmp, "bad.jsonl")
        with open(self.files[0]) as f:
            records = [json.loads(line) for line in f]
        for rec in records:
            if rec["type"] == "shard":
                rec["evidence"]["index_events"].append([99999, [["delete", "ab" * 32, 8]]])
        with open(bad, "w") as f:
            f.writelines(json.dumps(rec) + "\n" for rec in records)
        r = self.merge([bad] + self.files[1:])
        self.assertIn("shard 1/3: a shard's evidence names segment 99999", r.stderr)

    def test_a_plan_the_repository_does_not_have(self):
        # Every shard's plan fingerprint edited alike (as if they had all planned another state of
        # the repository, e.g. before a new index fragment of borg 2): the merge's own plan
        # differs, so it refuses.
        edited = []
        for i, path in enumerate(self.files):
            with open(path) as f:
                records = [json.loads(line) for line in f]
            for rec in records:
                if rec["type"] == "shard":
                    rec["plan"] = "0123456789abcdef"
            out = os.path.join(self.tmp, "edited-%d.jsonl" % i)
            with open(out, "w") as f:
                f.writelines(json.dumps(rec) + "\n" for rec in records)
            edited.append(out)
        r = self.merge(edited)
        self.assertIn("has other segments, packs or objects than the shards saw", r.stderr)

    def test_a_line_nested_too_deep(self):
        deep = os.path.join(self.tmp, "deep.jsonl")
        with open(deep, "w") as f:
            f.write('{"type":"finding","x":' + "[" * 100000 + "]" * 100000 + "}\n")
        r = self.merge(self.files[:2] + [deep])
        self.assertIn("deep.jsonl line 1: nested deeper than 32 levels", r.stderr)

    def test_not_a_run(self):
        junk = os.path.join(self.tmp, "junk.jsonl")
        with open(junk, "w") as f:
            f.write('{"type":"finding","severity":"bad"}\n')
        r = self.merge(self.files[:2] + [junk])
        self.assertIn("junk.jsonl line 1", r.stderr)
        self.assertIn("severity", r.stderr)

    def test_the_repository_changed_since(self):
        # A new transaction since the shards ran (borg wrote): the merge refuses, no verdict.
        shutil.rmtree(self.repo)
        shutil.copytree(os.path.join(cs.SHARED, "fixtures", "borg1", "v1.4.4/repos/repokey"), self.repo)
        cs.make_writable(self.repo)
        r = self.merge(self.files)
        self.assertIn("Run the shards again", r.stderr)

    def test_json_errors_keep_the_contract(self):
        r = self.run_borgcheck(["merge", "--json", self.files[0]], self.env)
        self.assertEqual(r.rc, cs.EXIT_COULD_NOT_RUN)
        recs = self.records(r)
        self.assertEqual(len(recs), 1)
        self.assertEqual(recs[0]["type"], "error")
        self.assertIn("shards 2, 3 of 3 are missing", recs[0]["message"])

    def test_shard_options_refused(self):
        for args, needle in ((["--shard", "2/3", self.repo], "add --json"),
                             (["--shard", "4/3", "--json", self.repo], "--shard takes K/N"),
                             (["--shard", "1/3", "--json", "--subset", "1/7", self.repo], "cannot be combined"),
                             (["--shard", "1/3", "--json", "--verify-data", "--last", "1", self.repo],
                              "archive selection"),
                             (["--shard", "1/3", "--json", "ssh://localhost/srv/repo"], "cannot be sharded"),
                             (["--shard", "1/3", "--json", "--metrics-file", os.path.join(self.tmp, "m.prom"),
                               self.repo], "give it to the merge")):
            with self.subTest(args=args):
                r = self.run_borgcheck(args, self.env)
                self.assertEqual(r.rc, cs.EXIT_COULD_NOT_RUN, r)
                self.assertIn(needle, r.stdout + r.stderr)


class Fleet(ShardCase):
    def test_five_repositories_one_damaged(self):
        cases = [("borg1", "v1.2.4/repos/repokey"), ("borg1", "v1.4.4/repos/none"), ("borg2b5", "repokey-aes-ocb"),
                 ("borg2master", "repos/aes256-ocb_sha256_repokey"), ("borg1", "corrupt/id-authenticated")]
        files = []
        for i, (gen, rel) in enumerate(cases):
            repo = self.copy(gen, rel)
            r = self.run_borgcheck(["--verify-data", "--json", repo], self.env)
            path = os.path.join(self.tmp, "repo-%d.jsonl" % i)
            with open(path, "w") as f:
                f.write(r.stdout)
            files.append((path, repo, r.rc))
        r = self.run_borgcheck(["merge", "--json"] + [p for p, _, _ in files], self.env)
        self.assertEqual(r.rc, cs.EXIT_INTEGRITY_ERRORS, r)
        fleet = self.records(r)[-1]
        self.assertEqual(fleet["type"], "fleet")
        self.assertEqual(fleet["exit_code"], cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(fleet["verdict"], "integrity-errors")
        self.assertEqual([(x["repository"], x["exit_code"], x["verdict"]) for x in fleet["repositories"]],
                         [(repo, rc, {0: "ok", 90: "integrity-errors"}[rc]) for _, repo, rc in files])
        self.assertEqual([rc for _, _, rc in files], [0, 0, 0, 0, 90])
        damaged = [x for x in self.records(r) if x["type"] == "finding"]
        self.assertIn("e3d7af4e3296d73bcedcab191ed07ffc8f2a835ce14a744aea660ce078ac8652",
                      [x["chunk_id"] for x in damaged])
        # Text: one line per repository's summary and the fleet's line.
        t = self.run_borgcheck(["merge"] + [p for p, _, _ in files], self.env)
        self.assertEqual(t.rc, cs.EXIT_INTEGRITY_ERRORS)
        self.assertIn("fleet: 5 repositories: 1 integrity-errors, 4 ok; exit 90 (integrity-errors)", t.stdout)
        # The same repository twice is refused.
        twice = self.run_borgcheck(["merge", files[0][0], files[0][0]], self.env)
        self.assertEqual(twice.rc, cs.EXIT_COULD_NOT_RUN)
        self.assertIn("runs of the same repository", twice.stderr)


if __name__ == "__main__":
    cs.main()
