"""A real borgmatic run (Debian's borgmatic 1.7) with borgcheck in its hooks, as docs/nightly.md
wires it: a repository made by real borg at test time (repokey, so the hook's passphrase
wiring is exercised), borg's own `check --repository-only` through borgmatic, then borgcheck
--verify-data in `after_check`:
  * clean: borgmatic exits 0;
  * one data chunk damaged with its CRC recomputed (borg's repository check cannot see it):
    borgmatic reports the failure (exit 1, borgcheck's finding in its log);
  * a repository that is absent, with `borgcheck --soft-fail` in `before_check`: borgmatic
    skips the repository (exit 0, "soft failure"); without --soft-fail the same is an error.
borgmatic, borg and the hook's shell write where they like, so this test works in a folder of
its own rather than under the read-only check of CliTestCase.
"""

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402

BORG = shutil.which("borg") or "borg"
BORGMATIC = shutil.which("borgmatic") or "borgmatic"
PASSPHRASE = "borgmatic-test"



def documented_hooks():
    """The borgmatic 1.7 hooks of docs/nightly.md, verbatim: (after_check, before_check)."""
    with open(os.path.join(cs.DOCS, "nightly.md"), encoding="utf-8") as f:
        doc = f.read()
    section = doc[doc.index("### borgmatic 1.7"):doc.index("### borgmatic 2.x")]
    hooks = {}
    for name, command in re.findall(r"```yaml\nhooks:\n    (\w+):\n        - (.*)\n```", section):
        hooks[name] = command
    return hooks["after_check"], hooks["before_check"]


AFTER_CHECK, BEFORE_CHECK_SOFT = documented_hooks()

CONFIG = """location:
    source_directories:
        - {src}
    repositories:
        - {repo}
storage:
    encryption_passcommand: cat {pass_file}
consistency:
    checks:
        - name: repository
    prefix: ""
hooks:
    {hook}:
        - {command}
"""



