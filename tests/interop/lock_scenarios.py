"""Stale and live borg locks made by real borg processes, and what borgcheck says about them.

Shared by tests/interop/borg1_lock_test.py (borg 1.2.4) and tests/borg2b5/borg2b5_lock_test.py
(borg2 2.0.0b5): both generations write the same lock.exclusive/ and lock.roster
(checker/repo/borg_lock.h, docs/formats.md "Locks"). A generation is described by a small
adapter (the command lines that differ); the scenarios are the same:

  stale:       `borg create --paths-from-stdin` holds the lock while it waits for paths on a pipe
               we keep open; SIGKILL leaves lock.exclusive/<host id>.<pid>-0 behind, as a user
               gets it (a killed cron job, an OOM kill). borgcheck --verify-data: exit 1, one
               warning naming that entry, the process and borg break-lock, every object
               verified, the repository byte for byte unchanged (lock included). Then borg itself
               takes the repository over ("Killed stale lock"): borg and borgcheck agree that it
               was this host's and dead.
  live:        `borg with-lock REPO sh -c "cat >/dev/null"` holds the lock until we close its stdin:
               exit 73 naming the process (borg is running), --json "lock-held", --bypass-lock
               checks (exit 0); after the holder finishes, exit 0.
  other host:  the killed create run with BORG_HOST_ID=<another id>: exit 73 (borg cannot tell
               either: borg itself times out on it), and with that BORG_HOST_ID given to
               borgcheck too, the lock is this host's and stale again (exit 1).

The host id borgcheck computes must be borg's to the character: every message is compared with
the entry name borg wrote.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from borg_generations import clean_environment, snapshot  # tests/interop, on sys.path for the tests

EXIT_OK = 0
EXIT_WARNINGS = 1
EXIT_LOCK_HELD = 73
BYPASS = ("or pass --bypass-lock to check anyway (results may then report changes in progress)")


class Generation:
    """The command lines of one borg generation. Subclasses fill them in."""
    name = None        # "borg1" / "borg2-b5": the summary's `format`
    comm = None        # /proc/<pid>/comm of the borg process ("borg", "borg2")

    def init(self, repo):
        raise NotImplementedError

    def create(self, repo, archive, src):
        raise NotImplementedError

    def create_from_stdin(self, repo, archive):
        raise NotImplementedError

    def with_lock(self, repo, command):
        raise NotImplementedError

    def list(self, repo, lock_wait=None):
        raise NotImplementedError


def environment(work):
    """No BORG_* or XDG_* settings from the caller; HOME and BORG_BASE_DIR inside `work`; the
    answers to borg's questions (the tests check copies of one repository: "relocated")."""
    env = clean_environment()
    env.update({"HOME": os.path.join(work, "home"), "BORG_BASE_DIR": os.path.join(work, "base"),
                "BORG_PASSPHRASE": "test", "BORG_DISPLAY_PASSPHRASE": "no",
                "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes", "LC_ALL": "C.UTF-8"})
    os.makedirs(env["HOME"], exist_ok=True)
    return env


def wait_for(what, predicate, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out after %ds waiting for %s" % (timeout, what))


def runs_cat(pid):
    """Whether a child of `pid` (or its child) is `cat`: borg with-lock has finished its own
    writes and runs the command."""
    parents = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            comm = st[st.index("(") + 1:st.rindex(")")]
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            parents[int(d)] = (ppid, comm)
    return any(comm == "cat" and (ppid == pid or parents.get(ppid, (0, ""))[0] == pid)
               for ppid, comm in parents.values())


def lock_entries(repo):
    try:
        return sorted(os.listdir(os.path.join(repo, "lock.exclusive")))
    except FileNotFoundError:
        return []


def entry_of(repo, pid):
    """The lock.exclusive entry borg process `pid` wrote, or None."""
    for name in lock_entries(repo):
        if re.fullmatch(r".+\.%d-0" % pid, name):
            return name
    return None


def reading_stdin(pid):
    """Whether process `pid` is blocked in read(0, ...) (/proc/<pid>/syscall: number 0, fd 0)."""
    try:
        with open("/proc/%d/syscall" % pid) as f:
            fields = f.read().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] == "0" and int(fields[1], 16) == 0


