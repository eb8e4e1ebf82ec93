"""Read-only operation. Every run in every CLI test is bracketed by a snapshot of its test
folder (repository copies, HOME, working directory; see cli_support.CliTestCase) and fails if
anything was added, removed or changed. Here: that the snapshot catches what it must, and a
sweep of every clean fixture, keyless and with --verify-data, under that check."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase, snapshot, snapshot_diff  # noqa: E402


class SnapshotCatchesWrites(CliTestCase):
    def setUp(self):
        super().setUp()
        self.repo = self.copy_fixture("v1.2.4/repos/none")
        self.before = snapshot(self.tmp)

    def diff(self):
        return snapshot_diff(self.before, snapshot(self.tmp))

    def test_same_size_same_mtime_content_change(self):
        path = os.path.join(self.repo, "index.29")
        st = os.stat(path)
        with open(path, "r+b") as f:
            f.seek(100)
            b = f.read(1)
            f.seek(100)
            f.write(bytes([b[0] ^ 1]))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.assertEqual(len(self.diff()), 1)
        self.assertTrue(self.diff()[0].startswith("changed: v1.2.4_repos_none/index.29 "))

    def test_added_lock_folder_and_cache_file(self):
        os.mkdir(os.path.join(self.repo, "lock.exclusive"))
        os.makedirs(os.path.join(self.home, ".cache", "borg"))
        self.assertEqual([d.split()[1] if d.startswith("added") else d for d in self.diff()
                          if not d.startswith("changed")],
                         ["home/.cache", "home/.cache/borg", "v1.2.4_repos_none/lock.exclusive"])

    def test_touch_only(self):
        path = os.path.join(self.repo, "config")
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
        self.assertEqual(len(self.diff()), 1)

    def test_write_into_a_hole_of_a_sparse_file(self):
        path = os.path.join(self.tmp, "sparse")
        with open(path, "wb") as f:
            f.truncate(64 << 20)
            f.seek(1 << 20)
            f.write(b"x")
        st = os.stat(path)
        before = snapshot(self.tmp)
        with open(path, "r+b") as f:
            f.seek(40 << 20)
            f.write(b"y")
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.assertEqual(len(snapshot_diff(before, snapshot(self.tmp))), 1)


class CleanFixturesUntouched(CliTestCase):
    def test_every_clean_fixture_keyless_and_verify_data(self):
        for key_set, live in (("v1.2.4", 102), ("v1.4.4", 115)):
            env = {"BORG_PASSPHRASE": cs.PASSPHRASE, "BORG_KEYS_DIR": self.copy_keys(key_set)}
            for mode in sorted(os.listdir(cs.fixture_path(key_set + "/repos"))):
                repo = self.copy_fixture("%s/repos/%s" % (key_set, mode))
                for args in (["--json"], ["--json", "--verify-data"]):
                    with self.subTest(repo=repo, args=args):
                        r = self.run_borgcheck(args + [repo], env)  # checks the snapshot
                        self.assert_rc(r, cs.EXIT_OK)
                        s = self.json_records(r)[-1]
                        want = 17 if mode == "repokey-history" else live
                        self.assertEqual((s["type"], s["objects_total"], s["objects_verified"], s["errors"],
                                          s["warnings"], s["mode"]),
                                         ("summary", want, want, 0, 0,
                                          ("repokey" if mode == "repokey-history" else mode)
                                          if "--verify-data" in args else None))


if __name__ == "__main__":
    cs.main()
