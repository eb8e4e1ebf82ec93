"""Long runs: progress records while a check runs, and 128+N when a signal stops it.

The fixtures are checked in milliseconds, too fast to interrupt. A long run is made from a copy
of v1.2.4/repos/none whose last committed segment (29, which held only the COMMIT) is rewritten
as 50 identical 20 MiB PUT entries of zero bytes, then the COMMIT: a sparse file of about
1 GiB that takes no disk space, and whose entries are all valid (their CRC is right). index.29
does not list their chunk id, so the keyless check reads every byte and ends with one index
finding. The test waits for a progress record that shows the run half-way, then signals it.

Signals while borgcheck waits for a passphrase (BORG_PASSPHRASE_FD, BORG_PASSCOMMAND) are
tested on a fixture copy.
"""

import json
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import (CliTestCase, RunResult, ENTRIES, ENTRY_SIZE, FILLER_ID, SEGMENT_29_SIZE,  # noqa: E402
                         make_long_repo)

STOP_TIMEOUT_S = 30.0  # how long a signalled run may take to exit: "not minutes", with room for TSan
# Every repository read sleeps 10 ms first (a test hook): the long run lasts seconds however fast
# the machine's page cache is (unslowed, a fast machine reads the sparse GiB in 0.2 s: fewer than
# two progress ticks, or done before the signal arrives).
SLOW = cs.slow_reads(10000)


class LineReader:
    """Reads a process's stdout lines on a thread so the test can wait with a timeout."""

    def __init__(self, stream):
        self.lines = queue.Queue()
        self.all = []
        self.thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.thread.start()

    def _run(self, stream):
        for line in iter(stream.readline, b""):
            self.all.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def next(self, deadline):
        try:
            return self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None

    def rest(self):
        self.thread.join(10)
        return b"".join(self.all)


def blocked_in_read(pid, fd):
    """Whether process `pid` is blocked in read(fd, ...) (/proc/<pid>/syscall: x86-64's read is
    number 0, then the first argument)."""
    try:
        with open("/proc/%d/syscall" % pid) as f:
            fields = f.read().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] == "0" and int(fields[1], 16) == fd


