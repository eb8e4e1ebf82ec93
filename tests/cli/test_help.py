"""--version and --help, and docs/cli.md kept in step with --help: the help text is quoted
verbatim, every option has a row in the options table, every exit code and environment
variable the help names has a row in its table."""

import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase  # noqa: E402

SOURCE_DIR = os.path.dirname(cs.DOCS)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def table_rows(doc):
    """First cells of every Markdown table row."""
    return [line.split("|")[1].strip() for line in doc.splitlines() if line.startswith("| ")]


class VersionAndHelp(CliTestCase):
    def test_version(self):
        m = re.search(r"project\(borgcheck VERSION ([0-9.]+)", read(os.path.join(SOURCE_DIR, "CMakeLists.txt")))
        self.assertIsNotNone(m)
        r = self.run_borgcheck(["--version"])
        self.assertEqual((r.rc, r.stdout, r.stderr), (0, "borgcheck %s\n" % m.group(1), ""))

    def test_help_exits_0(self):
        for args in (["--help"], ["-h"], ["--json", "--help"], ["--help", "/some/repo"]):
            with self.subTest(args=args):
                r = self.run_borgcheck(args)
                self.assert_rc(r, 0)
                self.assertEqual(r.stderr, "")
                self.assertTrue(r.stdout.startswith(
                    "borgcheck: verify a BorgBackup repository independently and in parallel.\n"), r)
                self.assertIn("\nUsage: borgcheck [OPTIONS] [REPO]\n", r.stdout)


    def test_help_fits_100_columns_with_no_cli11_headings(self):
        r = self.run_borgcheck(["--help"])
        self.assert_rc(r, 0)
        wide = [line for line in r.stdout.splitlines() if len(line) > 100]
        self.assertEqual(wide, [], "--help lines wider than 100 columns")
        self.assertNotIn("Positionals:", r.stdout)
        self.assertNotIn("Excludes:", r.stdout)
        self.assertIn("\nRepository:\n  REPO TEXT ", r.stdout)
        # A wrapped description goes on under its column.
        self.assertIn("  --verify-data               authenticate, decrypt, decompress and re-hash every live object (needs\n"
                      "                              the key)\n", r.stdout)


class DocsMatchHelp(CliTestCase):
    def setUp(self):
        super().setUp()
        r = self.run_borgcheck(["--help"])
        self.assert_rc(r, 0)
        self.help = r.stdout
        self.doc = read(os.path.join(cs.DOCS, "cli.md"))

    def help_options(self):
        opts = []
        for line in self.help.splitlines():
            m = re.match(r"^  (-\w,)?(--[\w-]+)", line)
            if m:
                if m.group(1):
                    opts.append(m.group(1)[:-1])
                opts.append(m.group(2))
        return opts

    def test_help_is_quoted_verbatim(self):
        # (--help ends with an empty line; the fenced block leaves it out.)
        block = "```\n" + self.help.rstrip("\n") + "\n```\n"
        self.assertTrue(block in self.doc, "docs/cli.md must quote `borgcheck --help` verbatim in a "
                        "fenced block; the help is now:\n" + self.help)

    def test_every_option_has_a_row_in_the_options_table(self):
        opts = self.help_options()
        self.assertEqual(opts, ["-h", "--help", "-r", "--repo", "--verify-data", "--threads", "--json", "-p",
                                "--progress", "--progress-interval", "-q", "--quiet", "-v", "--verbose", "--show-rc",
                                "--bypass-lock", "--lock-wait", "--soft-fail", "--keep-cache", "--repository-only", "--archives-only",
                                "-a", "--match-archives", "--first", "--last", "--subset", "--sample", "--sample-seed",
                                "--max-duration", "--max-age", "--min-interval", "--state-dir", "--rsh", "--remote-path",
                                "--remote-connections", "--remote-timeout", "--shard", "--metrics-file", "--version"])
        rows = table_rows(self.doc)
        missing = [o for o in opts + ["REPO"] if not any(re.search(r"`%s[` ]" % re.escape(o), r) for r in rows)]
        self.assertEqual(missing, [], "options of --help without a row in docs/cli.md's options table")
        # Aliases the help lists after the first long name have rows too.
        for alias in ("--info", "--glob-archives"):
            self.assertIn(alias, self.help)
            self.assertTrue(any(re.search(r"`%s[` ]" % re.escape(alias), r) for r in rows), alias)
        progress_row = next(r for r in self.doc.splitlines() if r.startswith("| ") and "`--progress`" in r)
        for choice in re.search(r"--progress \[=WHEN\]:\{([a-z,]+)\}", self.help).group(1).split(","):
            self.assertIn("`%s`" % choice, progress_row)

    def test_every_exit_code_has_a_row(self):
        para = self.help[self.help.index("Exit codes:"):]
        para = para[:para.index("\n\n")]
        codes = re.findall(r"(?:^|[:;] )(\d+(?:\+N)?) ", para.replace("\n", " "))
        self.assertEqual(codes, ["0", "1", "90", "2", "13", "15", "16", "40", "41", "42", "44", "50", "51", "52", "53",
                                 "73", "75", "141", "128+N"])
        rows = table_rows(self.doc)
        self.assertEqual([c for c in codes if "`%s`" % c not in rows], [])

    def test_every_environment_variable_has_a_row(self):
        names = sorted(set(re.findall(r"\b(?:BORG_|BORGCHECK_|CREDENTIALS_)[A-Z_]+", self.help)))
        self.assertEqual(names, ["BORGCHECK_PROGRESS_INTERVAL", "BORG_BASE_DIR", "BORG_KEYS_DIR", "BORG_KEY_FILE",
                                 "BORG_PASSCOMMAND", "BORG_PASSPHRASE", "BORG_PASSPHRASE_FD", "BORG_REMOTE_PATH",
                                 "BORG_REPO", "BORG_RSH", "CREDENTIALS_DIRECTORY"])
        env_rows = [r for r in table_rows(self.doc) if re.match(r"`(BORG|XDG|CREDENTIALS)", r)]
        self.assertEqual([n for n in names if not any("`%s`" % n in r for r in env_rows)], [])


if __name__ == "__main__":
    cs.main()
