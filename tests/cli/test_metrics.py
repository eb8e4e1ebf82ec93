"""--metrics-file: node_exporter textfile output checked by the real `promtool check metrics`
(Debian's prometheus package) for a success, an integrity failure and a run that could not
check; borgcheck_last_success_timestamp_seconds carried forward across failures; the file
replaced atomically (a new inode renamed over the old one, no temporary file left, a reader never
sees half a file). Also `promtool check rules` and `promtool test rules` on the shipped alert
rules (dist/prometheus/borgcheck-alerts.yml), which docs/nightly.md quotes verbatim.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase  # noqa: E402

SOURCE_DIR = os.path.dirname(cs.DOCS)
PROMTOOL = shutil.which("promtool") or "promtool"
RULES = os.path.join(SOURCE_DIR, "dist", "prometheus", "borgcheck-alerts.yml")
RULES_TEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prometheus", "borgcheck-alerts.test.yml")
VERIFY = {"BORG_PASSPHRASE": cs.PASSPHRASE}
RUN_METRICS = ["borgcheck_last_run_timestamp_seconds", "borgcheck_last_success_timestamp_seconds",
               "borgcheck_success", "borgcheck_exit_code", "borgcheck_duration_seconds"]
CHECK_METRICS = ["borgcheck_verify_data", "borgcheck_objects", "borgcheck_objects_verified",
                 "borgcheck_verified_bytes", "borgcheck_read_bytes", "borgcheck_errors", "borgcheck_warnings",
                 "borgcheck_findings"]
STAGES = ["entry-crc", "envelope", "authentication", "decompression", "id-hash", "missing", "truncated",
          "index", "segment", "reference", "archive", "io", "key", "lock"]
SAMPLE = re.compile(r'^(borgcheck_[a-z_]+)\{([^}]*)\} (\S+)$')


def parse(text):
    """{(name, labels): value} of the samples, checking the text form on the way: HELP and
    TYPE gauge before each metric's first sample, labels repo, repo_id (and stage on
    borgcheck_findings), no sample timestamp, a newline at the end."""
    assert text.endswith("\n"), text
    samples, typed, order = {}, set(), []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        m = re.match(r"^# TYPE (\S+) gauge$", line)
        if m:
            typed.add(m.group(1))
            order.append(m.group(1))
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line (or a timestamp after the value): %r" % line
        name, labels, value = m.groups()
        assert name in typed, name
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels))
        keys = {"repo", "repo_id", "stage"} if name == "borgcheck_findings" else {"repo", "repo_id"}
        assert set(labels) == keys, (name, labels)
        samples[(name, labels.get("stage"))] = float(value)
    return samples, order


class MetricsFile(CliTestCase):
    def setUp(self):
        super().setUp()
        # Outside the test folder: that one is checked for writes after every run.
        self.out = tempfile.mkdtemp(prefix="borgcheck-metrics-")
        self.addCleanup(shutil.rmtree, self.out, True)
        self.path = os.path.join(self.out, "borgcheck.prom")

    def promtool_accepts(self):
        with open(self.path, "rb") as f:
            p = subprocess.run([PROMTOOL, "check", "metrics"], stdin=f, capture_output=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, b"", b""), "promtool check metrics")
        with open(self.path) as f:
            return parse(f.read())

    def test_an_empty_metrics_file_name_is_refused(self):
        # `--metrics-file "$PROM"` with PROM unset would write nothing, silently.
        repo = self.copy_fixture("v1.2.4/repos/none")
        r = self.run_borgcheck(["-q", repo, "--metrics-file", ""])
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN),
                         "borgcheck: --metrics-file needs a file name (it was given an empty one); leave the option "
                         "out to write no metrics")

    def test_a_repository_path_that_is_not_utf8_gives_a_file_promtool_reads(self):
        # A label value must be valid UTF-8, or Prometheus drops the whole file: the path's
        # invalid bytes are written as borgcheck's text escapes (docs/nightly.md "Metrics").
        repo = self.copy_fixture("corrupt/mac-repokey", name=os.fsdecode(b"repo-\xff\x1b[31m"))
        r = self.run_borgcheck(["-q", repo, "--metrics-file", self.path])
        self.assert_rc(r, cs.EXIT_OK)
        samples, _ = self.promtool_accepts()
        self.assertEqual(samples[("borgcheck_success", None)], 1)
        with open(self.path, "rb") as f:
            text = f.read()
        label = os.fsencode(os.path.dirname(repo)) + b"/repo-\\\\xff\\\\x1b[31m"
        self.assertIn(b'{repo="' + label + b'",', text)
        # The next run of the same path carries its last success: it finds its own label.
        r = self.run_borgcheck(["-q", "--verify-data", repo, "--metrics-file", self.path], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        samples, _ = self.promtool_accepts()
        self.assertGreater(samples[("borgcheck_last_success_timestamp_seconds", None)], 0)

    def test_success_failure_and_could_not_run_files(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        r = self.run_borgcheck(["-q", repo, "--metrics-file", self.path])  # keyless: the MAC damage is invisible
        self.assert_rc(r, cs.EXIT_OK)
        samples, order = self.promtool_accepts()
        self.assertEqual(order, RUN_METRICS + CHECK_METRICS)
        self.assertEqual({k: samples[(k, None)] for k in ("borgcheck_success", "borgcheck_exit_code",
                                                           "borgcheck_verify_data", "borgcheck_objects",
                                                           "borgcheck_objects_verified", "borgcheck_errors",
                                                           "borgcheck_warnings")},
                         {"borgcheck_success": 1, "borgcheck_exit_code": 0, "borgcheck_verify_data": 0,
                          "borgcheck_objects": 102, "borgcheck_objects_verified": 102, "borgcheck_errors": 0,
                          "borgcheck_warnings": 0})
        self.assertEqual([s for (n, s) in samples if n == "borgcheck_findings"], STAGES)
        success_at = samples[("borgcheck_last_success_timestamp_seconds", None)]
        self.assertEqual(success_at, samples[("borgcheck_last_run_timestamp_seconds", None)])
        config_id = self.config_id(repo)
        with open(self.path) as f:
            self.assertIn('{repo="%s",repo_id="%s"}' % (repo, config_id), f.read())  # the absolute path, config's id

        # The same repository with --verify-data: exit 90, the last success carried forward.
        r = self.run_borgcheck(["-q", "--verify-data", repo, "--metrics-file", self.path], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        samples, order = self.promtool_accepts()
        self.assertEqual(order, RUN_METRICS + CHECK_METRICS)
        self.assertEqual((samples[("borgcheck_success", None)], samples[("borgcheck_exit_code", None)],
                          samples[("borgcheck_errors", None)], samples[("borgcheck_findings", "authentication")],
                          samples[("borgcheck_objects_verified", None)]), (0, 90, 1, 1, 101))
        self.assertEqual(samples[("borgcheck_last_success_timestamp_seconds", None)], success_at)
        self.assertGreater(samples[("borgcheck_last_run_timestamp_seconds", None)], success_at)

        # Wrong passphrase: could not check; the run metrics only, still carried forward.
        r = self.run_borgcheck(["-q", "--verify-data", repo, "--metrics-file", self.path], {"BORG_PASSPHRASE": "x"})
        self.assert_rc(r, cs.EXIT_WRONG_PASSPHRASE)
        samples, order = self.promtool_accepts()
        self.assertEqual(order, RUN_METRICS)
        self.assertEqual((samples[("borgcheck_success", None)], samples[("borgcheck_exit_code", None)]), (0, 52))
        self.assertEqual(samples[("borgcheck_last_success_timestamp_seconds", None)], success_at)

        # A success moves it.
        r = self.run_borgcheck(["-q", repo, "--metrics-file", self.path])
        samples, _ = self.promtool_accepts()
        self.assertGreater(samples[("borgcheck_last_success_timestamp_seconds", None)], success_at)

    def test_last_success_comes_from_the_state_when_the_previous_file_is_gone(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        state = tempfile.mkdtemp(prefix="borgcheck-state-")  # outside the read-only-checked folder
        self.addCleanup(shutil.rmtree, state, True)
        r = self.run_borgcheck(["-q", "--verify-data", "--state-dir", state, repo, "--metrics-file", self.path],
                               VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        samples, _ = self.promtool_accepts()
        success_at = samples[("borgcheck_last_success_timestamp_seconds", None)]
        [state_file] = glob.glob(os.path.join(state, "*", "*", "state.json"))  # <id>/<path>/
        with open(state_file) as f:
            state_success = json.load(f)["last_success_at"]
        # The state records the success when the run's findings are final, the metrics file when
        # the run ends, a moment later (however long that moment is on a loaded machine).
        self.assertLessEqual(state_success, success_at)
        self.assertLess(success_at - state_success, 600)
        os.remove(self.path)  # the textfile folder was cleaned, or the path changed
        r = self.run_borgcheck(["-q", "--verify-data", "--state-dir", state, repo, "--metrics-file", self.path],
                               {"BORG_PASSPHRASE": "x"})
        self.assert_rc(r, cs.EXIT_WRONG_PASSPHRASE)
        samples, _ = self.promtool_accepts()
        self.assertEqual(samples[("borgcheck_success", None)], 0)
        self.assertAlmostEqual(samples[("borgcheck_last_success_timestamp_seconds", None)], state_success, delta=1e-3)
        # The failed run is no success in the state either (its keyless fallback finished, but the
        # run exits 52: it once set last_success_at to its own time).
        with open(state_file) as f:
            self.assertEqual(json.load(f)["last_success_at"], state_success)
        # Without the state the same failure has nothing to carry forward.
        os.remove(self.path)
        r = self.run_borgcheck(["-q", "--verify-data", repo, "--metrics-file", self.path], {"BORG_PASSPHRASE": "x"})
        self.assert_rc(r, cs.EXIT_WRONG_PASSPHRASE)
        samples, _ = self.promtool_accepts()
        self.assertEqual(samples[("borgcheck_last_success_timestamp_seconds", None)], 0)

    def test_a_min_interval_skip_and_a_missing_disk_keep_the_last_success_and_the_series(self):
        # The repository on a "disk" outside the test folder, which the last step unmounts.
        disk = tempfile.mkdtemp(prefix="borgcheck-disk-")
        self.addCleanup(shutil.rmtree, disk, True)
        state = tempfile.mkdtemp(prefix="borgcheck-state-")
        self.addCleanup(shutil.rmtree, state, True)
        repo = os.path.join(disk, "repo")
        shutil.copytree(cs.fixture_path("v1.2.4/repos/repokey"), repo, symlinks=True)
        cs.make_writable(repo)
        config_id = self.config_id(repo)
        args = ["-q", "--verify-data", "--state-dir", state, repo, "--metrics-file", self.path]
        r = self.run_borgcheck(args, VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        samples, _ = self.promtool_accepts()
        success_at = samples[("borgcheck_last_success_timestamp_seconds", None)]
        with open(self.path) as f:
            self.assertIn('{repo="%s",repo_id="%s"}' % (repo, config_id), f.read())
        # --min-interval: a clean full verification is recent, nothing is read. The run succeeds
        # (exit 0) but verified nothing: the last success stays that of the run above.
        r = self.run_borgcheck(["--min-interval", "7d"] + args, VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        samples, _ = self.promtool_accepts()
        self.assertEqual(samples[("borgcheck_success", None)], 1)
        self.assertEqual(samples[("borgcheck_last_success_timestamp_seconds", None)], success_at)
        self.assertGreater(samples[("borgcheck_last_run_timestamp_seconds", None)], success_at)
        # The disk is not mounted (an empty mount point): --soft-fail exits 75, and the series
        # keep their repo_id (the run could not read it), so no new series and alert appear.
        shutil.rmtree(repo)
        os.mkdir(repo)
        r = self.run_borgcheck(["--soft-fail"] + args, VERIFY)
        self.assert_rc(r, 75)
        samples, _ = self.promtool_accepts()
        self.assertEqual((samples[("borgcheck_success", None)], samples[("borgcheck_exit_code", None)]), (0, 75))
        self.assertEqual(samples[("borgcheck_last_success_timestamp_seconds", None)], success_at)
        with open(self.path) as f:
            text = f.read()
        self.assertNotIn('repo_id=""', text)
        self.assertEqual(text.count('{repo="%s",repo_id="%s"}' % (repo, config_id)), 5, text)

    def test_no_previous_success_is_zero_and_warnings_are_a_success(self):
        missing = os.path.join(self.tmp, "usb", "borg")
        r = self.run_borgcheck(["--soft-fail", missing, "--metrics-file", self.path])
        self.assert_rc(r, 75)
        samples, order = self.promtool_accepts()
        self.assertEqual(order, RUN_METRICS)
        self.assertEqual((samples[("borgcheck_last_success_timestamp_seconds", None)],
                          samples[("borgcheck_exit_code", None)]), (0, 75))
        warn = self.copy_fixture("corrupt/uncommitted-repokey-history")
        r = self.run_borgcheck(["-q", warn, "--metrics-file", self.path])
        self.assert_rc(r, cs.EXIT_WARNINGS)
        samples, _ = self.promtool_accepts()
        self.assertEqual((samples[("borgcheck_success", None)], samples[("borgcheck_warnings", None)],
                          samples[("borgcheck_findings", "segment")]), (1, 1, 1))

    def test_replaced_atomically(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        self.run_borgcheck(["-q", repo, "--metrics-file", self.path])
        old = os.path.join(self.out, "old.prom")
        os.link(self.path, old)  # a second name for the first file
        with open(old) as f:
            first = f.read()
        inode = os.stat(self.path).st_ino

        # A reader that keeps reading the file while runs replace it: every read is a whole file.
        stop, seen, bad = threading.Event(), [0], []

        def reader():
            while not stop.is_set():
                with open(self.path) as f:
                    text = f.read()
                seen[0] += 1
                if not (text.endswith("\n") and "borgcheck_findings{" in text and text.count("# TYPE ") == 13):
                    bad.append(text)
        t = threading.Thread(target=reader)
        t.start()
        try:
            for _ in range(10):
                r = self.run_borgcheck(["-q", repo, "--metrics-file", self.path])
                self.assert_rc(r, cs.EXIT_OK)
        finally:
            stop.set()
            t.join()
        self.assertEqual(bad, [])
        self.assertGreater(seen[0], 0)
        self.assertNotEqual(os.stat(self.path).st_ino, inode)  # renamed over, not rewritten in place
        with open(old) as f:
            self.assertEqual(f.read(), first)  # the old file was never written to
        self.assertEqual(sorted(os.listdir(self.out)), ["borgcheck.prom", "old.prom"])  # no temporary left
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o644)

    def test_unwritable_metrics_file_after_a_success_exits_2(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        path = os.path.join(self.out, "no-such-folder", "borgcheck.prom")
        r = self.run_borgcheck(["-q", repo, "--metrics-file", path])
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        # Issue 17: the cron mail of such a night says what the check found (-q too) and that
        # only the record failed, naming the folder that is missing.
        self.assertEqual(cs.mask_times(r.stdout),
                         repo + ": ok: 102 of 102 objects CRC-checked (264.7 KiB, keyless: contents and archives not "
                         "verified), 0 errors, 0 warnings, <T>\n")
        self.assertEqual(r.stderr, "borgcheck: cannot write the metrics file %s: its folder %s/ does not exist "
                                   "(create it, or install node_exporter's textfile collector; docs/nightly.md); the "
                                   "check itself ended with exit 0 (ok), exit 2 because the run is not recorded\n"
                                   % (path, os.path.dirname(path)))
        bad = self.copy_fixture("corrupt/mac-repokey")
        r = self.run_borgcheck(["-q", "--verify-data", bad, "--metrics-file", path], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)  # the worse news stands


    def test_a_run_of_some_archives_leaves_the_last_success_alone(self):
        # Issue 17: a job that checks only the newest archive must not keep the staleness alert
        # quiet; and an archive named that does not exist is no success at all.
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["-q", "--verify-data", repo, "--metrics-file", self.path], VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        samples, order = self.promtool_accepts()
        self.assertEqual(order, RUN_METRICS + CHECK_METRICS)
        success_at = samples[("borgcheck_last_success_timestamp_seconds", None)]
        selection = "borgcheck_archive_selection_success_timestamp_seconds"
        for args in (["--last", "1"], ["--archives-only"]):
            r = self.run_borgcheck(["-q", "--verify-data", *args, repo, "--metrics-file", self.path], VERIFY)
            self.assert_rc(r, cs.EXIT_OK)
            samples, order = self.promtool_accepts()
            # (then the partial-run metrics: a selection verifies only what it references)
            self.assertEqual(order, RUN_METRICS + CHECK_METRICS + [selection, "borgcheck_complete",
                                                                   "borgcheck_skipped_bytes"])
            self.assertEqual((samples[("borgcheck_success", None)], samples[("borgcheck_exit_code", None)]), (1, 0))
            self.assertEqual(samples[("borgcheck_last_success_timestamp_seconds", None)], success_at)
            selected_at = samples[(selection, None)]
            self.assertEqual(selected_at, samples[("borgcheck_last_run_timestamp_seconds", None)])
            self.assertGreater(selected_at, success_at)

        r = self.run_borgcheck(["--verify-data", repo + "::no-such-archive", "--metrics-file", self.path], VERIFY)
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        self.assertEqual((r.stdout, r.stderr),
                         ("", "borgcheck: archive 'no-such-archive' does not exist in the repository (7 archives): "
                              "nothing was checked (borg list shows the archive names)\n"))
        samples, order = self.promtool_accepts()
        self.assertEqual(order, RUN_METRICS + [selection])
        self.assertEqual((samples[("borgcheck_success", None)], samples[("borgcheck_exit_code", None)]), (0, 2))
        self.assertEqual(samples[("borgcheck_last_success_timestamp_seconds", None)], success_at)
        self.assertEqual(samples[(selection, None)], selected_at)
        r = self.run_borgcheck(["--json", "--verify-data", repo + "::no-such-archive"], VERIFY)
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        self.assertEqual([json.loads(line) for line in r.stdout.splitlines()],
                         [{"type": "error", "code": "invalid-argument", "exit_code": 2,
                           "message": "archive 'no-such-archive' does not exist in the repository (7 archives): "
                                      "nothing was checked (borg list shows the archive names)"}])

        # A full run moves the last success again.
        r = self.run_borgcheck(["-q", "--verify-data", repo, "--metrics-file", self.path], VERIFY)
        samples, order = self.promtool_accepts()
        self.assertEqual(order, RUN_METRICS + CHECK_METRICS)
        self.assertGreater(samples[("borgcheck_last_success_timestamp_seconds", None)], selected_at)


    def test_a_run_of_some_archives_with_a_state_leaves_the_last_success_alone(self):
        # The same with a state file, which carries the last success when the metrics file is
        # gone: a --last 1 run must not record one there either.
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        state = tempfile.mkdtemp(prefix="borgcheck-state-")  # outside the read-only-checked folder
        self.addCleanup(shutil.rmtree, state, True)
        r = self.run_borgcheck(["-q", "--verify-data", "--state-dir", state, repo, "--metrics-file", self.path], VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        [state_file] = glob.glob(os.path.join(state, "*", "*", "state.json"))
        with open(state_file) as f:
            state_success = json.load(f)["last_success_at"]
        os.remove(self.path)
        r = self.run_borgcheck(["-q", "--verify-data", "--last", "1", "--state-dir", state, repo,
                                "--metrics-file", self.path], VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        samples, _ = self.promtool_accepts()
        self.assertEqual(samples[("borgcheck_last_success_timestamp_seconds", None)], state_success)
        with open(state_file) as f:
            self.assertEqual(json.load(f)["last_success_at"], state_success)


class AlertRules(CliTestCase):
    def test_promtool_checks_and_tests_the_shipped_rules(self):
        p = subprocess.run([PROMTOOL, "check", "rules", RULES], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("SUCCESS: 3 rules found", p.stdout)
        p = subprocess.run([PROMTOOL, "test", "rules", RULES_TEST], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("SUCCESS", p.stdout)

    def test_promtool_test_rules_can_fail(self):
        # The rule test is meaningful: with the staleness threshold doubled it fails.
        d = tempfile.mkdtemp(prefix="borgcheck-rules-")
        self.addCleanup(shutil.rmtree, d, True)
        os.makedirs(os.path.join(d, "dist", "prometheus"))
        os.makedirs(os.path.join(d, "tests", "cli", "prometheus"))
        with open(RULES) as f:
            rules = f.read()
        self.assertIn("> 36 * 3600", rules)
        with open(os.path.join(d, "dist", "prometheus", "borgcheck-alerts.yml"), "w") as f:
            f.write(rules.replace("> 36 * 3600", "> 72 * 3600"))
        shutil.copy(RULES_TEST, os.path.join(d, "tests", "cli", "prometheus"))
        p = subprocess.run([PROMTOOL, "test", "rules", os.path.join(d, "tests", "cli", "prometheus",
                                                                     os.path.basename(RULES_TEST))],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn("BorgcheckStale", p.stdout + p.stderr)

    def test_every_rules_file_in_the_docs_passes_promtool(self):
        # A snippet a user copies must be a whole rules file promtool accepts alone.
        with open(os.path.join(cs.DOCS, "nightly.md"), encoding="utf-8") as f:
            doc = f.read()
        blocks = [b for b in re.findall(r"```yaml\n(.*?)```\n", doc, re.S) if "alert:" in b]
        self.assertGreaterEqual(len(blocks), 2)
        d = tempfile.mkdtemp(prefix="borgcheck-rules-")
        self.addCleanup(shutil.rmtree, d, True)
        for n, block in enumerate(blocks):
            self.assertTrue(block.startswith("groups:\n"), block)
            path = os.path.join(d, "rules-%d.yml" % n)
            with open(path, "w") as f:
                f.write(block)
            p = subprocess.run([PROMTOOL, "check", "rules", path], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, block + p.stdout + p.stderr)

    def test_nightly_md_quotes_the_rules_verbatim(self):
        with open(os.path.join(cs.DOCS, "nightly.md"), encoding="utf-8") as f:
            doc = f.read()
        with open(RULES, encoding="utf-8") as f:
            rules = f.read()
        body = rules[rules.index("groups:"):]
        self.assertIn("```yaml\n" + body + "```\n", doc)


if __name__ == "__main__":
    cs.main()