class LongRun(CliTestCase):
    def setUp(self):
        super().setUp()
        self.repo = make_long_repo(self)

    def test_progress_records_during_a_long_run(self):
        r = self.run_borgcheck(["--json", "--progress=always", "--threads", "2", self.repo], env=SLOW, timeout=120)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(cs.without_hook_notes(r.stderr), "")
        records = self.json_records(r)
        progress = [x for x in records if x["type"] == "progress"]
        running = [x for x in progress if not x["final"]]
        self.assertGreaterEqual(len(running), 2, "the run was too short to show progress:\n%r" % r)
        self.assertTrue(progress[-1]["final"])
        self.assertEqual([x["type"] for x in records[len(progress):]], ["finding", "summary"], r)
        finding, summary = records[-2], records[-1]
        self.assertEqual(finding, {
            "type": "finding", "severity": "error", "stage": "index", "chunk_id": FILLER_ID.hex(), "segment": 29,
            "offset": 8 + (ENTRIES - 1) * ENTRY_SIZE,
            "location": "[segment 29, offset %d]" % (8 + (ENTRIES - 1) * ENTRY_SIZE),
            "message": "the log stores this chunk but index.29 does not list it", "reread": "not-reread",
            "affected": None, "affected_total": None, "advice": None})
        # The filler chunk the index does not list is live in the log (borg's rebuilt index has it):
        # it counts, and its copy in the log is verified (issue 13), so 102 + 1.
        self.assertEqual((summary["bytes_read"], summary["objects_total"], summary["objects_verified"],
                          summary["segments"]), (229386 - 17 + SEGMENT_29_SIZE, 103, 103, 30))
        for p in running:
            self.assertEqual((p["bytes_total"], p["objects_total"]), (summary["bytes_read"], 102), p)
            self.assertLessEqual(p["bytes_done"], p["bytes_total"], p)
            self.assertLessEqual(p["objects_done"], p["objects_total"], p)
            self.assertGreater(p["elapsed_s"], 0, p)
            if p["bytes_done"]:
                self.assertAlmostEqual(p["rate_bytes_per_s"], p["bytes_done"] / p["elapsed_s"],
                                       delta=1e-6 * p["rate_bytes_per_s"] + 1)
            else:
                self.assertEqual((p["rate_bytes_per_s"], p["eta_s"]), (0, None), p)
            # The ETA comes from the rate of the last 20 seconds (null until that window spans
            # half a second of reading), not from rate_bytes_per_s.
            if p["eta_s"] is not None:
                self.assertGreater(p["bytes_done"], 0, p)
                if p["bytes_done"] < p["bytes_total"]:
                    self.assertGreater(p["eta_s"], 0, p)
                else:  # read: the records go on while the check finishes and walks the archives
                    self.assertEqual(p["eta_s"], 0, p)
        reading = [p for p in running if p["bytes_done"]]
        if reading and reading[-1]["elapsed_s"] - reading[0]["elapsed_s"] > 0.6:
            self.assertTrue(any(p["eta_s"] is not None for p in running), running)
        for a, b in zip(running, running[1:]):
            self.assertLessEqual(a["bytes_done"], b["bytes_done"])
            self.assertLessEqual(a["objects_done"], b["objects_done"])
            self.assertLess(a["elapsed_s"], b["elapsed_s"])

    def stop_mid_run(self, signo):
        proc = self.start(["--json", "--progress=always", "--threads", "1", self.repo], SLOW)
        reader = LineReader(proc.stdout)
        deadline = time.monotonic() + 60
        while True:
            line = reader.next(deadline)
            self.assertIsNotNone(line, "the run ended (or stalled) before it reported progress half-way: %r"
                                 % reader.all)
            rec = json.loads(line)
            if rec["type"] == "progress" and not rec["final"] and 0 < rec["bytes_done"] < rec["bytes_total"] // 2:
                break
            self.assertEqual((rec["type"], rec["final"]), ("progress", False),
                             "the run finished before it could be signalled: %r" % reader.all)
        proc.send_signal(signo)
        sent = time.monotonic()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except Exception:
            self.fail("borgcheck still runs %.0f s after signal %d" % (STOP_TIMEOUT_S, signo))
        took = time.monotonic() - sent
        out = reader.rest()
        result = RunResult(proc.cli_args, proc.returncode, out, proc.stderr.read())
        self.check_finished(proc, result)
        return result, took

    def check_signal_stop(self, signo):
        r, _ = self.stop_mid_run(signo)
        self.assert_rc(r, cs.EXIT_SIGNAL_BASE + signo)
        self.assertEqual(cs.without_hook_notes(r.stderr), "")
        records = self.json_records(r)
        # Stopped mid-run: what it found so far (nothing: the one finding of this repository is
        # the index comparison's, made after the last segment) and a partial summary.
        s = records[-1]
        self.assertEqual((s["type"], s["verdict"], s["exit_code"], s["complete"], s["stopped"], s["errors"]),
                         ("summary", "interrupted", 128 + signo, False, "signal", 0), s)
        self.assertLess(s["bytes_read"], s["bytes_total"], s)
        self.assertEqual({x["type"] for x in records[:-1]}, {"progress"}, r)
        self.assertTrue(records[-2]["final"], r)

    def test_sigterm_mid_run_exits_143(self):
        self.check_signal_stop(signal.SIGTERM)

    def test_sigint_mid_run_exits_130(self):
        self.check_signal_stop(signal.SIGINT)

    def test_sighup_mid_run_exits_129(self):
        self.check_signal_stop(signal.SIGHUP)


