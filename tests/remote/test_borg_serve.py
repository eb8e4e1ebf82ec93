"""ssh:// repositories through a real `borg serve` (borg 1.2.4), end to end.

    python3 test_borg_serve.py BORGCHECK_BINARY SHARED_DIR [unittest args]

The contract (docs/remote.md, docs/cli.md): `borgcheck ... ssh://[user@]host[:port]/abs/path`,
`ssh://host/~/rel`, `ssh://host/./rel` or `[user@]host:path`; ssh from --rsh or BORG_RSH, run as
`CMD [-p PORT] [user@]host REMOTE_BORG serve`, REMOTE_BORG from --remote-path, BORG_REMOTE_PATH,
else `borg`.

Two transports, both real `borg serve`:
  * FAKE_RSH below as BORG_RSH: a script that drops ssh's arguments and runs the rest here (the
    research note's harness, ../shared/design/borg-serve-protocol.md §3.2): fast, no sshd;
  * a real OpenSSH server on 127.0.0.1 (sshd_harness.py), also with a forced command
    `borg serve --restrict-to-repository R`, the way hosted services set it up.

What is checked:
  * Every borg 1.x fixture (1.2.4 and 1.4.4, clean and damaged) with --verify-data --json:
    the same exit code, the same bad chunk ids (errors) and the same object counts as the local
    run, except where a served run cannot see the damage (KNOWN_DIFFERENCES, each with its
    reason); the notes say what a served run does not check.
  * Every borg 2.0.0b5 fixture (version 2, clean and damaged) the same way through `borg2 serve`
    (FixturesMatchB5; KNOWN_DIFFERENCES_B5).
  * A damaged entry header that stops the server's scan: the scan-gap finding, the damaged
    object reported, every other object still verified.
  * Errors: a missing repository (13), a path the forced command refuses (2, "not allowed"),
    borg's lock held by a writer (73), a server that is not borg (2), a connection cut mid-run
    (2, stopped "connection-lost", the objects verified before it counted, in bounded time),
    options a served run refuses (2).
  * A server without an index rebuilds it (it writes; a warning says so) and the objects are
    still verified.
  * The repository is unchanged (bytes and mtimes of every file; with the shared lock only the
    repository folder's own mtime moves, as borg's lock files come and go, and no lock is left);
    with --bypass-lock nothing changes at all.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cli"))

import cli_support as cs  # noqa: E402
import sshd_harness  # noqa: E402
from sshd_harness import Sshd  # noqa: E402

BORG = shutil.which("borg")
THREADS = ["--threads", "2"]
VERIFY = {"BORG_PASSPHRASE": cs.PASSPHRASE}

# A stand-in for ssh: drops ssh's options and the [user@]host word, runs the rest here.
FAKE_RSH = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    -p|-i|-o|-l|-F) shift 2 ;;
    -*) shift ;;
    *) shift; break ;;
  esac
done
exec "$@"
"""

# A stand-in for ssh that passes the first N bytes of the server's replies, then either cuts
# the connection (closes borgcheck's end of it: MARKER None) or stalls it (passes nothing more
# and creates MARKER). Either way the server goes on as if the link were gone: what it writes is
# dropped, and it ends (releasing borg's lock) when borgcheck closes its stdin.
LIMIT_RSH = """#!%s
import os, subprocess, sys
args = sys.argv[1:]
while args and args[0].startswith("-"):
    args = args[2:] if args[0] in ("-p", "-i", "-o", "-l", "-F") else args[1:]
server = subprocess.Popen(args[1:], stdout=subprocess.PIPE)
left, marker = %d, %r
while left > 0:
    block = os.read(server.stdout.fileno(), min(left, 65536))
    if not block:
        break
    os.write(1, block)
    left -= len(block)
if marker is None:
    os.close(1)
else:
    open(marker, "w").close()
while os.read(server.stdout.fileno(), 65536):
    pass
server.wait()
"""


# What a served run cannot see, fixture by fixture: its exit code there and why. Every other
# borg 1.x fixture's damage is in a live object's bytes, which the server hands over or refuses.
KNOWN_DIFFERENCES = {
    # Segments after the last COMMIT: the local run's warning ("uncommitted segment files
    # ignored"); borg serve's index and scan never show them. EXPECTED.tsv: clean (borg: rc 0).
    "borg1/corrupt/uncommitted-repokey-history": (cs.EXIT_OK, "bytes after the last commit"),
}


