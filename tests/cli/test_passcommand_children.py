"""No stray children (issue 13): after SIGTERM, SIGINT, a closed stdout or a normal end, no
BORG_PASSCOMMAND process, nor anything it started, is left running, and the command itself was
reaped by borgcheck (keys/passphrase.cc: the command leads a process group of its own, killed and
reaped on every return path and by the stop signal's handler; PR_SET_PDEATHSIG).

The command is a shell that writes its pid, starts a `sleep` in the background that writes its pid
too (a grandchild in the command's process group, holding the passphrase pipe open), and then
waits or answers. This test process makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER),
so every orphan borgcheck leaves behind becomes its child: a command borgcheck did not reap shows
up here as a zombie child of ours, and a grandchild it did not kill as a live one.
"""

import ctypes
import os
import signal
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase, RunResult  # noqa: E402

PR_SET_CHILD_SUBREAPER = 36
STOP_TIMEOUT_S = 10.0


def make_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def state(pid):
    """The process state letter (R, S, Z, ...), or None when there is no such process."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def read_pid(path):
    with open(path) as f:
        return int(f.read())


def wait_for_file(path, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return read_pid(path)
        except (FileNotFoundError, ValueError):
            time.sleep(0.05)
    raise AssertionError("%s was not written within %.0f s" % (path, timeout))


class PasscommandChildren(CliTestCase):
    @classmethod
    def setUpClass(cls):
        make_subreaper()

    def setUp(self):
        super().setUp()
        self.repo = self.copy_fixture("v1.2.4/repos/repokey")
        # Outside the test folder, which every run must leave unchanged.
        self.pids = cs.tempfile.mkdtemp(prefix="borgcheck-pids-")
        self.addCleanup(cs.shutil.rmtree, self.pids, True)
        # Reap anything of an earlier test that was reparented to us.
        self.addCleanup(self.reap_orphans)

    def reap_orphans(self):
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def command(self, then):
        """A BORG_PASSCOMMAND: sh writes its pid, starts `sleep 600 &` (which writes its pid), then
        runs `then`."""
        return ("sh -c 'echo $$ > %s/command; sleep 600 & echo $! > %s/grandchild; %s'"
                % (self.pids, self.pids, then))

    def assert_no_strays(self, command_pid, grandchild_pid, r):
        """Nothing is left: the command was reaped by borgcheck (it is not our zombie), the
        grandchild is not running (killed: at most a zombie that was reparented to us)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and state(grandchild_pid) not in (None, "Z"):
            time.sleep(0.05)
        self.assertIn(state(grandchild_pid), (None, "Z"), "the command's background child is still running: %r" % r)
        # Was the command (sh) left to us unreaped? Then it is our child now (subreaper).
        try:
            pid, _ = os.waitpid(command_pid, os.WNOHANG)
            self.fail("borgcheck exited without reaping BORG_PASSCOMMAND (pid %d, state %s): %r"
                      % (command_pid, state(command_pid), r))
        except ChildProcessError:
            pass  # not our child: borgcheck reaped it
        self.assertIsNone(state(command_pid), "BORG_PASSCOMMAND is still there: %r" % r)
        # The grandchild, orphaned when sh died, is ours: reap it and see that it was killed.
        try:
            pid, status = os.waitpid(grandchild_pid, 0)
            self.assertTrue(os.WIFSIGNALED(status), "the grandchild was not killed: status %d" % status)
        except ChildProcessError:
            pass  # already gone
        self.assertIsNone(state(grandchild_pid))

    def signalled(self, signo):
        proc = self.start(["--json", "--verify-data", self.repo], {"BORG_PASSCOMMAND": self.command("wait")})
        command = wait_for_file(os.path.join(self.pids, "command"), 10)
        grandchild = wait_for_file(os.path.join(self.pids, "grandchild"), 10)
        self.assertEqual(state(command) in ("S", "R"), True)
        proc.send_signal(signo)  # only borgcheck, as a service manager or `kill` does
        try:
            out, err = proc.communicate(timeout=STOP_TIMEOUT_S)
        except Exception:
            os.kill(grandchild, signal.SIGKILL)
            self.fail("borgcheck did not exit within %.0f s of signal %d while BORG_PASSCOMMAND ran"
                      % (STOP_TIMEOUT_S, signo))
        r = self.check_finished(proc, RunResult(proc.cli_args, proc.returncode, out, err))
        self.assertEqual(r.rc, 128 + signo, r)
        records = self.json_records(r)
        self.assertEqual([(x["type"], x["code"], x["exit_code"]) for x in records],
                         [("error", "interrupted", 128 + signo)], r)
        self.assert_no_strays(command, grandchild, r)

    def test_sigterm_leaves_no_child(self):
        self.signalled(signal.SIGTERM)

    def test_sigint_leaves_no_child(self):
        self.signalled(signal.SIGINT)

    def test_sighup_leaves_no_child(self):
        self.signalled(signal.SIGHUP)

    def test_a_background_child_holding_the_pipe_is_not_waited_for_and_is_killed(self):
        # The command answers and exits; its background `sleep 600` still holds the pipe open.
        # borgcheck must neither wait ten minutes for EOF nor leave the sleep running.
        started = time.monotonic()
        r = self.run_borgcheck(["--verify-data", self.repo], {"BORG_PASSCOMMAND": self.command("echo test")},
                               timeout=300)
        self.assertLess(time.monotonic() - started, 120, r)  # far from the sleep's 600 s, loose for TSan
        self.assertEqual(r.rc, cs.EXIT_OK, r)
        self.assert_no_strays(read_pid(os.path.join(self.pids, "command")),
                              read_pid(os.path.join(self.pids, "grandchild")), r)

    def test_closed_stdout_leaves_no_child(self):
        # stdout is a pipe whose reader is gone before borgcheck writes: exit 141 (EPIPE), and
        # the command's background child is gone as well.
        rfd, wfd = os.pipe()
        os.close(rfd)
        proc = cs.subprocess.Popen([cs.BINARY, "--verify-data", self.repo],
                                   env=self.environment({"BORG_PASSCOMMAND": self.command("echo test")}),
                                   cwd=self.cwd, stdin=cs.subprocess.DEVNULL, stdout=wfd,
                                   stderr=cs.subprocess.PIPE, start_new_session=True)
        os.close(wfd)
        _, err = proc.communicate(timeout=30)
        r = RunResult(["--verify-data", self.repo], proc.returncode, b"", err)
        self.assertEqual(r.rc, 141, r)
        self.assert_no_strays(read_pid(os.path.join(self.pids, "command")),
                              read_pid(os.path.join(self.pids, "grandchild")), r)

    def test_the_command_dies_with_a_killed_borgcheck(self):
        # SIGKILL cannot be handled: PR_SET_PDEATHSIG makes the kernel kill the command itself.
        # (What the command started in the background outlives it; nothing can run in a process
        # killed by SIGKILL.)
        proc = self.start(["--json", "--verify-data", self.repo], {"BORG_PASSCOMMAND": self.command("wait")})
        command = wait_for_file(os.path.join(self.pids, "command"), 10)
        grandchild = wait_for_file(os.path.join(self.pids, "grandchild"), 10)
        self.addCleanup(lambda: state(grandchild) and os.kill(grandchild, signal.SIGKILL))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)  # not communicate(): the surviving grandchild holds borgcheck's stderr
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and state(command) not in (None, "Z"):
            time.sleep(0.05)
        self.assertIn(state(command), (None, "Z"), "BORG_PASSCOMMAND outlived a SIGKILLed borgcheck")


if __name__ == "__main__":
    cs.main()
