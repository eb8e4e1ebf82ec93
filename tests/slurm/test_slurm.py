"""dist/slurm's job scripts on a real one-node Slurm cluster (slurm_cluster.py), end to end.

    python3 test_slurm.py BORGCHECK_BINARY SHARED_DIR [unittest args]

Everything goes through the shipped `dist/slurm/submit.sh` (the job array, then the merge with
--dependency=afterany), as a cluster admin would run it; the jobs get BORGCHECK (the binary under
test), BORGCHECK_PASSPHRASE_FILE (the scripts hand it to borgcheck as BORG_PASSPHRASE_FD, so no
passphrase is in any job's environment or command line) and BORGCHECK_MERGE_OPTIONS=--json.

What is checked:
  * Shards equal the unsharded run: copies of fixtures of each generation (borg 1.x, borg2
    2.0.0b5, borg2 master), clean and damaged, as N=3 shards and merged, against
    `borgcheck --verify-data --json` on the same copy: the same exit code (the merge job's, from
    slurmctld), the same set of (chunk_id, stage, location) of the findings, and the same
    objects_total and objects_verified; beyond that, the same records (findings and summary,
    less the clock readings). The damaged ones' findings are the exact expected ones (the
    fixtures' damaged object, and for borg 1.x a second byte flipped here in another segment,
    so that findings come from more than one unit). Every shard task left its
    shard-K-of-3.jsonl, with an exit code that follows its own findings; the shard records'
    units are disjoint and as many as the unsharded run verified.
  * A task killed mid-run (a BORGCHECK wrapper that SIGKILLs itself for shard 2 of 3, as a
    preemption would): the task leaves only shard-2-of-3.jsonl.partial, and the merge exits 2
    with one error record naming shard 2 of 3 as missing (also in the merge job's output).
    Then that task again (`sbatch --array=2 borgcheck-shards.sbatch REPO 3 OUTDIR`) and the merge
    again, as docs/distributed.md says: exit 0, the clean repository's counts.
  * A fleet of 5 repositories (copies of three generations; one damaged; one path with a space;
    the list with a comment and a blank line): overall exit 90, the fleet record names the
    damaged one with its verdict (integrity-errors, exit 90, 1 error) and the 4 others ok;
    the damaged one's finding exactly; each run wrote its own metrics. The merge script over
    those results less one repository's names it and exits 2 (90 while the damaged one is
    there).
  * None of the jobs or runs wrote anything into the repositories (bytes and mtimes).
All jobs are submitted at once and waited for together (bounded), while the unsharded runs go
on here, so the whole test costs a few seconds beyond the cluster's start.

It skips (reason printed) only where the Slurm or munge programs are missing: CI installs them
(ci/install-deps), so CI never skips it. Python 3 standard library only.
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest
import zlib

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(TESTS, "cli"))
sys.path.insert(0, os.path.join(TESTS, "interop"))

import cli_support as cs  # noqa: E402
import repo_files  # noqa: E402
import slurm_cluster  # noqa: E402

DIST = os.path.join(os.path.dirname(TESTS), "dist", "slurm")
SUBMIT = os.path.join(DIST, "submit.sh")
N = 3
JOB_TIMEOUT = 240  # seconds for every job to leave the queue (about 15 s here; ASan is slower)

MAC_REPOKEY = cs.MAC_REPOKEY_CHUNK  # fixtures/borg1/EXPECTED.tsv: corrupt/mac-repokey
B5_AUTHFAIL = "20d3151918fa7ad402e16c01d707c5cede2e8528f63942aab1bdead085fa1b82"  # borg2b5 chpo-data-authfail
MASTER_BITFLIP = "3dae7f7548fbac67caf1bc6d3214f147f0552fb79d3a4c3e9f032ba18546290d"  # borg2master bitflip

# name: (fixture under <shared>/fixtures, exit code, the exact findings as (chunk_id, stage,
# location)). The damage added here (flip_second_object) is filled in by setUpClass.
SCENARIOS = {
    "borg1-clean": ("borg1/v1.2.4/repos/repokey", cs.EXIT_OK, set()),
    "borg1-damaged": ("borg1/corrupt/mac-repokey", cs.EXIT_INTEGRITY_ERRORS,
                      {(MAC_REPOKEY, "authentication", "[segment 2, offset 8]")}),
    "borg2b5-clean": ("borg2b5/repokey-chacha20-poly1305", cs.EXIT_OK, set()),
    "borg2b5-damaged": ("borg2b5/corrupt/chpo-data-authfail", cs.EXIT_INTEGRITY_ERRORS,
                        {(B5_AUTHFAIL, "authentication", "[segment 2, offset 8171]")}),
    "master-clean": ("borg2master/repos/aes256-ocb_sha256_repokey", cs.EXIT_OK, set()),
    "master-damaged": ("borg2master/corrupt/aes256-ocb_sha256_repokey__bitflip", cs.EXIT_INTEGRITY_ERRORS,
                       {(MASTER_BITFLIP, "authentication", "[pack f4f4b0ae3ad6328c47e99e87c6df4d5842d72677c5d33ebf69a9d619233c0096, offset 1295867]"),
                        (None, "segment", "[pack f4f4b0ae3ad6328c47e99e87c6df4d5842d72677c5d33ebf69a9d619233c0096]")}),
}
# A fleet: five repositories of three generations, each with its own repository id (the merge
# refuses two runs of one repository); the third one damaged.
FLEET = ("borg1/v1.2.4/repos/repokey-blake2", "borg1/v1.4.4/repos/repokey", "borg1/corrupt/mac-repokey",
         "borg2b5/repokey-aes-ocb", "borg2master/repos/chacha20-poly1305_sha256_repokey")
FLEET_DAMAGED = 2

# Kills itself (SIGKILL, as a preemption ends a task) when asked for shard 2 of 3, else runs
# the real binary.
KILLED_WRAPPER = """#!/bin/sh
for a in "$@"; do
  [ "$a" = 2/3 ] && kill -KILL $$