# The same for borg 2.0.0b5's repositories (version 2) through `borg2 serve`: the fixtures whose
# damage a served run cannot see (log-level: dead or superseded entries, uncommitted segments,
# the index against the log), with its exit code there and why. None today: every b5 fixture's
# damage is in a current object's bytes, which the server hands over (and checks the header CRC
# and xxh64 of: chpo-entry-header-crc and chpo-data-stale-xxh64 are its IntegrityErrors).
KNOWN_DIFFERENCES_B5 = {
}


def fixtures(*folders, generation="borg1"):
    found = []
    for folder in folders:
        root = os.path.join(cs.SHARED, "fixtures", generation, folder)
        for name in sorted(os.listdir(root)):
            if os.path.exists(os.path.join(root, name, "config")):
                found.append(os.path.normpath(os.path.join(generation, folder, name)))
    return found


def bad_ids(records):
    return sorted({r["chunk_id"] for r in records if r["type"] == "finding" and r["severity"] == "error"
                   and r["chunk_id"] is not None})


def summary(records):
    return [r for r in records if r["type"] == "summary"][-1]


class ServeTestCase(cs.CliTestCase):
    def setUp(self):
        super().setUp()
        if BORG is None:
            self.skipTest("borg is not installed (Debian package borgbackup; ci/install-deps installs it)")
        self.rsh = os.path.join(self.tmp, "fake-rsh")
        with open(self.rsh, "w") as f:
            f.write(FAKE_RSH)
        os.chmod(self.rsh, 0o755)
        # The server's borg keeps its own files (security, cache) away from the test folder.
        self.server_home = os.path.join(self.tmp + "-server-home")
        os.mkdir(self.server_home)
        self.addCleanup(shutil.rmtree, self.server_home, True)
        self.repos = []  # repository folders whose own mtime the shared lock moves
        self.server_writes = []  # paths (relative to the test folder) the server may add

    def env(self, more=None):
        env = {"BORG_RSH": self.rsh, "BORG_BASE_DIR": self.server_home}
        env.update(more or {})
        return env

    @staticmethod
    def url(path):
        assert path.startswith("/")
        return "ssh://tester@serverhost" + path

    def copy(self, rel):
        repo = self.copy_generation(rel)
        self.repos.append(os.path.relpath(repo, self.tmp))
        return repo

    def check_finished(self, proc, result):
        """Read-only: every file as it was; the folders borg's shared lock touches (the
        repository's own) may have a new mtime, and no lock may be left."""
        after = cs.snapshot(self.tmp)
        before = proc.snapshot_before
        if "--bypass-lock" not in proc.cli_args:
            for rel in self.repos:
                for snap in (before, after):
                    if rel in snap and snap[rel][0] == "dir":
                        snap[rel] = ("dir", "mtime masked: borg's shared lock")
        diff = cs.snapshot_diff(before, after)
        # A test that makes the server rebuild its index expects exactly those files.
        diff = [d for d in diff if not any(d.startswith("added:   " + w) for w in self.server_writes)]
        self.assertEqual(diff, [], "the run changed the test folder:\n%s\n%r" % ("\n".join(diff), result))
        return result

    def check_same(self, repo, env, args=("--verify-data",), served_rc=None, served_args=()):
        # One after the other: each run's read-only check snapshots the whole test folder, and
        # the server's shared lock (lock.roster, borg 2.0.0b5's) would show in the local run's.
        local = self.finish(self.start(["--json"] + THREADS + list(args) + [repo], env))
        served = self.finish(self.start(["--json"] + THREADS + list(args) + list(served_args) + [self.url(repo)],
                                        self.env(env)), timeout=120)
        lrec, srec = self.json_records(local), self.json_records(served)
        self.assertEqual(served.rc, local.rc if served_rc is None else served_rc,
                         "local:\n%r\nserved:\n%r" % (local, served))
        self.assertEqual(bad_ids(srec), bad_ids(lrec), served)
        ls, ss = summary(lrec), summary(srec)
        for k in ("objects_total", "objects_verified", "repository_id", "encryption", "archives_checked"):
            if k in ls:
                self.assertEqual(ss.get(k), ls[k], "%s differs:\nlocal %r\nserved %r" % (k, ls, ss))
        self.assertEqual(ss["repository"], self.url(repo))
        self.assertTrue(any("not checked" in n for n in ss.get("notes", [])), ss)
        return lrec, srec


