#!/usr/bin/env python3
"""borg 1.x locks made by real borg (Debian's borg 1.2.4) at test time: a stale lock left by a
killed `borg create` is checked with a warning (exit 1), a running `borg with-lock` refuses
(exit 73), another host's lock refuses. The scenarios are in lock_scenarios.py (shared with
tests/borg2b5/borg2b5_lock_test.py).

Run: borg1_lock_test.py --borgcheck PATH [--borg PATH] [unittest args]. Python 3 stdlib.
"""

import argparse
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lock_scenarios  # noqa: E402


class Borg1(lock_scenarios.Generation):
    name = "borg1"

    def __init__(self, borg):
        self.borg = borg
        self.comm = os.path.basename(borg)[:15]  # the script's name, as /proc/<pid>/comm shows it

    def init(self, repo):
        return [self.borg, "init", "--encryption", "repokey", repo]

    def create(self, repo, archive, src):
        return [self.borg, "create", "%s::%s" % (repo, archive), src]

    def create_from_stdin(self, repo, archive):
        return [self.borg, "create", "--paths-from-stdin", "%s::%s" % (repo, archive)]

    def with_lock(self, repo, command):
        return [self.borg, "with-lock", repo] + command

    def list(self, repo, lock_wait=None):
        return [self.borg] + (["--lock-wait", str(lock_wait)] if lock_wait else []) + ["list", repo]


class Borg1Locks(lock_scenarios.LockScenarios, unittest.TestCase):
    pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--borgcheck", required=True)
    ap.add_argument("--borg", default="borg")
    args, rest = ap.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="borgcheck-lock-env-") as work:
        Borg1Locks.GEN = Borg1(args.borg)
        Borg1Locks.BORGCHECK = os.path.abspath(args.borgcheck)
        Borg1Locks.ENV = lock_scenarios.environment(work)
        unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
