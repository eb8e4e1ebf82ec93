"""The shell completions (dist/completion/): static files, since CLI11 generates none, kept in
step with `borgcheck --help` here. bash: the completion is loaded into a real bash and asked,
as readline would ask it; the options it offers after "-" are exactly those of --help (short,
long and aliases), the value of an option that takes one is never completed as an option, and
--progress= offers its three choices. zsh: `zsh -n` parses the file, and the options it names
are exactly those of --help, each that takes a value with a value spec."""

import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase  # noqa: E402

SOURCE_DIR = os.path.dirname(cs.DOCS)
BASH = os.path.join(SOURCE_DIR, "dist", "completion", "borgcheck.bash")
ZSH = os.path.join(SOURCE_DIR, "dist", "completion", "_borgcheck")

# Runs _borgcheck on the words given as arguments (the last is the one being completed) and
# prints COMPREPLY, one a line.
ASK = r"""
source "$1"; shift
[[ $(complete -p borgcheck) == "complete -F _borgcheck borgcheck" ]] || { echo "not registered" >&2; exit 3; }
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
_borgcheck
((${#COMPREPLY[@]} == 0)) || printf '%s\n' "${COMPREPLY[@]}"
"""


def help_options(help_text):
    """{option name: takes a value} for every line of --help's option list."""
    opts = {}
    for line in help_text.splitlines():
        m = re.match(r"^  (-[\w,-]+)(?: (?!Excludes:)(\S+))?", line)
        if m:
            value = m.group(2) is not None and not m.group(2).startswith("[")  # [=WHEN]: optional
            for name in m.group(1).split(","):
                opts[name] = value
    return opts


class Completion(CliTestCase):
    def setUp(self):
        super().setUp()
        r = self.run_borgcheck(["--help"])
        self.assert_rc(r, 0)
        self.options = help_options(r.stdout)
        self.assertGreaterEqual(len(self.options), 35)
        for opt, value in (("--threads", True), ("-r", True), ("--glob-archives", True), ("--first", True),
                           ("--json", False), ("-q", False), ("--progress", False), ("--info", False)):
            self.assertEqual(self.options[opt], value, opt)

    def complete(self, *words):
        p = subprocess.run(["bash", "--norc", "--noprofile", "-c", ASK, "ask", BASH, "borgcheck"] + list(words),
                           capture_output=True, text=True, timeout=60, cwd=self.tmp)
        self.assertEqual((p.returncode, p.stderr), (0, ""), p)
        return p.stdout.splitlines()

    def test_bash_offers_exactly_the_options_of_help(self):
        offered = self.complete("-")
        self.assertEqual(len(offered), len(set(offered)), offered)
        self.assertEqual(sorted(offered), sorted(self.options))
        self.assertEqual(self.complete("--verb"), ["--verbose"])
        self.assertEqual(sorted(self.complete("-q", "--ver")), ["--verbose", "--verify-data", "--version"])

    def test_bash_never_offers_options_as_a_value(self):
        for opt, value in sorted(self.options.items()):
            with self.subTest(option=opt):
                offered = self.complete(opt, "--")
                if value:
                    self.assertEqual(offered, [], "%s takes a value: add it to a case of $prev" % opt)
                else:
                    self.assertIn("--json", offered)

    def test_bash_values(self):
        self.assertEqual(self.complete("--progress", "=", ""), ["auto", "always", "never"])
        self.assertEqual(self.complete("-p", "=", "al"), ["always"])
        self.assertEqual(self.complete("--subset", "daily/m"), ["daily/month"])
        os.makedirs(os.path.join(self.tmp, "repo-one"))
        with open(os.path.join(self.tmp, "repo-file"), "w"):
            pass
        self.assertEqual(self.complete("--verify-data", "repo"), ["repo-one"])  # REPO: folders only
        self.assertEqual(self.complete("-r", "repo"), ["repo-one"])
        self.assertEqual(sorted(self.complete("--metrics-file", "repo")), ["repo-file", "repo-one"])

    def test_zsh_names_exactly_the_options_of_help(self):
        p = subprocess.run(["zsh", "-n", ZSH], capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stderr), (0, ""), p)
        with open(ZSH, encoding="utf-8") as f:
            text = f.read()
        self.assertTrue(text.startswith("#compdef borgcheck\n"))
        code = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
        # The options the specs define: '--json[...]', '(-p --progress)--progress=-[...]', and
        # the brace groups {-q,--quiet}; the exclusion lists in (...) may name only options.
        named = {n.rstrip("+=-") for group in re.findall(r"\{([^}]*)\}", code) for n in group.split(",")}
        named |= set(re.findall(r"'(?:\*|\([^)]*\))?(--?[a-zA-Z][\w-]*?)[+=]?-?\[", code))
        self.assertEqual(sorted(named), sorted(self.options))
        excluded = {n for group in re.findall(r"'\(([^)]*)\)", code) for n in group.split()}
        self.assertEqual(excluded - set(self.options), {"-", ":", "*"})
        for opt, value in self.options.items():
            if value and opt.startswith("--"):
                self.assertRegex(code, re.escape(opt) + r"=", "%s takes a value: spec it as %s=" % (opt, opt))
            elif value:
                self.assertRegex(code, re.escape(opt) + r"\+", "%s takes a value: spec it as %s+" % (opt, opt))


if __name__ == "__main__":
    cs.main()
