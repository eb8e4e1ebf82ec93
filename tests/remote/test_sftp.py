"""sftp:// repositories end to end, against a real OpenSSH server on 127.0.0.1 (sshd_harness.py).

    python3 test_sftp.py BORGCHECK_BINARY SHARED_DIR [unittest args]

The contract (docs/cli.md, docs/remote.md): `borgcheck ... sftp://[user@]host[:port]/relative/path` (relative to
the login folder) or `...//absolute/path`; ssh from --rsh or BORG_RSH, run as
`CMD [-p PORT] -s [user@]host sftp`; --remote-connections N (1..16); --remote-timeout SECONDS.

What is checked:
  * Every fixture repository of the three generations, clean and damaged, checked with
    `--verify-data --json` locally and through sftp: the same exit code and the same records,
    apart from the summary's `repository` (the URL as given; for a relative one, also its
    resolved absolute form, as docs/remote.md says) and the timing fields.
  * A path relative to the login folder (sshd: `ForceCommand internal-sftp -d FOLDER`), and a
    chrooted sftp-only login (`ChrootDirectory` + `ForceCommand internal-sftp`; root only).
  * --remote-connections 1 and 4, and --rsh instead of BORG_RSH: the same records. Without
    --remote-connections over a 50 ms round trip (the relay): 4 ssh spawned; with 1: one.
  * Errors: nothing listening, a key the server refuses, an unknown host key, a server without
    the sftp subsystem: exit 2, one stderr line "borgcheck: ..." naming the URL and quoting ssh
    (its phrase matched case-insensitively); a missing path: exit 13.
  * A connection lost mid-run (the server's sftp process killed; the relay cutting it) and a
    server that goes silent (the relay stalls; --remote-timeout 3): exit 2 (90 once damage
    was found), in bounded time, "lost" (or, for the silent server, a timeout) in the output,
    the findings so far and a summary with complete false and stopped "connection-lost" whose
    bytes_read counts only what was read; no ssh (relay) process left behind.
Every run is bracketed by cli_support's snapshot of the test folder, which holds the
repository copies: nothing may change, mtimes included.
"""

import os
import re
import shlex
import shutil
import signal
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

RELAY = os.path.join(HERE, "latency_relay.py")
# docs/json.md: the fields that may differ between two runs on the same repository, less
# `threads` (both sides pass the same --threads): elapsed_s, throughput_bytes_per_s,
# started_at, finished_at; also the clock readings in `coverage` (every `..._at`, and
# oldest_unit_age_s, measured from finished_at). Dropped at every depth.
TIMING = ("elapsed_s", "throughput_bytes_per_s", "oldest_unit_age_s")


def without_times(value):
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMING and not k.endswith("_at")}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


THREADS = ["--threads", "2"]
VERIFY = {"BORG_PASSPHRASE": cs.PASSPHRASE}


def fixtures(generation, *folders):
    """Repository folders (with a `config`) directly under <shared>/fixtures/<generation>/<folder>,
    as paths relative to <shared>/fixtures."""
    found = []
    for folder in folders:
        root = os.path.join(cs.SHARED, "fixtures", generation, folder)
        for name in sorted(os.listdir(root)):
            if os.path.exists(os.path.join(root, name, "config")):
                found.append(os.path.normpath(os.path.join(generation, folder, name)))
    return found


def lower_output(result):
    return (result.stdout + "\n" + result.stderr).lower()


