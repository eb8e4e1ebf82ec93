"""The environment borgcheck reads, as borg does: BORG_REPO; the passphrase from
BORG_PASSPHRASE, BORG_PASSCOMMAND or BORG_PASSPHRASE_FD (in that order); key files from
BORG_KEY_FILE, else BORG_KEYS_DIR, else the default keys folder (BORG_BASE_DIR, XDG_CONFIG_HOME,
HOME)."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase  # noqa: E402

OTHER_REPO_ID = "74fc735ed79bde88477c6df4d2fe30d137d05773ca16cbfd66fa07d0a295e65e"  # keyfile-blake2
KEYFILE_REPO_ID = "54ae3d0ea811321724f40d2b128318758fef01011e1d9b0983ce2b5b4653b795"


class BorgRepo(CliTestCase):
    def test_borg_repo_is_used_without_positional_repo(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["--json"], {"BORG_REPO": repo})
        self.assert_rc(r, cs.EXIT_OK)
        summary = self.json_records(r)[-1]
        self.assertEqual((summary["type"], summary["repository"], summary["objects_total"]),
                         ("summary", repo, 102))

    def test_trailing_slash_is_dropped(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["--json"], {"BORG_REPO": repo + "//"})
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual(self.json_records(r)[-1]["repository"], repo)

    def test_positional_repo_wins_over_borg_repo(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["-q", repo], {"BORG_REPO": os.path.join(self.tmp, "missing")})
        self.assert_rc(r, cs.EXIT_OK)

    def test_borg_repo_errors_are_those_of_the_path(self):
        missing = os.path.join(self.tmp, "missing")
        r = self.run_borgcheck([], {"BORG_REPO": missing})
        self.assert_error_exit(r, cs.EXIT_NO_REPO, "repository %s does not exist" % missing)
        r = self.run_borgcheck([], {"BORG_REPO": "ssh://backup@host/./repo", "BORG_RSH": "false"})
        self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN, "cannot connect to ssh://backup@host/./repo: ")
        r = self.run_borgcheck([], {"BORG_REPO": ""})
        self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN, "no repository given: pass REPO or set BORG_REPO")


class Passphrase(CliTestCase):
    def setUp(self):
        super().setUp()
        self.repo = self.copy_fixture("v1.2.4/repos/repokey")

    def verify(self, env, pass_fds=()):
        return self.run_borgcheck(["--verify-data", "-q", self.repo], env, pass_fds)

    def test_passcommand(self):
        r = self.verify({"BORG_PASSCOMMAND": "echo test"})
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((r.stdout, r.stderr), ("", ""))

    def test_passcommand_is_split_like_a_shell_and_run_without_one(self):
        r = self.verify({"BORG_PASSCOMMAND": "sh -c 'printf \"%s\\n\\n\" te\"\"st'"})
        self.assert_rc(r, cs.EXIT_OK)
        # No shell runs the command itself: "echo test; false" would fail in a shell.
        r = self.verify({"BORG_PASSCOMMAND": "echo test; false"})
        self.assert_error_exit(r, cs.EXIT_WRONG_PASSPHRASE, "BORG_PASSCOMMAND")

    def test_failing_passcommand_exits_51(self):
        r = self.verify({"BORG_PASSCOMMAND": "false"})
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_PASSCOMMAND_FAILED),
                         "borgcheck: BORG_PASSCOMMAND failed (false exited with status 1): fix the "
                         "command or set BORG_PASSPHRASE instead")
        missing = os.path.join(self.tmp, "no-such-command")
        r = self.verify({"BORG_PASSCOMMAND": missing})
        self.assert_error_exit(r, cs.EXIT_PASSCOMMAND_FAILED,
                               "BORG_PASSCOMMAND failed (%s exited with status 127)" % missing)
        r = self.verify({"BORG_PASSCOMMAND": "echo 'test"})
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_PASSCOMMAND_FAILED),
                         "borgcheck: BORG_PASSCOMMAND could not be parsed: unbalanced quotes")

    def test_wrong_passphrase_from_passcommand_exits_52(self):
        r = self.verify({"BORG_PASSCOMMAND": "echo wrong"})
        self.assert_error_exit(r, cs.EXIT_WRONG_PASSPHRASE,
                               "the passphrase supplied in BORG_PASSCOMMAND is incorrect for the key in config of "
                               "repository " + self.repo,
                               "BORG_PASSCOMMAND ran and printed a passphrase that does not unlock it: make the "
                               "command print the right one")

    def test_a_passcommand_with_a_pipe_says_that_no_shell_runs_it(self):
        # borg splits BORG_PASSCOMMAND into words (shlex) and runs no shell; so does borgcheck.
        # (false ignores its arguments and prints nothing, as cat's own complaint would.)
        r = self.verify({"BORG_PASSCOMMAND": "false | head -1"})
        self.assert_error_exit(r, cs.EXIT_PASSCOMMAND_FAILED,
                               "BORG_PASSCOMMAND failed (false exited with status 1)",
                               "BORG_PASSCOMMAND is split into words and run without a shell, as borg does, so '|' is "
                               "passed to false as an argument; for a pipe or a redirection use "
                               "BORG_PASSCOMMAND=\"sh -c '...'\"")

    def test_passphrase_fd(self):
        rfd, wfd = os.pipe()
        os.write(wfd, b"test\n")
        os.close(wfd)
        try:
            r = self.verify({"BORG_PASSPHRASE_FD": str(rfd)}, pass_fds=(rfd,))
        finally:
            os.close(rfd)
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((r.stdout, r.stderr), ("", ""))

    def test_passphrase_fd_wrong_or_unreadable(self):
        rfd, wfd = os.pipe()
        os.write(wfd, b"nope")
        os.close(wfd)
        try:
            r = self.verify({"BORG_PASSPHRASE_FD": str(rfd)}, pass_fds=(rfd,))
        finally:
            os.close(rfd)
        self.assert_error_exit(r, cs.EXIT_WRONG_PASSPHRASE, "supplied in BORG_PASSPHRASE_FD is incorrect")
        for value in ("77", "three"):
            with self.subTest(fd=value):
                r = self.verify({"BORG_PASSPHRASE_FD": value})
                self.assertEqual(self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN),
                                 "borgcheck: BORG_PASSPHRASE_FD=%s is not a readable file descriptor" % value)

    def test_order_passphrase_then_passcommand_then_fd(self):
        r = self.verify({"BORG_PASSPHRASE": "test", "BORG_PASSCOMMAND": "false", "BORG_PASSPHRASE_FD": "77"})
        self.assert_rc(r, cs.EXIT_OK)
        r = self.verify({"BORG_PASSCOMMAND": "echo test", "BORG_PASSPHRASE_FD": "77"})
        self.assert_rc(r, cs.EXIT_OK)
        # An empty BORG_PASSPHRASE is a passphrase (the empty one), not "unset".
        r = self.verify({"BORG_PASSPHRASE": "", "BORG_PASSCOMMAND": "echo test"})
        self.assert_error_exit(r, cs.EXIT_WRONG_PASSPHRASE, "supplied in BORG_PASSPHRASE is incorrect")

    def test_no_passphrase_source_and_no_terminal_exits_50(self):
        r = self.verify({})
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_NO_PASSPHRASE),
                         "borgcheck: the key of repository " + self.repo + " is protected by a passphrase and "
                         "there is no terminal to ask for it: set BORG_PASSPHRASE, BORG_PASSCOMMAND or "
                         "BORG_PASSPHRASE_FD, or (a systemd unit) pass it as the credential borg-passphrase with "
                         "LoadCredential= (docs/nightly.md)")


class KeyFiles(CliTestCase):
    def setUp(self):
        super().setUp()
        self.repo = self.copy_fixture("v1.2.4/repos/keyfile")
        self.keys = self.copy_keys()
        self.empty = os.path.join(self.tmp, "empty-keys")
        os.mkdir(self.empty)

    def verify(self, env, repo=None):
        env = dict(env)
        env.setdefault("BORG_PASSPHRASE", cs.PASSPHRASE)
        return self.run_borgcheck(["--verify-data", "--json", repo or self.repo], env)

    def assert_clean(self, r, mode="keyfile"):
        self.assert_rc(r, cs.EXIT_OK)
        summary = self.json_records(r)[-1]
        self.assertEqual((summary["type"], summary["mode"], summary["objects_verified"], summary["errors"]),
                         ("summary", mode, 102, 0))

    def test_borg_key_file(self):
        r = self.verify({"BORG_KEY_FILE": os.path.join(self.keys, "keyfile.key"), "BORG_KEYS_DIR": self.empty})
        self.assert_clean(r)

    def test_the_key_used_is_named_in_the_notes(self):
        # borg 1.x too says which key it used (-v prints the notes; JSON carries them).
        key = os.path.join(self.keys, "keyfile.key")
        r = self.verify({"BORG_KEY_FILE": key, "BORG_KEYS_DIR": self.empty})
        self.assert_clean(r)
        self.assertEqual(self.json_records(r)[-1]["notes"], ["key: " + key])
        r = self.run_borgcheck(["--verify-data", "-v", self.repo],
                               {"BORG_KEYS_DIR": self.keys, "BORG_PASSPHRASE": cs.PASSPHRASE})
        self.assert_rc(r, cs.EXIT_OK)
        self.assertIn("note: key: " + os.path.join(self.keys, "keyfile.key") + "\n", r.stdout)

    def test_borg_key_file_relative_to_working_directory(self):
        rel = os.path.relpath(os.path.join(self.keys, "keyfile.key"), self.cwd)
        r = self.verify({"BORG_KEY_FILE": rel, "BORG_KEYS_DIR": self.empty})
        self.assert_clean(r)

    def test_borg_keys_dir_is_searched_by_repository_id(self):
        # The folder holds the key files of two repositories; each repo finds its own by the
        # key file's first line, not by its name.
        renamed = os.path.join(self.tmp, "renamed-keys")
        os.mkdir(renamed)
        os.rename(os.path.join(self.keys, "keyfile.key"), os.path.join(renamed, "zz"))
        os.rename(os.path.join(self.keys, "keyfile-blake2.key"), os.path.join(renamed, "aa"))
        self.assert_clean(self.verify({"BORG_KEYS_DIR": renamed}))
        other = self.copy_fixture("v1.2.4/repos/keyfile-blake2")
        self.assert_clean(self.verify({"BORG_KEYS_DIR": renamed}, other), "keyfile-blake2")

    def test_default_keys_dir_under_home_base_dir_and_xdg(self):
        for var in ("HOME", "BORG_BASE_DIR"):
            with self.subTest(var=var):
                base = os.path.join(self.tmp, "base-" + var)
                os.makedirs(os.path.join(base, ".config", "borg"))
                os.symlink(self.keys, os.path.join(base, ".config", "borg", "keys"))
                self.assert_clean(self.verify({var: base}))
        xdg = os.path.join(self.tmp, "xdg")
        os.makedirs(os.path.join(xdg, "borg"))
        os.symlink(self.keys, os.path.join(xdg, "borg", "keys"))
        self.assert_clean(self.verify({"XDG_CONFIG_HOME": xdg}))

    def test_key_file_of_another_repository_exits_41(self):
        key = os.path.join(self.keys, "keyfile-blake2.key")
        r = self.verify({"BORG_KEY_FILE": key})
        self.assert_rc(r, cs.EXIT_KEY_FILE_MISMATCH)
        records = self.json_records(r)
        self.assertEqual(records, [{
            "type": "error", "code": "key-file-mismatch", "exit_code": 41,
            "message": "key file %s (from BORG_KEY_FILE) belongs to repository %s, not to %s (%s)"
                       % (key, OTHER_REPO_ID, self.repo, KEYFILE_REPO_ID)}])
        self.assertEqual(r.stderr, "")

    def test_missing_borg_key_file_exits_42(self):
        key = os.path.join(self.tmp, "missing.key")
        r = self.run_borgcheck(["--verify-data", self.repo], {"BORG_PASSPHRASE": "test", "BORG_KEY_FILE": key})
        self.assert_error_exit(r, cs.EXIT_KEY_FILE_NOT_FOUND,
                               "key file %s (from BORG_KEY_FILE) cannot be read" % key)

    def test_keys_dir_without_a_matching_key_exits_42(self):
        os.remove(os.path.join(self.keys, "keyfile.key"))
        r = self.run_borgcheck(["--verify-data", self.repo], {"BORG_PASSPHRASE": "test", "BORG_KEYS_DIR": self.keys})
        self.assert_error_exit(r, cs.EXIT_KEY_FILE_NOT_FOUND,
                               "No key file for repository %s (id " % self.repo, ") found in %s" % self.keys,
                               "Set BORG_KEY_FILE")

    def test_corrupt_keyfile_repo_with_borg_key_file_exits_90(self):
        repo = self.copy_fixture("corrupt/mac-keyfile")
        r = self.verify({"BORG_KEY_FILE": os.path.join(self.keys, "keyfile.key")}, repo)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        findings = [x for x in self.json_records(r) if x["type"] == "finding"]
        self.assertEqual([(f["chunk_id"], f["stage"], f["segment"], f["offset"]) for f in findings],
                         [("9fadf1707ee4cf45ca93ba0c58653eb258dba114c58543ddfff5c39fc996aac2",
                           "authentication", 2, 8)])


if __name__ == "__main__":
    cs.main()
