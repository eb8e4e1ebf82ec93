"""borgcheck's exit codes end to end, with the exact report or message behind each.

0 clean, 1 warnings only, 90 integrity errors, 2 could not run (bad option, remote URL, no
repository given), 13 no such path, 15 not a repository / unsupported version, 42 key file not
found, 52 wrong passphrase, 73 lock held. 128+N (signals) is in test_signals.py.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase, mask_times  # noqa: E402

VERIFY = {"BORG_PASSPHRASE": cs.PASSPHRASE}


class CleanAndWarnings(CliTestCase):
    def test_clean_repokey_verify_data_exits_0(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["--verify-data", "--threads", "2", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual(r.stderr, "")
        self.assertEqual(mask_times(r.stdout),
                         "verify-data borg1 repokey: 102 of 102 objects verified (264.7 KiB stored, "
                         "282.0 KiB plaintext) in 30 segments, transaction 29 (index), 0 errors, "
                         "0 warnings, <T>s, <RATE>, 2 threads: ok\n")

    def test_keyless_check_needs_no_passphrase_and_exits_0(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["--threads", "2", repo])  # no BORG_PASSPHRASE, no terminal
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual(r.stderr, "")
        self.assertEqual(mask_times(r.stdout),
                         "repository check (keyless) borg1: 102 of 102 objects verified (264.7 KiB "
                         "stored, 0 B plaintext) in 30 segments, transaction 29 (index), 0 errors, "
                         "0 warnings, <T>s, <RATE>, 2 threads: ok\n")

    def test_keyless_check_of_keyfile_repo_needs_no_key_file(self):
        repo = self.copy_fixture("v1.2.4/repos/keyfile")
        empty = os.path.join(self.tmp, "no-keys")
        os.mkdir(empty)
        r = self.run_borgcheck(["--quiet", repo], {"BORG_KEYS_DIR": empty})
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((r.stdout, r.stderr), ("", ""))

    def test_uncommitted_segments_are_a_warning_exit_1(self):
        repo = self.copy_fixture("corrupt/uncommitted-repokey-history")
        warning = ("warning: segment: 2 uncommitted segment file(s) after transaction 26 ignored "
                   "(left by an interrupted write; borg deletes them on its next write)\n")
        r = self.run_borgcheck(["--verify-data", "--threads", "3", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_WARNINGS)
        self.assertEqual(r.stderr, "")
        self.assertEqual(mask_times(r.stdout),
                         warning + "verify-data borg1 repokey: 17 of 17 objects verified (14.3 KiB "
                         "stored, 44.1 KiB plaintext) in 12 segments, transaction 26 (index), "
                         "0 errors, 1 warnings, <T>s, <RATE>, 3 threads: warnings\n")
        r = self.run_borgcheck(["--quiet", repo])
        self.assert_rc(r, cs.EXIT_WARNINGS)
        self.assertEqual((r.stdout, r.stderr), (warning, ""))


class IntegrityErrors(CliTestCase):
    def test_mac_failure_exits_90_naming_chunk_stage_and_location(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        r = self.run_borgcheck(["--verify-data", "--threads", "4", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(r.stderr, "")
        self.assertEqual(mask_times(r.stdout),
                         "error: authentication chunk " + cs.MAC_REPOKEY_CHUNK + " [segment 2, offset 8]: "
                         "MAC Authentication failed (second read: agreed)\n"
                         "verify-data borg1 repokey: 101 of 102 objects verified (260.6 KiB stored, "
                         "278.0 KiB plaintext) in 30 segments, transaction 29 (index), 1 errors, "
                         "0 warnings, <T>s, <RATE>, 4 threads: integrity-errors\n")

    def test_quiet_prints_the_finding_only(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        r = self.run_borgcheck(["-q", "--verify-data", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual((r.stdout, r.stderr), (
            "error: authentication chunk " + cs.MAC_REPOKEY_CHUNK + " [segment 2, offset 8]: "
            "MAC Authentication failed (second read: agreed)\n", ""))

    def test_mac_damage_is_invisible_to_the_keyless_check(self):
        # The CRC was recomputed after the damage: only --verify-data can see it.
        repo = self.copy_fixture("corrupt/mac-repokey")
        r = self.run_borgcheck(["-q", repo])
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((r.stdout, r.stderr), ("", ""))


class CouldNotRun(CliTestCase):
    def test_unknown_option_exits_2(self):
        r = self.run_borgcheck(["--bogus", "/x"])
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        self.assertEqual(r.stdout, "")
        self.assertIn("--bogus", r.stderr)

    def test_bad_option_values_exit_2(self):
        cases = [
            (["--progress", "sometimes", "/x"], "--progress: sometimes not in {auto,always,never}"),
            (["--threads", "abc", "/x"], "--threads"),
            (["--threads", "2000", "/x"], "borgcheck: --threads must be between 1 and 1024 (0 or omitted: all online cores)"),
            (["--threads=-1", "/x"], "borgcheck: --threads must be between 1 and 1024 (0 or omitted: all online cores)"),
            (["/x", "/y"], "/y"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                r = self.run_borgcheck(args)
                self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
                self.assertEqual(r.stdout, "", r)
                self.assertIn(needle, r.stderr, r)

    def test_remote_repository_urls_exit_2(self):
        for url in ("ssh://user@host:2222/srv/repo", "user@host:repo", "host:/srv/repo",
                    "sftp://host/repo", "ssh:host/repo"):
            with self.subTest(url=url):
                r = self.run_borgcheck([url])
                self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN,
                                       "remote repositories are not supported: " + url,
                                       "borgcheck reads a local path")

    def test_no_repository_given_exits_2(self):
        r = self.run_borgcheck([])
        self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN, "no repository given: pass REPO or set BORG_REPO")


class RepositoryCodes(CliTestCase):
    def test_nonexistent_path_exits_13(self):
        path = os.path.join(self.tmp, "nothing-here")
        r = self.run_borgcheck([path])
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_NO_REPO),
                         "borgcheck: repository %s does not exist" % path)
        r = self.run_borgcheck(["--verify-data", path], VERIFY)
        self.assert_rc(r, cs.EXIT_NO_REPO)

    # Repository detection also recognises borg 2 layouts (being added); its messages are
    # checked by their stable parts: the exit code, the path and the reason.

    def test_directory_that_is_not_a_repository_exits_15(self):
        path = os.path.join(self.tmp, "plain-dir")
        os.mkdir(path)
        with open(os.path.join(path, "README"), "w") as f:
            f.write("just a folder\n")
        r = self.run_borgcheck([path])
        self.assert_error_exit(r, cs.EXIT_NOT_A_REPO, path + " is not a borg repository", "'config'")

    def test_regular_file_exits_15(self):
        path = os.path.join(self.tmp, "a-file")
        with open(path, "w") as f:
            f.write("x")
        r = self.run_borgcheck([path])
        self.assert_error_exit(r, cs.EXIT_NOT_A_REPO, path + " is not a borg repository", "not a directory")

    def test_config_without_repository_section_exits_15(self):
        path = os.path.join(self.tmp, "ini")
        os.mkdir(path)
        with open(os.path.join(path, "config"), "w") as f:
            f.write("[something]\nversion = 1\n")
        r = self.run_borgcheck([path])
        self.assert_error_exit(r, cs.EXIT_NOT_A_REPO, path + " is not a borg repository", "[repository]")

    def set_config_version(self, repo, version):
        cfg = os.path.join(repo, "config")
        with open(cfg) as f:
            text = f.read()
        self.assertIn("\nversion = 1\n", text)
        with open(cfg, "w") as f:
            f.write(text.replace("\nversion = 1\n", "\nversion = %s\n" % version))

    def test_repository_version_9_exits_15(self):
        # An INI config naming a repository version no borg has written (1 is borg 1.x, 2 the
        # 2.0 betas up to b9, which borgcheck verifies).
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        self.set_config_version(repo, 9)
        for args, env in (([repo], {}), (["--verify-data", repo], VERIFY)):
            with self.subTest(args=args):
                r = self.run_borgcheck(args, env)
                self.assert_error_exit(r, cs.EXIT_NOT_A_REPO, "unsupported repository version 9", repo)

    def test_unknown_repository_version_exits_15(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        self.set_config_version(repo, 3)
        r = self.run_borgcheck([repo])
        self.assert_error_exit(r, cs.EXIT_NOT_A_REPO, "unsupported repository version 3", repo)

    def test_borg2_layout_without_version_exits_15(self):
        path = os.path.join(self.tmp, "borg2")
        os.makedirs(os.path.join(path, "config"))
        r = self.run_borgcheck([path])
        self.assert_error_exit(r, cs.EXIT_NOT_A_REPO, path + " is not a borg repository", "config/")

    def test_lock_held_exits_73_and_bypass_lock_checks_anyway(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        os.mkdir(os.path.join(repo, "lock.exclusive"))
        r = self.run_borgcheck([repo])
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_LOCK_HELD),
                         "borgcheck: repository %s is locked by borg (lock.exclusive exists): a backup, "
                         "prune or compact may be writing. Run again when it has finished, or pass "
                         "--bypass-lock to check anyway (results may then report changes in progress)"
                         % repo)
        r = self.run_borgcheck(["--verify-data", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_LOCK_HELD)
        r = self.run_borgcheck(["--bypass-lock", "-q", repo])
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((r.stdout, r.stderr), ("", ""))
        r = self.run_borgcheck(["--bypass-lock", "-q", "--verify-data", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((r.stdout, r.stderr), ("", ""))


class KeyCodes(CliTestCase):
    def test_keyfile_repo_without_key_file_exits_42(self):
        repo = self.copy_fixture("v1.2.4/repos/keyfile")
        empty = os.path.join(self.tmp, "empty-keys")
        os.mkdir(empty)
        r = self.run_borgcheck(["--verify-data", repo], {"BORG_PASSPHRASE": cs.PASSPHRASE, "BORG_KEYS_DIR": empty})
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_KEY_FILE_NOT_FOUND),
                         "borgcheck: No key file for repository %s found in %s. Set BORG_KEY_FILE to the "
                         "key file, or BORG_KEYS_DIR to the folder that holds it." % (repo, empty))

    def test_wrong_passphrase_exits_52(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["--verify-data", repo], {"BORG_PASSPHRASE": "not-the-passphrase"})
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_WRONG_PASSPHRASE),
                         "borgcheck: the passphrase supplied in BORG_PASSPHRASE is incorrect for the key "
                         "in config (or that key blob is damaged: the two cannot be told apart). Set the "
                         "right passphrase in BORG_PASSPHRASE.")

    def test_wrong_passphrase_for_key_file_exits_52(self):
        repo = self.copy_fixture("v1.2.4/repos/keyfile")
        key = os.path.join(self.copy_keys(), "keyfile.key")
        r = self.run_borgcheck(["--verify-data", repo], {"BORG_PASSPHRASE": "", "BORG_KEY_FILE": key})
        self.assert_error_exit(r, cs.EXIT_WRONG_PASSPHRASE, "BORG_PASSPHRASE", "the key in " + key)


if __name__ == "__main__":
    cs.main()