done
exec %s "$@"
"""


def copy_fixture(rel, dest):
    shutil.copytree(os.path.join(cs.SHARED, "fixtures", rel), dest, symlinks=True)
    cs.make_writable(dest)
    return dest


def flip_second_object(repo):
    """A second damage in a borg 1.x copy, in another unit than the fixture's (segment 2): one
    byte in the middle of the data of the largest PUT of the largest segment, the entry's CRC
    fixed, so that only the object's MAC fails. Returns (chunk id, segment, entry offset)."""
    segments = [int(n) for n in os.listdir(os.path.join(repo, "data", "0")) if n.isdigit()]
    seg = max((s for s in segments if s != 2), key=lambda s: os.path.getsize(repo_files.segment_path(repo, s)))
    path = repo_files.segment_path(repo, seg)
    puts = [e for e in repo_files.segment_entries(path) if e[2] == 0 and e[3] != bytes(32)]
    off, size, _tag, key = max(puts, key=lambda e: e[1])
    with open(path, "r+b") as f:
        entry = bytearray(f.read()[off:off + size])
        entry[41 + (size - 41) // 2] ^= 0x01
        entry[0:4] = (zlib.crc32(bytes(entry[4:])) & 0xFFFFFFFF).to_bytes(4, "little")
        f.seek(off)
        f.write(entry)
    return key.hex(), seg, off


# docs/json.md: the fields that differ between two runs of the same repository (the clock
# readings, also in `coverage`: every `..._at`, oldest_unit_age_s), and `threads` (the shards
# and the merge use the task's CPUs). Dropped at every depth.
TIMING = ("elapsed_s", "throughput_bytes_per_s", "oldest_unit_age_s", "threads")


def without_times(value):
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMING and not k.endswith("_at")}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def report(records):
    """A run's records as a report to compare: no progress, no clock readings, and not the
    merge's own count of the shards it merged (`merged_shards`, null in the unsharded run)."""
    out = [without_times(r) for r in records if r["type"] != "progress"]
    for r in out:
        if r["type"] == "summary":
            r.pop("merged_shards", None)
    return out


def json_records(text):
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def findings(records):
    return {(r.get("chunk_id"), r["stage"], r["location"]) for r in records if r["type"] == "finding"}


def summary(records):
    found = [r for r in records if r["type"] == "summary"]
    return found[-1] if found else None