class SftpTestCase(cs.CliTestCase):
    """One sshd (internal-sftp, the tests' own user) for the whole class."""

    sshd = None

    @classmethod
    def setUpClass(cls):
        cls.sshd = Sshd()
        cls.sshd.start()

    @classmethod
    def tearDownClass(cls):
        if cls.sshd:
            cls.sshd.stop()

    def env(self, more=None, rsh=None):
        env = {"BORG_RSH": rsh or self.sshd.rsh()}
        env.update(more or {})
        return env

    def url(self, path, sshd=None):
        """The URL of an absolute path on the server ("sftp://u@127.0.0.1:P//abs")."""
        assert path.startswith("/")
        return (sshd or self.sshd).url("/" + path)

    def comparable(self, result, *repository):
        """The run's JSON records without progress and timing fields, and without the summary's
        `repository` (which must be one of `repository`)."""
        records = []
        for rec in self.json_records(result):
            if rec["type"] == "progress":
                continue
            rec = without_times(rec)
            if rec["type"] == "summary":
                self.assertIn(rec.pop("repository"), repository, result)
            records.append(rec)
        return records

    def relay_rsh(self, *options):
        proxy = shlex.join([sys.executable, RELAY] + list(options) + ["127.0.0.1", str(self.sshd.port)])
        return self.sshd.rsh("-o", "ProxyCommand=" + proxy)

    def check_same(self, repo, args, env, url=None, remote_args=(), remote_env=None, resolved=None):
        """Runs `--json ARGS repo` locally and through sftp, side by side (the key derivation
        takes a second of CPU on each); the exit codes and the records are equal. The remote
        summary's `repository` is the URL as given, or for a relative one `resolved`, its
        absolute form (docs/remote.md: the server resolves the path). Returns the records."""
        url = url or self.url(repo)
        local = self.start(["--json"] + args + [repo], env)
        remote = self.start(["--json"] + args + list(remote_args) + [url],
                            self.env(env) if remote_env is None else remote_env)
        local, remote = self.finish(local), self.finish(remote, timeout=120)
        self.assertEqual(remote.rc, local.rc,
                         "local:\n%r\nremote:\n%r\nsshd log:\n%s" % (local, remote, self.sshd.log()))
        local_records = self.comparable(local, repo)
        self.assertTrue(local_records and local_records[-1]["type"] == "summary", local)
        self.assertEqual(self.comparable(remote, url, resolved or url), local_records, remote)
        return local_records


# -- every fixture, local versus sftp --------------------------------------------------------------


class FixturesMatch(SftpTestCase):
    """--verify-data --json on every fixture: the same records and exit code over sftp."""

    def check_all(self, rels, env_for):
        for rel in rels:
            with self.subTest(fixture=rel):
                repo = self.copy_generation(rel)
                self.check_same(repo, ["--verify-data"] + THREADS, env_for(rel))

    def borg1_env(self):
        keys = {v: self.copy_generation("borg1/%s/keys" % v) for v in ("v1.2.4", "v1.4.4")}
        return lambda rel: dict(VERIFY, BORG_KEYS_DIR=keys["v1.4.4" if "/v1.4.4/" in rel else "v1.2.4"])

    def b5_env(self, rel):
        """A keyfile-* repository's key is <repo>.key beside it (BORG_KEY_FILE), copied too."""
        key = os.path.join(cs.SHARED, "fixtures", rel + ".key")
        if not os.path.exists(key):
            return VERIFY
        dest = os.path.join(self.tmp, os.path.basename(key))
        if not os.path.exists(dest):
            shutil.copyfile(key, dest)
        return dict(VERIFY, BORG_KEY_FILE=dest)

    def test_borg1_clean(self):
        self.check_all(fixtures("borg1", "v1.2.4/repos", "v1.4.4/repos"), self.borg1_env())

    def test_borg1_damaged(self):
        self.check_all(fixtures("borg1", "corrupt"), self.borg1_env())

    def test_borg2b5_clean(self):
        self.check_all(fixtures("borg2b5", "."), self.b5_env)

    def test_borg2b5_damaged(self):
        self.check_all(fixtures("borg2b5", "corrupt"), self.b5_env)

    def test_borg2master_clean_and_damaged(self):
        keys = self.copy_generation("borg2master/keys")
        self.check_all(fixtures("borg2master", "repos", "corrupt"), lambda rel: dict(VERIFY, BORG_KEYS_DIR=keys))


# -- paths, logins, connections -----------------------------------------------------------------------