class SignalWhileWaitingForPassphrase(CliTestCase):
    """A signal must stop borgcheck at once even while it waits for its passphrase (a pipe
    that never delivers, a BORG_PASSCOMMAND that hangs): exit 128+N and an error record."""

    def setUp(self):
        super().setUp()
        self.repo = self.copy_fixture("v1.2.4/repos/repokey")

    def wait_for_exit(self, proc, what, unblock):
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
            return None
        except Exception:
            unblock()
            proc.wait(timeout=30)
            return "borgcheck ignored the signal while %s: still running %.0f s later" % (what, STOP_TIMEOUT_S)

    def expect_signal_exit(self, proc, signo, late):
        out, err = proc.communicate(timeout=30)
        r = self.check_finished(proc, RunResult(proc.cli_args, proc.returncode, out, err))
        detail = "%s%r" % ((late + "; once unblocked: ") if late else "", r)
        self.assertEqual(r.rc, 128 + signo, detail)
        records = self.json_records(r)
        self.assertEqual(len(records), 1, detail)
        self.assertEqual((records[0]["type"], records[0]["exit_code"]), ("error", 128 + signo), detail)
        self.assertIsNone(late, detail)

    def start_fd_wait(self):
        rfd, wfd = os.pipe()
        writer = os.fdopen(wfd, "wb", buffering=0)
        self.addCleanup(writer.close)
        proc = self.start(["--json", "--verify-data", self.repo], {"BORG_PASSPHRASE_FD": str(rfd)}, pass_fds=(rfd,))
        os.close(rfd)
        # Signal only once it blocks reading the pipe (its handlers are set by then): a fixed
        # sleep is too short on a loaded machine under the sanitizers, and the default action
        # of the signal would kill it before its handlers exist.
        self.wait_until(proc, lambda: blocked_in_read(proc.pid, rfd), "to block reading BORG_PASSPHRASE_FD")
        return proc, writer

    def wait_until(self, proc, ready, what):
        deadline = time.monotonic() + 60
        while not ready():
            self.assertIsNone(proc.poll(), "borgcheck exited instead of waiting %s" % what)
            self.assertLess(time.monotonic(), deadline, "borgcheck did not wait %s within 60 s" % what)
            time.sleep(0.01)

    def start_passcommand_wait(self):
        """borgcheck running a BORG_PASSCOMMAND that never ends, once the command has started."""
        # Outside self.tmp, whose tree the read-only check compares before and after.
        flags = tempfile.mkdtemp(prefix="borgcheck-signals-")
        self.addCleanup(shutil.rmtree, flags, True)
        ready = os.path.join(flags, "passcommand-started")
        proc = self.start(["--json", "--verify-data", self.repo],
                          {"BORG_PASSCOMMAND": "sh -c 'touch %s; exec sleep 30'" % ready})
        self.wait_until(proc, lambda: os.path.exists(ready), "for BORG_PASSCOMMAND")
        return proc

    def test_sigterm_while_reading_passphrase_fd_exits_143(self):
        proc, writer = self.start_fd_wait()
        proc.send_signal(signal.SIGTERM)

        def unblock():
            writer.write(b"test\n")
            writer.close()
        late = self.wait_for_exit(proc, "reading BORG_PASSPHRASE_FD", unblock)
        self.expect_signal_exit(proc, signal.SIGTERM, late)

    def test_signal_wins_over_a_passphrase_that_arrives_later(self):
        # SIGTERM first, then a wrong passphrase: the run was stopped, so 143, not 52.
        proc, writer = self.start_fd_wait()
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        if proc.poll() is None:
            writer.write(b"wrong\n")
            writer.close()
        out, err = proc.communicate(timeout=30)
        r = self.check_finished(proc, RunResult(proc.cli_args, proc.returncode, out, err))
        self.assert_rc(r, 128 + signal.SIGTERM)
        self.assertEqual([(x["type"], x["exit_code"]) for x in self.json_records(r)], [("error", 143)], r)

    def test_sigterm_while_passcommand_runs_exits_143_and_ends_the_command(self):
        # Only borgcheck is signalled (a service manager stopping it): it must not wait for
        # the command, nor leave it running.
        proc = self.start_passcommand_wait()
        proc.send_signal(signal.SIGTERM)
        late = self.wait_for_exit(proc, "running BORG_PASSCOMMAND", lambda: os.killpg(proc.pid, signal.SIGKILL))
        self.expect_signal_exit(proc, signal.SIGTERM, late)
        time.sleep(0.2)
        with self.assertRaises(ProcessLookupError, msg="BORG_PASSCOMMAND is still running after borgcheck exited"):
            os.killpg(proc.pid, 0)  # the command ran in borgcheck's process group

    def test_ctrl_c_while_passcommand_runs_exits_130(self):
        # Ctrl-C on a terminal signals the whole foreground process group: borgcheck and the
        # BORG_PASSCOMMAND it runs.
        proc = self.start_passcommand_wait()
        os.killpg(proc.pid, signal.SIGINT)
        late = self.wait_for_exit(proc, "running BORG_PASSCOMMAND", lambda: os.killpg(proc.pid, signal.SIGKILL))
        self.expect_signal_exit(proc, signal.SIGINT, late)


if __name__ == "__main__":
    cs.main()
