"""Partial runs end to end (docs/nightly.md): --subset n/t, daily/week and daily/month over
simulated dates, --max-duration with the state file (a run slowed down by the test-only read
delay), kill -9 mid-run then resume, a signal mid-run on a damaged repository, the state file's
problems (corrupt, another repository's, a newer version, a read-only folder), --min-interval,
and the test hooks' guard.

The state folders live outside the test folder (which must not change: cli_support), one per
test. The test hooks need BORGCHECK_TEST_HOOKS (checker/cli/partial_args.h)."""

import glob
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase  # noqa: E402

HOOKS = {"BORGCHECK_TEST_HOOKS": "only-for-borgcheck-tests"}
VERIFY = {"BORG_PASSPHRASE": cs.PASSPHRASE}


def summary_of(test, r):
    records = test.json_records(r)
    test.assertEqual(records[-1]["type"], "summary", r)
    return records[-1], records[:-1]


def marked_units(state):
    """The units of a state file with a verification mark (every unit on disk has a record from
    the run that first saw it: its seen_at)."""
    return {name: u for name, u in state["units"].items() if "data" in u or "crc" in u}


class PartialTestCase(CliTestCase):
    def setUp(self):
        super().setUp()
        self.state = tempfile.mkdtemp(prefix="borgcheck-state-")
        self.addCleanup(self._remove_state)

    def _remove_state(self):
        for dirpath, dirnames, _ in os.walk(self.state):
            for d in dirnames:
                os.chmod(os.path.join(dirpath, d), 0o700)
        os.chmod(self.state, 0o700)
        shutil.rmtree(self.state, True)

    def copy_repo(self, where):
        return self.copy_generation(where)

    def state_file(self, summary):
        """The state file of a run (<state>/<repository id>/<path>/state.json), as it says."""
        path = summary["coverage"]["state_file"]
        self.assertEqual(os.path.dirname(os.path.dirname(path)), os.path.join(self.state, summary["repository_id"]))
        return path

    def run_json(self, args, env=None, rc=0):
        """The summary and the other records of a --json run; rc None: any exit code (the
        summary's exit_code is the process's)."""
        r = self.run_borgcheck(["--json"] + args, env=dict(VERIFY, **(env or {})))
        if rc is None:
            s, rest = summary_of(self, r)
            self.assertEqual(s["exit_code"], r.rc, r)
            return s, rest
        self.assert_rc(r, rc)
        return summary_of(self, r)


