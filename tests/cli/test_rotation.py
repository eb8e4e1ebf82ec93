"""Coverage and full verification under a rotation (docs/nightly.md "Coverage"): two weeks of
`--subset daily/week --max-age 8d` on repositories that get a real `borg create` every night,
with `borg prune` and `borg compact` on two nights, in borg 1.2.4 and 2.0.0b5, then 18 nights
off. Its own ctest (cli.rotation): a minute of real borg runs."""

import hashlib
import json
import os
import re
import struct
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from test_partial import HOOKS, VERIFY, PartialTestCase  # noqa: E402


class Rotation(PartialTestCase):
    """daily/week with --max-age 8d over two weeks of a repository that gets a real `borg create`
    every night, with prune and compact on two nights, in both generations (docs/nightly.md
    "Coverage"). Every expected number follows from the state rule and the unit files on disk:
    a unit is verified whole once it has been on disk for the last seven nights (all seven slices
    within 8 days), partly before; a cycle takes in the units on disk on its first night and
    completes on the night the last of them that survived got its seventh slice since then. The
    content is deterministic; nothing here depends on where the chunker cuts or on timing. The
    expected ratio is computed here from the segment files themselves (a log replay of their
    PUT and DELETE entries gives each unit's live ids, their slices by the documented rule), so
    it is exact whatever borg wrote."""

    # Monday 2026-11-30 .. Sunday 2026-12-13; prune and compact before the checks of nights 4 and 10.
    DATES = ["2026-11-30"] + ["2026-12-%02d" % d for d in range(1, 14)]
    COMPACT_ON = {4: 2, 10: 3}  # night -> --keep-last

    def borg(self, gen, repo, words, archive=None):
        if gen == "borg1":
            cmd = ["borg", *words, repo + "::" + archive if archive else repo]
        else:
            cmd = ["borg2", "-r", repo, *words, *([archive] if archive else [])]
        if archive:
            cmd.append(".")
        env = self.environment({"BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "yes",
                                "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes"})
        p = subprocess.run(cmd, env=env, cwd=self.src, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, "%s: %s" % (cmd, p.stderr))

    def write_night(self, n):
        # Four files of fixed, distinct content: four new chunks a night.
        for i in range(4):
            block, out = ("night %d file %d" % (n, i)).encode(), bytearray()
            while len(out) < 12288:
                block = hashlib.sha256(block).digest()
                out += block
            with open(os.path.join(self.src, "n%02d-%d.bin" % (n, i)), "wb") as f:
                f.write(bytes(out))

    def units_on_disk(self, repo):
        """{segment number: (inode, size, mtime_ns)} of the repository's segment files."""
        out = {}
        self.paths = {}
        data = os.path.join(repo, "data")
        for d in os.listdir(data):
            for name in os.listdir(os.path.join(data, d)):
                if name.isdigit():
                    self.paths[int(name)] = os.path.join(data, d, name)
                    st = os.stat(self.paths[int(name)])
                    out[int(name)] = (st.st_ino, st.st_size, st.st_mtime_ns)
        return out

    def live_per_slice(self, units):
        """{segment: [live objects in slice k of 7 for k = 1..7]}: a replay of the log (the
        segment files units_on_disk found, in order)."""
        live = {}
        for seg in sorted(units):
            with open(self.paths[seg], "rb") as f:
                data = f.read()
            self.assertEqual(data[:8], b"BORG_SEG")
            pos = 8
            while pos + 9 <= len(data):
                size, tag = struct.unpack_from("<I", data, pos + 4)[0], data[pos + 8]
                self.assertGreaterEqual(size, 9)
                if tag in (0, 3):  # PUT, PUT2
                    live[data[pos + 9:pos + 41]] = seg
                elif tag == 1:  # DELETE
                    live.pop(data[pos + 9:pos + 41], None)
                pos += size
        out = {seg: [0] * 7 for seg in units}
        for chunk_id, seg in live.items():
            out[seg][(int.from_bytes(chunk_id[:8], "big") * 7 >> 64)] += 1
        return out

    def expected_ratio(self, units, fresh_of):
        """The coverage rule: a unit counts by its live objects in the slices done within 8 days
        (`fresh_of(unit identity)`), all of it with all seven, by its slices without live objects."""
        per_slice = self.live_per_slice(units)
        verified = 0.0
        for seg, ident in units.items():
            fresh = fresh_of((seg, ident))
            counts = per_slice[seg]
            if len(fresh) == 7:
                share = 1.0
            elif sum(counts):
                share = sum(counts[k - 1] for k in fresh) / sum(counts)
            else:
                share = len(fresh) / 7
            verified += share * ident[1]
        return verified / sum(v[1] for v in units.values())

    def rotate(self, gen):
        self.src = os.path.join(self.tmp, "src-" + gen)
        os.mkdir(self.src)
        repo = os.path.join(self.tmp, "repo-" + gen)
        self.borg(gen, repo, ["init" if gen == "borg1" else "rcreate", "--encryption", "none"])
        args = ["--verify-data", "--repository-only", "--subset", "daily/week", "--max-age", "8d", "--state-dir",
                self.state, repo]
        nights_on_disk = {}  # unit identity -> consecutive nights on disk up to now
        members, last_full = None, None
        for n, date in enumerate(self.DATES, 1):
            weekday = (n - 1) % 7 + 1
            self.write_night(n)
            self.borg(gen, repo, ["create"], archive="n%02d" % n)
            if n in self.COMPACT_ON:
                self.borg(gen, repo, ["prune", "--keep-last", str(self.COMPACT_ON[n])])
                self.borg(gen, repo, ["compact"])
            units = self.units_on_disk(repo)
            idents = {(k, v) for k, v in units.items()}
            nights_on_disk = {u: nights_on_disk.get(u, 0) + 1 for u in idents}
            if weekday == 1:
                members = set(idents)  # the cycle's units: on disk on its first night
            s, _ = self.run_json(args, env=dict(HOOKS, BORGCHECK_TEST_TODAY=date))
            where = (gen, n, date)
            self.assertEqual((s["subset"], s["verdict"], s["units_total"]), ("%d/7" % weekday, "ok", len(units)),
                             (where, s))
            self.assertEqual(s["bytes_total"], sum(v[1] for v in units.values()), where)
            c = s["coverage"]
            whole = {u for u in idents if nights_on_disk[u] >= 7}
            self.assertEqual((c["units_verified"], c["units_partly_verified"], c["units_never_verified"]),
                             (len(whole), len(idents) - len(whole), 0), (where, c))
            # Every unit holds tonight's slice at least: never 0.0% on the first nights.
            self.assertGreater(c["ratio"], 0, (where, c))
            self.assertLessEqual(c["ratio"], 1, (where, c))
            self.assertGreaterEqual(c["ratio"] + 1e-12, sum(u[1][1] for u in whole) / s["bytes_total"], (where, c))
            # Exactly: slices of the last min(nights on disk, 7) nights, all consecutive.
            self.assertAlmostEqual(c["ratio"], self.expected_ratio(units, lambda u: {
                (m - 1) % 7 + 1 for m in range(n - min(nights_on_disk[u], 7) + 1, n + 1)}), places=9, msg=where)
            cycle = c["cycle"]
            survivors = members & idents
            self.assertTrue(cycle["started_at"].startswith(self.DATES[n - weekday] + "T12:00:"), (where, cycle))
            self.assertEqual((cycle["slices"], cycle["slices_done"], cycle["units"]),
                             (7, weekday, len(survivors)), (where, cycle))
            if weekday == 7:  # the cycle completes on Sunday, new segments and compaction or not
                self.assertEqual(cycle["units_done"], len(survivors), (where, cycle))
                self.assertEqual(cycle["completed_at"], c["full_verification_at"], (where, c))
                self.assertTrue(c["full_verification_at"].startswith(date + "T"), (where, c))
                last_full = c["full_verification_at"]
            else:
                self.assertEqual((cycle["units_done"], cycle["completed_at"]), (0, None), (where, cycle))
                self.assertEqual(c["full_verification_at"], last_full, (where, c))  # does not move nightly
        # 18 nights off, then one slice (a Friday): no full verification that night, and the
        # coverage says only that slice is within 8 days.
        r = self.run_borgcheck(["-v"] + args, env=dict(VERIFY, **HOOKS, BORGCHECK_TEST_TODAY="2027-01-01"))
        self.assert_rc(r, 0)
        self.assertRegex(r.stdout, r"\ncoverage: [0-9.]+%% of [0-9.]+ [KM]iB verified within 8d \(0 of %d segments, %d "
                         r"partly\); rotation: 1 of 7 slices done since 2027-01-01T12:00:[0-9:.]+Z; full verification "
                         r"completed %s; " % (len(units), len(units), re.escape(last_full)))
        s, _ = self.run_json(args, env=dict(HOOKS, BORGCHECK_TEST_TODAY="2027-01-01"))
        self.assertEqual((s["coverage"]["full_verification_at"], s["coverage"]["units_verified"]), (last_full, 0), s)
        self.assertLess(s["coverage"]["ratio"], 1, s)
        self.assertAlmostEqual(s["coverage"]["ratio"], self.expected_ratio(units, lambda u: {5}), places=9)
        with open(self.state_file(s)) as f:
            state = json.load(f)
        self.assertEqual((state["borgcheck_state"], state["cycle"]["data"]["completed_at"]), (2, 0), state["cycle"])

    def test_two_weeks_with_nightly_backups_prune_and_compact_borg1(self):
        self.rotate("borg1")

    def test_two_weeks_with_nightly_backups_prune_and_compact_borg2b5(self):
        self.rotate("borg2")



if __name__ == "__main__":
    cs.main()
