"""The Debian package's source (debian/) kept in step with the rest: its version is the
project's (CMakeLists.txt, `borgcheck --version`), and its build dependencies are those of
`ci/install-deps --build`. ci/package builds, lints, installs and purges the package itself."""

import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase  # noqa: E402

SOURCE_DIR = os.path.dirname(cs.DOCS)
DEBIAN = os.path.join(SOURCE_DIR, "debian")


def read(*parts):
    with open(os.path.join(*parts), encoding="utf-8") as f:
        return f.read()


def control_field(control, name):
    """A field of debian/control's first (source) stanza, continuation lines joined."""
    lines = [line for line in control.split("\n\n")[0].splitlines() if not line.startswith("#")]
    value, inside = [], False
    for line in lines:
        if re.match(r"^%s:" % re.escape(name), line):
            value.append(line.split(":", 1)[1])
            inside = True
        elif inside and line[:1] in (" ", "\t"):
            value.append(line)
        else:
            inside = False
    return " ".join(value)


class Package(CliTestCase):
    def test_changelog_version_is_the_projects(self):
        project = re.search(r"project\(borgcheck VERSION ([0-9.]+)", read(SOURCE_DIR, "CMakeLists.txt")).group(1)
        head = read(DEBIAN, "changelog").splitlines()[0]
        m = re.match(r"^borgcheck \(((?:\d+:)?([0-9.]+)(-[\w.+~]+)?)\) \w+; urgency=\w+$", head)
        self.assertIsNotNone(m, head)
        native = read(DEBIAN, "source", "format").strip() == "3.0 (native)"
        self.assertEqual(m.group(3) is None, native, "a native package has no Debian revision, others need one")
        self.assertEqual(m.group(2), project, "debian/changelog's newest entry must be the version in CMakeLists.txt")
        r = self.run_borgcheck(["--version"])
        self.assertEqual((r.rc, r.stdout), (0, "borgcheck %s\n" % m.group(2)))

    def test_build_depends_are_install_deps_build(self):
        p = subprocess.run(["bash", os.path.join(SOURCE_DIR, "ci", "install-deps"), "--build", "--list"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        build = set(p.stdout.split())
        field = control_field(read(DEBIAN, "control"), "Build-Depends")
        depends = {re.match(r"\s*([\w.+-]+)", d).group(1) for d in field.split(",") if d.strip()}
        self.assertIn("debhelper-compat", depends)
        self.assertIn("debhelper", build)
        # build-essential (g++ included) is implied for every Debian package; debhelper comes
        # in as debhelper-compat.
        self.assertEqual(sorted(depends - {"debhelper-compat"}), sorted(build - {"build-essential", "g++", "debhelper"}))

    def test_rules_build_the_release_without_tests(self):
        rules = read(DEBIAN, "rules")
        for flag in ("-DCMAKE_BUILD_TYPE=Release", "-DBORGCHECK_BUILD_TESTS=OFF",
                     "-DBORGCHECK_SYSTEMD_UNIT_DIR=/lib/systemd/system"):
            self.assertIn(flag, rules)
        self.assertTrue(os.access(os.path.join(DEBIAN, "rules"), os.X_OK))


if __name__ == "__main__":
    cs.main()