class Slices(PartialTestCase):
    def test_subset_1_to_7_of_7_covers_every_generation(self):
        for where, manifest_in_units in (("borg1/v1.2.4/repos/repokey", True), ("borg2b5/repokey-aes-ocb", True),
                                         ("borg2master/repos/aes256-ocb_sha256_repokey", False)):
            with self.subTest(where=where):
                repo = self.copy_repo(where)
                full, _ = self.run_json(["--verify-data", "--repository-only", repo])
                self.assertTrue(full["complete"], full)
                self.assertEqual(full["bytes_skipped"], 0, full)
                total = 0
                for k in range(1, 8):
                    s, findings = self.run_json(["--verify-data", "--repository-only", "--subset", "%d/7" % k, repo])
                    self.assertEqual(findings, [])
                    self.assertEqual((s["subset"], s["complete"], s["stopped"], s["verdict"]),
                                     ("%d/7" % k, False, None, "ok"), s)
                    self.assertEqual(s["bytes_total"], full["bytes_total"], s)
                    self.assertEqual(s["bytes_read"] + s["bytes_skipped"], s["bytes_total"], s)
                    self.assertGreater(s["bytes_skipped"], 0, s)
                    self.assertIsNone(s["coverage"], s)  # no state: earlier slices are unknown
                    total += s["objects_verified"]
                self.assertEqual(total, full["objects_verified"] + (6 if manifest_in_units else 0))

    def test_slices_with_the_archive_pass_find_the_bad_chunk_in_its_own_slice_only(self):
        # --verify-data with the archive pass on (no --repository-only): every slice walks every
        # archive (references are checked against the index each night), verifies its own
        # objects, and the one damaged chunk is reported, with the files it breaks, by exactly
        # the slice its id falls in.
        repo = self.copy_repo("borg1/corrupt/mac-repokey")
        full, full_findings = self.run_json(["--verify-data", repo], rc=90)
        [bad] = [f for f in full_findings if f["severity"] == "error"]
        self.assertTrue(bad["affected"], bad)
        total, found_in = 0, []
        for k in range(1, 8):
            s, findings = self.run_json(["--verify-data", "--subset", "%d/7" % k, repo], rc=None)
            self.assertEqual((s["archives_checked"], s["archives_total"]), (7, 7), s)
            total += s["objects_verified"]
            errors = [f for f in findings if f["severity"] == "error"]
            if errors:
                found_in.append(k)
                self.assertEqual(s["exit_code"], 90, s)
                self.assertEqual(errors, [bad])  # the same finding, affected uses and all
            else:
                self.assertEqual((s["exit_code"], s["verdict"], findings), (0, "ok", []), s)
        self.assertEqual(len(found_in), 1, found_in)
        self.assertEqual(total, full["objects_verified"] + 6)  # the manifest is in every slice

    def test_text_summary_says_what_a_slice_left_out(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/none")
        r = self.run_borgcheck(["--subset", "2/7", repo])
        self.assert_rc(r, 0)
        self.assertRegex(r.stdout, r"^%s: ok: \d+ of 102 objects CRC-checked \([^)]*\), 0 errors, 0 warnings, "
                         r"[0-9.]+s; partial: slice 2/7, [0-9.]+ KiB of [0-9.]+ KiB read, from 30 of 30 segments\n$" % repo)

    def test_a_week_of_daily_week_covers_the_repository_exactly(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/repokey")
        full, _ = self.run_json(["--verify-data", "--repository-only", repo])
        total, per_day = 0, []
        # Monday 2026-11-30 .. Sunday 2026-12-06; --max-age keeps the state (and slices' marks).
        for day in range(7):
            date = "2026-%02d-%02d" % ((11, 30) if day == 0 else (12, day))
            s, _ = self.run_json(["--verify-data", "--repository-only", "--subset", "daily/week", "--max-age", "8d",
                                  "--state-dir", self.state, repo], env=dict(HOOKS, BORGCHECK_TEST_TODAY=date))
            self.assertEqual(s["subset"], "%d/7" % (day + 1), s)
            self.assertIn("TEST hook BORGCHECK_TEST_TODAY=%s in effect (the date and clock of this run)" % date,
                          s["notes"])
            total += s["objects_verified"]
            per_day.append(s["objects_verified"])
            c = s["coverage"]
            if day < 6:
                self.assertEqual((c["units_verified"], c["full_verification_at"]), (0, None), c)
            else:
                self.assertEqual((c["ratio"], c["units_verified"], c["units_never_verified"]), (1, 30, 0), c)
                self.assertTrue(c["full_verification_at"].startswith("2026-12-06T"), c)
                self.assertTrue(c["oldest_unit_verified_at"].startswith("2026-11-30T"), c)
        self.assertEqual(total, full["objects_verified"] + 6)  # the manifest is in every slice
        with open(self.state_file(s)) as f:
            state = json.load(f)
        self.assertEqual(len(state["units"]), 30)
        for name, u in state["units"].items():
            self.assertEqual((u["data"]["how"], u["data"]["result"]), ("slices", "clean"), name)
            self.assertEqual(sorted(u["slices"]["done"]), [str(k) for k in range(1, 8)], name)  # kept: rolling
        # The next week's rotation reads its slices again although --max-age 8d still calls last
        # week's marks fresh: in a slice run --max-age never leaves anything out (it only sets the
        # coverage window), else the next Monday would read nothing and slice 1 go two weeks unread.
        for day, date in ((0, "2026-12-07"), (1, "2026-12-08")):
            s, _ = self.run_json(["--verify-data", "--repository-only", "--subset", "daily/week", "--max-age", "8d",
                                  "--state-dir", self.state, repo], env=dict(HOOKS, BORGCHECK_TEST_TODAY=date))
            self.assertEqual((s["subset"], s["units_not_due"], s["objects_verified"], s["segments"]),
                             ("%d/7" % (day + 1), 0, per_day[day], 30), s)
            self.assertEqual((s["coverage"]["ratio"], s["coverage"]["units_verified"]), (1, 30), s)

    def test_a_month_of_daily_month_covers_february_and_december(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/none")
        full, _ = self.run_json([repo])
        for year, month, days in ((2027, 2, 28), (2026, 12, 31)):
            state = os.path.join(self.state, "%d-%d" % (year, month))
            total = 0
            for day in range(1, days + 1):
                s, _ = self.run_json(["--subset", "daily/month", "--state-dir", state, repo],
                                     env=dict(HOOKS, BORGCHECK_TEST_TODAY="%d-%02d-%02d" % (year, month, day)))
                self.assertEqual(s["subset"], "%d/%d" % (day, days), s)
                total += s["objects_verified"]
                self.assertEqual(s["coverage"]["units_verified"], 30 if day == days else 0, (day, s))
            self.assertEqual(total, full["objects_verified"] + days - 1)

    def test_a_sample_reports_its_seed_and_repeats_with_it(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/none")
        s, _ = self.run_json(["--sample", "30%", repo])
        self.assertEqual(s["sample_fraction"], 0.3, s)
        self.assertIsInstance(s["sample_seed"], int)
        again, _ = self.run_json(["--sample", "30%", "--sample-seed", str(s["sample_seed"]), repo])
        self.assertEqual((again["objects_verified"], again["bytes_read"]), (s["objects_verified"], s["bytes_read"]))
        by_size, _ = self.run_json(["--sample", "50K", "--sample-seed", "1", repo])
        self.assertAlmostEqual(by_size["sample_fraction"], 51200 / by_size["bytes_total"], places=9)
        for whole in ("100%", "1T"):  # everything, or at least the repository's size: a full run
            s, _ = self.run_json(["--sample", whole, repo])
            self.assertEqual((s["complete"], s["sample_fraction"], s["sample_seed"]), (True, None, None), s)
        r = self.run_borgcheck(["--sample", "5%", "--sample-seed", "7", repo])
        self.assertRegex(r.stdout, r"; partial: sample 5% \(seed 7\), [0-9.]+ KiB of [0-9.]+ KiB read, from 30 of 30 "
                         r"segments\n")


class TimeBudget(PartialTestCase):
    SLOW = dict(HOOKS, BORGCHECK_TEST_READ_DELAY_US="20000")
    # The budget counts units, not time (BORGCHECK_TEST_BUDGET_S_PER_UNIT): "4s" starts exactly
    # four units a run, however fast the machine.
    UNITS = dict(HOOKS, BORGCHECK_TEST_BUDGET_S_PER_UNIT="1")

    def test_repeated_runs_cover_everything_once_before_verifying_again(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/repokey")
        read, runs = 0, 0
        while True:
            s, _ = self.run_json(["--verify-data", "--repository-only", "--max-duration", "4s", "--state-dir",
                                  self.state, repo], env=self.UNITS)
            runs += 1
            c = s["coverage"]
            read += s["segments"]
            self.assertEqual((s["segments"], s["stopped"]), (4, "time-budget"), s)
            if c["units_never_verified"] == 0:
                break
            self.assertEqual(c["units_verified"], read, s)  # nothing verified twice so far
            self.assertLess(runs, 30)
        self.assertEqual((runs, read), (8, 32))  # 7 runs of 4 new segments, then 2 new and the 2 oldest
        self.assertIsNotNone(c["full_verification_at"])

    def test_kill_9_mid_run_then_resume_loses_nothing(self):
        repo = self.copy_repo("borg1/corrupt/mac-repokey")  # segment 2: a MAC failure
        # 100 ms per read: after the 8th mark, the 22 segments left take seconds, room for this
        # poller to kill the run on a busy machine (at 20 ms it had under half a second).
        env = dict(VERIFY, BORGCHECK_TEST_CHECKPOINT_S="0.05", **dict(self.SLOW, BORGCHECK_TEST_READ_DELAY_US="100000"))
        proc = self.start(["--json", "--progress=always", "--verify-data", "--repository-only", "--max-duration", "1h",
                           "--state-dir", self.state, repo], env=env)
        deadline = time.monotonic() + 60
        marked, states = {}, []
        while time.monotonic() < deadline:
            time.sleep(0.05)
            states = glob.glob(os.path.join(self.state, "*", "*", "state.json"))
            if states and os.path.exists(states[0]):
                with open(states[0]) as f:
                    marked = marked_units(json.load(f))  # always a whole file: written atomically
                if len(marked) >= 8:
                    break
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        self.check_finished(proc, cs.RunResult(proc.cli_args, proc.returncode, b"", b""))
        self.assertGreaterEqual(len(marked), 8)
        with open(states[0]) as f:
            state = json.load(f)  # still a valid state after the kill
        marked = marked_units(state)
        self.assertLess(len(marked), 30, "the run finished before it could be killed")
        self.assertNotIn("last_run", state)
        for name, u in marked.items():
            self.assertEqual(u["data"]["result"], "errors" if name == "segment 2" else "clean", name)
        clean = [n for n, u in marked.items() if u["data"]["result"] == "clean"]
        # Resume: what was marked clean is not read again; everything else is, the damage included.
        s, findings = self.run_json(["--verify-data", "--repository-only", "--max-age", "30d", "--state-dir",
                                     self.state, repo], rc=90)
        self.assertEqual(s["units_not_due"], len(clean), s)
        self.assertEqual(s["segments"], 30 - len(clean), s)
        self.assertEqual([(f["segment"], f["stage"]) for f in findings if f["type"] == "finding"],
                         [(2, "authentication")])
        self.assertEqual((s["coverage"]["ratio"], s["coverage"]["units_never_verified"]), (1, 0), s)

    def test_a_damaged_segment_is_verified_again_and_reported_in_the_next_run(self):
        repo = self.copy_repo("borg1/corrupt/mac-repokey")
        args = ["--json", "--verify-data", "--repository-only", "--max-duration", "2s", "--max-age", "30d",
                "--state-dir", self.state, repo]
        for run in range(5):  # two segments a run: the second run reaches segment 2
            r = self.run_borgcheck(args, env=dict(VERIFY, **self.UNITS))
            s, records = summary_of(self, r)
            findings = [(f["segment"], f["chunk_id"]) for f in records if f["type"] == "finding"]
            self.assertEqual(s["segments"], 2, s)
            if run == 0:
                self.assert_rc(r, 0)
                self.assertEqual(findings, [])
                continue
            self.assert_rc(r, 90)
            self.assertEqual(findings, [(2, cs.MAC_REPOKEY_CHUNK)], run)

class Signals(PartialTestCase):
    def test_sigterm_mid_run_prints_the_findings_so_far(self):
        repo = self.copy_repo("borg1/corrupt/mac-repokey")
        proc = self.start(["--json", "--progress=always", "--verify-data", "--repository-only", repo],
                          env=dict(VERIFY, BORGCHECK_TEST_READ_DELAY_US="30000", **HOOKS))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            self.assertTrue(line, "the run ended before it could be signalled")
            rec = json.loads(line)
            if rec["type"] == "progress" and rec["objects_done"] >= 40:
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        r = self.check_finished(proc, cs.RunResult(proc.cli_args, proc.returncode, out, err))
        self.assert_rc(r, 143)
        self.assertEqual(r.stderr, "")
        records = [json.loads(x) for x in r.stdout.splitlines()]  # every line is JSON
        kinds = [x["type"] for x in records if x["type"] != "progress"]
        self.assertEqual(kinds, ["finding", "summary"], r)
        finding, s = [x for x in records if x["type"] != "progress"]
        self.assertEqual((finding["segment"], finding["stage"], finding["chunk_id"]),
                         (2, "authentication", cs.MAC_REPOKEY_CHUNK))
        self.assertEqual((s["verdict"], s["exit_code"], s["complete"], s["stopped"], s["errors"]),
                         ("interrupted", 143, False, "signal", 1), s)
        self.assertLess(s["objects_verified"], s["objects_total"], s)
        self.assertGreaterEqual(s["objects_verified"], 39, s)

    def test_sigint_in_text_mode_prints_findings_summary_and_the_stop(self):
        repo = self.copy_repo("borg1/corrupt/mac-repokey")
        proc = self.start(["--progress=always", "--progress-interval", "0.1", "--verify-data", repo],
                          env=dict(VERIFY, BORGCHECK_TEST_READ_DELAY_US="30000", **HOOKS))
        # Wait for a progress line that shows objects verified (reading has begun).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stderr.readline().decode()
            self.assertTrue(line, "the run ended before it could be signalled")
            if line.startswith("borgcheck: progress") and not line.split(", ")[1].startswith("0 of"):
                break
        proc.send_signal(signal.SIGINT)
        r = self.finish(proc, timeout=30)
        self.assert_rc(r, 130)
        lines = r.stdout.splitlines()
        self.assertRegex(r.stdout, r": interrupted: \d+ of 102 objects verified .*; partial: stopped by a signal, "
                         r"[0-9.]+ [KMG]?i?B of [0-9.]+ [KMG]?i?B read, from \d+ of 30 segments")
        self.assertIn("borgcheck: stopped by signal 2 before the check finished\n", r.stderr)
        if any("segment 2" in x for x in lines):
            self.assertTrue(lines[0].startswith("error: authentication chunk " + cs.MAC_REPOKEY_CHUNK), r)


class Metrics(PartialTestCase):
    COVERAGE = ["borgcheck_complete", "borgcheck_skipped_bytes", "borgcheck_coverage_ratio",
                "borgcheck_coverage_units_verified", "borgcheck_coverage_units_never_verified",
                "borgcheck_full_verification_timestamp_seconds", "borgcheck_oldest_verification_timestamp_seconds",
                "borgcheck_cycle_started_timestamp_seconds", "borgcheck_cycle_done_ratio"]

    def metrics(self, path):
        with open(path, "rb") as f:
            p = subprocess.run([shutil.which("promtool") or "promtool", "check", "metrics"], stdin=f,
                               capture_output=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, b"", b""), "promtool check metrics")
        values, names = {}, []
        with open(path) as f:
            for line in f:
                if line.startswith("# TYPE "):
                    names.append(line.split()[2])
                elif not line.startswith("#") and "stage=" not in line:
                    values[line.split("{")[0]] = float(line.rsplit(" ", 1)[1])
        return values, names

    @staticmethod
    def units_in(state):
        [path] = glob.glob(os.path.join(state, "*", "*", "state.json"))
        with open(path) as f:
            return len(json.load(f)["units"])

    def test_partial_runs_and_runs_with_a_state_export_their_coverage(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/none")
        path = os.path.join(self.state, "borgcheck.prom")
        self.assert_rc(self.run_borgcheck(["--metrics-file", path, repo]), 0)
        values, names = self.metrics(path)
        self.assertFalse(set(self.COVERAGE) & set(names), names)  # a plain full run: unchanged
        self.assert_rc(self.run_borgcheck(["--subset", "3/7", "--metrics-file", path, repo]), 0)
        values, names = self.metrics(path)
        self.assertEqual(names[-2:], self.COVERAGE[:2])  # no state: no coverage to tell
        self.assertEqual(values["borgcheck_complete"], 0)
        self.assertGreater(values["borgcheck_skipped_bytes"], 0)
        state = os.path.join(self.state, "s")
        self.assert_rc(self.run_borgcheck(["--max-age", "30d", "--state-dir", state, "--metrics-file", path, repo]), 0)
        values, names = self.metrics(path)
        self.assertEqual(names[-9:], self.COVERAGE)
        self.assertEqual((values["borgcheck_complete"], values["borgcheck_skipped_bytes"],
                          values["borgcheck_coverage_ratio"], values["borgcheck_coverage_units_verified"],
                          values["borgcheck_coverage_units_never_verified"]), (1, 0, 1, self.units_in(state), 0))
        self.assertAlmostEqual(values["borgcheck_full_verification_timestamp_seconds"], time.time(), delta=60)
        self.assertGreater(values["borgcheck_oldest_verification_timestamp_seconds"], 0)
        self.assertEqual(values["borgcheck_cycle_done_ratio"], 1)  # a whole run completes its cycle


class State(PartialTestCase):
    def first_run(self, repo):
        s, _ = self.run_json(["--max-age", "30d", "--state-dir", self.state, repo])
        return s

    def test_a_corrupt_state_file_is_set_aside_and_the_run_starts_over(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/none")
        path = self.state_file(self.first_run(repo))
        with open(path, "w") as f:
            f.write("{\"borgcheck_state\": 1, \"units\": ")
        r = self.run_borgcheck(["--max-age", "30d", "--state-dir", self.state, repo])
        self.assert_rc(r, 0)
        self.assertEqual(r.stderr, "borgcheck: warning: the state file %s is corrupt (not valid JSON): set aside as "
                         "%s.corrupt; this run starts from an empty state (every unit counts as unverified)\n"
                         % (path, path))
        self.assertIn(": ok: 102 of 102 objects CRC-checked", r.stdout)
        self.assertTrue(os.path.exists(path + ".corrupt"))
        with open(path) as f:
            self.assertEqual(len(json.load(f)["units"]), 30)
        # JSON: the same warning is a note.
        with open(path, "w") as f:
            f.write("garbage")
        s, _ = self.run_json(["--max-age", "30d", "--state-dir", self.state, repo])
        self.assertTrue(any("is corrupt (not valid JSON)" in n for n in s["notes"]), s)

    def test_another_repositorys_state_is_refused(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/none")
        other = self.copy_repo("borg1/v1.2.4/repos/repokey")
        mine = self.first_run(repo)
        theirs = self.first_run(other)
        shutil.copy(self.state_file(theirs), self.state_file(mine))
        r = self.run_borgcheck(["--max-age", "30d", "--state-dir", self.state, repo])
        self.assert_error_exit(r, 2, "the state file %s belongs to repository %s, not to %s: refused"
                               % (self.state_file(mine), theirs["repository_id"], mine["repository_id"]))
        r = self.run_borgcheck(["--json", "--max-age", "30d", "--state-dir", self.state, repo])
        self.assertEqual([(x["type"], x["code"], x["exit_code"]) for x in self.json_records(r)],
                         [("error", "invalid-argument", 2)])

    def test_a_newer_state_version_is_refused(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/none")
        path = self.state_file(self.first_run(repo))
        with open(path) as f:
            state = json.load(f)
        state["borgcheck_state"] = 3
        with open(path, "w") as f:
            json.dump(state, f)
        r = self.run_borgcheck(["--max-age", "30d", "--state-dir", self.state, repo])
        self.assert_error_exit(r, 2, "was written by a newer borgcheck (state version 3; this borgcheck reads "
                               "version 2): refused")

    def test_a_read_only_state_folder_checks_and_exits_2(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/none")
        folder = os.path.dirname(self.state_file(self.first_run(repo)))
        os.chmod(folder, 0o555)
        args = ["--max-duration", "1h", "--state-dir", self.state, repo]
        # root writes into any folder: run as nobody, who can read the copies but not write.
        self.open_to_nobody(self.state)
        os.chmod(folder, 0o555)
        r = self.run_unprivileged(args)
        self.assert_rc(r, 2)
        # The check ran (its summary is printed), then said what it could not record.
        self.assertTrue(r.stdout.startswith(repo + ": state-not-saved: 102 of 102 objects CRC-checked"), r)
        self.assertIn("borgcheck: warning: the state folder %s is not writable" % folder, r.stderr)
        self.assertIn("this run's verification was not recorded", r.stderr)

    def test_min_interval_skips_after_a_clean_full_verification(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/none")
        r = self.run_borgcheck(["--min-interval", "7d", "--state-dir", self.state, repo])
        self.assert_rc(r, 0)
        self.assertIn(": ok: 102 of 102 objects CRC-checked", r.stdout)
        r = self.run_borgcheck(["--min-interval", "7d", "--state-dir", self.state, repo])
        self.assert_rc(r, 0)
        self.assertRegex(r.stdout, r"^%s: skipped: a clean full verification completed \d{4}-\d\d-\d\dT[0-9:.]+Z "
                         r"\(within --min-interval\); nothing checked\n$" % repo)
        s, _ = self.run_json(["--min-interval", "7d", "--state-dir", self.state, repo])
        self.assertEqual((s["verdict"], s["objects_verified"], s["complete"]), ("skipped", 0, False), s)

    def test_test_hooks_are_refused_without_their_guard(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/none")
        r = self.run_borgcheck([repo], env={"BORGCHECK_TEST_TODAY": "2026-12-01"})
        self.assert_error_exit(r, 2, "BORGCHECK_TEST_TODAY is a test-only hook")


# (original, its damaged twin in the fixtures: one byte of segment 2 differs, checksums fixed, so
# only --verify-data sees it; the chunk it damages): a borg 1.2.4 and a borg2 2.0.0b5 repository.
TWINS = (("borg1/v1.2.4/repos/repokey", "borg1/corrupt/mac-repokey", cs.MAC_REPOKEY_CHUNK),
         ("borg2b5/repokey-chacha20-poly1305", "borg2b5/corrupt/chpo-data-authfail",
          "20d3151918fa7ad402e16c01d707c5cede2e8528f63942aab1bdead085fa1b82"))


class Copies(PartialTestCase):
    """Copies of a repository share its id, not its state (unit_state.h, docs/nightly.md "One
    state per copy"): a run counts only verification done on the units at its own path."""

    def copy_of(self, repo, name):
        """`cp -a`: the same files (sizes, mtimes), other inodes."""
        dest = os.path.join(self.tmp, name)
        subprocess.run(["cp", "-a", repo, dest], check=True)
        return dest

    @staticmethod
    def damage_like(repo, twin):
        """Writes into repo's segment 2, in place, the bytes where the fixture's damaged twin
        differs (one flipped byte; borg2 b5: and its entry's checksums, fixed), and keeps the
        file's mtime: damage that leaves size and mtime as they were."""
        seg = os.path.join(repo, "data", "0", "2")
        with open(os.path.join(cs.SHARED, "fixtures", twin, "data", "0", "2"), "rb") as f:
            bad = f.read()
        st = os.stat(seg)
        with open(seg, "r+b") as f:
            good = f.read()
            assert len(good) == len(bad)
            for i in (i for i in range(len(good)) if good[i] != bad[i]):  # the byte, and its entry's checksums
                f.seek(i)
                f.write(bad[i:i + 1])
        os.utime(seg, ns=(st.st_atime_ns, st.st_mtime_ns))

    def findings_of(self, records):
        return [(f["segment"], f["stage"], f["chunk_id"]) for f in records if f["type"] == "finding"]

    def test_a_clean_run_of_the_original_does_not_let_min_interval_skip_a_damaged_copy(self):
        for where, twin, chunk in TWINS:
            with self.subTest(where=where):
                original = self.copy_repo(where)
                copy = self.copy_of(original, "copy-" + twin.replace("/", "_"))
                self.damage_like(copy, twin)
                args = ["--verify-data", "--repository-only", "--min-interval", "7d", "--state-dir", self.state]
                s, _ = self.run_json(args + [original])
                self.assertEqual(s["verdict"], "ok", s)
                s, _ = self.run_json(args + [original])
                self.assertEqual(s["verdict"], "skipped", s)  # the original itself: verified, skipped
                s, records = self.run_json(args + [copy], rc=90)
                self.assertEqual((s["verdict"], s["complete"]), ("integrity-errors", True), s)
                self.assertEqual(self.findings_of(records), [(2, "authentication", chunk)])
                self.assertNotEqual(os.path.dirname(s["coverage"]["state_file"]),
                                    os.path.dirname(self.state_file(self.run_json(args + [original])[0])))
                # Text: the copy is checked again (its damage is known to its own state).
                r = self.run_borgcheck(args + [copy], env=VERIFY)
                self.assert_rc(r, 90)
                self.assertNotIn("skipped", r.stdout)

    def test_a_copy_restored_onto_the_same_path_is_not_skipped(self):
        for where, twin, chunk in TWINS:
            with self.subTest(where=where):
                repo = self.copy_repo(where)
                args = ["--verify-data", "--repository-only", "--min-interval", "7d", "--state-dir", self.state, repo]
                s, _ = self.run_json(args)
                self.assertEqual(s["verdict"], "ok", s)
                # A clean restore (the same files, new inodes): checked, not skipped.
                saved = self.copy_of(repo, "saved-" + twin.replace("/", "_"))
                shutil.rmtree(repo)
                subprocess.run(["cp", "-a", saved, repo], check=True)
                s, _ = self.run_json(args)
                self.assertEqual((s["verdict"], s["complete"], s["coverage"]["units_verified"]),
                                 ("ok", True, s["units_total"]), s)
                self.assertEqual(self.run_json(args)[0]["verdict"], "skipped")  # now verified here
                # A damaged restore (size and mtime as before, new inodes): checked, the damage found.
                self.damage_like(saved, twin)
                shutil.rmtree(repo)
                subprocess.run(["cp", "-a", saved, repo], check=True)
                s, records = self.run_json(args, rc=90)
                self.assertEqual(self.findings_of(records), [(2, "authentication", chunk)])

    def test_two_copies_checked_in_turn_with_a_time_budget_both_complete(self):
        # The test clock: 1 second per unit started, so --max-duration 3s reads exactly 3 units.
        env = dict(HOOKS, BORGCHECK_TEST_BUDGET_S_PER_UNIT="1")
        for where, twin, _ in TWINS:
            with self.subTest(where=where):
                a = self.copy_repo(where)
                b = self.copy_of(a, "mirror-" + twin.replace("/", "_"))
                verified = {a: 0, b: 0}
                total = None
                for night in range(40):
                    repo = (a, b)[night % 2]
                    s, _ = self.run_json(["--verify-data", "--repository-only", "--max-duration", "3s",
                                          "--state-dir", self.state, repo], env=env)
                    total = s["units_total"]
                    self.assertEqual(s["segments"], min(3, total - verified[repo]), s)
                    verified[repo] = min(total, verified[repo] + 3)
                    self.assertEqual(s["coverage"]["units_verified"], verified[repo], s)
                    if verified[a] == verified[b] == total:
                        break
                self.assertEqual(night + 1, 2 * -(-total // 3))
                for repo in (a, b):
                    s, _ = self.run_json(["--verify-data", "--repository-only", "--min-interval", "7d",
                                          "--state-dir", self.state, repo])
                    self.assertEqual(s["verdict"], "skipped", s)


    def borg1(self, *args, cwd=None):
        env = self.environment({"BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "yes",
                                "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes",
                                "BORG_DELETE_I_KNOW_WHAT_I_AM_DOING": "YES"})
        p = subprocess.run(["borg", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, "borg %s: %s" % (args, p.stderr))

    @staticmethod
    def segments(repo):
        return {int(n) for d in os.listdir(os.path.join(repo, "data")) for n in os.listdir(os.path.join(repo, "data", d))
                if n.isdigit()}

    def test_an_older_copy_restored_onto_the_path_is_not_skipped_though_the_state_knows_none_of_its_units(self):
        # The state knows the units of the repository after a delete and compact; an older copy
        # (from before them: segment numbers the state has no record of, mtimes kept by cp -a)
        # restored onto the path, then damaged, must be checked: units without a record vouch
        # only as units written after the state's last save (a backup since), which these are not.
        src = os.path.join(self.tmp, "src")
        os.makedirs(src)
        with open(os.path.join(src, "f.bin"), "wb") as f:
            f.write(b"".join(i.to_bytes(4, "little") for i in range(60000)))
        repo = os.path.join(self.tmp, "repo")
        self.borg1("init", "-e", "none", repo)
        self.borg1("create", repo + "::a1", ".", cwd=src)
        older = self.copy_of(repo, "older")
        self.borg1("delete", repo + "::a1")
        self.borg1("compact", repo)
        self.borg1("create", repo + "::a2", ".", cwd=src)
        self.assertFalse(self.segments(older) & self.segments(repo), (self.segments(older), self.segments(repo)))
        args = ["--min-interval", "7d", "--state-dir", self.state, repo]
        s, _ = self.run_json(args)
        self.assertEqual(s["verdict"], "ok", s)
        s, _ = self.run_json(args)
        self.assertEqual(s["verdict"], "skipped", s)
        shutil.rmtree(repo)
        subprocess.run(["cp", "-a", older, repo], check=True)
        biggest = max(self.segments(repo), key=lambda n: os.path.getsize(os.path.join(repo, "data", "0", str(n))))
        seg = os.path.join(repo, "data", "0", str(biggest))
        st = os.stat(seg)
        with open(seg, "r+b") as f:
            f.seek(st.st_size // 2)
            b = f.read(1)
            f.seek(st.st_size // 2)
            f.write(bytes([b[0] ^ 0x01]))
        os.utime(seg, ns=(st.st_atime_ns, st.st_mtime_ns))
        s, records = self.run_json(args, rc=90)
        self.assertEqual((s["verdict"], s["complete"]), ("integrity-errors", True), s)
        self.assertEqual({(f["segment"], f["stage"]) for f in records if f["type"] == "finding"}, {(biggest, "entry-crc")})


class KnownDamage(PartialTestCase):
    """Re-reading units with known findings must not crowd out the rest (docs/nightly.md "The
    time budget: what it covers, and the order")."""

    @staticmethod
    def damage_first_put(repo, segment):
        """Flips the last byte of the first PUT entry's data in a borg 1.x segment, CRC left
        stale: an entry-crc finding at [segment N, offset 8]."""
        path = os.path.join(repo, "data", "0", str(segment))
        with open(path, "r+b") as f:
            data = f.read()
            assert data[:8] == b"BORG_SEG" and data[16] == 0, (segment, data[16])  # the first entry is a PUT
            size = int.from_bytes(data[12:16], "little")
            f.seek(8 + size - 1)
            f.write(bytes([data[8 + size - 1] ^ 0x01]))

    def put_segments(self, repo):
        found = []
        for name in sorted(os.listdir(os.path.join(repo, "data", "0")), key=int):
            with open(os.path.join(repo, "data", "0", name), "rb") as f:
                head = f.read(17)
            if len(head) == 17 and head[16] == 0:
                found.append(int(name))
        return found

    def marks(self, summary):
        with open(self.state_file(summary)) as f:
            return {k: u["crc"]["at"] for k, u in json.load(f)["units"].items()}

    def test_known_damage_is_reported_every_night_and_every_unit_is_still_verified(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/none")
        puts = self.put_segments(repo)
        damaged = sorted({puts[0], puts[len(puts) // 2], puts[-1]})
        self.assertEqual(len(damaged), 3, puts)
        for seg in damaged:
            self.damage_first_put(repo, seg)
        # Night 0: a full run finds the three.
        night0 = dict(HOOKS, BORGCHECK_TEST_TODAY="2026-01-01")
        s, records = self.run_json(["--state-dir", self.state, repo], env=night0, rc=90)
        self.assertEqual(sorted({f["segment"] for f in records if f["type"] == "finding"}), damaged)
        self.assertEqual([f["stage"] for f in records if f["type"] == "finding"], ["entry-crc"] * 3)
        total = s["units_total"]
        start = max(self.marks(s).values())
        # Then a budget of three units a night: exactly the damaged ones. Each night re-reads two
        # of them (the least recently re-read) and one other unit, oldest first.
        env = dict(HOOKS, BORGCHECK_TEST_BUDGET_S_PER_UNIT="1")
        seen = set()
        for night in range(1, total - 3 + 1):
            s, records = self.run_json(["--max-duration", "3s", "--state-dir", self.state, repo],
                                       env=dict(env, BORGCHECK_TEST_TODAY="2026-01-%02d" % (1 + night)), rc=90)
            found = {f["segment"] for f in records if f["type"] == "finding"}
            self.assertEqual(len(found), 2, (night, records))
            self.assertTrue(found <= set(damaged), found)
            seen |= found
            self.assertEqual((s["segments"], s["stopped"]), (3, "time-budget"), s)
            others = [k for k, at in self.marks(s).items() if at > start and int(k.split()[1]) not in damaged]
            self.assertEqual(len(others), night, (night, others))
        self.assertEqual(sorted(seen), damaged)
        # Every unit was verified again since night 0.
        self.assertTrue(all(at > start for at in self.marks(s).values()), self.marks(s))


class Budget(PartialTestCase):
    """--max-duration counts the whole run: the reading stops early by what the last run's finish
    and archive pass took (kept in the state; BORGCHECK_TEST_AFTER_READING_S fixes that time
    under the test clock)."""

    PREFIX = ("the time budget (5.00s) counts the whole run: planning, the key, reading the segments, the finish "
              "and the archive pass; no segment starts once it is spent, those being read finish; ")

    def budget_notes(self, s):
        return [n for n in s["notes"] if n.startswith("the time budget")]

    def test_the_archive_pass_is_kept_back_from_the_budget(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/repokey")
        args = ["--verify-data", "--max-duration", "5s", "--state-dir", self.state, repo]
        env = dict(HOOKS, BORGCHECK_TEST_BUDGET_S_PER_UNIT="1", BORGCHECK_TEST_AFTER_READING_S="2")
        s, _ = self.run_json(args, env=env)
        self.assertEqual(s["segments"], 5, s)
        self.assertEqual(self.budget_notes(s), [
            self.PREFIX + "nothing has measured the finish and the archive pass yet, so this run's come on top of "
            "the budget (the next runs keep back what they take) (see the `phase` lines)"])
        with open(self.state_file(s)) as f:
            self.assertEqual(json.load(f)["after_reading_s"], {"data": 2})
        s, _ = self.run_json(args, env=env)
        self.assertEqual(s["segments"], 3, s)
        self.assertEqual(self.budget_notes(s), [
            self.PREFIX + "the reading stops 2.00s early, kept back for the finish and the archive pass (what the "
            "last run's took) (see the `phase` lines)"])
        env["BORGCHECK_TEST_AFTER_READING_S"] = "7"
        self.run_json(args, env=env)  # records 7
        r = self.run_borgcheck(["-v"] + args, env=dict(VERIFY, **env))
        self.assert_rc(r, 0)
        self.assertIn("note: " + self.PREFIX + "the last run's finish and archive pass took 7.00s, more than the "
                      "whole budget: this run reads one segment; raise --max-duration (see the `phase` lines)\n",
                      r.stdout)
        self.assertRegex(r.stdout, r"\nphase read\+verify: [0-9.]+s\nphase finish: [0-9.]+s\n"
                         r"phase archive pass: [0-9.]+s\n")
        s, _ = self.run_json(args, env=env)
        self.assertEqual(s["segments"], 1, s)

    def test_the_hook_for_the_time_after_the_reading_needs_the_test_clock(self):
        repo = self.copy_repo("borg1/v1.2.4/repos/repokey")
        r = self.run_borgcheck(["--max-duration", "5s", "--state-dir", self.state, repo],
                               env=dict(HOOKS, BORGCHECK_TEST_AFTER_READING_S="2"))
        self.assert_rc(r, 2)
        self.assertIn("BORGCHECK_TEST_AFTER_READING_S must be 0..86400 seconds, with "
                      "BORGCHECK_TEST_BUDGET_S_PER_UNIT", r.stderr)


if __name__ == "__main__":
    cs.main()
