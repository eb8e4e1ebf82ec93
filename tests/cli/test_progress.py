"""Text progress (docs/cli.md, "Progress"): on a terminal, one labelled line redrawn in place
that fits the width (40 and 120 columns, and a resize with SIGWINCH mid-run) and leaves no
wrapped or stale line behind; off a terminal, plain lines every --progress-interval seconds with
no control characters.

The terminal is a pseudo-terminal (python's pty support) that is borgcheck's controlling
terminal and its stderr; what borgcheck writes to it is replayed through a small terminal model
(auto-wrap at the last column, carriage return, erase to end of line) to see the screen a user
would see.
"""

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase, RunResult  # noqa: E402

PLAIN_LINE = re.compile(r"^borgcheck: progress \d+\.\d% [0-9.]+ (?:B|KiB|MiB|GiB) of [0-9.]+ (?:B|KiB|MiB|GiB), "
                        r"[0-9,]+ of [0-9,]+ objects, (?:-|[0-9.]+ (?:B|KiB|MiB|GiB))/s, elapsed \d+:\d\d:\d\d, "
                        r"ETA (?:-|\d+:\d\d:\d\d)$")


# Every read of the repository sleeps first (a test-only hook): the 1 GiB long repository then
# takes seconds to check however fast this machine is, the 2 GiB one (half the delay) too.
SLOW = cs.slow_reads(10000)
SLOW_PLAIN = cs.slow_reads(5000)


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Screen:
    """A terminal of `cols` columns: printable bytes, CR, LF, ESC [ K, auto-wrap (a character
    written after the last column goes to the next line, as xterm and the Linux console do)."""

    def __init__(self, cols):
        self.cols, self.rows, self.row, self.col, self.pending_wrap = cols, [[]], 0, 0, False
        self.max_row = 0

    def feed(self, data):
        i = 0
        while i < len(data):
            c = data[i]
            if c == 0x1B:
                m = re.match(rb"\x1b\[(\d*)K", data[i:])
                assert m, "unexpected escape sequence %r" % data[i:i + 8]
                del self.rows[self.row][self.col:]
                self.pending_wrap = False
                i += len(m.group(0))
                continue
            if c == 0x0D:
                self.col, self.pending_wrap = 0, False
            elif c == 0x0A:
                self.newline()
            else:
                assert 0x20 <= c < 0x7F, "control byte %#x" % c
                if self.pending_wrap:
                    self.newline()
                line = self.rows[self.row]
                line.extend(b" " * (self.col - len(line)))
                if self.col < len(line):
                    line[self.col] = c
                else:
                    line.append(c)
                if self.col == self.cols - 1:
                    self.pending_wrap = True
                else:
                    self.col += 1
            i += 1

    def newline(self):
        self.row, self.col, self.pending_wrap = self.row + 1, 0, False
        while len(self.rows) <= self.row:
            self.rows.append([])
        self.max_row = max(self.max_row, self.row)

    def text(self):
        return [bytes(r).decode().rstrip() for r in self.rows]


class ProgressTestCase(CliTestCase):
    def run_on_terminal(self, args, cols, resize_to=None, env=None):
        """Runs borgcheck with a pseudo-terminal of `cols` columns as controlling terminal and
        stderr (stdout a pipe). With resize_to, the terminal is resized once the first
        progress line is drawn. Returns (RunResult, terminal bytes, terminal bytes after the
        resize), without the test hooks' notes."""
        master, slave = os.openpty()
        set_size(slave, 24, cols)
        before = cs.snapshot(self.tmp)

        def make_controlling():
            fcntl.ioctl(2, termios.TIOCSCTTY, 0)

        proc = subprocess.Popen([cs.BINARY] + args, env=self.environment(dict(env or {}, TERM="xterm")), cwd=self.cwd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                                start_new_session=True, preexec_fn=make_controlling)
        os.close(slave)
        proc.snapshot_before, proc.cli_args = before, args
        self.addCleanup(self._reap, proc)
        seen, after, resized = b"", b"", False
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not data:
                    break
                if resized:
                    after += data
                seen += data
                if resize_to and not resized and b"ETA" in seen:
                    set_size(master, 24, resize_to)  # the kernel sends SIGWINCH to the foreground group
                    os.kill(proc.pid, signal.SIGWINCH)
                    resized = True
            elif proc.poll() is not None:
                break
        out = proc.stdout.read()
        proc.wait(timeout=60)
        os.close(master)
        r = self.check_finished(proc, RunResult(args, proc.returncode, out, b""))
        return r, cs.without_hook_notes(seen), after

    def assert_fits(self, data, cols):
        """Every redraw (the text between two "\\r\\x1b[K") is one line shorter than the terminal."""
        self.assertTrue(data.startswith(b"\r\x1b[K"), data[:80])
        self.assertTrue(data.endswith(b"\r\x1b[K"), data[-80:])
        draws = [d for d in data.split(b"\r\x1b[K") if d]
        for d in draws:
            self.assertLessEqual(len(d), cols - 1, d)
            self.assertNotIn(b"\n", d)
        return draws