class PathsAndConnections(SftpTestCase):
    def test_relative_path_from_the_login_folder(self):
        # The login folder is the test folder: internal-sftp's -d sets where sftp starts, so
        # the test needs neither a HOME to write into nor root.
        repo = self.copy_generation("borg1/corrupt/mac-repokey", os.path.join("sub", "mac-repokey"))
        with Sshd(force_command="internal-sftp -d %s" % self.tmp) as sshd:
            url = sshd.url("sub/mac-repokey")
            self.assertNotIn("//", url.split(":", 2)[2])  # relative: one slash after the port
            records = self.check_same(repo, ["--verify-data"] + THREADS, VERIFY, url=url,
                                      remote_env=dict(VERIFY, BORG_RSH=sshd.rsh()), resolved=self.url(repo, sshd))
            self.assertEqual(records[-1]["exit_code"], cs.EXIT_INTEGRITY_ERRORS)
            # The absolute form of the same folder reads the same.
            self.check_same(repo, ["--verify-data"] + THREADS, VERIFY, url=self.url(repo, sshd),
                            remote_env=dict(VERIFY, BORG_RSH=sshd.rsh()))

    def test_chrooted_sftp_only_login(self):
        root = sshd_harness.make_chroot_root()  # skips unless root
        self.addCleanup(shutil.rmtree, root, True)
        # The repository copies live in the chroot; the snapshots cover it instead of /tmp.
        self.tmp = root
        self.home, self.cwd = os.path.join(root, "home"), os.path.join(root, "cwd")
        os.mkdir(self.home)
        os.mkdir(self.cwd)
        repo = self.copy_generation("borg2b5/corrupt/chpo-data-authfail", "chpo")
        with Sshd(chroot=root, force_command="internal-sftp -d /") as sshd:
            env = dict(VERIFY, BORG_RSH=sshd.rsh())
            # Relative to the start folder (the chroot's /), and absolute inside the chroot.
            for url in (sshd.url("chpo"), sshd.url("//chpo")):
                with self.subTest(url=url):
                    records = self.check_same(repo, ["--verify-data"] + THREADS, VERIFY, url=url, remote_env=env,
                                              resolved=sshd.url("//chpo"))
                    self.assertEqual(records[-1]["exit_code"], cs.EXIT_INTEGRITY_ERRORS)
            # The chroot hides the real path: the server has no such file.
            r = self.run_borgcheck([sshd.url("/" + repo)], env)
            self.assert_rc(r, cs.EXIT_NO_REPO)

    def test_one_and_four_connections_and_rsh_option_give_the_same_records(self):
        # Keyless: every byte is still read (CRCs, pack hashes), without a second of key
        # derivation per run; each shows its damage.
        for rel in ("borg1/corrupt/crc-repokey", "borg2b5/corrupt/chpo-data-stale-xxh64",
                    "borg2master/corrupt/aes256-ocb_sha256_repokey__bitflip"):
            repo = self.copy_generation(rel)
            for extra, remote_env in ((["--remote-connections", "1"], None), (["--remote-connections", "4"], None),
                                      (["--rsh", self.sshd.rsh()], {})):  # --rsh, and no BORG_RSH at all
                with self.subTest(fixture=rel, args=extra[0]):
                    records = self.check_same(repo, THREADS, {}, remote_args=extra, remote_env=remote_env)
                    self.assertEqual(records[-1]["exit_code"], cs.EXIT_INTEGRITY_ERRORS)

    def test_the_default_starts_more_connections_only_over_a_slow_round_trip(self):
        # Through a relay that adds 25 ms each way, the first connection's round trip is 50 ms or
        # more whatever the load: over the 5 ms from which the default starts all 4 (after the
        # first's round trip, not waited for). --remote-connections 1 starts one. Counted where
        # they are spawned (a wrapper of ssh): a late one may still be connecting when a short
        # run ends. Findings equal the local run's either way.
        counting = tempfile.mkdtemp(prefix="borgcheck-spawns-")  # not in self.tmp: watched
        self.addCleanup(shutil.rmtree, counting, True)
        spawns = os.path.join(counting, "spawns")
        wrapper = os.path.join(counting, "count-ssh")
        with open(wrapper, "w") as f:
            f.write('echo x >> %s\nexec "$@"\n' % shlex.quote(spawns))
        rsh = "sh %s %s" % (shlex.quote(wrapper), self.relay_rsh("--delay-ms", "25"))
        repo = self.copy_generation("borg1/corrupt/crc-repokey")
        for extra, want in (([], 4), (["--remote-connections", "1"], 1)):
            with self.subTest(args=extra):
                if os.path.exists(spawns):
                    os.unlink(spawns)
                records = self.check_same(repo, THREADS, {}, remote_args=extra, remote_env={"BORG_RSH": rsh})
                self.assertEqual(records[-1]["exit_code"], cs.EXIT_INTEGRITY_ERRORS)
                with open(spawns) as f:
                    self.assertEqual(f.read().count("x"), want)

    def test_remote_connections_out_of_range_is_a_usage_error(self):
        repo = self.copy_generation("borg1/v1.2.4/repos/none")
        for n in ("0", "17"):
            with self.subTest(n=n):
                r = self.run_borgcheck(["--remote-connections", n, self.url(repo)], self.env())
                self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
                self.assertIn("--remote-connections", r.stderr, r)