class FixturesMatch(ServeTestCase):
    def borg1_env(self):
        keys = {v: self.copy_generation("borg1/%s/keys" % v) for v in ("v1.2.4", "v1.4.4")}
        return lambda rel: dict(VERIFY, BORG_KEYS_DIR=keys["v1.4.4" if "/v1.4.4/" in rel else "v1.2.4"])

    def check_all(self, rels):
        env_for = self.borg1_env()
        for rel in rels:
            with self.subTest(fixture=rel):
                known = KNOWN_DIFFERENCES.get(rel)
                self.check_same(self.copy(rel), env_for(rel), served_rc=known[0] if known else None)

    def test_borg1_clean(self):
        self.check_all(fixtures("v1.2.4/repos", "v1.4.4/repos"))

    def test_borg1_damaged(self):
        self.check_all(fixtures("corrupt"))

    def test_keyless_run_and_bypass_lock(self):
        repo = self.copy("borg1/v1.2.4/repos/repokey")
        for args in ((), ("--bypass-lock", "--verify-data")):
            with self.subTest(args=args):
                self.check_same(repo, VERIFY, args)


class Partial(ServeTestCase):
    def test_slices_and_samples_verify_what_a_local_run_does(self):
        # A slice is chosen by chunk id, so a served run verifies exactly the local run's objects.
        repo = self.copy("borg1/corrupt/mac-repokey")
        for args in (["--subset", "1/3"], ["--subset", "2/3"], ["--subset", "3/3"]):
            with self.subTest(args=args):
                lrec, srec = self.check_same(repo, VERIFY, ["--verify-data"] + args)
                self.assertEqual(summary(srec)["subset"], args[1])
                self.assertFalse(summary(srec)["complete"])
        r = self.run_borgcheck(["--sample", "30%", "--sample-seed", "7", "--verify-data", self.url(repo)],
                               self.env(VERIFY))
        self.assertIn(r.rc, (cs.EXIT_OK, cs.EXIT_INTEGRITY_ERRORS), r)
        self.assertIn("from 1 of 1 batch", r.stdout, r)


