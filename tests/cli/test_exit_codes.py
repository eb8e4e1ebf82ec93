"""borgcheck's exit codes end to end, with the exact report or message behind each.

0 clean, 1 warnings only, 90 integrity errors, 2 could not run (bad option, a remote form it cannot read, no
repository given), 13 no such path, 15 not a repository / unsupported version, 40 not a key
file, 41 another repository's key file, 42 key file not found, 44 no key in a repokey config,
50 no passphrase and no terminal, 51 BORG_PASSCOMMAND failed, 52 wrong passphrase, 53 three
wrong passphrases typed, 73 lock held. 128+N (signals) is in test_signals.py.
"""

import fcntl
import json
import os
import re
import select
import subprocess
import sys
import termios
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase, mask_times  # noqa: E402

VERIFY = {"BORG_PASSPHRASE": cs.PASSPHRASE}
# The lines the archive pass adds under mac-repokey's finding: the one file that uses the chunk.
MAC_AFFECTS = ("  affects c-none: c-none/text.txt [bytes 0-4096]\n"
               "  advice: borg check --verify-data --repair deletes the damaged chunk and replaces it in these files "
               "by an all-zero chunk of the same size, keeping the original reference (chunks_healthy); if a later "
               "borg create stores the same data again, another borg check --repair puts it back\n")