class Borgmatic(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="borgcheck-borgmatic-")
        cls.home = os.path.join(cls.work, "home")
        os.mkdir(cls.home)
        cls.pass_file = os.path.join(cls.work, "passphrase")
        with open(cls.pass_file, "w") as f:
            f.write(PASSPHRASE + "\n")
        os.chmod(cls.pass_file, 0o600)
        cls.src = os.path.join(cls.work, "src")
        os.mkdir(cls.src)
        with open(os.path.join(cls.src, "big.bin"), "wb") as f:
            f.write(os.urandom(300000))  # incompressible: one large data chunk
        with open(os.path.join(cls.src, "small.txt"), "w") as f:
            f.write("hello\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, True)

    @classmethod
    def env(cls):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": cls.home, "LC_ALL": "C.UTF-8"}
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "LSAN_OPTIONS", "LLVM_PROFILE_FILE"):
            if k in os.environ:
                env[k] = os.environ[k]
        return env

    def borgmatic(self, repo, hook, documented):
        # The documented hook with this test's paths: the passphrase file, the binary, the
        # metrics folder.
        command = re.sub(r"/etc/borgcheck/[\w-]+\.passphrase", self.pass_file, documented)
        command = command.replace(" borgcheck -q ", " %s -q " % cs.BINARY)
        command = command.replace("/var/lib/prometheus/node-exporter/", self.work + "/")
        self.assertNotEqual(command, documented)
        cfg = os.path.join(self.work, "config-%s.yaml" % self._testMethodName)
        with open(cfg, "w") as f:
            f.write(CONFIG.format(src=self.src, repo=repo, pass_file=self.pass_file, hook=hook, command=command))
        log = os.path.join(self.work, "borgmatic-%s.log" % self._testMethodName)
        if os.path.exists(log):
            os.remove(log)
        # --log-file: borgmatic logs there (and to the console), not to syslog.
        p = subprocess.run([BORGMATIC, "--config", cfg, "--log-file", log, "--log-file-verbosity", "1", "check"],
                           env=self.env(), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        with open(log) as f:
            return p, f.read()

    def make_repo(self, name):
        """A repository of its own per test (a copy would look "relocated" to borg, which then
        asks before it opens it)."""
        repo = os.path.join(self.work, name)
        env = dict(self.env(), BORG_PASSPHRASE=PASSPHRASE)
        for args in (["init", "--encryption=repokey", repo],
                     ["create", "--compression", "none", repo + "::nightly-1", self.src]):
            p = subprocess.run([BORG] + args, env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, "borg %s: %s" % (args[0], p.stderr))
        return repo

    def test_1_clean_repository_passes(self):
        p, log = self.borgmatic(self.make_repo("clean"), "after_check", AFTER_CHECK)
        self.assertEqual(p.returncode, 0, log + p.stderr)
        self.assertIn("Running command for post-check hook", log)
        self.assertNotIn("Error", log)
        repo = os.path.join(self.work, "clean")
        config_id = cs.CliTestCase.config_id(repo)
        with open(os.path.join(self.work, "borgcheck-srv-borg-main.prom")) as f:  # the hook's --metrics-file
            self.assertIn('borgcheck_success{repo="%s",repo_id="%s"} 1\n' % (repo, config_id), f.read())

    def test_2_damaged_chunk_is_reported_by_borgmatic(self):
        repo = self.make_repo("damaged")
        chunk = damage_largest_put(repo)
        # borg's own repository check (which borgmatic runs first) does not see it: the CRC fits.
        p = subprocess.run([BORG, "check", "--repository-only", repo], env=dict(self.env(), BORG_PASSPHRASE=PASSPHRASE),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        p, log = self.borgmatic(repo, "after_check", AFTER_CHECK)
        self.assertEqual(p.returncode, 1, log + p.stderr)
        self.assertIn("error: authentication chunk %s [segment " % chunk, log)
        self.assertIn("MAC Authentication failed (second read: agreed)", log)
        self.assertIn("returned non-zero exit status 90", log)
        self.assertIn("Error running actions for repository", log)

    def test_3_absent_repository_with_soft_fail_is_skipped(self):
        absent = os.path.join(self.work, "usb-disk", "borg")  # its disk is not mounted
        p, log = self.borgmatic(absent, "before_check", BEFORE_CHECK_SOFT)
        self.assertEqual(p.returncode, 0, log + p.stderr)
        self.assertIn("Command hook exited with soft failure exit code (75); skipping remaining actions", log)
        self.assertNotIn("Running consistency checks", log)  # borg's check never ran
        # The control: without --soft-fail, the same hook is an error (exit 13).
        without = BEFORE_CHECK_SOFT.replace(" --soft-fail", "")
        self.assertNotEqual(without, BEFORE_CHECK_SOFT)
        p, log = self.borgmatic(absent, "before_check", without)
        self.assertEqual(p.returncode, 1, log + p.stderr)
        self.assertIn("returned non-zero exit status 13", log)


def damage_largest_put(repo):
    """Flips one byte in the middle of the largest PUT entry's data (a file chunk, whose MAC now
    fails) and recomputes the entry's CRC32, so that only --verify-data can notice. Returns the
    chunk id (hex)."""
    best = None
    data_dir = os.path.join(repo, "data")
    for sub in os.listdir(data_dir):
        for name in os.listdir(os.path.join(data_dir, sub)):
            path = os.path.join(data_dir, sub, name)
            with open(path, "rb") as f:
                b = f.read()
            pos = 8
            while pos + 9 <= len(b):
                _crc, size, tag = struct.unpack_from("<IIB", b, pos)
                if size < 9:
                    break
                if tag == 0 and (best is None or size > best[2]):
                    best = (path, pos, size)
                pos += size
    path, pos, size = best
    with open(path, "rb") as f:
        b = bytearray(f.read())
    b[pos + 41 + (size - 41) // 2] ^= 0x01
    struct.pack_into("<I", b, pos, zlib.crc32(bytes(b[pos + 4:pos + size])))
    with open(path, "wb") as f:
        f.write(b)
    return bytes(b[pos + 9:pos + 41]).hex()


if __name__ == "__main__":
    cs.main()
