"""borg's command-line habits (docs/cli.md): -r/--repo, a bare -p/--progress that never eats
REPO, -v/--info, --show-rc, --lock-wait, --soft-fail (exit 75), --repository-only and the archive
selections (--archives-only, -a/--match-archives/--glob-archives, --first, --last, REPO::ARCHIVE:
walked with --verify-data, refused without), and the systemd credential as a passphrase source.
"""

import json
import os
import re
import shutil
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase, mask_times  # noqa: E402

VERIFY = {"BORG_PASSPHRASE": cs.PASSPHRASE}
NEEDS_VERIFY_DATA = ("borgcheck: an archive selection (-a/--match-archives, --first, --last, REPO::ARCHIVE) needs "
                     "--verify-data: the archives are read with the key, and a run without it checks the repository "
                     "layer only")
EXIT_SOFT_FAILURE = 75


class Repository(CliTestCase):
    def setUp(self):
        super().setUp()
        self.repo = self.copy_fixture("v1.2.4/repos/repokey")
        self.clean = self.repo + ": ok: 102 of 102 objects CRC-checked (264.7 KiB, keyless: contents and archives not verified), 0 errors, 0 warnings, <T>\n"

    def test_dash_r_and_repo_name_the_repository(self):
        for args in (["-r", self.repo], ["--repo", self.repo], ["--repo=" + self.repo]):
            with self.subTest(args=args):
                r = self.run_borgcheck(args)
                self.assert_rc(r, cs.EXIT_OK)
                self.assertEqual((mask_times(r.stdout), r.stderr), (self.clean, ""))

    def test_a_file_url_is_the_local_path(self):
        # borg takes file:///abs/path as the local repository /abs/path.
        r = self.run_borgcheck(["file://" + self.repo])
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((mask_times(r.stdout), r.stderr), (self.clean, ""))

    def test_borg_check_habit_says_there_is_no_subcommand(self):
        r = self.run_borgcheck(["check", "-r", self.repo])
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN),
                         "borgcheck: borgcheck has no subcommands: 'check' before -r %s is borg's habit; run borgcheck "
                         "-r %s (or borgcheck %s), with the options of borg check" % ((self.repo,) * 3))

    def test_a_duration_in_two_words_says_how_to_write_it(self):
        # `--max-duration 2 hours R` would take "hours" as the repository and complain about R.
        for args, word in ((["--max-duration", "2", "hours", self.repo], "'2 hours' as 2h"),
                           (["--max-duration", "2", "hours"], "'2 hours' as 2h"),
                           (["--max-age=30", "Days", self.repo], "'30 Days' as 30d"),
                           (["--min-interval", "1.5", "w", self.repo], "'1.5 w' as 1.5w")):
            with self.subTest(args=args):
                flag = args[0].split("=")[0]
                r = self.run_borgcheck(args)
                self.assertEqual(self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN),
                                 "borgcheck: %s takes one word: write %s (a number and s, m, h, d or w, "
                                 "without a space)" % (flag, word))
        r = self.run_borgcheck(["--json", "--max-duration", "2", "hours", self.repo])
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        self.assertEqual(json.loads(r.stdout)["message"], "--max-duration takes one word: write '2 hours' as 2h "
                         "(a number and s, m, h, d or w, without a space)")
        # A repository that is only named like a unit is still a repository.
        r = self.run_borgcheck(["--max-duration", "2h", "hours"])
        self.assert_rc(r, cs.EXIT_NO_REPO)

    def test_repository_given_twice_exits_2(self):
        r = self.run_borgcheck(["-r", self.repo, self.repo])
        self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN, "the repository is given twice")

    def test_repo_colon_colon_archive_is_repo_plus_an_archive_selection(self):
        r = self.run_borgcheck([self.repo + "::"])  # borg 1.x: "REPO::" is the repository
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual(mask_times(r.stdout), self.clean)
        r = self.run_borgcheck([self.repo + "::c-lz4"])  # the archives are read with the key
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN), NEEDS_VERIFY_DATA)
        r = self.run_borgcheck(["--verify-data", self.repo + "::c-lz4"], VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        # (the rest of the line says what a partial run left out: docs/nightly.md)
        self.assertTrue(r.stdout.startswith(self.repo + ": ok: 16 of 16 selected objects verified (22.8 KiB), 1 of 7 archives "
                                            "checked, 0 errors, 0 warnings, "), r.stdout)
        # An archive named that does not exist stops the run: borg check only warns (exit 1),
        # which a nightly job takes for success (issue 17).
        r = self.run_borgcheck(["--verify-data", self.repo + "::host-2024-01-01"], VERIFY)
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        self.assertEqual((r.stdout, r.stderr),
                         ("", "borgcheck: archive 'host-2024-01-01' does not exist in the repository (7 archives): "
                              "nothing was checked (borg list shows the archive names)\n"))
        # A relative REPO::ARCHIVE is not taken for a remote host:path.
        r = self.run_borgcheck(["repo::arch"])
        self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN, NEEDS_VERIFY_DATA)