class SlurmJobs(unittest.TestCase):
    """One cluster; every scenario's jobs submitted at once in setUpClass."""

    maxDiff = None

    @classmethod
    def setUpClass(cls):
        slurm_cluster.skip_unless_available()  # CI installs the packages: it never skips there
        cls.tmp = tempfile.mkdtemp(prefix="borgcheck-slurm-test-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        os.chmod(cls.tmp, 0o755)
        cls.cluster = slurm_cluster.SlurmCluster()
        cls.cluster.start()
        cls.addClassCleanup(cls.cluster.stop)

        home = os.path.join(cls.tmp, "home")
        os.mkdir(home)
        passphrase = os.path.join(cls.tmp, "passphrase")
        with open(passphrase, "w") as f:
            f.write(cs.PASSPHRASE + "\n")
        os.chmod(passphrase, stat.S_IRUSR)
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LC_ALL": "C.UTF-8"}
        for name in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"):
            if name in os.environ:
                base[name] = os.environ[name]
        cls.local_env = dict(base, BORG_PASSPHRASE=cs.PASSPHRASE)
        cls.job_env = dict(base, BORGCHECK=cs.BINARY, BORGCHECK_PASSPHRASE_FILE=passphrase,
                           BORGCHECK_MERGE_OPTIONS="--json")

        # The repositories.
        cls.expected = {}
        repos = {}
        for name, (rel, rc, expect) in SCENARIOS.items():
            repos[name] = copy_fixture(rel, os.path.join(cls.tmp, "repos", name))
            cls.expected[name] = (rc, set(expect))
        chunk, seg, off = flip_second_object(repos["borg1-damaged"])
        cls.expected["borg1-damaged"][1].add((chunk, "authentication", "[segment %d, offset %d]" % (seg, off)))
        cls.killed_repo = killed_repo = copy_fixture(SCENARIOS["borg1-clean"][0], os.path.join(cls.tmp, "repos", "killed"))
        fleet = [copy_fixture(rel, os.path.join(cls.tmp, "repos", "fleet", "repo %d" % i if i == 2 else "repo%d" % i))
                 for i, rel in enumerate(FLEET, 1)]
        cls.fleet = fleet
        fleet_list = os.path.join(cls.tmp, "fleet.list")
        with open(fleet_list, "w") as f:
            f.write("# tonight's repositories\n%s\n%s\n\n%s\n" % (fleet[0], fleet[1], "\n".join(fleet[2:])))
        wrapper = os.path.join(cls.tmp, "killed-borgcheck")
        with open(wrapper, "w") as f:
            f.write(KILLED_WRAPPER % cs.BINARY)
        os.chmod(wrapper, 0o755)

        # Every job at once; the unsharded runs meanwhile, here. Nothing may write to the
        # repositories (cli_support's snapshot: bytes and mtimes of everything).
        cls.before = cs.snapshot(os.path.join(cls.tmp, "repos"))
        cls.jobs = {}
        cls.out = {}
        for name in SCENARIOS:
            cls.out[name] = os.path.join(cls.tmp, "out", name)
            cls.jobs[name] = cls.submit(["shards", repos[name], str(N), cls.out[name]])
        cls.out["killed"] = os.path.join(cls.tmp, "out", "killed")
        cls.jobs["killed"] = cls.submit(["shards", killed_repo, str(N), cls.out["killed"]], BORGCHECK=wrapper)
        cls.out["fleet"] = os.path.join(cls.tmp, "out", "fleet")
        cls.jobs["fleet"] = cls.submit(["fleet", fleet_list, cls.out["fleet"]])

        runs = {name: subprocess.Popen([cs.BINARY, "--verify-data", "--json", "--threads", "2", repos[name]],
                                       env=cls.local_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, cwd=cls.tmp)
                for name in SCENARIOS}
        cls.unsharded = {}
        for name, p in runs.items():
            stdout, stderr = p.communicate(timeout=300)
            cls.unsharded[name] = (p.returncode, json_records(stdout), stderr)

        cls.cluster.wait_for_jobs([j for jobs in cls.jobs.values() for j in jobs.values()], timeout=JOB_TIMEOUT)
        cls.tasks = {name: {kind: cls.cluster.job_tasks(j) for kind, j in jobs.items()}
                     for name, jobs in cls.jobs.items()}
        cls.after = cs.snapshot(os.path.join(cls.tmp, "repos"))

    @classmethod
    def submit(cls, args, **more):
        """submit.sh ARGS; returns {"shards" or "fleet": array id, "merge": merge id}."""
        p = cls.cluster.command(["bash", SUBMIT] + args, env=cls.cluster.env(dict(cls.job_env, **more), base={}))
        ids = dict(line.split() for line in p.stdout.splitlines())
        if set(ids) != {args[0], "merge"}:
            raise AssertionError("submit.sh printed %r" % p.stdout)
        return ids

    def merged(self, name):
        """(the merge job's exit code, its JSON records, merge.log)."""
        [(_task, _state, rc)] = self.tasks[name]["merge"]
        out = self.out[name]
        with open(os.path.join(out, "merge.log")) as f:
            log = f.read()
        with open(os.path.join(out, "report.jsonl")) as f:
            return rc, json_records(f.read()), log

    def context(self, name):
        """Everything there is to read about a scenario, for a failed assertion."""
        parts = ["tasks: %r" % self.tasks[name]]
        out = self.out[name]
        for entry in sorted(os.listdir(out)):
            if entry.endswith((".log", ".out")):
                with open(os.path.join(out, entry), errors="replace") as f:
                    parts.append("--- %s\n%s" % (entry, f.read()[-3000:]))
        return "\n".join(parts)

    def test_nothing_is_written_to_the_repositories(self):
        self.assertEqual(cs.snapshot_diff(self.before, self.after), [])

    # -- shards ---------------------------------------------------------------------------------

    def test_shards_merged_equal_the_unsharded_run(self):
        for name in SCENARIOS:
            with self.subTest(scenario=name):
                want_rc, want_findings = self.expected[name]
                rc, records, stderr = self.unsharded[name]
                self.assertEqual((rc, findings(records)), (want_rc, want_findings), stderr)
                whole = summary(records)

                # Every task ran; each left its shard, whose record says which units it read:
                # every unit in exactly one shard.
                tasks = self.tasks[name]["shards"]
                self.assertEqual([t[0] for t in tasks], list(range(1, N + 1)), self.context(name))
                units = []
                for k, (_task, _state, rc) in enumerate(tasks, 1):
                    path = os.path.join(self.out[name], "shard-%d-of-%d.jsonl" % (k, N))
                    self.assertTrue(os.path.isfile(path), self.context(name))
                    with open(path) as f:
                        [shard] = [r for r in json_records(f.read()) if r["type"] == "shard"]
                    self.assertEqual((shard["k"], shard["n"], shard["repository"]), (k, N, whole["repository"]))
                    units += shard["units"]
                    # A shard's exit code follows its own findings.
                    errors = [f for f in shard["findings"] if f["severity"] == "error"]
                    self.assertEqual(rc, cs.EXIT_INTEGRITY_ERRORS if errors else cs.EXIT_OK, (k, self.context(name)))
                self.assertEqual(len(units), len(set(units)), units)
                self.assertEqual(len(units), whole["coverage"]["units_verified"], units)

                # The merge job's exit code and report: the unsharded run's, record for record.
                merge_rc, merged, _log = self.merged(name)
                self.assertEqual(merge_rc, want_rc, self.context(name))
                self.assertEqual(findings(merged), want_findings, self.context(name))
                total = summary(merged)
                self.assertIsNotNone(total, self.context(name))
                for field in ("objects_total", "objects_verified", "exit_code", "verdict"):
                    self.assertEqual(total[field], whole[field], field)
                self.assertEqual(report(merged), report(records))

    def test_a_killed_task_is_named_missing_by_the_merge(self):
        tasks = self.tasks["killed"]["shards"]
        self.assertEqual([(t[0], t[2]) for t in tasks], [(1, 0), (2, 128 + 9), (3, 0)], self.context("killed"))
        out = self.out["killed"]
        self.assertFalse(os.path.exists(os.path.join(out, "shard-2-of-3.jsonl")))
        self.assertTrue(os.path.exists(os.path.join(out, "shard-2-of-3.jsonl.partial")))
        rc, records, _log = self.merged("killed")
        self.assertEqual(rc, cs.EXIT_COULD_NOT_RUN, self.context("killed"))
        # --json: the refusal is the report's one record.
        [error] = records
        self.assertEqual((error["type"], error["code"], error["exit_code"]),
                         ("error", "invalid-argument", cs.EXIT_COULD_NOT_RUN), error)
        self.assertIn("shard 2 of 3 is missing", error["message"])
        # Slurm's output of the merge job says it too.
        with open(os.path.join(out, "slurm-%s.out" % self.jobs["killed"]["merge"])) as f:
            self.assertIn("shard 2 of 3 is missing", f.read())

        # docs/distributed.md's way out: that one task again (an array of one task still checks
        # shard 2 of 3), then the merge again; now it is the clean repository's verdict.
        env = self.cluster.env(self.job_env, base={})
        task = self.cluster.command(["sbatch", "--parsable", "--array=2", "--output=" + out + "/slurm-%A_%a.out",
                                     os.path.join(DIST, "borgcheck-shards.sbatch"), self.killed_repo, str(N), out],
                                    env=env).stdout.strip()
        merge = self.cluster.command(["sbatch", "--parsable", "--dependency=afterany:" + task,
                                      "--output=" + out + "/slurm-%j.out", os.path.join(DIST, "borgcheck-merge.sbatch"),
                                      out, "--json"], env=env).stdout.strip()
        self.cluster.wait_for_jobs([task, merge], timeout=JOB_TIMEOUT)
        self.assertEqual([t[1:] for t in self.cluster.job_tasks(task)], [("COMPLETED", 0)])
        self.assertEqual([t[1:] for t in self.cluster.job_tasks(merge)], [("COMPLETED", 0)], self.context("killed"))
        with open(os.path.join(out, "report.jsonl")) as f:
            records = json_records(f.read())
        self.assertEqual(findings(records), set())
        clean = summary(self.unsharded["borg1-clean"][1])
        total = summary(records)
        self.assertEqual((total["repository"], total["objects_total"], total["objects_verified"], total["verdict"]),
                         (self.killed_repo, clean["objects_total"], clean["objects_verified"], "ok"))

    # -- a fleet --------------------------------------------------------------------------------

    def test_fleet_of_five_with_one_damaged(self):
        want_codes = [cs.EXIT_INTEGRITY_ERRORS if i == FLEET_DAMAGED else cs.EXIT_OK for i in range(len(FLEET))]
        self.assertEqual([(t[0], t[2]) for t in self.tasks["fleet"]["fleet"]],
                         list(zip(range(1, len(FLEET) + 1), want_codes)), self.context("fleet"))
        rc, records, _log = self.merged("fleet")
        self.assertEqual(rc, cs.EXIT_INTEGRITY_ERRORS, self.context("fleet"))
        [fleet] = [r for r in records if r["type"] == "fleet"]
        self.assertEqual((fleet["verdict"], fleet["exit_code"]), ("integrity-errors", cs.EXIT_INTEGRITY_ERRORS))
        got = {r["repository"]: (r["verdict"], r["exit_code"], r["errors"]) for r in fleet["repositories"]}
        want = {repo: ("ok", cs.EXIT_OK, 0) for repo in self.fleet}
        want[self.fleet[FLEET_DAMAGED]] = ("integrity-errors", cs.EXIT_INTEGRITY_ERRORS, 1)
        self.assertEqual(got, want, self.context("fleet"))
        # The damaged repository's finding, exactly, with its summary.
        self.assertEqual(findings(records), {(MAC_REPOKEY, "authentication", "[segment 2, offset 8]")})
        # Each run wrote its own metrics.
        for i in range(1, len(FLEET) + 1):
            self.assertTrue(os.path.isfile(os.path.join(self.out["fleet"], "repo-%d.prom" % i)), i)

    def test_fleet_merge_names_a_repository_without_a_result(self):
        """The merge script alone (run here, as the job would), on copies of the fleet's results
        less one repository's: exit 2, or 90 when another repository has integrity errors; the
        repository named in merge.log."""
        for gone, want_rc in ((FLEET_DAMAGED + 1, cs.EXIT_COULD_NOT_RUN), (4, cs.EXIT_INTEGRITY_ERRORS)):
            with self.subTest(gone=gone):
                out = os.path.join(self.tmp, "fleet-without-%d" % gone)
                shutil.copytree(self.out["fleet"], out)
                for name in os.listdir(out):
                    if name.startswith(("report.", "merge.")):
                        os.remove(os.path.join(out, name))
                os.remove(os.path.join(out, "repo-%d.jsonl" % gone))
                p = subprocess.run(["bash", os.path.join(DIST, "borgcheck-merge.sbatch"), out, "--json"],
                                   env=self.job_env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   timeout=120)
                line = "repository %d (%s) has no result: its task did not finish" % (gone, self.fleet[gone - 1])
                self.assertEqual(p.returncode, want_rc, p)
                self.assertIn(line, p.stderr)
                with open(os.path.join(out, "merge.log")) as f:
                    self.assertIn(line, f.read())
                with open(os.path.join(out, "report.jsonl")) as f:
                    [fleet] = [r for r in json_records(f.read()) if r["type"] == "fleet"]
                self.assertEqual(len(fleet["repositories"]), len(FLEET) - 1)


if __name__ == "__main__":
    cs.main()