# -- what ssh refuses -----------------------------------------------------------------------------------


class SshErrors(SftpTestCase):
    def expect_ssh_error(self, url, env, phrase):
        """Exit 2; nothing on stdout; one stderr line "borgcheck: ..." with the URL and ssh's
        phrase (case-insensitive); then the same with --json: one error record."""
        r = self.run_borgcheck([url], env)
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        self.assertEqual(r.stdout, "", r)
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r)
        self.assertTrue(lines[0].startswith("borgcheck: "), r)
        self.assertIn(url, lines[0], r)
        self.assertIn(phrase.lower(), lines[0].lower(), r)
        j = self.run_borgcheck(["--json", url], env)
        self.assert_rc(j, cs.EXIT_COULD_NOT_RUN)
        self.assertEqual(j.stderr, "", j)
        records = self.json_records(j)
        self.assertEqual([(x["type"], x["exit_code"]) for x in records], [("error", 2)], j)
        self.assertIn(phrase.lower(), records[0]["message"].lower(), j)

    def test_nothing_listening(self):
        port = sshd_harness.free_port()
        url = "sftp://%s@127.0.0.1:%d//srv/repo" % (self.sshd.user, port)
        self.expect_ssh_error(url, self.env(), "Connection refused")

    def test_key_not_in_authorized_keys(self):
        repo = self.copy_generation("borg1/v1.2.4/repos/none")
        rsh = sshd_harness.rsh_command(self.sshd.other_key())
        self.expect_ssh_error(self.url(repo), self.env(rsh=rsh), "Permission denied")

    def test_unknown_host_key_with_strict_checking(self):
        repo = self.copy_generation("borg1/v1.2.4/repos/none")
        known = os.path.join(self.tmp, "known_hosts")
        open(known, "w").close()  # in the snapshot: ssh must not add the key either
        self.expect_ssh_error(self.url(repo), self.env(rsh=self.sshd.rsh(known_hosts=known)),
                              "Host key verification failed")

    def test_server_without_sftp_subsystem(self):
        repo = self.copy_generation("borg1/v1.2.4/repos/none")
        with Sshd(subsystem=None) as sshd:
            self.expect_ssh_error(self.url(repo, sshd), self.env(rsh=sshd.rsh()), "subsystem request failed")

    def test_missing_path_exits_13(self):
        missing = os.path.join(self.tmp, "missing")
        for url in (self.url(missing), self.sshd.url("no/such/relative/folder")):
            with self.subTest(url=url):
                r = self.run_borgcheck([url], self.env())
                self.assert_rc(r, cs.EXIT_NO_REPO)
                self.assertEqual(r.stdout, "", r)
                self.assertTrue(r.stderr.startswith("borgcheck: "), r)
                j = self.run_borgcheck(["--json", url], self.env())
                self.assert_rc(j, cs.EXIT_NO_REPO)
                records = self.json_records(j)
                self.assertEqual([(x["type"], x["code"], x["exit_code"]) for x in records],
                                 [("error", "repository-not-found", 13)], j)


