"""What a nightly job does, over sftp (issue 18): a read-only key, slices and their state (named
by the repository's URL), the metrics label, --lock-wait, --soft-fail, and a stop signal mid-run,
through a real OpenSSH server on 127.0.0.1 (sshd_harness.py).

Every run is bracketed by the read-only snapshot of cli_support.CliTestCase (the repository
copies live in the test's folder); the state and metrics folders live outside it.
"""

import json
import os
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cli"))
sys.path.insert(0, HERE)

import cli_support as cs  # noqa: E402
import sshd_harness  # noqa: E402

RELAY = os.path.join(HERE, "latency_relay.py")


class NightlyOverSftp(cs.CliTestCase):
    @classmethod
    def setUpClass(cls):
        sshd_harness.skip_unless_available()
        cls.sshd = sshd_harness.Sshd().start()

    @classmethod
    def tearDownClass(cls):
        cls.sshd.stop()

    def setUp(self):
        super().setUp()
        self.repo = self.copy_fixture("v1.2.4/repos/repokey")
        self.outside = tempfile.mkdtemp(prefix="borgcheck-sftp-state-")
        self.addCleanup(shutil.rmtree, self.outside, True)
        self.url = self.sshd.url("//" + self.repo.lstrip("/"))

    def env(self, **extra):
        e = {"BORG_RSH": self.sshd.rsh(), "BORG_PASSPHRASE": cs.PASSPHRASE}
        e.update(extra)
        return e

    def summary(self, r):
        records = cs.parse_json_lines(self, r)
        self.assertEqual(records[-1]["type"], "summary", r)
        return records[-1]

    def test_a_key_that_can_only_run_a_read_only_sftp_server_verifies(self):
        # docs/remote.md's restricted key: the forced command replaces the sftp subsystem, and
        # sftp-server -R refuses every request that writes.
        keys = os.path.join(self.sshd.dir, "authorized_keys")
        with open(keys) as f:
            original = f.read()
        self.addCleanup(lambda: open(keys, "w").write(original))
        with open(keys, "w") as f:
            f.write('restrict,command="/usr/lib/openssh/sftp-server -R" ' + original)
        r = self.run_borgcheck(["--verify-data", "--json", self.url], self.env())
        self.assert_rc(r, cs.EXIT_OK)
        s = self.summary(r)
        self.assertEqual((s["verdict"], s["objects_verified"], s["archives_checked"]), ("ok", 102, 7), r)
        self.assertEqual(s["repository"], self.url)

    def test_slices_keep_their_state_under_the_url_and_cover_the_repository(self):
        state = os.path.join(self.outside, "state")
        first = self.run_borgcheck(["--verify-data", "--json", "--subset", "1/2", "--state-dir", state, self.url],
                                   self.env())
        self.assert_rc(first, cs.EXIT_OK)
        second = self.run_borgcheck(["--verify-data", "--json", "--subset", "2/2", "--state-dir", state, self.url],
                                    self.env())
        self.assert_rc(second, cs.EXIT_OK)
        a, b = self.summary(first), self.summary(second)
        # The slices are those of a local run.
        for k, sub in (("1/2", a), ("2/2", b)):
            local = self.run_borgcheck(["--verify-data", "--json", "--subset", k, self.repo], self.env())
            self.assertEqual(sub["objects_verified"], self.summary(local)["objects_verified"], (k, local))
        self.assertEqual(b["coverage"]["ratio"], 1.0, second)
        self.assertIsNotNone(b["coverage"]["state_file"], second)
        # One state folder, named by the URL (the repository id, then the escaped URL).
        (repo_id,) = os.listdir(state)
        self.assertEqual(repo_id, self.config_id(self.repo))
        folder = os.listdir(os.path.join(state, repo_id))
        self.assertEqual(len(folder), 1, folder)
        self.assertTrue(folder[0].startswith("sftp%3A+"), folder)
        self.assertTrue(b["coverage"]["state_file"].startswith(os.path.join(state, repo_id, folder[0])), second)
        with open(b["coverage"]["state_file"]) as f:
            self.assertEqual(json.load(f)["repository"], self.url)
        # The same repository by a local path is another repository's state (a path alone
        # could be any server's).
        local = self.run_borgcheck(["--verify-data", "--json", "--subset", "1/2", "--state-dir", state, self.repo],
                                   self.env())
        self.assert_rc(local, cs.EXIT_OK)
        self.assertEqual(len(os.listdir(os.path.join(state, repo_id))), 2)

    def test_the_metrics_label_is_the_url(self):
        prom = os.path.join(self.outside, "borgcheck.prom")
        r = self.run_borgcheck(["--verify-data", "-q", "--metrics-file", prom, self.url], self.env())
        self.assert_rc(r, cs.EXIT_OK)
        with open(prom) as f:
            text = f.read()
        self.assertIn('borgcheck_success{repo="%s",repo_id="%s"} 1' % (self.url, self.config_id(self.repo)), text)
        self.assertNotIn('repo="%s"' % self.repo, text)

    def test_lock_wait_and_a_held_lock_over_sftp(self):
        lock = os.path.join(self.repo, "lock.exclusive")
        os.mkdir(lock)
        open(os.path.join(lock, "otherhost@1.4242-0"), "w").close()
        started = time.monotonic()
        r = self.run_borgcheck(["--lock-wait", "2", self.url], self.env())
        self.assertGreaterEqual(time.monotonic() - started, 1.5)
        self.assert_rc(r, cs.EXIT_LOCK_HELD)
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 2, r)
        self.assertTrue(lines[0].startswith("borgcheck: waiting up to 2 s (--lock-wait) for borg's lock to be released: "
                                            "repository %s is locked by borg: lock.exclusive/otherhost@1.4242-0"
                                            % self.repo), r)
        # --bypass-lock checks all the same, and the lock is only read.
        r = self.run_borgcheck(["--bypass-lock", "-q", self.url], self.env())
        self.assert_rc(r, cs.EXIT_OK)

    def test_soft_fail_on_a_missing_remote_path(self):
        missing = self.sshd.url("//" + os.path.join(self.tmp, "missing").lstrip("/"))
        r = self.run_borgcheck(["--soft-fail", missing], self.env())
        self.assert_rc(r, 75)
        r = self.run_borgcheck([missing], self.env())
        self.assert_rc(r, cs.EXIT_NO_REPO)

    def test_a_stop_signal_mid_run_prints_the_findings_so_far_and_leaves_no_ssh_behind(self):
        # A slow link (50 ms each way) keeps the run reading long enough to be stopped.
        rsh = self.sshd.rsh("-o", "ProxyCommand=%s %s --delay-ms 50 127.0.0.1 %d" % (sys.executable, RELAY,
                                                                                   self.sshd.port))
        proc = self.start(["--verify-data", "--json", "--remote-connections", "1", self.url], self.env(BORG_RSH=rsh))
        # Wait until its ssh session is up on the server, then a little more.
        deadline = time.monotonic() + 30
        while not self.sshd.session_pids("sftp") and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(self.sshd.session_pids("sftp"), "no sftp session started")
        time.sleep(0.5)
        if proc.poll() is not None:
            self.skipTest("the run ended before the signal (machine too fast for this delay)")
        os.kill(proc.pid, signal.SIGTERM)
        r = self.finish(proc, timeout=60)
        self.assertEqual(r.rc, 128 + signal.SIGTERM, r)
        records = cs.parse_json_lines(self, r)
        if records and records[-1]["type"] == "summary":
            self.assertEqual(records[-1]["verdict"], "interrupted", r)
        else:  # stopped before reading began: one error record
            self.assertEqual(records[-1]["type"], "error", r)
        # borgcheck closed its connection: the server's session ends.
        deadline = time.monotonic() + 10
        while self.sshd.session_pids("sftp") and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.sshd.session_pids("sftp"), [])


if __name__ == "__main__":
    cs.main()