class LockScenarios:
    """Mixed into a unittest.TestCase by the generation's test file, which sets GEN (a
    Generation), BORGCHECK and ENV (the environment for borg and borgcheck)."""
    GEN = None
    BORGCHECK = None
    ENV = None
    WORK = None       # a temporary directory per test class
    PRISTINE = None   # a repository with one archive, never locked

    @classmethod
    def setUpClass(cls):
        cls.WORK = tempfile.mkdtemp(prefix="borgcheck-lock-")
        src = os.path.join(cls.WORK, "input")
        os.makedirs(src)
        with open(os.path.join(src, "text.txt"), "w") as f:
            f.write("".join("line %d of a small archive\n" % i for i in range(3000)))
        with open(os.path.join(src, "bytes.bin"), "wb") as f:
            f.write(bytes(range(256)) * 64)
        cls.PRISTINE = os.path.join(cls.WORK, "pristine")
        cls.run_ok(cls.GEN.init(cls.PRISTINE))
        cls.run_ok(cls.GEN.create(cls.PRISTINE, "a1", src))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.WORK, ignore_errors=True)

    @classmethod
    def run_ok(cls, argv, env=None):
        p = subprocess.run(argv, env=env or cls.ENV, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=300)
        if p.returncode != 0:
            raise AssertionError("%s failed (rc %d):\n%s" % (" ".join(argv), p.returncode, p.stderr))
        return p

    def copy(self, name):
        dst = os.path.join(self.WORK, name)
        shutil.copytree(self.PRISTINE, dst, copy_function=shutil.copy2, symlinks=True)
        return dst

    def env(self, **extra):
        env = dict(self.ENV)
        env.update(extra)
        return env

    def borgcheck(self, repo, args, env=None):
        """Runs borgcheck and asserts that it changed nothing in the repository."""
        before = snapshot(repo)
        p = subprocess.run([self.BORGCHECK] + list(args) + [repo], env=env or self.ENV,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        after = snapshot(repo)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        self.assertEqual(changed, [], "borgcheck changed the repository: %s" % "; ".join(
            "%s: %s -> %s" % (k, before.get(k), after.get(k)) for k in changed))
        return p

    def records(self, proc):
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    def kill_create(self, repo, env=None):
        """Starts borg create --paths-from-stdin, waits until it holds the lock and waits for
        paths on stdin, SIGKILLs it; returns (pid, lock entry name)."""
        p = subprocess.Popen(self.GEN.create_from_stdin(repo, "killed"), env=env or self.ENV,
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            name = wait_for("borg create (pid %d) to take the lock" % p.pid,
                            lambda: p.poll() is None and entry_of(repo, p.pid))
            wait_for("borg create (pid %d) to read paths from stdin" % p.pid,
                     lambda: p.poll() is not None or reading_stdin(p.pid))
            if p.poll() is not None:
                self.fail("borg create ended early (rc %d): %s" % (p.returncode, p.stderr.read()))
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdin.close()
            p.stderr.close()
        self.assertEqual(p.returncode, -signal.SIGKILL)
        self.assertEqual(lock_entries(repo), [name], "the killed borg left its lock behind")
        with open(os.path.join(repo, "lock.roster")) as f:
            roster = json.load(f)
        self.assertEqual(roster.get("exclusive"), [[name.rsplit(".", 1)[0], p.pid, 0]], roster)
        return p.pid, name

    def assert_stale_verdict(self, repo, pid, name, host, env=None):
        """borgcheck --verify-data --json on a repository whose only problem is the stale lock."""
        p = self.borgcheck(repo, ["--verify-data", "--json"], env)
        self.assertEqual(p.returncode, EXIT_WARNINGS, p.stdout + p.stderr)
        recs = self.records(p)
        findings = [r for r in recs if r["type"] == "finding"]
        self.assertEqual(len(findings), 1, findings)
        f = findings[0]
        self.assertEqual((f["severity"], f["stage"]), ("warning", "lock"))
        self.assertEqual(f["location"], "[lock.exclusive/%s]" % name)
        self.assertIsNone(f.get("chunk_id"))
        self.assertEqual(
            f["message"],
            "stale lock: lock.exclusive/%s names process %d on this host (%s), which is not "
            "running (a borg process was killed or crashed while it held the lock). The "
            "repository was checked anyway. borg removes a stale lock itself on its next command, "
            "or `borg break-lock %s` removes it now; borgcheck never writes to a repository and "
            "leaves it alone" % (name, pid, host, repo))
        summary = [r for r in recs if r["type"] == "summary"][0]
        self.assertEqual((summary["format"], summary["errors"], summary["warnings"], summary["exit_code"]),
                         (self.GEN.name, 0, 1, EXIT_WARNINGS))
        self.assertGreater(summary["objects_total"], 0)
        self.assertEqual(summary["objects_verified"], summary["objects_total"])

    def test_a_killed_create_leaves_a_stale_lock_that_is_checked_with_a_warning(self):
        repo = self.copy("stale")
        pid, name = self.kill_create(repo)
        host = name.rsplit(".", 1)[0]
        self.assert_stale_verdict(repo, pid, name, host)
        # Text mode: the same warning, on stdout, and exit 1.
        p = self.borgcheck(repo, [])
        self.assertEqual(p.returncode, EXIT_WARNINGS, p.stdout + p.stderr)
        self.assertIn("stale lock: lock.exclusive/%s names process %d on this host (%s)" % (name, pid, host),
                      p.stdout)
        # borg agrees: the lock is this host's and dead, so it takes the repository over.
        b = self.run_ok(self.GEN.list(repo))
        self.assertIn("Killed stale lock %s" % name, b.stderr)
        self.assertEqual(lock_entries(repo), [])
        self.assertFalse(os.path.exists(os.path.join(repo, "lock.exclusive")))
        p = self.borgcheck(repo, ["--verify-data"])
        self.assertEqual(p.returncode, EXIT_OK, p.stdout + p.stderr)

    def test_a_running_lock_holder_refuses_with_73(self):
        repo = self.copy("live")
        holder = subprocess.Popen(self.GEN.with_lock(repo, ["sh", "-c", "cat >/dev/null"]), env=self.ENV,
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            name = wait_for("borg with-lock (pid %d) to take the lock" % holder.pid,
                            lambda: holder.poll() is None and entry_of(repo, holder.pid))
            wait_for("borg with-lock (pid %d) to run its command" % holder.pid,
                     lambda: holder.poll() is not None or runs_cat(holder.pid))
            host = name.rsplit(".", 1)[0]
            p = self.borgcheck(repo, ["--verify-data"])
            self.assertEqual(p.returncode, EXIT_LOCK_HELD, p.stdout + p.stderr)
            self.assertEqual(p.stdout, "")
            self.assertEqual(
                p.stderr,
                "borgcheck: repository %s is locked by borg: lock.exclusive/%s names process %d (%s) "
                "on this host (%s), which is running: a backup, prune or compact may be writing. Run "
                "again when it has finished, %s\n" % (repo, name, holder.pid, self.GEN.comm, host, BYPASS))
            p = self.borgcheck(repo, ["--json"])
            self.assertEqual(p.returncode, EXIT_LOCK_HELD)
            err = [r for r in self.records(p) if r["type"] == "error"]
            self.assertEqual([(e["code"], e["exit_code"]) for e in err], [("lock-held", EXIT_LOCK_HELD)])
            # --bypass-lock checks while borg writes (with-lock rewrites the manifest into a new,
            # still uncommitted segment first): no error, nothing about the lock.
            p = self.borgcheck(repo, ["--bypass-lock", "--verify-data", "--json"])
            recs = self.records(p)
            summary = [r for r in recs if r["type"] == "summary"][0]
            self.assertEqual((summary["errors"], p.returncode), (0, EXIT_WARNINGS if summary["warnings"] else EXIT_OK))
            self.assertEqual([f for f in recs if f["type"] == "finding" and "lock" in f["message"]], [])
        finally:
            holder.stdin.close()  # cat ends, borg commits and releases the lock
            holder.wait(timeout=120)
            holder.stderr.close()
        self.assertEqual(holder.returncode, 0)
        self.assertEqual(lock_entries(repo), [])
        p = self.borgcheck(repo, ["--verify-data"])
        self.assertEqual(p.returncode, EXIT_OK, p.stdout + p.stderr)

    def test_another_hosts_lock_is_held_unless_borgcheck_is_that_host(self):
        repo = self.copy("elsewhere")
        other = "lock-test-other-host@1"
        pid, name = self.kill_create(repo, self.env(BORG_HOST_ID=other))
        self.assertEqual(name, "%s.%d-0" % (other, pid))
        # This host's id, from a lock borg takes here without BORG_HOST_ID.
        probe = self.copy("probe")
        holder = subprocess.Popen(self.GEN.with_lock(probe, ["sh", "-c", "cat >/dev/null"]), env=self.ENV,
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            here = wait_for("borg with-lock to take the lock",
                            lambda: entry_of(probe, holder.pid)).rsplit(".", 1)[0]
        finally:
            holder.stdin.close()
            holder.wait(timeout=120)
        self.assertNotEqual(here, other)
        p = self.borgcheck(repo, ["--verify-data"])
        self.assertEqual(p.returncode, EXIT_LOCK_HELD, p.stdout + p.stderr)
        self.assertEqual(
            p.stderr,
            "borgcheck: repository %s is locked by borg: lock.exclusive/%s names process %d on host "
            "%s, not this one (this host is %s). Neither borg nor borgcheck can tell from here whether "
            "it is still running, so the lock counts as held. If no borg process on %s uses the "
            "repository, `borg break-lock %s` removes it; %s\n" % (repo, name, pid, other, here, other, repo,
                                                                    BYPASS))
        # borg cannot tell either: it waits for the lock and gives up.
        b = subprocess.run(self.GEN.list(repo, lock_wait=1), env=self.ENV, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=300)
        self.assertNotEqual(b.returncode, 0, b.stderr)
        self.assertIn("Failed to create/acquire the lock", b.stderr)
        self.assertEqual(lock_entries(repo), [name])
        # With that host's id, borgcheck (like borg) knows the process is gone.
        self.assert_stale_verdict(repo, pid, name, other, self.env(BORG_HOST_ID=other))
