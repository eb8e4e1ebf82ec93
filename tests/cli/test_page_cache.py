"""The page cache (issue 22): a run leaves it as it found it (docs/cli.md --keep-cache).

For one repository of each generation (borg 1.2.4 segments, 2.0.0b5 segments, master's packs):
a copy whose pages are all dropped from the cache is verified; after the run no page of any of
its files is cached (what the run read, it dropped). With --keep-cache the same run leaves the
files it read cached. A copy cached before the run stays cached. A cold run reads each file
from the disk about once (2.0.0b5's walk of entry headers before its data pass kept its pages
for that pass: a cold run of it read twice its segments). Residency is read with
fincore (util-linux), the tool an administrator would use. The copies live under the build
folder: tmpfs (a /tmp on some machines) keeps every page whatever fadvise asks.

The read-only check of the other CLI tests (cli_support) hashes every file before and after a
run, which caches them: here the snapshot is taken before the pages are dropped and compared
after residency was read.

Pages that must stay cached are checked as "most of them" (at least 3 in 4): the kernel may
take any page back at any time (on the test machines DAMON pages out memory it finds cold
within seconds: a page or two of a cached file went during a run). Pages that must be gone
are checked exactly: nothing brings back a page we dropped.
"""

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase, snapshot, snapshot_diff  # noqa: E402

REPOS = [
    ("borg1/v1.2.4/repos/repokey", "data"),
    ("borg2b5/repokey-aes-ocb", "data"),
    ("borg2master/repos/aes256-ocb_sha256_repokey", "packs"),
]


def repo_files(root):
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for n in files:
            p = os.path.join(dirpath, n)
            if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) > 0:
                out.append(p)
    return sorted(out)


def drop(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cache_in(paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 20):
                pass


PAGE = os.sysconf("SC_PAGE_SIZE")


def whole(path):
    """The bytes of the pages that hold `path` (fincore counts pages)."""
    return -(-os.path.getsize(path) // PAGE) * PAGE


def most_of(kept, of):
    return kept * 4 >= of * 3


def resident(paths):
    """{path: resident bytes} from fincore."""
    r = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES,FILE"] + paths,
                       capture_output=True, text=True, check=True)
    out = {}
    for line in r.stdout.splitlines():
        res, name = line.split(" ", 1)
        out[name] = int(res)
    return out


class PageCache(CliTestCase):
    def setUp(self):
        super().setUp()
        build = os.environ.get("BORGCHECK_BUILD_DIR") or os.getcwd()
        self.disk = tempfile.mkdtemp(prefix="borgcheck-page-cache-", dir=build)
        self.addCleanup(shutil.rmtree, self.disk, True)

    def copy(self, where):
        dest = os.path.join(self.disk, where.replace("/", "_"))
        shutil.copytree(os.path.join(cs.SHARED, "fixtures", where), dest, symlinks=True)
        cs.make_writable(dest)
        return dest

    def run_cold(self, repo, extra=(), precache=False):
        """Drops (or caches) every file of `repo`, runs a check, returns (result, resident after)."""
        before = snapshot(self.disk)
        files = repo_files(repo)
        drop(files)
        self.assertEqual(sum(resident(files).values()), 0,
                         "this file system keeps pages after POSIX_FADV_DONTNEED: the test needs one that lets them go")
        if precache:
            cache_in(files)
            self.assertTrue(most_of(sum(resident(files).values()), sum(whole(p) for p in files)))
        p = subprocess.run([cs.BINARY, "--verify-data", "-q"] + list(extra) + [repo],
                           env=self.environment({"BORG_PASSPHRASE": cs.PASSPHRASE}), cwd=self.cwd,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        after = resident(files)
        self.assertEqual(snapshot_diff(before, snapshot(self.disk)), [], "the run wrote into the repository")
        return p, files, after

    def test_a_cold_repository_is_cold_after_the_run(self):
        for where, data in REPOS:
            with self.subTest(where):
                repo = self.copy(where)
                p, files, after = self.run_cold(repo)
                self.assertEqual(p.returncode, cs.EXIT_OK, p.stderr)
                self.assertEqual({f: n for f, n in after.items() if n}, {})
                # The run did read the data files (a cached copy of them is what --keep-cache keeps).
                self.assertTrue(any(os.sep + data + os.sep in f for f in files))

    def test_keep_cache_leaves_what_was_read_cached(self):
        for where, data in REPOS:
            with self.subTest(where):
                repo = self.copy(where)
                p, files, after = self.run_cold(repo, ["--keep-cache"])
                self.assertEqual(p.returncode, cs.EXIT_OK, p.stderr)
                data_files = [f for f in files if os.sep + data + os.sep in f]
                self.assertTrue(data_files)
                # Every segment or pack was read whole: (most of) it is cached.
                self.assertTrue(most_of(sum(after[f] for f in data_files), sum(whole(f) for f in data_files)),
                                ({f: after[f] for f in data_files}, {f: whole(f) for f in data_files}))

    def test_a_cold_run_reads_each_file_from_the_disk_about_once(self):
        # The binary and its libraries come from the cache: they are not the repository's reads.
        subprocess.run([cs.BINARY, "--version"], capture_output=True, check=True)
        for where, _data in REPOS:
            with self.subTest(where):
                repo = self.copy(where)
                files = repo_files(repo)
                drop(files)
                self.assertEqual(sum(resident(files).values()), 0)
                before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_inblock
                proc = subprocess.Popen([cs.BINARY, "--verify-data", "-q", repo],
                                        env=self.environment({"BORG_PASSPHRASE": cs.PASSPHRASE}), cwd=self.cwd,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                out, err = proc.communicate(timeout=120)
                # communicate reaped it: its rusage is in the children's total.
                self.assertEqual(proc.returncode, cs.EXIT_OK, err)
                total = sum(whole(f) for f in files)
                read = (resource.getrusage(resource.RUSAGE_CHILDREN).ru_inblock - before) * 512
                # Everything once, and a little more: the archive pass reads the archives'
                # metadata objects again (after the data pass dropped them), and a page the
                # kernel took back between the plan and the data pass (see above) is read
                # again. Reading the segments twice (the 2.0.0b5 walk's pages dropped before
                # the data pass) was 2.2 times.
                self.assertGreaterEqual(read, total // 2, "the run read from the cache, not the disk: nothing measured")
                self.assertLessEqual(read, total * 8 // 5, (read, total))

    def test_a_cached_repository_stays_cached(self):
        for where, _data in REPOS:
            with self.subTest(where):
                repo = self.copy(where)
                p, files, after = self.run_cold(repo, precache=True)
                self.assertEqual(p.returncode, cs.EXIT_OK, p.stderr)
                self.assertTrue(most_of(sum(after.values()), sum(whole(f) for f in files)),
                                (after, {f: whole(f) for f in files}))


if __name__ == "__main__":
    cs.main()
