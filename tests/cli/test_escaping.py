"""Text output escapes every string from the repository or the command line (issue 17 item 5;
checker/base/text_escape.h, docs/cli.md "Escaping"); --json carries them exactly.

Repositories are made at test time by borg 1.2.4 and borg2 2.0.0b5 (`-e none`, so a chunk id is
the sha256 of its data) from one tree whose file names hold a newline (a path that would forge
a summary line in cron mail), CR, an ESC [ sequence, BEL, tab, bytes that are not UTF-8, a
backslash, a C1 control (CSI), a bidi override, and valid UTF-8 that must pass unchanged. Two
archives each, named with what each borg accepts from `create`:
  * borg 1.2.4: ESC, BEL, tab, CR, DEL, C1 and bidi controls, a backslash, an OSC sequence; not
    a newline (its REPO::ARCHIVE parser refuses it) nor invalid UTF-8 (msgpack raises). Its
    `rename` takes a newline, but the renamed archive does not verify (borg #7791): that case
    is its own test, which asserts only the escaping;
  * borg2 2.0.0b5 refuses C0 controls ("invalid control chars detected"), a backslash and
    invalid UTF-8 in archive names, and takes DEL, C1 and bidi controls.
On copies: two file chunks deleted (`borg debug delete-obj`), on a copy whose folder name holds
a newline and ESC (the summary line): each finding names its path in both archives; every file
chunk deleted: a roll-up whose member lines name every path (with -v). Then `-a` with ESC and
BEL in its pattern (echoed in a warning), a missing repository path with a newline (stderr) and
an option value with ESC (the option parser's message). Asserted: the exact text lines and no
other (nothing forged), no byte below 0x20 but the newline, no DEL, no C1 or bidi control and
no U+FFFD anywhere in stdout or stderr, and the exact names in --json (a byte that is not UTF-8
is U+FFFD there, as docs/json.md says).
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402

BORG1 = shutil.which("borg") or "borg"
BORG2 = shutil.which("borg2") or "borg2"

# (raw name as stored, as the text output must show it); the first is a path with folders.
FILES = [
    (b"x\n/srv/borg/main: ok: 1 of 1 objects verified", "x\\n/srv/borg/main: ok: 1 of 1 objects verified"),
    (b"cr\rname", "cr\\rname"),
    (b"esc\x1b[31mred\x1b[0m", "esc\\x1b[31mred\\x1b[0m"),
    (b"bel\x07", "bel\\x07"),
    (b"tab\tname", "tab\\tname"),
    (b"bad\xff\xfe.bin", "bad\\xff\\xfe.bin"),
    (b"back\\slash", "back\\\\slash"),
    (b"c1\xc2\x9b2J", "c1\\u009b2J"),
    (b"bidi\xe2\x80\xaetxt.exe", "bidi\\u202etxt.exe"),
    (b"K\xc3\xa4se \xe2\x82\xac", "K\u00e4se \u20ac"),  # valid UTF-8 passes unchanged
]
# Deleted on the first damaged copy: the chunks of these files (two: no roll-up).
PAIR = (0, 2)

# Archive names: (name as given to create, as shown in text), two archives per generation.
ARCHIVES = {
    "borg1": [("first\x1b[31m\x07\t\r\x7f\u009b\u202e\\", "first\\x1b[31m\\x07\\t\\r\\x7f\\u009b\\u202e\\\\"),
              ("second\x1b]0;title\x07", "second\\x1b]0;title\\x07")],
    "borg2b5": [("first\x7f\u009b2J\u202e", "first\\x7f\\u009b2J\\u202e"),
                ("second\u2066\u0085", "second\\u2066\\u0085")],
}
# borg 1.2.4 takes a newline in an archive name only from `rename`.
RENAMED = "nl\nmain: ok: forged"

SCRATCH = None
REPOS = {}


def content(i):
    return b"escaping test file %d\n" % i * 8


def borg(gen, repo, words, archive=None, tail=(), cwd=None):
    env = dict(os.environ, BORG_BASE_DIR=os.path.join(SCRATCH, gen + "-base"), BORG_PASSPHRASE="",
               BORG_RELOCATED_REPO_ACCESS_IS_OK="yes", BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK="yes",
               BORG_CHECK_I_KNOW_WHAT_I_AM_DOING="YES", TZ="UTC")
    if gen == "borg1":
        cmd = [BORG1, *words, os.fsencode(repo) + (b"::" + archive.encode() if archive else b""), *tail]
    else:
        cmd = [BORG2, "-r", repo, *words, *([archive] if archive else []), *tail]
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise AssertionError(f"{cmd!r} failed ({p.returncode}):\n{p.stderr.decode(errors='replace')[-3000:]}")
    return p


def setUpModule():
    global SCRATCH
    SCRATCH = tempfile.mkdtemp(prefix="borgcheck-escaping-")
    src = os.path.join(SCRATCH, "src").encode()
    for i, (name, _) in enumerate(FILES):
        path = os.path.join(src, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content(i))
    for gen, archives in ARCHIVES.items():
        repo = os.path.join(SCRATCH, gen)
        borg(gen, repo, ["init" if gen == "borg1" else "rcreate", "-e", "none"])
        for name, _ in archives:
            borg(gen, repo, ["create"], archive=name, tail=["."], cwd=src)
        REPOS[gen] = repo


def tearDownModule():
    if SCRATCH:
        shutil.rmtree(SCRATCH, True)


def chunk_id(i):
    return hashlib.sha256(content(i)).hexdigest()


MISSING = "chunk is not in the repository: {uses} cannot be restored (missing file chunk)"
ADVICE = ("borg check --repair replaces the missing chunk in these files by an all-zero chunk of the same size and "
          "keeps the original reference (chunks_healthy); if a later borg create stores the same data again, "
          "another borg check --repair puts it back and the files are whole again")
SUMMARY = re.compile(r"^(?P<repo>.*): integrity-errors: \d+ of \d+ objects verified \([^)]*\), 2 of 2 archives "
                     r"checked, (?P<errors>\d+) errors, 0 warnings, \d+\.\d\ds$")


def escaped_path(p):
    """A test folder path (ASCII but for what the tests put in it) as text output shows it."""
    return p.replace("\\", "\\\\").replace("\n", "\\n").replace("\x1b", "\\x1b")


def lines_of(text):
    """Text output's lines: split at "\n" only (str.splitlines() also splits at U+0085 and
    U+2028, which must not be in text output anyway: assert_clean_bytes checks)."""
    return text.split("\n")[:-1] if text else []


class Escaping(cs.CliTestCase):
    def copy(self, gen, name):
        dest = os.path.join(self.tmp, name)
        shutil.copytree(REPOS[gen], dest)
        return dest

    def assert_clean_bytes(self, result):
        """No control character of any kind reaches stdout or stderr: no C0 byte but the
        newline, no DEL, no C1 (UTF-8 C2 80-9F) and no bidi control; and both are UTF-8."""
        for stream, data in (("stdout", result.stdout_bytes), ("stderr", result.stderr.encode())):
            bad = [b for b in data if (b < 0x20 and b != 0x0A) or b == 0x7F]
            self.assertEqual(bad, [], f"{stream}: {result!r}")
            text = data.decode("utf-8")  # raises on a raw byte that is not UTF-8
            self.assertNotIn("\ufffd", text, f"{stream}: {result!r}")  # nor was one replaced
            self.assertEqual([c for c in text if 0x80 <= ord(c) <= 0x9F or ord(c) in
                              (0x061C, 0x200E, 0x200F, 0x2028, 0x2029) or 0x202A <= ord(c) <= 0x202E or
                              0x2066 <= ord(c) <= 0x2069], [], f"{stream}: {result!r}")

    def run_text(self, args, rc):
        r = self.run_borgcheck(args)
        self.assert_rc(r, rc)
        self.assert_clean_bytes(r)
        return r

    def check_damaged(self, gen):
        archives = ARCHIVES[gen]
        # Two file chunks deleted, on a copy whose own folder name would forge a summary line.
        repo = self.copy(gen, "repo\n/srv/borg/main: ok: 1 of 1 objects verified\x1b[2J")
        borg(gen, repo, ["debug", "delete-obj"], tail=[chunk_id(i) for i in PAIR])
        r = self.run_text(["--verify-data", "--threads", "2", repo], cs.EXIT_INTEGRITY_ERRORS)
        expected = []
        for i in sorted(PAIR, key=chunk_id):
            expected.append(f"error: reference chunk {chunk_id(i)}: " +
                            MISSING.format(uses="2 uses by files in 2 archives"))
            expected += [f"  affects {shown}: {FILES[i][1]} [bytes 0-{len(content(i))}]" for _, shown in archives]
            expected.append("  advice: " + ADVICE)
        lines = lines_of(r.stdout)
        self.assertEqual(lines[:-1], expected, r)  # every line, none forged
        m = SUMMARY.match(lines[-1])
        self.assertTrue(m, r)
        self.assertEqual((m["repo"], m["errors"]), (escaped_path(repo), "2"), r)
        self.assertEqual(r.stderr, "", r)

        # --json: the exact names (a byte that is not UTF-8 is U+FFFD, docs/json.md).
        j = self.run_borgcheck(["--json", "--verify-data", "--threads", "2", repo])
        self.assert_rc(j, cs.EXIT_INTEGRITY_ERRORS)
        records = self.json_records(j)
        uses = sorted((u["archive"], u["path"]) for rec in records if rec["type"] == "finding"
                      for u in rec["affected"])
        self.assertEqual(uses, sorted((name, FILES[i][0].decode("utf-8", "replace"))
                                      for i in PAIR for name, _ in archives), j)
        self.assertEqual(records[-1]["repository"], repo, j)

        # Every file chunk deleted: one roll-up whose member lines name every path, with the
        # first archive that uses it; -v adds the notes and the details line.
        every = self.copy(gen, "every")
        borg(gen, every, ["debug", "delete-obj"], tail=[chunk_id(i) for i in range(len(FILES))])
        r = self.run_text(["-v", "--verify-data", "--threads", "2", every], cs.EXIT_INTEGRITY_ERRORS)
        lines = lines_of(r.stdout)
        header = f"error: reference: {len(FILES)} objects: " + MISSING.format(uses="2 uses by files in 2 archives")
        members = [f"  chunk {chunk_id(i)}: affects {archives[0][1]}: {FILES[i][1]} [bytes 0-{len(content(i))}] "
                   "(and 1 more)" for i in sorted(range(len(FILES)), key=chunk_id)]
        self.assertEqual(lines[:len(FILES) + 2], [header] + members + ["  advice: " + ADVICE], r)
        self.assertTrue(all(line.startswith(("note: ", "details: ", "phase ")) for line in lines[len(FILES) + 2:-1]), r)
        m = SUMMARY.match(lines[-1])
        self.assertTrue(m, r)
        self.assertEqual((m["repo"], m["errors"]), (every, str(len(FILES))), r)

    def test_borg1_damaged(self):
        self.check_damaged("borg1")

    def test_borg2b5_damaged(self):
        self.check_damaged("borg2b5")

    def check_arguments(self, gen):
        """Strings from the command line: an archive pattern echoed in a warning, a repository
        path in an error, an option value in the option parser's message."""
        repo = self.copy(gen, "clean")
        r = self.run_text(["--verify-data", "-a", "sh:none\x1b[2J\x07", repo], cs.EXIT_WARNINGS)
        lines = lines_of(r.stdout)
        self.assertEqual(lines[0], "warning: archive: -a 'sh:none\\x1b[2J\\x07' matches no archive: no archive was "
                                   "checked", r)
        self.assertEqual(len(lines), 2, r)
        self.assertTrue(lines[1].startswith(repo + ": warnings: "), r)

        gone = os.path.join(self.tmp, "gone\n\x1b[31mred")
        r = self.run_text([gone], cs.EXIT_NO_REPO)
        self.assertIn(escaped_path(gone), self.assert_error_exit(r, cs.EXIT_NO_REPO), r)

        r = self.run_text(["--threads", "\x1b[31m\n4", repo], cs.EXIT_COULD_NOT_RUN)
        self.assertEqual(r.stdout, "", r)
        self.assertIn("\\x1b[31m\\n4", r.stderr, r)

    def test_borg1_arguments(self):
        self.check_arguments("borg1")

    def test_borg2b5_arguments(self):
        self.check_arguments("borg2b5")

    def test_borg1_renamed_archive_with_a_newline(self):
        """borg 1.2.4 `rename` takes a newline; the archive it writes does not verify (borg #7791,
        issue 17 item 6), so only its name is asserted: escaped wherever it is printed (location,
        message, affected use), and no line is forged."""
        repo = self.copy("borg1", "renamed")
        borg("borg1", repo, ["rename"], archive=ARCHIVES["borg1"][1][0], tail=[RENAMED])
        r = self.run_borgcheck(["--verify-data", repo])
        self.assertNotEqual(r.rc, cs.EXIT_OK, r)
        self.assert_clean_bytes(r)
        lines = lines_of(r.stdout)
        self.assertIn("nl\\nmain: ok: forged", r.stdout, r)
        self.assertEqual([line for line in lines if line.startswith("main: ok")], [], r)
        self.assertTrue(lines[-1].startswith(repo + ": "), r)


if __name__ == "__main__":
    cs.main()