class CleanAndWarnings(CliTestCase):
    def test_clean_repokey_verify_data_exits_0(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["--verify-data", "--threads", "2", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual(r.stderr, "")
        self.assertEqual(mask_times(r.stdout),
                         repo + ": ok: 102 of 102 objects verified (264.7 KiB), 7 of 7 archives checked, 0 errors, "
                         "0 warnings, <T>\n")

    def test_keyless_check_needs_no_passphrase_and_exits_0(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["--threads", "2", repo])  # no BORG_PASSPHRASE, no terminal
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual(r.stderr, "")
        self.assertEqual(mask_times(r.stdout),
                         repo + ": ok: 102 of 102 objects CRC-checked (264.7 KiB, keyless: contents and archives not verified), 0 errors, 0 warnings, "
                         "<T>\n")

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
                         warning + repo + ": warnings: 17 of 17 objects verified (14.3 KiB), 1 of 1 archive checked, "
                         "0 errors, "
                         "1 warning, <T>\n")
        r = self.run_borgcheck(["--quiet", repo])  # not clean: the verdict too (issue 17)
        self.assert_rc(r, cs.EXIT_WARNINGS)
        self.assertEqual((mask_times(r.stdout), r.stderr),
                         (warning + repo + ": warnings: 17 of 17 objects CRC-checked (14.3 KiB, keyless: contents and "
                          "archives not verified), 0 errors, 1 warning, <T>\n", ""))


class IntegrityErrors(CliTestCase):
    def test_mac_failure_exits_90_naming_chunk_stage_and_location(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        r = self.run_borgcheck(["--verify-data", "--threads", "4", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(r.stderr, "")
        self.assertEqual(mask_times(r.stdout),
                         "error: authentication chunk " + cs.MAC_REPOKEY_CHUNK + " [segment 2, offset 8]: "
                         "MAC Authentication failed (second read: agreed)\n" + MAC_AFFECTS +
                         repo + ": integrity-errors: 101 of 102 objects verified (260.6 KiB), 7 of 7 archives "
                         "checked, 1 error, "
                         "0 warnings, <T>\n")

    def test_quiet_prints_the_finding_and_the_verdict(self):
        # -q is silent on a clean run only: a cron mail with findings says the verdict and what
        # was verified too (issue 17).
        repo = self.copy_fixture("corrupt/mac-repokey")
        r = self.run_borgcheck(["-q", "--verify-data", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual((mask_times(r.stdout), r.stderr), (
            "error: authentication chunk " + cs.MAC_REPOKEY_CHUNK + " [segment 2, offset 8]: "
            "MAC Authentication failed (second read: agreed)\n" + MAC_AFFECTS +
            repo + ": integrity-errors: 101 of 102 objects verified (260.6 KiB), 7 of 7 archives checked, 1 error, "
            "0 warnings, <T>\n", ""))

    def test_mac_damage_is_invisible_to_the_keyless_check(self):
        # The CRC was recomputed after the damage: only --verify-data can see it.
        repo = self.copy_fixture("corrupt/mac-repokey")
        r = self.run_borgcheck(["-q", repo])
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((r.stdout, r.stderr), ("", ""))


class CouldNotCheck(CliTestCase):
    """A unit (segment, pack) that exists and cannot be read is "could not check": stage `io`
    with the errno text, exit 2, never "damaged" or "missing" (docs/exit-codes.md), in every
    generation. Permission bits stand in for EACCES; run as nobody when the tests run as root."""

    def biggest(self, repo, sub):
        files = [os.path.join(d, n) for d, _, ns in os.walk(os.path.join(repo, sub)) for n in ns]
        return max(files, key=os.path.getsize)

    def test_an_unreadable_segment_or_pack_exits_2_in_every_generation(self):
        for where, sub in (("borg1/v1.2.4/repos/repokey", "data"), ("borg2b5/repokey-aes-ocb", "data"),
                           ("borg2master/repos/aes256-ocb_sha256_repokey", "packs")):
            with self.subTest(where=where):
                repo = self.copy_generation(where)
                self.open_to_nobody()
                unit = self.biggest(repo, sub)
                os.chmod(unit, 0)
                if os.geteuid() != 0 and os.access(unit, os.R_OK):
                    self.skipTest("file permissions do not apply to this user")
                r = self.run_unprivileged(["--json", "--verify-data", repo], {"BORG_PASSPHRASE": cs.PASSPHRASE})
                self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
                records = [json.loads(line) for line in r.stdout.splitlines()]
                summary = records[-1]
                findings = [x for x in records if x["type"] == "finding"]
                self.assertEqual((summary["type"], summary["verdict"], summary["exit_code"]),
                                 ("summary", "could-not-check", 2), r)
                self.assertGreater(summary["io_errors"], 0, r)
                self.assertEqual(summary["errors"], summary["io_errors"], r)  # nothing called damaged
                errors = [f for f in findings if f["severity"] == "error"]
                self.assertTrue(errors, r)
                for f in errors:
                    self.assertEqual(f["stage"], "io", f)
                    self.assertIn("Permission denied", f["message"], f)

    def test_the_text_summary_says_could_not_check(self):
        repo = self.copy_generation("borg1/v1.2.4/repos/none")
        self.open_to_nobody()
        os.chmod(os.path.join(repo, "data", "0", "2"), 0)
        r = self.run_unprivileged([repo])
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        self.assertIn("error: io [segment 2]: cannot read segment file: %s/data/0/2: Permission denied" % repo,
                      r.stdout)
        self.assertRegex(r.stdout.splitlines()[-1], r"^%s: could-not-check: " % re.escape(repo))


class CouldNotRun(CliTestCase):
    def test_unknown_option_exits_2(self):
        r = self.run_borgcheck(["--bogus", "/x"])
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        self.assertEqual(r.stdout, "")
        self.assertIn("--bogus", r.stderr)

    def test_bad_option_values_exit_2(self):
        cases = [
            (["--progress=sometimes", "/x"], "--progress: sometimes not in {auto,always,never}"),
            # A bare --progress takes no value (borg's flag): "sometimes" is REPO, "/x" one too many.
            (["--progress", "sometimes", "/x"], "The following argument was not expected: /x"),
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

    def test_remote_forms_it_cannot_read_exit_2(self):
        # ssh:// and user@host:path go to borg serve, sftp:// to the sftp server (tests/remote/);
        # an ssh command that cannot reach anything ends the run with exit 2 and ssh's words.
        for url in ("ssh://user@host:2222/srv/repo", "user@host:repo", "host:/srv/repo"):
            with self.subTest(url=url):
                r = self.run_borgcheck([url], {"BORG_RSH": "false"})
                self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN, "cannot connect to ")
        for url in ("rest://host/repo", "s3://bucket/repo"):
            with self.subTest(url=url):
                r = self.run_borgcheck([url])
                self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN,
                                       "cannot read %s: borgcheck reads local paths, sftp:// and ssh:// URLs" % url)
        # The transport's flags belong to remote repositories only.
        r = self.run_borgcheck(["--remote-connections", "2", self.tmp])
        self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN, "--rsh, --remote-connections, --remote-timeout and --remote-path "
                               "are for remote repositories (sftp://, ssh://); %s is a local path" % self.tmp)
        for bad in (["--remote-connections", "17"], ["--remote-timeout", "0"]):
            with self.subTest(bad=bad):
                r = self.run_borgcheck(bad + ["sftp://host//srv/repo"])
                self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN, bad[0] + " must be between")

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

    def test_an_invalid_config_value_exits_16_in_every_generation(self):
        # borg's InvalidRepositoryConfig (16): the config names a value no repository can have.
        cases = (("borg1/v1.2.4/repos/none", "config", "segments_per_dir = 1000", "segments_per_dir = 0",
                  "config: invalid segments_per_dir '0'"),
                 ("borg2b5/none", "config", None, None, "config: repository id is not 64 hex digits"),
                 ("borg2master/repos/none-sha256", "config/id", None, None,
                  "is not 64 lowercase hex characters"))
        for where, name, old, new, needle in cases:
            with self.subTest(where=where):
                repo = self.copy_generation(where)
                path = os.path.join(repo, name)
                with open(path) as f:
                    text = f.read()
                if old:
                    self.assertIn(old, text)
                    text = text.replace(old, new)
                elif name == "config":
                    text = re.sub(r"\nid = [0-9a-f]{64}\n", "\nid = 12zz\n", text)
                else:
                    text = "not-an-id\n"
                with open(path, "w") as f:
                    f.write(text)
                r = self.run_borgcheck([repo])
                self.assert_error_exit(r, 16, needle)

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
        # Another host's lock: nobody can tell from here whether it is alive (tests/interop has
        # live and stale locks of real borg processes).
        open(os.path.join(repo, "lock.exclusive", "otherhost@1.4242-0"), "w").close()
        r = self.run_borgcheck([repo])
        message = self.assert_error_exit(r, cs.EXIT_LOCK_HELD)
        self.assertRegex(message, r"\Aborgcheck: repository %s is locked by borg: lock.exclusive/otherhost@1\.4242-0 "
                         r"names process 4242 on host otherhost@1, not this one \(this host is .+\)\. Neither "
                         % re.escape(repo))
        self.assertTrue(message.endswith(
            "Neither borg nor borgcheck can tell from here whether it is still running, so the lock "
            "counts as held. If no borg process on otherhost@1 uses the repository, `borg break-lock %s` "
            "removes it; or pass --bypass-lock to check anyway (results may then report changes in "
            "progress)" % repo), message)
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
                         "borgcheck: No key file for repository %s (id %s) found in %s. Set BORG_KEY_FILE to the "
                         "key file, or BORG_KEYS_DIR to the folder that holds it." % (repo, self.config_id(repo), empty))

    def test_wrong_passphrase_exits_52(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["--verify-data", repo], {"BORG_PASSPHRASE": "not-the-passphrase"})
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_WRONG_PASSPHRASE),
                         "borgcheck: the passphrase supplied in BORG_PASSPHRASE is incorrect for the key "
                         "in config of repository %s (or that key blob is damaged: the two cannot be told apart). "
                         "Set the right passphrase in BORG_PASSPHRASE." % repo)

    def test_wrong_passphrase_for_key_file_exits_52(self):
        repo = self.copy_fixture("v1.2.4/repos/keyfile")
        key = os.path.join(self.copy_keys(), "keyfile.key")
        r = self.run_borgcheck(["--verify-data", repo], {"BORG_PASSPHRASE": "", "BORG_KEY_FILE": key})
        self.assert_error_exit(r, cs.EXIT_WRONG_PASSPHRASE, "BORG_PASSPHRASE", "the key in " + key)