class ServedState(ServeTestCase):
    """--state-dir, --max-duration, --max-age and --min-interval on an ssh:// repository: its
    batches are cut where the ids say (repo/segment_log/served_source.h), named by their first id
    and recognised by their ids, so later runs pick up where earlier ones stopped."""
    # Batches of 4 objects on average (a fixture has dozens of objects, so several batches), and
    # a time budget that starts exactly one batch per "second" (tests/cli/test_partial.py).
    HOOKS = {"BORGCHECK_TEST_HOOKS": "only-for-borgcheck-tests", "BORGCHECK_TEST_SERVED_BATCH_OBJECTS": "4",
             "BORGCHECK_TEST_BUDGET_S_PER_UNIT": "1"}

    def setUp(self):
        super().setUp()
        self.state = tempfile.mkdtemp(prefix="borgcheck-state-")
        self.addCleanup(shutil.rmtree, self.state, True)

    def served(self, repo, args, env=None):
        r = self.run_borgcheck(["--json", "--verify-data", "--repository-only", "--state-dir", self.state] + THREADS +
                               list(args) + [self.url(repo)], self.env(dict(VERIFY, **self.HOOKS, **(env or {}))),
                               timeout=120)
        records = self.json_records(r)
        return r, summary(records), records

    def test_a_time_budget_resumes_and_goes_back_to_earlier_batches(self):
        repo = self.copy("borg1/corrupt/mac-repokey")
        local = self.run_borgcheck(["--json", "--verify-data", "--repository-only", repo], VERIFY)
        first_r, first, _ = self.served(repo, ["--max-duration", "2s"])
        self.assertEqual((first["stopped"], first["complete"]), ("time-budget", False), first)
        batches = first["units_total"]
        self.assertGreaterEqual(batches, 4, first)
        self.assertEqual(first["coverage"]["units_verified"], 2, first)
        self.assertEqual(first["coverage"]["units_never_verified"], batches - 2, first)
        self.assertLess(first["coverage"]["ratio"], 1, first)
        # Every batch is due, the two verified ones last: this run reads the others in plan order,
        # then goes back to the first two (the gets posted ahead are forgotten and posted again).
        second_r, second, records = self.served(repo, ["--max-duration", "%ds" % (batches + 5)])
        self.assertEqual(second_r.rc, local.rc, second_r)
        for k in ("objects_total", "objects_verified"):  # the MAC failure's object is not verified
            self.assertEqual(second[k], summary(self.json_records(local))[k], second)
        self.assertEqual(bad_ids(records), bad_ids(self.json_records(local)), second_r)
        self.assertEqual(second["coverage"]["units_verified"], batches, second)
        self.assertEqual(second["coverage"]["ratio"], 1, second)
        self.assertIsNotNone(second["coverage"]["full_verification_at"], second)
        # The state is kept per URL (StateFolderName's spelling of it).
        self.assertEqual(second["coverage"]["state_file"],
                         os.path.join(self.state, second["repository_id"],
                                      "ssh%3A++tester%40serverhost" + repo.replace("/", "+"), "state.json"))

    def test_a_borg2b5_repository_keeps_its_state_too(self):
        if shutil.which("borg2") is None:
            self.skipTest("borg2 is not installed (Debian package borgbackup2)")
        repo = self.copy("borg2b5/repokey-chacha20-poly1305")
        b5 = {"BORG_REMOTE_PATH": "borg2"}
        r, first, _ = self.served(repo, ["--max-duration", "3s"], b5)
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((first["format"], first["stopped"]), ("borg2-b5", "time-budget"), first)
        batches = first["units_total"]
        self.assertGreaterEqual(batches, 5, first)
        self.assertEqual(first["coverage"]["units_verified"], 3, first)
        r, rest, _ = self.served(repo, ["--max-age", "1d"], b5)
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual(rest["units_not_due"], 3, rest)
        self.assertEqual(rest["coverage"]["units_verified"], batches, rest)
        self.assertEqual(rest["coverage"]["ratio"], 1, rest)
        self.assertEqual(first["objects_verified"] + rest["objects_verified"], rest["objects_total"], rest)

    def test_max_age_and_min_interval_skip_what_was_verified(self):
        repo = self.copy("borg1/v1.2.4/repos/repokey")
        r, full, _ = self.served(repo, [])
        self.assert_rc(r, cs.EXIT_OK)
        self.assertTrue(full["complete"], full)
        # What a mark vouches for is weaker than locally (docs/remote.md): every run with a state says so.
        self.assertTrue(any("marks of an ssh:// repository follow its object ids" in n for n in full["notes"]), full)
        batches = full["units_total"]
        self.assertGreaterEqual(batches, 4, full)
        r, again, _ = self.served(repo, ["--max-age", "1d"])
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((again["units_not_due"], again["objects_verified"]), (batches, 0), again)
        self.assertEqual(again["coverage"]["ratio"], 1, again)
        r, skipped, _ = self.served(repo, ["--min-interval", "1d"])
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual(skipped["verdict"], "skipped", skipped)
        # A new backup: its objects are new batches at the end of the scan, and the batch that
        # held the old manifest changes; the other batches keep their ids and stay verified.
        data = os.path.join(self.tmp + "-server-home", "new-data")
        os.mkdir(data)
        with open(os.path.join(data, "file"), "wb") as f:
            f.write(bytes(range(256)) * 4096)
        subprocess.run([BORG, "create", repo + "::later", data], env=dict(os.environ, BORG_PASSPHRASE=cs.PASSPHRASE,
                       BORG_BASE_DIR=self.server_home), check=True, capture_output=True)
        r, later, _ = self.served(repo, ["--max-age", "1d"])
        self.assert_rc(r, cs.EXIT_OK)
        self.assertGreater(later["units_not_due"], 0, later)
        self.assertGreater(later["objects_verified"], 0, later)
        self.assertLess(later["objects_verified"], later["objects_total"], later)
        self.assertEqual(later["coverage"]["ratio"], 1, later)
        # Every batch on the server now has a mark (the new ones from the run just made), as a
        # local repository's segments would: the full verification still vouches for them.
        r, skipped, _ = self.served(repo, ["--min-interval", "1d"])
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual(skipped["verdict"], "skipped", skipped)