class OnATerminal(ProgressTestCase):
    def setUp(self):
        super().setUp()
        self.repo = cs.make_long_repo(self)

    def check_width(self, cols):
        # --progress auto: a terminal. Slow reads: a run of seconds on any machine.
        r, tty, _ = self.run_on_terminal(["--threads", "1", self.repo], cols, env=SLOW)
        self.assertEqual(r.rc, cs.EXIT_INTEGRITY_ERRORS, r)  # the long repository's index finding
        draws = self.assert_fits(tty, cols)
        self.assertGreaterEqual(len(draws), 3, tty)  # a run of seconds is redrawn several times
        screen = Screen(cols)
        screen.feed(tty)
        self.assertEqual(screen.max_row, 0, "the progress line wrapped:\n" + "\n".join(screen.text()))
        self.assertEqual(screen.text(), [""])  # cleared at the end: nothing stale is left
        return draws

    def test_120_columns_the_full_labelled_line(self):
        draws = self.check_width(120)
        for d in draws:
            self.assertRegex(d.decode(), r"^borgcheck: \d+\.\d% .* of .*, \d[\d,]* of 102 objects, .*/s, "
                                         r"elapsed \d:\d\d:\d\d, ETA (?:-|\d+:\d\d:\d\d)$")
        self.assertTrue(any(re.search(rb"ETA \d", d) for d in draws[1:]), draws)  # an ETA once the rate is known

    def test_40_columns_a_shorter_layout(self):
        for d in self.check_width(40):
            self.assertRegex(d.decode(), r"^\d+\.\d% (?:\S+ \S+ of \S+ \S+, |\S+ \S+/\S+ \S+ )?ETA "
                                         r"(?:-|\d+:\d\d:\d\d)$")

    def test_resize_mid_run_is_followed(self):
        r, tty, after = self.run_on_terminal(["--threads", "1", self.repo], 120, resize_to=40, env=SLOW)
        self.assertEqual(r.rc, cs.EXIT_INTEGRITY_ERRORS, r)
        self.assert_fits(tty, 120)
        later = [d for d in after.split(b"\r\x1b[K") if d]
        self.assertTrue(later, "no redraw after the resize: %r" % tty[-200:])
        # The first draw after the resize may have been on its way; every later one fits 40.
        for d in later[1:]:
            self.assertLessEqual(len(d), 39, d)
        self.assertTrue(any(len(d) > 60 for d in tty.split(b"\r\x1b[K")), tty[:300])  # it was wide before

    def test_quiet_and_json_draw_nothing_on_the_terminal(self):
        for args in (["-q"], ["--json"], ["--progress=never"]):
            with self.subTest(args=args):
                r, tty, _ = self.run_on_terminal(args + ["--threads", "2", self.repo], 80)
                self.assertEqual((r.rc, tty), (cs.EXIT_INTEGRITY_ERRORS, b""), r)


class OffATerminal(ProgressTestCase):
    def setUp(self):
        super().setUp()
        self.repo = cs.make_long_repo(self, entries=100)  # about 2 GiB: a run of seconds

    def plain_lines(self, r):
        self.assertNotIn("\r", r.stderr)
        self.assertNotIn("\x1b", r.stderr)
        lines = cs.without_hook_notes(r.stderr).splitlines()
        for line in lines:
            self.assertRegex(line, PLAIN_LINE)
        return lines

    def test_plain_lines_every_interval_from_the_flag_or_the_environment(self):
        for args, env in ((["-p", "--progress-interval", "0.2"], {}),
                          (["--progress"], {"BORGCHECK_PROGRESS_INTERVAL": "0.2"}),
                          (["--progress=always", "--progress-interval", "0.2"], {"BORGCHECK_PROGRESS_INTERVAL": "999"})):
            with self.subTest(args=args, env=env):
                r = self.run_borgcheck(args + ["--threads", "1", self.repo], dict(env, **SLOW_PLAIN), timeout=240)
                self.assertEqual(r.rc, cs.EXIT_INTEGRITY_ERRORS, r)
                lines = self.plain_lines(r)
                self.assertGreaterEqual(len(lines), 2, r)
                elapsed = [int(a) * 3600 + int(b) * 60 + int(c)
                           for a, b, c in (re.search(r"elapsed (\d+):(\d\d):(\d\d)", x).groups() for x in lines)]
                self.assertEqual(elapsed, sorted(elapsed))
                self.assertIn(": integrity-errors: ", r.stdout)  # the report is unchanged on stdout

    def test_default_interval_is_quiet_for_a_short_run(self):
        # 60 s by default: a run of seconds writes no progress line into a log.
        r = self.run_borgcheck(["-p", "--threads", "2", self.repo], timeout=240)
        self.assertEqual((r.rc, r.stderr), (cs.EXIT_INTEGRITY_ERRORS, ""), r)

    def test_bad_intervals_exit_2(self):
        for args, env, needle in (
                (["--progress-interval", "0"], {}, "--progress-interval must be a number of seconds between 0.1 and 86400"),
                (["--progress-interval", "100000"], {}, "--progress-interval must be"),
                ([], {"BORGCHECK_PROGRESS_INTERVAL": "soon"}, "BORGCHECK_PROGRESS_INTERVAL must be a number"),
                ([], {"BORGCHECK_PROGRESS_INTERVAL": "-1"}, "BORGCHECK_PROGRESS_INTERVAL must be a number")):
            with self.subTest(args=args, env=env):
                r = self.run_borgcheck(args + [self.repo], env)
                self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN, needle)


if __name__ == "__main__":
    cs.main()