class ProgressFlag(CliTestCase):
    def test_bare_progress_and_p_do_not_eat_the_repository(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        for args in (["--progress", repo], ["-p", repo], [repo, "--progress"], ["-qp", repo],
                     ["--progress", "never", repo], ["--progress=auto", repo]):
            with self.subTest(args=args):
                r = self.run_borgcheck(args)
                self.assert_rc(r, cs.EXIT_OK)
                self.assertEqual(r.stderr, "")  # not a terminal, a short run: no plain line either

    def test_json_with_bare_progress_writes_progress_records(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["--json", "-p", repo])
        self.assert_rc(r, cs.EXIT_OK)
        records = self.json_records(r)
        # Progress records (one every 100 ms: a loaded machine may add some before the final
        # one), the final progress record, then the summary.
        self.assertEqual([x["type"] for x in records], ["progress"] * (len(records) - 1) + ["summary"], r)
        self.assertEqual([x["final"] for x in records[:-1]], [False] * (len(records) - 2) + [True], r)


class Verbosity(CliTestCase):
    def test_default_is_findings_and_one_summary_line_v_adds_notes_and_details(self):
        b5 = os.path.join(self.tmp, "b5")
        shutil.copytree(os.path.join(cs.SHARED, "fixtures", "borg2b5", "repokey-aes-ocb"), b5)
        cs.make_writable(b5)
        r = self.run_borgcheck(["--verify-data", b5], VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual((mask_times(r.stdout), r.stderr),
                         (b5 + ": ok: 154 of 154 objects verified (364.9 KiB), 1 of 1 archive checked, 0 errors, 0 warnings, "
                                 "<T>\n", ""))
        for flag in ("-v", "--verbose", "--info"):
            with self.subTest(flag=flag):
                r = self.run_borgcheck([flag, "--verify-data", b5], VERIFY)
                self.assert_rc(r, cs.EXIT_OK)
                lines = r.stdout.splitlines()
                self.assertEqual(lines[:3], [
                    "note: 1 superseded PUT entry (not current; checksummed only)",
                    "note: key: config",
                    "note: session keys: 1 AEAD session(s) authenticated: 1 with HKDF-SHA512 (borg 2.0.0b5..b7)"])
                self.assertRegex(lines[3], r"^details: borg2-b5 repokey-aes-ocb, 6 segments, transaction 5 "
                                           r"\(log-replay\+index\), 800\.4 KiB plaintext, 365\.6 KiB read at .*, "
                                           r"\d+ threads, borgcheck \d+\.\d+\.\d+")
                # One line per phase, in order, then the summary line.
                self.assertEqual([re.sub(r"[0-9.]+s$", "<T>", l) for l in lines[4:-1]],
                                 ["phase %s: <T>" % p for p in ("plan", "key", "prepare", "read+verify", "finish",
                                                                 "archive pass")], r)
                self.assertEqual(mask_times(lines[-1] + "\n"),
                                 b5 + ": ok: 154 of 154 objects verified (364.9 KiB), 1 of 1 archive checked, 0 errors, 0 warnings, "
                                 "<T>\n")

    def test_quiet_and_verbose_exclude_each_other(self):
        r = self.run_borgcheck(["-q", "-v", "/x"])
        self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
        self.assertIn("--quiet excludes --verbose", r.stderr)

    def test_show_rc(self):
        clean = self.copy_fixture("v1.2.4/repos/repokey")
        bad = self.copy_fixture("corrupt/mac-repokey")
        warn = self.copy_fixture("corrupt/uncommitted-repokey-history")
        for args, rc, line in ((["-q", clean], 0, "borgcheck: terminating with success status, rc 0\n"),
                               (["-q", warn], 1, "borgcheck: terminating with warning status, rc 1\n"),
                               (["-q", "--verify-data", bad], 90, "borgcheck: terminating with error status, rc 90\n"),
                               ([os.path.join(self.tmp, "gone")], 13, None)):
            with self.subTest(args=args):
                r = self.run_borgcheck(["--show-rc"] + args, VERIFY)
                self.assert_rc(r, rc)
                if line:
                    self.assertEqual(r.stderr, line)
                else:
                    self.assertEqual(r.stderr.splitlines()[-1], "borgcheck: terminating with error status, rc 13")
        r = self.run_borgcheck(["--show-rc", "--json", clean])  # the code is in the records
        self.assertEqual((r.rc, r.stderr), (0, ""))


def hold_lock(repo):
    """borg's exclusive lock as another host's borg leaves it (borg cannot tell whether that
    process lives, so the lock is held; an empty lock.exclusive would be a stale one)."""
    lock = os.path.join(repo, "lock.exclusive")
    os.mkdir(lock)
    entry = os.path.join(lock, "otherhost@1.4242-0")
    open(entry, "w").close()
    return lock, entry


class Locks(CliTestCase):
    def setUp(self):
        super().setUp()
        self.repo = self.copy_fixture("v1.2.4/repos/repokey")
        self.lock, self.entry = hold_lock(self.repo)

    def wait_then_release(self, args):
        """Starts borgcheck with `args`, checks that it waits for the lock, releases the lock
        as borg would, and returns the finished run."""
        proc = self.start(args)
        time.sleep(1.5)
        self.assertIsNone(proc.poll(), "borgcheck did not wait for the lock")
        os.unlink(self.entry)  # borg released its lock
        os.rmdir(self.lock)
        out, err = proc.communicate(timeout=30)
        # The read-only check compares with the folder as it was: put the lock back as it was.
        hold_lock(self.repo)
        for path in (self.entry, self.lock, self.repo):
            mtime = proc.snapshot_before[os.path.relpath(path, self.tmp)]
            os.utime(path, ns=(mtime[2] if mtime[0] == "file" else mtime[1],) * 2)
        return self.check_finished(proc, cs.RunResult(proc.cli_args, proc.returncode, out, err))

    def test_lock_wait_checks_once_the_lock_is_gone(self):
        r = self.wait_then_release(["--lock-wait", "30", "-q", self.repo])
        self.assertEqual((r.rc, r.stdout, r.stderr), (cs.EXIT_OK, "", ""), r)

    def test_lock_wait_gives_up_with_73(self):
        started = time.monotonic()
        r = self.run_borgcheck(["--lock-wait", "2", self.repo])
        self.assertGreaterEqual(time.monotonic() - started, 1.5)
        # First it says that it waits, and for whom (a wait of an hour must not look hung).
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 2, r)
        self.assertTrue(lines[0].startswith("borgcheck: waiting up to 2 s (--lock-wait) for borg's lock to be released: "
                                            "repository %s is locked by borg: lock.exclusive/otherhost@1.4242-0 names "
                                            "process 4242 on host otherhost@1" % self.repo), r)
        self.assert_rc(r, cs.EXIT_LOCK_HELD)
        self.assertEqual(r.stdout, "", r)
        self.assertTrue(lines[1].startswith("borgcheck: repository %s is locked by borg: "
                                            "lock.exclusive/otherhost@1.4242-0" % self.repo), r)

    def test_lock_wait_says_when_the_lock_was_released(self):
        r = self.wait_then_release(["--lock-wait", "30", self.repo])
        self.assert_rc(r, cs.EXIT_OK)
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 2, r)
        self.assertTrue(lines[0].startswith("borgcheck: waiting up to 30 s (--lock-wait) for borg's lock"), r)
        self.assertRegex(lines[1], r"^borgcheck: borg's lock was released after \d+ s$")
        # Checked after the wait, keyless: the one summary line of a clean run.
        self.assertEqual(len(r.stdout.splitlines()), 1, r)
        self.assertTrue(r.stdout.startswith(self.repo + ": ok: 102 of 102 objects CRC-checked"), r)

    def test_bad_lock_wait_values_exit_2(self):
        for value in ("-1", "100000"):
            with self.subTest(value=value):
                r = self.run_borgcheck(["--lock-wait=" + value, self.repo])
                self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN, "--lock-wait must be between 0 and 86400 seconds")


