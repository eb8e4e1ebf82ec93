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
        env = dict(VERIFY, BORGCHECK_TEST_CHECKPOINT_S="0.05", **self.SLOW)
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