class BorgKeyAndPassphraseCodes(CliTestCase):
    """borg's modern codes for the key and passphrase causes (borg's KeyfileInvalidError 40,
    KeyfileMismatchError 41, RepoKeyNotFoundError 44, NoPassphraseFailure 50,
    PasscommandFailure 51, PasswordRetriesExceeded 53), for every repository generation
    whose key loader produces them."""

    KEYFILE_ID = "54ae3d0ea811321724f40d2b128318758fef01011e1d9b0983ce2b5b4653b795"

    def test_borg_key_file_that_is_not_a_key_file_exits_40(self):
        repo = self.copy_fixture("v1.2.4/repos/keyfile")
        notakey = os.path.join(self.tmp, "notes.txt")
        with open(notakey, "w") as f:
            f.write("hello\n")
        r = self.run_borgcheck(["--verify-data", repo], {"BORG_PASSPHRASE": cs.PASSPHRASE, "BORG_KEY_FILE": notakey})
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_KEY_FILE_INVALID),
                         "borgcheck: key file %s (from BORG_KEY_FILE) is not a borg key file: key file does "
                         "not start with `BORG_KEY `" % notakey)

    def test_key_file_of_this_repository_with_a_broken_body_exits_40(self):
        repo = self.copy_fixture("v1.2.4/repos/keyfile")
        keys = os.path.join(self.tmp, "keys")
        os.mkdir(keys)
        bad = os.path.join(keys, "mine")
        with open(bad, "w") as f:
            f.write("BORG_KEY %s\n!!!not base64\n" % self.KEYFILE_ID)
        r = self.run_borgcheck(["--verify-data", repo], {"BORG_PASSPHRASE": cs.PASSPHRASE, "BORG_KEYS_DIR": keys})
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_KEY_FILE_INVALID),
                         "borgcheck: key file %s: key file body is not valid base64" % bad)

    def test_key_file_of_another_repository_exits_41(self):
        repo = self.copy_fixture("v1.2.4/repos/keyfile")
        other = os.path.join(self.copy_keys(), "keyfile-blake2.key")
        r = self.run_borgcheck(["--verify-data", repo], {"BORG_PASSPHRASE": cs.PASSPHRASE, "BORG_KEY_FILE": other})
        self.assert_error_exit(r, cs.EXIT_KEY_FILE_MISMATCH, "key file %s (from BORG_KEY_FILE) belongs to "
                               "repository 74fc735e" % other, "not to %s (%s)" % (repo, self.KEYFILE_ID))
        # borg 2.0.0b5 and borg 2 master: another repository's key file, the same code.
        b5 = self.copy_generation("borg2b5/keyfile-aes-ocb")
        other_b5 = os.path.join(cs.SHARED, "fixtures", "borg2b5", "keyfile-chacha20-poly1305.key")
        r = self.run_borgcheck(["--verify-data", b5], {"BORG_PASSPHRASE": cs.PASSPHRASE, "BORG_KEY_FILE": other_b5})
        self.assert_error_exit(r, cs.EXIT_KEY_FILE_MISMATCH, other_b5, "belongs to repository")
        master = self.copy_generation("borg2master/repos/aes256-ocb_sha256_keyfile")
        r = self.run_borgcheck(["--verify-data", master], {"BORG_PASSPHRASE": cs.PASSPHRASE,
                                                           "BORG_KEY_FILE": other_b5})
        # One key-file search for every generation (checker/keys), so one wording.
        self.assert_error_exit(r, cs.EXIT_KEY_FILE_MISMATCH, other_b5, "belongs to repository b4eff15f",
                               "not to %s (0d542920" % master)

    def test_repokey_config_without_a_key_exits_44(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        cfg = os.path.join(repo, "config")
        with open(cfg) as f:
            text = f.read()
        # The key is the last value; its continuation lines start with a tab.
        stripped = re.sub(r"key = [^\n]*(\n\t[^\n]*)*", "", text)
        self.assertNotIn("key =", stripped)
        with open(cfg, "w") as f:
            f.write(stripped)
        r = self.run_borgcheck(["--verify-data", repo], {"BORG_PASSPHRASE": cs.PASSPHRASE})
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_REPO_KEY_NOT_FOUND),
                         "borgcheck: No key entry found in the config of repository %s (its objects say "
                         "mode repokey)" % repo)

    def test_no_passphrase_and_no_terminal_exits_50_in_every_generation(self):
        message = ("the key of repository %s is protected by a passphrase and there is no terminal to ask for it: "
                   "set BORG_PASSPHRASE, BORG_PASSCOMMAND or BORG_PASSPHRASE_FD, or (a systemd unit) pass it as the "
                   "credential borg-passphrase with LoadCredential= (docs/nightly.md)")
        for rel in ("borg1/v1.2.4/repos/repokey", "borg2b5/repokey-aes-ocb",
                    "borg2master/repos/aes256-ocb_sha256_repokey"):
            with self.subTest(repo=rel):
                repo = self.copy_generation(rel)
                r = self.run_borgcheck(["--verify-data", repo])
                self.assertEqual(self.assert_error_exit(r, cs.EXIT_NO_PASSPHRASE), "borgcheck: " + message % repo)

    def test_failing_passcommand_exits_51(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        for cmd, needle in (("false", "BORG_PASSCOMMAND failed (false exited with status 1)"),
                            ("echo 'unbalanced", "BORG_PASSCOMMAND could not be parsed: unbalanced quotes")):
            with self.subTest(cmd=cmd):
                r = self.run_borgcheck(["--verify-data", repo], {"BORG_PASSCOMMAND": cmd})
                self.assert_error_exit(r, cs.EXIT_PASSCOMMAND_FAILED, needle)
        master = self.copy_generation("borg2master/repos/aes256-ocb_sha256_repokey")
        r = self.run_borgcheck(["--verify-data", master], {"BORG_PASSCOMMAND": "false"})
        self.assert_error_exit(r, cs.EXIT_PASSCOMMAND_FAILED, "BORG_PASSCOMMAND failed")

    def run_on_terminal(self, args, answers, env=None):
        """Runs borgcheck with a pseudo-terminal as its controlling terminal (so it can prompt
        on /dev/tty) and stdin; answers each passphrase prompt with the next of `answers`.
        stdout and stderr are pipes. Returns the RunResult and everything the terminal got."""
        master, slave = os.openpty()
        before = cs.snapshot(self.tmp)

        def make_controlling():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        proc = subprocess.Popen([cs.BINARY] + list(args), env=self.environment(env), cwd=self.cwd,
                                stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, preexec_fn=make_controlling)
        os.close(slave)
        proc.snapshot_before = before
        proc.cli_args = list(args)
        self.addCleanup(self._reap, proc)
        seen, pending, deadline = b"", list(answers), time.monotonic() + 60
        prompts = 0
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                seen += data
            # A prompt is answered only once it is printed: borgcheck flushes the terminal's
            # input when it turns echo off.
            if seen.count(b"Enter passphrase") > prompts and pending:
                prompts += 1
                time.sleep(0.05)
                os.write(master, pending.pop(0).encode() + b"\n")
            if proc.poll() is not None:
                break
        out, err = proc.communicate(timeout=60)
        os.close(master)
        result = cs.RunResult(proc.cli_args, proc.returncode, out, err)
        return self.check_finished(proc, result), seen.decode("utf-8", "replace")

    def test_three_wrong_typed_passphrases_exit_53_and_the_right_one_passes(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r, tty = self.run_on_terminal(["--verify-data", "-q", repo], ["wrong1", "wrong2", "wrong3"])
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_PASSWORD_RETRIES_EXCEEDED),
                         "borgcheck: the passphrase typed is incorrect for the key in config of repository %s (or "
                         "that key blob is damaged: the two cannot be told apart)" % repo)
        self.assertEqual(tty.count("Enter passphrase for key config: "), 3, tty)
        self.assertNotIn("wrong", tty)  # no echo
        r, tty = self.run_on_terminal(["--verify-data", "-q", repo], ["wrong1", cs.PASSPHRASE])
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((r.stdout, r.stderr), ("", ""))
        master = self.copy_generation("borg2master/repos/aes256-ocb_sha256_repokey")
        r, tty = self.run_on_terminal(["--verify-data", "-q", master], ["a", "b", "c"])
        self.assert_error_exit(r, cs.EXIT_PASSWORD_RETRIES_EXCEEDED, "the passphrase typed is incorrect")


if __name__ == "__main__":
    cs.main()