class SoftFail(CliTestCase):
    def test_absent_unmounted_or_locked_is_75(self):
        absent = os.path.join(self.tmp, "usb", "borg")
        mountpoint = os.path.join(self.tmp, "mnt")
        os.mkdir(mountpoint)
        locked = self.copy_fixture("v1.2.4/repos/repokey")
        hold_lock(locked)
        for repo, needle in ((absent, "does not exist"), (mountpoint, "is not a borg repository"),
                             (locked, "is locked by borg")):
            with self.subTest(repo=repo):
                r = self.run_borgcheck(["--soft-fail", repo])
                line = self.assert_error_exit(r, EXIT_SOFT_FAILURE, needle)
                self.assertTrue(line.endswith(" (--soft-fail: exit 75, a soft failure)"), line)
                r = self.run_borgcheck(["--soft-fail", "--json", repo])
                self.assertEqual(r.rc, EXIT_SOFT_FAILURE)
                self.assertEqual(self.json_records(r)[0]["exit_code"], EXIT_SOFT_FAILURE)

    def test_everything_else_keeps_its_code(self):
        plain = os.path.join(self.tmp, "plain")
        os.mkdir(plain)
        with open(os.path.join(plain, "README"), "w") as f:
            f.write("not a repository, not empty\n")
        bad = self.copy_fixture("corrupt/mac-repokey")
        for args, env, rc in (([plain], {}, cs.EXIT_NOT_A_REPO),
                              (["--verify-data", bad], VERIFY, cs.EXIT_INTEGRITY_ERRORS),
                              (["--verify-data", bad], {"BORG_PASSPHRASE": "wrong"}, cs.EXIT_WRONG_PASSPHRASE),
                              (["--verify-data", bad], {}, cs.EXIT_NO_PASSPHRASE)):
            with self.subTest(args=args, env=env):
                r = self.run_borgcheck(["--soft-fail", "-q"] + args, env)
                self.assert_rc(r, rc)


