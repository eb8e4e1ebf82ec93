"""Output that never aborts: a closed stdout pipe (`| head -1`), stdout on /dev/full, stderr on
/dev/full. Each ends promptly with its documented exit code (docs/exit-codes.md: 141 for
EPIPE, 2 with a line on stderr for ENOSPC, unchanged for a broken stderr), never with an abort
(134), a core file or a "terminate called" message.
"""

import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase, RunResult  # noqa: E402

VERIFY = {"BORG_PASSPHRASE": cs.PASSPHRASE}
EXIT_BROKEN_PIPE = 141
STOP_TIMEOUT_S = 10.0  # a run whose stdout broke must end this soon (the long run takes minutes)


class OutputErrors(CliTestCase):
    def run_to(self, args, stdout, stderr, env=None, timeout=60):
        """Runs borgcheck with the given stdout/stderr (file objects or descriptors); returns the
        RunResult with whatever was captured from pipes given as subprocess.PIPE."""
        before = cs.snapshot(self.tmp)
        proc = subprocess.Popen([cs.BINARY] + list(args), env=self.environment(env), cwd=self.cwd,
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True)
        proc.snapshot_before, proc.cli_args = before, list(args)
        self.addCleanup(self._reap, proc)
        out, err = proc.communicate(timeout=timeout)
        return self.check_finished(proc, RunResult(proc.cli_args, proc.returncode, out or b"", err or b""))

    def assert_no_abort(self, r):
        self.assertGreaterEqual(r.rc, 0, r)  # not killed by a signal (SIGABRT would be -6)
        self.assertNotEqual(r.rc, 134, r)
        self.assertNotIn("terminate called", r.stderr, r)
        self.assertEqual([n for n in os.listdir(self.cwd) if n.startswith("core")], [])

    def closed_pipe(self):
        rfd, wfd = os.pipe()
        os.close(rfd)  # nobody will ever read: the first write is EPIPE
        self.addCleanup(os.close, wfd)
        return wfd

    def test_closed_stdout_pipe_exits_141_silently(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        for args in (["--verify-data", repo], ["--json", "--verify-data", repo], ["-q", "--verify-data", repo]):
            with self.subTest(args=args):
                r = self.run_to(args, self.closed_pipe(), subprocess.PIPE, VERIFY)
                self.assert_no_abort(r)
                self.assertEqual((r.rc, r.stderr), (EXIT_BROKEN_PIPE, ""), r)
        # A clean, quiet run writes nothing to stdout, so a closed stdout does not matter.
        clean = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_to(["-q", clean], self.closed_pipe(), subprocess.PIPE)
        self.assertEqual((r.rc, r.stderr), (cs.EXIT_OK, ""), r)

    def test_stdout_on_dev_full_exits_2_with_a_message(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        for args in (["--verify-data", repo], ["--json", "--verify-data", repo]):
            with self.subTest(args=args), open("/dev/full", "wb") as full:
                r = self.run_to(args, full, subprocess.PIPE, VERIFY)
                self.assert_no_abort(r)
                self.assertEqual((r.rc, r.stderr), (
                    cs.EXIT_COULD_NOT_RUN, "borgcheck: cannot write the report to stdout: No space left on device\n"), r)
        # An error message goes to stderr; stdout on /dev/full changes nothing then.
        with open("/dev/full", "wb") as full:
            r = self.run_to([os.path.join(self.tmp, "missing")], full, subprocess.PIPE)
        self.assert_error_exit(r, cs.EXIT_NO_REPO, "does not exist")

    def test_stderr_on_dev_full_leaves_the_verdict(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        plain = self.run_borgcheck(["--verify-data", repo], VERIFY)
        for extra in (["--progress=always", "--progress-interval", "0.1"], ["-p", "--show-rc"]):
            with self.subTest(args=extra), open("/dev/full", "wb") as full:
                r = self.run_to(extra + ["--verify-data", repo], subprocess.PIPE, full, VERIFY)
                self.assert_no_abort(r)
                self.assertEqual(r.rc, cs.EXIT_INTEGRITY_ERRORS, r)
                self.assertEqual(cs.mask_times(r.stdout), cs.mask_times(plain.stdout))
        # An error that cannot be written keeps its exit code.
        with open("/dev/full", "wb") as full:
            r = self.run_to([os.path.join(self.tmp, "missing")], subprocess.PIPE, full)
        self.assertEqual((r.rc, r.stdout), (cs.EXIT_NO_REPO, ""))

    def test_progress_with_stderr_on_dev_full_during_a_long_run(self):
        repo = cs.make_long_repo(self)
        with open("/dev/full", "wb") as full:
            r = self.run_to(["--progress=always", "--progress-interval", "0.1", "--threads", "2", repo],
                            subprocess.PIPE, full, timeout=300)
        self.assert_no_abort(r)
        # The long repository's one index finding; its filler chunk, which the index does not list,
        # is verified from the log (102 + 1).
        self.assertEqual(r.rc, cs.EXIT_INTEGRITY_ERRORS, r)
        self.assertIn(": integrity-errors: 103 of 103 objects CRC-checked", r.stdout)

    def test_json_progress_into_a_pipe_closed_after_one_line_stops_the_run(self):
        # `borgcheck --json --progress=always REPO | head -1` on a run of minutes (1,000 entries
        # of 20 MiB, sparse): head exits after the first record, the next progress write is
        # EPIPE, and borgcheck stops reading and exits 141 at once.
        repo = cs.make_long_repo(self, entries=1000)
        before = cs.snapshot(self.tmp)
        args = ["--json", "--progress=always", "--threads", "1", repo]
        proc = subprocess.Popen([cs.BINARY] + args, env=self.environment({}), cwd=self.cwd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        proc.snapshot_before, proc.cli_args = before, args
        self.addCleanup(self._reap, proc)
        first = proc.stdout.readline()
        self.assertIn(b'"type":"progress"', first)
        proc.stdout.close()  # what head does after one line
        closed = time.monotonic()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.fail("borgcheck went on for %.0f s after its stdout was closed" % STOP_TIMEOUT_S)
        err = proc.stderr.read()
        r = self.check_finished(proc, RunResult(args, proc.returncode, b"", err))
        self.assert_no_abort(r)
        self.assertEqual((r.rc, r.stderr), (EXIT_BROKEN_PIPE, ""), r)
        self.assertLess(time.monotonic() - closed, STOP_TIMEOUT_S)

    def test_head_dash_1_in_a_shell_pipeline(self):
        # The reported case, through a real shell and head: the report may fit in the pipe
        # before head exits (then the verdict, 90) or not (then 141); never an abort.
        repo = self.copy_fixture("corrupt/mac-repokey")
        script = 'set -o pipefail; "$0" --verify-data "$1" | head -1; echo "rc=$?" >&2'
        before = cs.snapshot(self.tmp)
        proc = subprocess.run(["bash", "-c", script, cs.BINARY, repo], env=self.environment(VERIFY), cwd=self.cwd,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        self.assert_unchanged(before, proc)
        out, err = proc.stdout.decode(), proc.stderr.decode()
        self.assertEqual(out, "error: authentication chunk " + cs.MAC_REPOKEY_CHUNK + " [segment 2, offset 8]: "
                         "MAC Authentication failed (second read: agreed)\n")
        self.assertIn(err, ("rc=90\n", "rc=141\n"))


if __name__ == "__main__":
    cs.main()