class Sessions(ServeTestCase):
    def test_several_sessions_give_the_same_verdict(self):
        # --remote-connections N: N borg serve sessions, each with its shared lock, the gets
        # spread over them; all are closed (and their locks released) before borgcheck exits.
        repo = self.copy("borg1/corrupt/mac-repokey")
        for n in ("1", "3"):
            with self.subTest(connections=n):
                lrec, srec = self.check_same(repo, VERIFY, served_args=["--remote-connections", n])
                notes = summary(srec)["notes"]
                self.assertEqual(any("(3 sessions)" in x for x in notes), n == "3", notes)
                self.assertFalse(os.path.exists(os.path.join(repo, "lock.roster")))


class FixturesMatchB5(ServeTestCase):
    """Every borg 2.0.0b5 fixture (version 2), local vs through `borg2 serve`."""

    def setUp(self):
        super().setUp()
        if shutil.which("borg2") is None:
            self.skipTest("borg2 is not installed (Debian package borgbackup2)")

    def b5_env(self, rel):
        """A keyfile-* repository's key is <repo>.key beside it (BORG_KEY_FILE), copied too."""
        env = dict(VERIFY, BORG_REMOTE_PATH="borg2")
        key = os.path.join(cs.SHARED, "fixtures", rel + ".key")
        if not os.path.exists(key):
            return env
        dest = os.path.join(self.tmp, os.path.basename(key))
        if not os.path.exists(dest):
            shutil.copyfile(key, dest)
        return dict(env, BORG_KEY_FILE=dest)

    def check_all(self, rels):
        self.assertTrue(rels)
        for rel in rels:
            with self.subTest(fixture=rel):
                known = KNOWN_DIFFERENCES_B5.get(rel)
                _, served = self.check_same(self.copy(rel), self.b5_env(rel), served_rc=known[0] if known else None)
                notes = summary(served)["notes"]
                self.assertTrue(any("borg serve 2.0.0b5" in n for n in notes), notes)
                self.assertEqual(summary(served)["format"], "borg2-b5")

    def test_borg2b5_clean(self):
        self.check_all(fixtures(".", generation="borg2b5"))

    def test_borg2b5_damaged(self):
        self.check_all(fixtures("corrupt", generation="borg2b5"))

    def test_keyless_run(self):
        self.check_same(self.copy("borg2b5/repokey-chacha20-poly1305"), self.b5_env("borg2b5/repokey-chacha20-poly1305"),
                        args=())


class OtherServer(ServeTestCase):
    def test_borg2_serve_reads_a_borg1_repository(self):
        # borg 2.0.0b5's serve opens version-1 repositories, speaks the bin dialect, and its scan
        # fails on them (AttributeError: its index entries there have no `segment`): the objects
        # are fetched in index order, and the verdict is the local one.
        if shutil.which("borg2") is None:
            self.skipTest("borg2 is not installed (Debian package borgbackup2)")
        keys = self.copy_generation("borg1/v1.2.4/keys")
        for rel in ("borg1/v1.2.4/repos/repokey", "borg1/corrupt/mac-keyfile"):
            with self.subTest(fixture=rel):
                _, served = self.check_same(self.copy(rel), dict(VERIFY, BORG_KEYS_DIR=keys, BORG_REMOTE_PATH="borg2"))
                notes = summary(served)["notes"]
                self.assertTrue(any("borg serve 2.0.0b5" in n for n in notes), notes)
                self.assertTrue(any("index order" in n for n in notes), notes)


def entries(segment_path):
    """(offset, size, tag) of every entry of a borg 1.x segment file."""
    with open(segment_path, "rb") as f:
        data = f.read()
    out, pos = [], 8
    while pos + 9 <= len(data):
        size = int.from_bytes(data[pos + 4:pos + 8], "little")
        if size < 9 or pos + size > len(data):
            break
        out.append((pos, size, data[pos + 8]))
        pos += size
    return out


