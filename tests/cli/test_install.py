"""`cmake --install` into a temporary prefix: the binary, the man page (made by help2man from
--help, rendered by `man -l`), the docs (every one the README names for users), the Prometheus
alert rules, the bash and zsh completions, and the systemd units, which `systemd-analyze verify`
accepts (and, to show the check is real here, rejects when broken). The installed binary needs
no package beyond `ci/install-deps --runtime`. (The Debian package installs the same files:
ci/package.)

Run by CTest with the build folder in BORGCHECK_BUILD_DIR (label "install": it needs the whole
build, man page included, so the TSan gate, which builds only its targets, leaves it out).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase  # noqa: E402

SOURCE_DIR = os.path.dirname(cs.DOCS)
BUILD_DIR = os.environ.get("BORGCHECK_BUILD_DIR", "")
UNITS = ("borgcheck@.service", "borgcheck@.timer")
DOCS = ("README.md", "cli.md", "json.md", "exit-codes.md", "formats.md", "nightly.md", "remote.md",
        "distributed.md")
SANITIZER_RUNTIMES = re.compile(r"^lib(asan|ubsan|tsan|lsan)\d+$")


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


class Installed(CliTestCase):
    @classmethod
    def setUpClass(cls):
        if not BUILD_DIR:
            raise AssertionError("BORGCHECK_BUILD_DIR is not set (CTest sets it to the build folder)")
        cls.prefix = tempfile.mkdtemp(prefix="borgcheck-install-")
        p = run(["cmake", "--install", BUILD_DIR, "--prefix", cls.prefix])
        if p.returncode != 0:
            raise AssertionError("cmake --install failed (is the whole build done, man page included?):\n" +
                                 p.stdout + p.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.prefix, True)

    def path(self, *parts):
        return os.path.join(self.prefix, *parts)

    def test_binary_man_page_docs_and_units_are_installed(self):
        binary = self.path("bin", "borgcheck")
        self.assertTrue(os.access(binary, os.X_OK), binary)
        p = run([binary, "--version"])
        with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
            version = re.search(r"project\(borgcheck VERSION ([0-9.]+)", f.read())
        self.assertEqual((p.returncode, p.stdout), (0, "borgcheck %s\n" % version.group(1)), p)
        self.assertTrue(os.path.isfile(self.path("share", "man", "man1", "borgcheck.1")))
        for d in DOCS:
            self.assertTrue(os.path.isfile(self.path("share", "doc", "borgcheck", d)), d)
        for u in UNITS:
            self.assertTrue(os.path.isfile(self.path("lib", "systemd", "system", u)), u)

    def test_alert_rules_and_completions_are_installed(self):
        for installed, source in ((("share", "borgcheck", "borgcheck-alerts.yml"), ("prometheus", "borgcheck-alerts.yml")),
                                  (("share", "bash-completion", "completions", "borgcheck"),
                                   ("completion", "borgcheck.bash")),
                                  (("share", "zsh", "site-functions", "_borgcheck"), ("completion", "_borgcheck"))):
            with open(self.path(*installed), "rb") as f, open(os.path.join(SOURCE_DIR, "dist", *source), "rb") as g:
                self.assertEqual(f.read(), g.read(), installed)

    def test_the_installed_readme_names_only_installed_docs(self):
        # The README names docs by their source paths (docs/cli.md); they are installed next to
        # it. Its Development section is about the source tree (docs/design.md stays there).
        with open(os.path.join(SOURCE_DIR, "README.md"), encoding="utf-8") as f:
            readme = f.read().split("\n## Development\n")[0]
        named = sorted(set(re.findall(r"\bdocs/([\w-]+\.md)", readme)))
        self.assertGreaterEqual(len(named), 4)
        for doc in named:
            self.assertTrue(os.path.isfile(self.path("share", "doc", "borgcheck", doc)), doc)

    def test_man_renders_and_says_what_help_says(self):
        page = self.path("share", "man", "man1", "borgcheck.1")
        p = run(["man", "--warnings", "-l", page], env={"PATH": os.environ["PATH"], "MANWIDTH": "100",
                                                         "MANPAGER": "cat", "LC_ALL": "C.UTF-8"})
        self.assertEqual((p.returncode, p.stderr), (0, ""), p.stderr)
        text = re.sub(r".\x08", "", p.stdout)  # overstrike bold/underline, if the pager kept it
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES", "FILES", "SEE ALSO"):
            self.assertRegex(text, r"(?m)^%s$" % section)
        self.assertRegex(text, r"borgcheck - verify a BorgBackup repository independently and in\s+parallel")
        help_text = run([self.path("bin", "borgcheck"), "--help"]).stdout
        options = re.findall(r"(?m)^  (--[\w-]+|-\w,--[\w-]+)", help_text)
        self.assertGreaterEqual(len(options), 20)
        for opt in options:  # (groff may print a hyphen as U+2010)
            self.assertIn(opt, text.replace("\u2010", "-"), opt)
        self.assertIn("128+N killed by signal N", re.sub(r"\s+", " ", text))

    def test_systemd_analyze_accepts_the_units(self):
        units = [self.path("lib", "systemd", "system", u) for u in UNITS]
        with open(units[0]) as f:
            service = f.read()
        self.assertIn("ExecStart=%s $BORGCHECK_OPTIONS --metrics-file ${BORGCHECK_METRICS} %%f\n"
                      % self.path("bin", "borgcheck"), service)
        # StateDirectory=: the home folders are read-only (ProtectHome=), so the partial-run
        # options the unit's comment names need $STATE_DIRECTORY for their state (issue 17).
        for key in ("Type=oneshot", "Nice=19", "IOSchedulingClass=idle", "SuccessExitStatus=1",
                    "LoadCredential=borg-passphrase:/etc/borgcheck/%i.passphrase", "ProtectHome=read-only",
                    "StateDirectory=borgcheck"):
            self.assertIn("\n" + key + "\n", service)
        with open(units[1]) as f:
            timer = f.read()
        for key in ("Persistent=true", "RandomizedDelaySec=45min", "WantedBy=timers.target"):
            self.assertIn("\n" + key + "\n", timer)
        p = run(["systemd-analyze", "verify", "--man=no"] + units)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""), p)

    def test_systemd_analyze_rejects_broken_units_here(self):
        # The check above means something only if systemd-analyze works in this environment
        # (it needs no running systemd): a typo is reported, a missing binary fails.
        d = tempfile.mkdtemp(prefix="borgcheck-units-")
        self.addCleanup(shutil.rmtree, d, True)
        with open(self.path("lib", "systemd", "system", UNITS[0])) as f:
            service = f.read()
        typo = os.path.join(d, "typo@.service")
        with open(typo, "w") as f:
            f.write(service.replace("IOSchedulingClass=idle", "IOSchedulingClass=idel"))
        p = run(["systemd-analyze", "verify", "--man=no", typo])
        self.assertIn("Failed to parse IO scheduling class", p.stderr)
        missing = os.path.join(d, "missing@.service")
        with open(missing, "w") as f:
            f.write(service.replace(self.path("bin", "borgcheck"), os.path.join(d, "no-such-binary")))
        p = run(["systemd-analyze", "verify", "--man=no", missing])
        self.assertNotEqual(p.returncode, 0, p)
        self.assertIn("is not executable", p.stderr)

    def test_nightly_md_shows_the_installed_service(self):
        with open(os.path.join(cs.DOCS, "nightly.md"), encoding="utf-8") as f:
            doc = f.read()
        excerpt = re.search(r"```ini\n(.*?)```", doc, re.S).group(1)
        with open(self.path("lib", "systemd", "system", UNITS[0])) as f:
            service = f.read().replace(self.path("bin"), "/usr/local/bin")
        for line in excerpt.splitlines():
            self.assertIn(line + "\n", service)

    def test_runtime_packages_cover_what_the_binary_links(self):
        p = run(["bash", os.path.join(SOURCE_DIR, "ci", "install-deps"), "--runtime", "--list"])
        self.assertEqual(p.returncode, 0, p.stderr)
        runtime = set(p.stdout.split())
        for heavy in ("clang", "llvm", "borgbackup2", "g++", "cmake"):
            self.assertNotIn(heavy, runtime)
        libs = re.findall(r"=> (/\S+)", run(["ldd", self.path("bin", "borgcheck")]).stdout)
        self.assertTrue(libs)
        needed = set()
        for lib in libs:
            owner = run(["dpkg", "-S", os.path.realpath(lib)])
            if owner.returncode != 0:
                owner = run(["dpkg", "-S", lib])
            self.assertEqual(owner.returncode, 0, lib)
            needed.add(owner.stdout.split(":")[0])
        needed = {n for n in needed if not SANITIZER_RUNTIMES.match(n)} - {"libc6", "libgcc-s1"}
        self.assertEqual(sorted(needed - runtime), [], "libraries the binary links but --runtime does not install")


if __name__ == "__main__":
    cs.main()
