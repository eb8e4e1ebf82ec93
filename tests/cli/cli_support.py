"""Shared support for borgcheck's end-to-end CLI tests (tests/cli/test_*.py).

Every test script is run by CTest as

    python3 test_<concern>.py BORGCHECK_BINARY SHARED_DIR [unittest arguments]

and calls cli_support.main(), which takes the first two arguments and hands the rest to
unittest. By hand, BORGCHECK_BINARY and BORGCHECK_SHARED_DIR in the environment work too.

The contract every test relies on (CliTestCase):
  * Each test gets its own temporary folder holding the repository copies it uses (the
    fixtures under SHARED_DIR are read-only and never used in place; the tests run as any
    user, root included, so "read-only" permissions alone would not protect them), a HOME
    and a working directory for borgcheck.
  * Every borgcheck run gets a minimal environment: PATH, HOME (the test's own, empty), LC_ALL,
    sanitizer options if set, and what the test passes; no BORG_* variable leaks in from the
    caller. It runs in a new session, so it has no controlling terminal and cannot prompt.
  * Every run is bracketed by a snapshot of the whole temporary folder: kind, size, mtime_ns
    and sha256 of every file, kind and mtime_ns of every directory. A run that changes,
    adds or removes anything (a lock, a cache, a rewritten config or index) fails its test.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

sys.dont_write_bytecode = True

BINARY = os.environ.get("BORGCHECK_BINARY", "")
SHARED = os.environ.get("BORGCHECK_SHARED_DIR", "")
DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs")

PASSPHRASE = "test"  # every encrypted fixture's passphrase (fixtures README)

# Chunk ids, locations and sizes of the fixtures, from fixtures/borg1/EXPECTED.tsv and the
# corruption records in fixtures/borg1/expected/.
MAC_REPOKEY_CHUNK = "97f70ee6c177b4921d2b27bc0ed943c35d98338c1e9f0c6a566cf3d075bf69da"

# Exit codes (checker/report/exit_codes.h, docs/cli.md).
EXIT_OK = 0
EXIT_WARNINGS = 1
EXIT_COULD_NOT_RUN = 2
EXIT_NO_REPO = 13
EXIT_NOT_A_REPO = 15
EXIT_KEY_FILE_INVALID = 40
EXIT_KEY_FILE_MISMATCH = 41
EXIT_KEY_FILE_NOT_FOUND = 42
EXIT_REPO_KEY_NOT_FOUND = 44
EXIT_NO_PASSPHRASE = 50
EXIT_PASSCOMMAND_FAILED = 51
EXIT_WRONG_PASSPHRASE = 52
EXIT_PASSWORD_RETRIES_EXCEEDED = 53
EXIT_LOCK_HELD = 73
EXIT_INTEGRITY_ERRORS = 90
EXIT_SIGNAL_BASE = 128

# Environment variables passed through to borgcheck when the caller sets them.
_PASSTHROUGH = ("ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "LSAN_OPTIONS", "LLVM_PROFILE_FILE")


def main():
    global BINARY, SHARED
    args = sys.argv[1:]
    if len(args) >= 2 and not args[0].startswith("-"):
        BINARY, SHARED = args[0], args[1]
        args = args[2:]
    if not BINARY or not SHARED:
        sys.exit("usage: %s BORGCHECK_BINARY SHARED_DIR [unittest args]" % sys.argv[0])
    BINARY = os.path.abspath(BINARY)
    SHARED = os.path.abspath(SHARED)
    if not os.access(BINARY, os.X_OK):
        sys.exit("borgcheck binary %s is missing or not executable (build the borgcheck target)" % BINARY)
    if not os.path.isdir(fixture_path("")):
        sys.exit("no borg1 fixtures under %s" % SHARED)
    unittest.main(argv=[sys.argv[0]] + args, verbosity=2)


def fixture_path(rel):
    return os.path.join(SHARED, "fixtures", "borg1", rel)


def expected_rows():
    """fixtures/borg1/EXPECTED.tsv as {repo: (outcome class, [bad chunk ids])}."""
    rows = {}
    with open(fixture_path("EXPECTED.tsv"), encoding="utf-8") as f:
        next(f)
        for line in f:
            cols = line.rstrip("\n").split("\t")
            ids = [] if cols[2] == "-" else cols[2].split(",")
            rows[cols[0]] = (cols[1], ids)
    return rows


def corrupt_cases():
    """The damaged repositories under fixtures/borg1/corrupt (folders only)."""
    root = fixture_path("corrupt")
    return sorted(n for n in os.listdir(root) if os.path.isfile(os.path.join(root, n, "config")))


def make_writable(root):
    """chmod -R u+w: copies of the read-only fixtures must be damageable and removable."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
            st = os.lstat(name)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(name, stat.S_IMODE(st.st_mode) | stat.S_IWUSR)