class Damage(ServeTestCase):
    def test_scan_stops_at_a_damaged_entry_header(self):
        repo = self.copy("borg1/v1.2.4/repos/none")
        seg = os.path.join(repo, "data", "0", "2")
        puts = [e for e in entries(seg) if e[2] == 0]
        self.assertGreater(len(puts), 3)
        off, size, _ = puts[1]
        with open(seg, "r+b") as f:
            f.seek(off + 8)
            f.write(bytes([0x7f]))  # an unknown tag: the entry header is damaged
            f.seek(off + 9)
            damaged_id = f.read(32).hex()
        served = self.run_borgcheck(["--json", "--verify-data"] + THREADS + [self.url(repo)], self.env(VERIFY),
                                    timeout=120)
        self.assert_rc(served, cs.EXIT_INTEGRITY_ERRORS)
        records = self.json_records(served)
        findings = sorted((r["stage"], r["severity"], r["chunk_id"], r["segment"]) for r in records
                          if r["type"] == "finding")
        # The scan gap (no chunk), and the damaged entry itself: the server's IntegrityError,
        # at the segment it names.
        self.assertEqual(findings, [("entry-crc", "error", damaged_id, 2), ("truncated", "error", None, None)], served)
        self.assertIn("scan", [r for r in records if r["type"] == "finding" and r["stage"] == "truncated"][0]["message"])
        s = summary(records)
        self.assertEqual(s["objects_verified"], s["objects_total"] - 1, s)


class ServerWrites(ServeTestCase):
    def test_a_server_that_rebuilds_its_index_is_reported(self):
        # Without index.N the server replays its log and writes a new index, hints and
        # integrity file before it answers (a client cannot prevent it): the objects are still
        # verified, and a warning says what the server did.
        repo = self.copy("borg1/v1.2.4/repos/none")
        rel = os.path.relpath(repo, self.tmp)
        for name in os.listdir(repo):
            if name.startswith(("index.", "hints.", "integrity.")):
                os.unlink(os.path.join(repo, name))
        self.server_writes = [rel + "/index.", rel + "/hints.", rel + "/integrity."]
        r = self.run_borgcheck(["--json", "--verify-data"] + THREADS + [self.url(repo)], self.env(VERIFY), timeout=120)
        self.assert_rc(r, cs.EXIT_WARNINGS)
        records = self.json_records(r)
        warnings = [x for x in records if x["type"] == "finding" and x["severity"] == "warning"]
        self.assertEqual([(w["stage"], "rebuilt its index" in w["message"]) for w in warnings], [("index", True)], r)
        s = summary(records)
        self.assertEqual((s["objects_verified"], s["objects_total"]), (102, 102), s)
        self.assertTrue(any(n.startswith("index.") for n in os.listdir(repo)))