# -- connections lost mid-run -------------------------------------------------------------------------


LOST_AFTER = 50 << 20  # bytes the server sends before it goes: a twentieth of the long repository


def make_long(test, base):
    """cli_support's long-run repository (segment 29: 1 GiB of valid PUTs, sparse), built on a
    copy of `base`, a fixture whose segment 29 is v1.2.4/repos/none's."""
    real_copy = test.copy_fixture

    def copy_base(rel, name=None):
        return real_copy(base, name)

    test.copy_fixture = copy_base
    try:
        return cs.make_long_repo(test)
    finally:
        test.copy_fixture = real_copy


class LostConnections(SftpTestCase):

    def assert_no_relay_left(self, marker):
        """borgcheck's ssh processes are gone after it exits: their relays (found by the
        options only this test uses) end with them."""
        deadline = time.monotonic() + 10
        while True:
            left = []
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        with open("/proc/%s/cmdline" % entry, "rb") as f:
                            cmd = f.read()
                    except OSError:
                        continue
                    if RELAY.encode() in cmd and marker.encode() in cmd:
                        left.append(int(entry))
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        self.assertEqual(left, [], "relay processes left behind (their ssh outlived borgcheck)")

    def assert_lost(self, r, rc=cs.EXIT_COULD_NOT_RUN, words=("lost",)):
        self.assertEqual(r.rc, rc, r)
        text = lower_output(r)
        self.assertTrue(any(w in text for w in words), "none of %r in the output:\n%r" % (words, r))
        records = self.json_records(r)  # every line is JSON
        summary = records[-1]
        self.assertEqual(summary["type"], "summary", r)  # a report, not only an error
        self.assertEqual(summary["exit_code"], r.rc, r)
        # docs/json.md: a run cut short is not complete, and says why.
        self.assertEqual((summary["complete"], summary["stopped"]), (False, "connection-lost"), r)
        return records

    def test_sftp_server_killed_mid_run(self):
        repo = make_long(self, "v1.2.4/repos/none")
        p = self.start(["--json", "--verify-data", "--remote-connections", "1"] + THREADS + [self.url(repo)],
                       self.env())
        # Killed once it has read a twentieth of the repository: mid-run, whatever the speed.
        deadline = time.monotonic() + 60
        killed = None
        while killed is None and time.monotonic() < deadline and p.poll() is None:
            for pid in self.sshd.session_pids("sftp"):
                try:
                    with open("/proc/%d/io" % pid) as f:
                        rchar = int(re.search(r"^rchar: (\d+)", f.read(), re.M).group(1))
                except (OSError, AttributeError):
                    continue
                if rchar >= LOST_AFTER:
                    os.kill(pid, signal.SIGKILL)
                    killed = pid
            time.sleep(0.01)
        self.assertIsNotNone(killed, "the sftp server never read %d bytes (%r)" % (LOST_AFTER, p.poll()))
        r = self.finish(p, timeout=60)
        self.assert_lost(r)

    def test_relay_cuts_the_connection_mid_run(self):
        repo = make_long(self, "v1.2.4/repos/none")
        rsh = self.relay_rsh("--delay-ms", "10", "--cut-after-bytes", str(LOST_AFTER))
        r = self.run_borgcheck(["--json", "--verify-data", "--remote-connections", "1"] + THREADS + [self.url(repo)],
                               self.env(rsh=rsh))
        self.assert_lost(r)
        self.assert_no_relay_left("--cut-after-bytes")
        # Text mode: the report on stdout, and a line on stderr saying the connection was lost.
        r = self.run_borgcheck(["--verify-data", "--remote-connections", "1"] + THREADS + [self.url(repo)],
                               self.env(rsh=rsh))
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        self.assertTrue([x for x in r.stderr.splitlines() if x.startswith("borgcheck: ") and "lost" in x.lower()], r)
        self.assert_no_relay_left("--cut-after-bytes")

    def test_a_lost_run_counts_only_what_it_read(self):
        # docs/json.md: bytes_read is what the run read (units read whole), bytes_skipped the
        # rest. The connection goes a twentieth of the way into the 1 GiB segment.
        repo = make_long(self, "v1.2.4/repos/none")
        rsh = self.relay_rsh("--cut-after-bytes", str(LOST_AFTER))
        r = self.run_borgcheck(["--json", "--verify-data", "--remote-connections", "1"] + THREADS + [self.url(repo)],
                               self.env(rsh=rsh))
        summary = self.assert_lost(r)[-1]
        self.assertLess(summary["bytes_read"], summary["bytes_total"], r)
        self.assertEqual(summary["bytes_skipped"], summary["bytes_total"] - summary["bytes_read"], r)

    def test_findings_before_the_cut_are_kept(self):
        # corrupt/id-none: one damaged chunk in segment 2, read long before the 1 GiB segment 29.
        repo = make_long(self, "corrupt/id-none")
        rsh = self.relay_rsh("--delay-ms", "10", "--cut-after-bytes", str(LOST_AFTER))
        r = self.run_borgcheck(["--json", "--verify-data", "--remote-connections", "2"] + THREADS + [self.url(repo)],
                               self.env(rsh=rsh))
        # Exit 2 (the contract); 90 would follow docs/exit-codes.md's rule for unreadable files
        # next to damage. Either keeps the finding.
        self.assertIn(r.rc, (cs.EXIT_COULD_NOT_RUN, cs.EXIT_INTEGRITY_ERRORS), r)
        records = self.assert_lost(r, r.rc)
        bad = cs.expected_rows()["corrupt/id-none"][1]
        self.assertIn(bad[0], [x.get("chunk_id") for x in records if x["type"] == "finding"], r)
        self.assert_no_relay_left("--cut-after-bytes")

    def test_silent_server_times_out(self):
        repo = make_long(self, "v1.2.4/repos/none")
        rsh = self.relay_rsh("--delay-ms", "10", "--stall-after-bytes", str(LOST_AFTER))
        start = time.monotonic()
        r = self.run_borgcheck(["--json", "--verify-data", "--remote-connections", "2", "--remote-timeout", "6"] +
                               THREADS + [self.url(repo)], self.env(rsh=rsh), timeout=120)
        elapsed = time.monotonic() - start
        # About 6 s of silence plus the run before it; far below the 60 s default, which a
        # run ignoring --remote-timeout (or hanging) would take at least. (6 s, not less: the
        # first connection's wait for VERSION includes ssh's start through the relay.)
        self.assertLess(elapsed, 40, r)
        self.assert_lost(r, words=("lost", "timed out", "timeout", "no answer", "not answer"))
        self.assert_no_relay_left("--stall-after-bytes")

    def test_sigterm_while_the_server_is_silent(self):
        # A stalled server must not hold a stopping run until --remote-timeout (60 s here): the
        # waits for it give way to the signal.
        repo = make_long(self, "v1.2.4/repos/none")
        marker = os.path.join(self.tmp + "-stalled")
        self.addCleanup(lambda: os.path.exists(marker) and os.unlink(marker))
        rsh = self.relay_rsh("--delay-ms", "10", "--stall-after-bytes", str(LOST_AFTER), "--stall-marker", marker)
        proc = self.start(["--json", "--verify-data", "--remote-connections", "1", "--remote-timeout", "60"] +
                          THREADS + [self.url(repo)], self.env(rsh=rsh))
        deadline = time.monotonic() + 60
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(os.path.exists(marker), "the relay never stalled")
        time.sleep(0.3)  # borgcheck now waits for bytes that will not come
        proc.send_signal(signal.SIGTERM)
        start = time.monotonic()
        r = self.finish(proc, timeout=60)
        self.assertLess(time.monotonic() - start, 15, r)
        self.assert_rc(r, cs.EXIT_SIGNAL_BASE + signal.SIGTERM)
        self.assert_no_relay_left("--stall-after-bytes")


if __name__ == "__main__":
    cs.main()