def _sha256(path, st):
    """sha256 of the file's bytes. A sparse file (fewer blocks than its size needs, as the
    long-run test's 1 GiB segment) is digested as its size plus its data extents (offset,
    length, bytes), skipping the holes: any write to it still changes the digest, and hashing
    a gigabyte of zeros per run is avoided."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        sparse = st.st_blocks * 512 < st.st_size and hasattr(os, "SEEK_DATA")
        if not sparse:
            while True:
                block = f.read(1 << 20)
                if not block:
                    break
                h.update(block)
            return h.hexdigest()
        fd = f.fileno()
        h.update(b"sparse %d\n" % st.st_size)
        pos = 0
        while pos < st.st_size:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole is left
                break
            end = os.lseek(fd, data, os.SEEK_HOLE)
            h.update(b"extent %d %d\n" % (data, end - data))
            f.seek(data)
            left = end - data
            while left:
                block = f.read(min(left, 1 << 20))
                if not block:
                    break
                h.update(block)
                left -= len(block)
            pos = end
    return "sparse:" + h.hexdigest()


def snapshot(root):
    """{relative path: state} for everything under root (root itself is ".")."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in [dirpath] + [os.path.join(dirpath, n) for n in sorted(dirnames + filenames)]:
            rel = os.path.relpath(name, root)
            if rel in state:
                continue
            st = os.lstat(name)
            if stat.S_ISDIR(st.st_mode):
                state[rel] = ("dir", st.st_mtime_ns)
            elif stat.S_ISREG(st.st_mode):
                state[rel] = ("file", st.st_size, st.st_mtime_ns, _sha256(name, st))
            elif stat.S_ISLNK(st.st_mode):
                state[rel] = ("symlink", os.readlink(name))
            else:
                state[rel] = ("other", stat.S_IFMT(st.st_mode), st.st_mtime_ns)
    return state


def snapshot_diff(before, after):
    lines = []
    for rel in sorted(set(before) | set(after)):
        if rel not in before:
            lines.append("added:   %s %r" % (rel, after[rel]))
        elif rel not in after:
            lines.append("removed: %s %r" % (rel, before[rel]))
        elif before[rel] != after[rel]:
            lines.append("changed: %s %r -> %r" % (rel, before[rel], after[rel]))
    return lines


class RunResult:
    """One finished run: rc, stdout/stderr as text, and stdout_bytes exactly as written."""

    def __init__(self, args, rc, stdout, stderr):
        self.args, self.rc = args, rc
        self.stdout_bytes = stdout
        self.stdout = stdout.decode("utf-8", "replace")
        self.stderr = stderr.decode("utf-8", "replace")

    def __repr__(self):
        return "borgcheck %s -> rc %r\nstdout:\n%s\nstderr:\n%s" % (
            " ".join(self.args), self.rc, self.stdout, self.stderr)


def parse_json_lines(test, result):
    """Every stdout line is one JSON object with a string `type`; returns the list."""
    records = []
    test.assertTrue(result.stdout.endswith("\n") or result.stdout == "", result)
    # Records end at "\n" only: str.splitlines() would also split inside a string holding a
    # raw U+0085, U+2028 or U+2029, which JSON leaves unescaped (a borg2 archive name may).
    for line in result.stdout.split("\n")[:-1]:
        try:
            rec = json.loads(line)
        except ValueError as e:
            test.fail("stdout line is not JSON (%s): %r\n%r" % (e, line, result))
        test.assertIsInstance(rec, dict, line)
        test.assertIsInstance(rec.get("type"), str, line)
        records.append(rec)
    return records