class Errors(ServeTestCase):
    def test_missing_repository_exits_13(self):
        r = self.run_borgcheck([self.url(os.path.join(self.tmp, "missing"))], self.env())
        self.assert_rc(r, cs.EXIT_NO_REPO)
        self.assertIn("borgcheck: ", r.stderr)

    def test_locked_repository_exits_73(self):
        repo = self.copy("borg1/v1.2.4/repos/none")
        env = dict(os.environ, BORG_BASE_DIR=self.server_home, BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK="yes")
        holder = subprocess.Popen([BORG, "with-lock", repo, "sleep", "30"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (holder.poll() is None and holder.kill(), holder.wait()))
        deadline = time.time() + 20
        while not os.path.exists(os.path.join(repo, "lock.exclusive")) and time.time() < deadline:
            time.sleep(0.05)
        self.assertTrue(os.path.exists(os.path.join(repo, "lock.exclusive")))
        before = cs.snapshot(self.tmp)
        r = subprocess.run([cs.BINARY, self.url(repo)], env=self.environment(self.env()), cwd=self.cwd,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, cs.EXIT_LOCK_HELD, r)
        self.assertIn("lock", r.stderr.lower(), r)
        holder.kill()
        holder.wait()
        del before

    def test_sigterm_during_a_stalled_read(self):
        # The link stalls mid-run; SIGTERM ends the run at once: the findings and a partial
        # summary (stopped "signal"), exit 143, the session closed (no lock left behind).
        repo = self.copy("borg1/v1.2.4/repos/none")
        marker = os.path.join(self.server_home, "stalled")
        rsh = os.path.join(self.server_home, "rsh-stall")
        with open(rsh, "w") as f:
            f.write(LIMIT_RSH % (sys.executable, 60000, marker))
        os.chmod(rsh, 0o755)
        proc = self.start(["--json", "--verify-data", "--threads", "1", self.url(repo)],
                          dict(self.env(VERIFY), BORG_RSH=rsh))
        deadline = time.time() + 30
        while not os.path.exists(marker) and time.time() < deadline:
            time.sleep(0.02)
        self.assertTrue(os.path.exists(marker))
        time.sleep(0.2)  # the run is waiting for a reply that will not come (--remote-timeout 60)
        proc.send_signal(15)
        r = self.finish(proc, timeout=30)
        self.assert_rc(r, 128 + 15)
        s = summary(self.json_records(r))
        self.assertEqual(s["stopped"], "signal", r)
        self.assertLess(s["objects_verified"], s["objects_total"], r)
        self.assertFalse(os.path.exists(os.path.join(repo, "lock.roster")))

    def test_server_that_is_not_borg(self):
        r = self.run_borgcheck(["--remote-path", "cat", self.url("/nowhere")], self.env(), timeout=60)
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        self.assertIn("borgcheck: ", r.stderr)

    def test_options_a_served_run_refuses(self):
        for args in (["--remote-connections", "17"], ["--sample", "1G"]):
            with self.subTest(args=args):
                r = self.run_borgcheck(args + [self.url("/x")], self.env())
                self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
                self.assertIn("ssh://" if args[0] != "--remote-connections" else "between 1 and 16", r.stderr)

    def test_connection_cut_mid_run(self):
        # The "ssh" passes the first 60,000 bytes of the server's replies, then closes: past the
        # session's start (negotiate, open, list, scan, the key), in the middle of the gets.
        repo = self.copy("borg1/v1.2.4/repos/none")
        rsh = os.path.join(self.server_home, "rsh-cut")
        with open(rsh, "w") as f:
            f.write(LIMIT_RSH % (sys.executable, 60000, None))
        os.chmod(rsh, 0o755)
        started = time.time()
        r = self.run_borgcheck(["--json", "--verify-data", "--threads", "1", "--remote-timeout", "120",
                                self.url(repo)], dict(self.env(VERIFY), BORG_RSH=rsh), timeout=240)
        self.assertLess(time.time() - started, 60)  # EOF, not the timeout
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        records = self.json_records(r)
        s = summary(records)
        self.assertEqual(s["stopped"], "connection-lost", r)
        self.assertFalse(s["complete"], r)
        self.assertGreater(s["objects_verified"], 0, r)
        self.assertLess(s["objects_verified"], s["objects_total"], r)
        self.assertEqual(bad_ids(records), [], r)
        self.assertTrue(any("lost" in n for n in s["notes"]), s)


class RealSshd(ServeTestCase):
    def test_through_sshd_and_a_forced_command(self):
        try:
            sshd_harness.skip_unless_available()
        except Exception as e:  # unittest.SkipTest
            self.skipTest(str(e))
        repo = self.copy("borg1/v1.2.4/repos/repokey")
        other = self.copy("borg1/v1.2.4/repos/none")
        with Sshd() as sshd:
            url = self.ssh_url(sshd, repo)
            env = dict(VERIFY, BORG_RSH=sshd.rsh(), BORG_BASE_DIR=self.server_home)
            r = self.run_borgcheck(["--json", "--verify-data"] + THREADS + [url], env, timeout=120)
            self.assert_rc(r, cs.EXIT_OK)
            self.assertEqual(summary(self.json_records(r))["objects_verified"], 102)
        forced = "%s serve --restrict-to-repository %s" % (BORG, repo)
        with Sshd(force_command=forced) as sshd:
            env = dict(VERIFY, BORG_RSH=sshd.rsh(), BORG_BASE_DIR=self.server_home)
            r = self.run_borgcheck(["--verify-data"] + THREADS + [self.ssh_url(sshd, repo)], env, timeout=120)
            self.assert_rc(r, cs.EXIT_OK)
            r = self.run_borgcheck([self.ssh_url(sshd, other)], env, timeout=120)
            self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
            self.assertIn("not allowed", r.stderr.lower(), r)

    @staticmethod
    def ssh_url(sshd, path):
        """ssh://user@127.0.0.1:PORT/abs/path from the harness's sftp URL of the same place."""
        sftp = sshd.url("/" + path)  # sftp://user@127.0.0.1:PORT//abs/path
        authority = sftp[len("sftp://"):].split("/", 1)[0]
        return "ssh://%s%s" % (authority, path)


if __name__ == "__main__":
    cs.main()