class ArchiveSelection(CliTestCase):
    def test_repository_only_leaves_the_archives_out(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        finding = ("error: authentication chunk " + cs.MAC_REPOKEY_CHUNK + " [segment 2, offset 8]: MAC Authentication "
                   "failed (second read: agreed)\n")
        plain = self.run_borgcheck(["--verify-data", repo], VERIFY)
        self.assertEqual(mask_times(plain.stdout).splitlines()[:2],
                         [finding.rstrip("\n"), "  affects c-none: c-none/text.txt [bytes 0-4096]"])
        r = self.run_borgcheck(["--repository-only", "--verify-data", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(mask_times(r.stdout), finding + repo + ": integrity-errors: 101 of 102 objects verified "
                                               "(260.6 KiB), archives not checked (--repository-only), 1 error, "
                                               "0 warnings, <T>\n")
        r = self.run_borgcheck(["-v", "--repository-only", "--verify-data", repo], VERIFY)
        self.assertIn("note: archives not checked: --repository-only\n", r.stdout)

    def test_archive_selections_need_verify_data(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        archives = NEEDS_VERIFY_DATA.replace("an archive selection (-a/--match-archives, --first, --last, "
                                             "REPO::ARCHIVE)", "--archives-only")
        for args, message in ((["--archives-only"], archives), (["-a", "sh:c-*"], NEEDS_VERIFY_DATA),
                              (["--match-archives", "c-*"], NEEDS_VERIFY_DATA),
                              (["--glob-archives", "c-*"], NEEDS_VERIFY_DATA),
                              (["--first", "3"], NEEDS_VERIFY_DATA), (["--last", "1"], NEEDS_VERIFY_DATA)):
            with self.subTest(args=args):
                r = self.run_borgcheck(args + [repo])
                self.assertEqual(self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN), message)

    def test_archive_selections_walk_the_chosen_archives(self):
        # The fixture's seven archives, oldest first: c-none, c-lz4, c-zstd3, c-zlib6, c-lzma6,
        # c-autozstd, c-obf; a borg 1.x pattern without a prefix is a glob.
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        for args, checked in ((["--archives-only"], 7), (["--last", "1"], 1), (["--first", "2"], 2),
                              (["-a", "c-z*"], 2), (["--glob-archives", "sh:c-z*"], 2),
                              (["--match-archives", "re:c-(lz4|obf)"], 2), (["-a", "id:c-lz4"], 1),
                              (["-a", "c-*", "-a", "re:.*std.*"], 2)):
            with self.subTest(args=args):
                r = self.run_borgcheck(["--json", "--verify-data"] + args + [repo], VERIFY)
                self.assert_rc(r, cs.EXIT_OK)
                summary = self.json_records(r)[-1]
                self.assertEqual((summary["archives_checked"], summary["archives_total"]), (checked, 7))
                self.assertEqual(summary["objects_verified"], summary["objects_total"])
        r = self.run_borgcheck(["--verify-data", "-a", "sh:host-*", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_WARNINGS)
        self.assertEqual(r.stdout.splitlines()[0],
                         "warning: archive: -a 'sh:host-*' matches no archive: no archive was checked")
        for args, needle in ((["-a", "re:("], "-a/--match-archives re:(: not a valid regular expression"),
                             (["-a", "tags:daily"], "borg master's tags: patterns are not supported"),
                             (["-a", "x", repo + "::c-lz4"], "REPO::ARCHIVE names one archive")):
            with self.subTest(args=args):
                r = self.run_borgcheck(["--verify-data"] + args + ([] if "::" in args[-1] else [repo]), VERIFY)
                self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
                self.assertIn(needle, r.stderr)

    def test_contradictions_are_usage_errors(self):
        for args, needle in ((["--repository-only", "--archives-only"], "--repository-only excludes --archives-only"),
                             (["--first", "1", "--last", "1"], "--first excludes --last"),
                             (["--repository-only", "--last", "1"], "--repository-only contradicts an archive selection")):
            with self.subTest(args=args):
                r = self.run_borgcheck(args + ["/x"])
                self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
                self.assertIn(needle, r.stderr)


class Credential(CliTestCase):
    """systemd's LoadCredential=borg-passphrase:...: the passphrase in $CREDENTIALS_DIRECTORY."""

    def credentials(self, text):
        d = os.path.join(self.tmp, "credentials")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "borg-passphrase"), "w") as f:
            f.write(text)
        os.chmod(os.path.join(d, "borg-passphrase"), 0o400)
        return d

    def test_credential_is_the_passphrase_after_the_borg_variables(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        d = self.credentials(cs.PASSPHRASE + "\n")
        r = self.run_borgcheck(["-q", "--verify-data", repo], {"CREDENTIALS_DIRECTORY": d})
        self.assertEqual((r.rc, r.stdout, r.stderr), (cs.EXIT_OK, "", ""), r)
        # BORG_PASSPHRASE comes first.
        r = self.run_borgcheck(["-q", "--verify-data", repo], {"CREDENTIALS_DIRECTORY": d, "BORG_PASSPHRASE": "x"})
        self.assert_error_exit(r, cs.EXIT_WRONG_PASSPHRASE, "supplied in BORG_PASSPHRASE")

    def test_wrong_missing_or_unreadable_credential(self):
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        d = self.credentials("wrong\n")
        r = self.run_borgcheck(["--verify-data", repo], {"CREDENTIALS_DIRECTORY": d})
        self.assertEqual(self.assert_error_exit(r, cs.EXIT_WRONG_PASSPHRASE),
                         "borgcheck: the passphrase supplied in the systemd credential borg-passphrase is incorrect "
                         "for the key in config of repository %s (or that key blob is damaged: the two cannot be told "
                         "apart). Put the right passphrase in the file the unit's LoadCredential=borg-passphrase:... "
                         "names." % repo)
        empty = os.path.join(self.tmp, "no-credentials")
        os.mkdir(empty)
        r = self.run_borgcheck(["--verify-data", repo], {"CREDENTIALS_DIRECTORY": empty})
        self.assert_error_exit(r, cs.EXIT_NO_PASSPHRASE, "no terminal")
        os.remove(os.path.join(d, "borg-passphrase"))
        os.mkdir(os.path.join(d, "borg-passphrase"))  # a folder: open works, read fails
        r = self.run_borgcheck(["--verify-data", repo], {"CREDENTIALS_DIRECTORY": d})
        self.assert_error_exit(r, cs.EXIT_COULD_NOT_RUN, "the systemd credential %s/borg-passphrase cannot be read" % d)


if __name__ == "__main__":
    cs.main()