class CliTestCase(unittest.TestCase):
    """A test with its own temporary folder; every borgcheck run in it is checked read-only."""

    maxDiff = None

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="borgcheck-cli-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.home = os.path.join(self.tmp, "home")
        self.cwd = os.path.join(self.tmp, "cwd")
        os.mkdir(self.home)
        os.mkdir(self.cwd)

    # -- fixtures -------------------------------------------------------------------------

    def copy_fixture(self, rel, name=None):
        """Copies fixtures/borg1/<rel> (a repository or a keys folder) into the test folder."""
        dest = os.path.join(self.tmp, name or rel.replace("/", "_"))
        shutil.copytree(fixture_path(rel), dest, symlinks=True)
        make_writable(dest)
        return dest

    def copy_generation(self, where, name=None):
        """A writable copy of <shared>/fixtures/<where>, any generation ("borg2b5/repokey-aes-ocb")."""
        dest = os.path.join(self.tmp, name or where.replace("/", "_"))
        shutil.copytree(os.path.join(SHARED, "fixtures", where), dest, symlinks=True)
        make_writable(dest)
        return dest

    @staticmethod
    def config_id(repo):
        """The repository id in a borg 1.x / 2.0.0b5 repository's INI config."""
        with open(os.path.join(repo, "config")) as f:
            return re.search(r"\nid = ([0-9a-f]{64})\n", f.read()).group(1)

    def copy_keys(self, key_set="v1.2.4"):
        return self.copy_fixture(key_set + "/keys", key_set + "_keys")

    # -- running ----------------------------------------------------------------------------

    def environment(self, env):
        # TZ=UTC: the test hooks' dates (BORGCHECK_TEST_TODAY: local noon) and the reports (UTC)
        # agree on the day whatever the machine's zone.
        full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.home, "LC_ALL": "C", "TZ": "UTC"}
        for k in _PASSTHROUGH:
            if k in os.environ:
                full[k] = os.environ[k]
        for k, v in (env or {}).items():
            if v is None:
                full.pop(k, None)
            else:
                full[k] = v
        return full

    def start(self, args, env=None, pass_fds=()):
        """Starts borgcheck with stdout/stderr pipes; finish() must be called on the result."""
        before = snapshot(self.tmp)
        proc = subprocess.Popen([BINARY] + list(args), env=self.environment(env), cwd=self.cwd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, pass_fds=pass_fds, start_new_session=True)
        proc.snapshot_before = before
        proc.cli_args = list(args)
        self.addCleanup(self._reap, proc)
        return proc

    def finish(self, proc, timeout=60):
        out, err = proc.communicate(timeout=timeout)
        result = RunResult(proc.cli_args, proc.returncode, out, err)
        return self.check_finished(proc, result)

    def check_finished(self, proc, result):
        """The read-only check for a run whose output the test collected itself."""
        self.assert_unchanged(proc.snapshot_before, result)
        return result

    @staticmethod
    def _reap(proc):
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f:
                f.close()

    def run_borgcheck(self, args, env=None, pass_fds=(), timeout=60):
        return self.finish(self.start(args, env, pass_fds), timeout)

    def open_to_nobody(self, *more):
        """As root: makes the test folder (and the folders `more`) readable, not writable, by
        everyone, for run_unprivileged; the caller then takes away what the test needs
        unreadable."""
        if os.geteuid() != 0:
            return
        for dirpath, dirnames, filenames in (w for top in (self.tmp,) + more for w in os.walk(top)):
            os.chmod(dirpath, 0o755)
            for n in filenames:
                p = os.path.join(dirpath, n)
                if not os.path.islink(p):
                    os.chmod(p, 0o644)

    def run_unprivileged(self, args, env=None, timeout=60):
        """Runs borgcheck where file permissions apply: as nobody (setpriv) when the tests run
        as root (root reads every file), else as the current user. No read-only snapshot: the
        caller's chmods are the only change."""
        cmd = [BINARY] + list(args)
        if os.geteuid() == 0:
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
        p = subprocess.run(cmd, env=self.environment(env), cwd="/", stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=timeout)
        return RunResult(list(args), p.returncode, p.stdout, p.stderr)

    def assert_unchanged(self, before, result):
        diff = snapshot_diff(before, snapshot(self.tmp))
        if diff:
            self.fail("borgcheck wrote into the test folder (repository copies, HOME, cwd):\n  " +
                      "\n  ".join(diff) + "\n%r" % result)

    # -- assertions -------------------------------------------------------------------------

    def assert_rc(self, result, rc):
        self.assertEqual(result.rc, rc, result)

    def assert_error_exit(self, result, rc, *needles):
        """A could-not-run stop in text mode: exit code, nothing on stdout, one stderr line
        "borgcheck: <message>" containing every needle."""
        self.assert_rc(result, rc)
        self.assertEqual(result.stdout, "", result)
        lines = result.stderr.splitlines()
        self.assertEqual(len(lines), 1, result)
        self.assertTrue(lines[0].startswith("borgcheck: "), result)
        for n in needles:
            self.assertIn(n, lines[0], result)
        return lines[0]

    def json_records(self, result):
        return parse_json_lines(self, result)


