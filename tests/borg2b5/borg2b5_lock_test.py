#!/usr/bin/env python3
"""borg 2.0.0b5 locks made by real borg2 at test time: a stale lock left by a killed
`borg2 create` is checked with a warning (exit 1), a running `borg2 with-lock` refuses
(exit 73), another host's lock refuses. b5 writes lock.exclusive/ and lock.roster exactly as
borg 1.x does; the scenarios are in tests/interop/lock_scenarios.py.

Run: borg2b5_lock_test.py --borgcheck PATH [--borg2 PATH] [unittest args]. Python 3 stdlib.
"""

import argparse
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
import lock_scenarios  # noqa: E402


class Borg2b5(lock_scenarios.Generation):
    name = "borg2-b5"

    def __init__(self, borg2):
        self.borg2 = borg2
        self.comm = os.path.basename(borg2)[:15]  # the script's name, as /proc/<pid>/comm shows it

    def init(self, repo):
        return [self.borg2, "-r", repo, "rcreate", "--encryption", "repokey-aes-ocb"]

    def create(self, repo, archive, src):
        return [self.borg2, "-r", repo, "create", archive, src]

    def create_from_stdin(self, repo, archive):
        return [self.borg2, "-r", repo, "create", "--paths-from-stdin", archive]

    def with_lock(self, repo, command):
        return [self.borg2, "-r", repo, "with-lock"] + command

    def list(self, repo, lock_wait=None):
        return [self.borg2] + (["--lock-wait", str(lock_wait)] if lock_wait else []) + ["-r", repo, "rlist"]


class Borg2b5Locks(lock_scenarios.LockScenarios, unittest.TestCase):
    pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--borgcheck", required=True)
    ap.add_argument("--borg2", default="borg2")
    args, rest = ap.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="borgcheck-lock-env-") as work:
        Borg2b5Locks.GEN = Borg2b5(args.borg2)
        Borg2b5Locks.BORGCHECK = os.path.abspath(args.borgcheck)
        Borg2b5Locks.ENV = lock_scenarios.environment(work)
        unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