# The text summary line (checker/report/text_report.cc, FormatSummaryLine) ends in the
# elapsed time, which varies from run to run.
_PHASE_TIME = re.compile(r"^(phase [a-z+ ]+: )[0-9]+\.[0-9]+s$", re.M)
_SUMMARY_TIME = re.compile(r"^(.*: (?:ok|warnings|integrity-errors): .* warnings?), "
                           r"(?:\d+\.\d\ds|\d+m\d\ds|\d+h\d\dm\d\ds)$", re.M)


def mask_times(text):
    """Replaces the elapsed time at the end of text summary lines, and the seconds of -v's
    `phase <name>: <seconds>s` lines, by <T>."""
    text = _PHASE_TIME.sub(lambda m: m.group(1) + "<T>", text)
    return _SUMMARY_TIME.sub(lambda m: m.group(1) + ", <T>", text)


# A long run (tests/cli/test_signals.py, test_progress.py): the fixtures are checked in
# milliseconds. A copy of v1.2.4/repos/none whose last committed segment (29, which held only
# the COMMIT) is rewritten as 50 identical 20 MiB PUT entries of zero bytes, then the COMMIT:
# a sparse file of about 1 GiB that takes no disk space, and whose entries are all valid
# (their CRC is right). index.29 does not list their chunk id, so the keyless check reads
# every byte and ends with one index finding.
ENTRY_SIZE = 20971479 + 41  # MAX_DATA_SIZE + PUT header: the largest entry borg writes
ENTRIES = 50
FILLER_ID = bytes(range(32))
COMMIT = bytes([0x40, 0xF4, 0x3C, 0x25, 0x09, 0x00, 0x00, 0x00, 0x02])
SEGMENT_29_SIZE = 8 + ENTRIES * ENTRY_SIZE + len(COMMIT)


def make_long_repo(test, entries=ENTRIES):
    """The long-run repository; `entries` 20 MiB entries (50: about 1 GiB, a run of seconds)."""
    repo = test.copy_fixture("v1.2.4/repos/none", "long")
    seg = os.path.join(repo, "data", "0", "29")
    with open(seg, "rb") as f:
        test.assertEqual(f.read(), b"BORG_SEG" + COMMIT)
    body = struct.pack("<IB", ENTRY_SIZE, 0) + FILLER_ID
    crc = zlib.crc32(bytes(ENTRY_SIZE - len(body) - 4), zlib.crc32(body))
    header = struct.pack("<I", crc) + body
    with open(seg, "wb") as f:
        f.write(b"BORG_SEG")
        for i in range(entries):
            f.seek(8 + i * ENTRY_SIZE)
            f.write(header)
        f.seek(8 + entries * ENTRY_SIZE)
        f.write(COMMIT)
    test.assertEqual(os.path.getsize(seg), 8 + entries * ENTRY_SIZE + len(COMMIT))
    return repo


# The test-only hooks (checker/cli/partial_args.h, docs/nightly.md section 7). A slow disk makes
# a long run last seconds on any machine, however fast it reads from the page cache: the
# progress tests need several redraws and a known rate, which a timed run cannot promise.
TEST_HOOKS = {"BORGCHECK_TEST_HOOKS": "only-for-borgcheck-tests"}
_HOOK_NOTE = re.compile(rb"borgcheck: TEST hook [^\n]*\n")


def slow_reads(delay_us):
    """The environment that makes every repository read sleep `delay_us` microseconds first."""
    return dict(TEST_HOOKS, BORGCHECK_TEST_READ_DELAY_US=str(delay_us))


def without_hook_notes(data):
    """stderr bytes or text without the leading 'borgcheck: TEST hook ...' lines the binary
    prints while a hook is in effect."""
    if isinstance(data, str):
        return without_hook_notes(data.encode()).decode()
    while True:
        m = _HOOK_NOTE.match(data)
        if not m:
            return data
        data = data[m.end():]


