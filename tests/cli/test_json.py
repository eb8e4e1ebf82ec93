"""--json: JSON Lines on stdout, one object per line keyed by `type` (finding, progress,
summary, error), each with exactly the fields docs/json.md lists."""

import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase  # noqa: E402

FINDING_KEYS = {"type", "severity", "stage", "chunk_id", "segment", "offset", "location", "message", "reread"}
SUMMARY_KEYS = {"type", "repository", "format", "mode", "verify_data", "transaction", "live_list_source",
                "segments", "objects_total", "objects_verified", "stored_bytes", "plaintext_bytes",
                "bytes_read", "errors", "warnings", "findings_by_stage", "elapsed_s",
                "throughput_bytes_per_s", "threads", "notes", "verdict", "exit_code"}
ERROR_KEYS = {"type", "code", "exit_code", "message"}
PROGRESS_KEYS = {"type", "bytes_done", "bytes_total", "objects_done", "objects_total", "rate_bytes_per_s",
                 "eta_s", "elapsed_s", "final"}
KEYS = {"finding": FINDING_KEYS, "summary": SUMMARY_KEYS, "error": ERROR_KEYS, "progress": PROGRESS_KEYS}
STAGES = ["entry-crc", "envelope", "authentication", "decompression", "id-hash", "missing", "truncated",
          "index", "segment"]
VERDICTS = {0: "ok", 1: "warnings", 90: "integrity-errors"}
ERROR_CODES = {"invalid-argument", "repository-not-found", "not-a-repository", "unsupported", "wrong-passphrase",
               "key-not-found", "lock-held", "repository-changed", "io-error", "corrupt-metadata", "interrupted",
               "internal"}

VERIFY = {"BORG_PASSPHRASE": cs.PASSPHRASE}


def no_stages(**counts):
    d = {s: 0 for s in STAGES}
    d.update({k.replace("_", "-"): v for k, v in counts.items()})
    return d


class JsonTestCase(CliTestCase):
    def check_records(self, r):
        """Every line parses, every record has exactly its type's keys and value types, and
        the stream is findings then one summary, or a single error record."""
        records = self.json_records(r)
        self.assertTrue(records, r)
        for rec in records:
            self.assertIn(rec["type"], KEYS, rec)
            self.assertEqual(set(rec), KEYS[rec["type"]], rec)
            getattr(self, "check_" + rec["type"])(rec)
        kinds = [x["type"] for x in records if x["type"] != "progress"]
        if kinds[-1] == "error":
            self.assertEqual(kinds, ["error"], r)
            self.assertEqual(records[-1]["exit_code"], r.rc, r)
            self.assertNotIn(r.rc, (0, 1, 90), r)
        else:
            self.assertEqual(kinds, ["finding"] * (len(kinds) - 1) + ["summary"], r)
            self.assertEqual(records[-1]["exit_code"], r.rc, r)
            self.assertEqual(records[-1]["verdict"], VERDICTS[r.rc], r)
            findings = [x for x in records if x["type"] == "finding"]
            summary = records[-1]
            self.assertEqual(summary["errors"], sum(f["severity"] == "error" for f in findings))
            self.assertEqual(summary["warnings"], sum(f["severity"] == "warning" for f in findings))
            self.assertEqual(summary["findings_by_stage"], no_stages(**{
                s.replace("-", "_"): sum(f["stage"] == s for f in findings) for s in STAGES}))
        # Progress records come before everything else, the final one last among them.
        progress = [i for i, x in enumerate(records) if x["type"] == "progress"]
        self.assertEqual(progress, list(range(len(progress))), r)
        if progress:
            self.assertEqual([records[i]["final"] for i in progress], [False] * (len(progress) - 1) + [True], r)
        return records

    def check_finding(self, f):
        self.assertIn(f["severity"], ("error", "warning"))
        self.assertIn(f["stage"], STAGES)
        self.assertIn(f["reread"], ("not-reread", "agreed", "differed", "passed"))
        self.assertIsInstance(f["message"], str)
        if f["chunk_id"] is not None:
            self.assertRegex(f["chunk_id"], r"^[0-9a-f]{64}$")
        if f["segment"] is None:
            self.assertEqual((f["offset"], f["location"]), (None, ""), f)
        elif f["offset"] is None:
            self.assertEqual(f["location"], "[segment %d]" % f["segment"], f)
        else:
            self.assertEqual(f["location"], "[segment %d, offset %d]" % (f["segment"], f["offset"]), f)

    def check_summary(self, s):
        for k in ("transaction", "segments", "objects_total", "objects_verified", "stored_bytes",
                  "plaintext_bytes", "bytes_read", "errors", "warnings", "threads", "exit_code"):
            self.assertIsInstance(s[k], int, k)
            self.assertGreaterEqual(s[k], 0, k)
        self.assertEqual(s["format"], "borg1")
        self.assertIn(s["live_list_source"], ("index", "log-replay"))
        self.assertIsInstance(s["verify_data"], bool)
        if s["verify_data"]:
            self.assertIn(s["mode"], ("none", "authenticated", "authenticated-blake2", "repokey", "keyfile",
                                      "repokey-blake2", "keyfile-blake2"))
        else:
            self.assertIsNone(s["mode"])
            self.assertEqual(s["plaintext_bytes"], 0)
        self.assertIsInstance(s["elapsed_s"], (int, float))
        self.assertIsInstance(s["throughput_bytes_per_s"], (int, float))
        self.assertGreaterEqual(s["elapsed_s"], 0)
        if s["elapsed_s"] > 0:
            self.assertAlmostEqual(s["throughput_bytes_per_s"], s["bytes_read"] / s["elapsed_s"],
                                   delta=1 + 1e-6 * s["throughput_bytes_per_s"])
        self.assertIsInstance(s["notes"], list)
        self.assertEqual(s["verdict"], VERDICTS[s["exit_code"]])

    def check_error(self, e):
        self.assertIn(e["code"], ERROR_CODES)
        self.assertIsInstance(e["exit_code"], int)
        self.assertTrue(e["message"])

    def check_progress(self, p):
        for k in ("bytes_done", "bytes_total", "objects_done", "objects_total"):
            self.assertIsInstance(p[k], int, k)
        for k in ("rate_bytes_per_s", "elapsed_s"):
            self.assertIsInstance(p[k], (int, float), k)
        self.assertTrue(p["eta_s"] is None or isinstance(p["eta_s"], (int, float)), p)
        self.assertIsInstance(p["final"], bool)


class Records(JsonTestCase):
    def test_integrity_error_records_exact(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        r = self.run_borgcheck(["--json", "--verify-data", "--threads", "4", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(r.stderr, "")
        records = self.check_records(r)
        summary = records[-1]
        for k in ("elapsed_s", "throughput_bytes_per_s"):
            del summary[k]
        self.assertEqual(records, [
            {"type": "finding", "severity": "error", "stage": "authentication", "chunk_id": cs.MAC_REPOKEY_CHUNK,
             "segment": 2, "offset": 8, "location": "[segment 2, offset 8]",
             "message": "MAC Authentication failed", "reread": "agreed"},
            {"type": "summary", "repository": repo, "format": "borg1", "mode": "repokey", "verify_data": True,
             "transaction": 29, "live_list_source": "index", "segments": 30, "objects_total": 102,
             "objects_verified": 101, "stored_bytes": 266859, "plaintext_bytes": 284697, "bytes_read": 276462,
             "errors": 1, "warnings": 0, "findings_by_stage": no_stages(authentication=1), "threads": 4,
             "notes": [], "verdict": "integrity-errors", "exit_code": 90}])

    def test_warning_without_location_and_keyless_summary(self):
        repo = self.copy_fixture("corrupt/uncommitted-repokey-history")
        r = self.run_borgcheck(["--json", "--threads", "1", repo])
        self.assert_rc(r, cs.EXIT_WARNINGS)
        records = self.check_records(r)
        summary = records[-1]
        for k in ("elapsed_s", "throughput_bytes_per_s"):
            del summary[k]
        self.assertEqual(records, [
            {"type": "finding", "severity": "warning", "stage": "segment", "chunk_id": None, "segment": None,
             "offset": None, "location": "",
             "message": "2 uncommitted segment file(s) after transaction 26 ignored (left by an interrupted "
                        "write; borg deletes them on its next write)", "reread": "not-reread"},
            {"type": "summary", "repository": repo, "format": "borg1", "mode": None, "verify_data": False,
             "transaction": 26, "live_list_source": "index", "segments": 12, "objects_total": 17,
             "objects_verified": 17, "stored_bytes": 14636, "plaintext_bytes": 0, "bytes_read": 29249,
             "errors": 0, "warnings": 1, "findings_by_stage": no_stages(segment=1), "threads": 1,
             "notes": [], "verdict": "warnings", "exit_code": 1}])

    def test_notes_in_summary(self):
        # A committed transaction newer than index.29: the live list comes from the log, and the
        # summary says why in a note (not a finding).
        repo = self.copy_fixture("v1.2.4/repos/none")
        with open(os.path.join(repo, "data", "0", "30"), "wb") as f:
            f.write(b"BORG_SEG" + bytes([0x40, 0xF4, 0x3C, 0x25, 0x09, 0x00, 0x00, 0x00, 0x02]))
        note = ("index.29 is older than the log (transaction 30): a crash between COMMIT and index write; "
                "borg would update it on next use. Live objects taken from the log")
        r = self.run_borgcheck(["--json", "--verify-data", repo])
        self.assert_rc(r, cs.EXIT_OK)
        records = self.check_records(r)
        self.assertEqual(len(records), 1)
        s = records[0]
        self.assertEqual((s["notes"], s["transaction"], s["live_list_source"], s["segments"], s["mode"],
                          s["objects_verified"]), ([note], 30, "log-replay", 31, "none", 102))
        r = self.run_borgcheck(["-q", repo])  # -q: findings and errors only, notes too are quiet
        self.assertEqual((r.rc, r.stdout, r.stderr), (0, "", ""))

    def test_summary_exit_code_matches_process_exit_code_on_every_fixture(self):
        keys = self.copy_keys()
        env = {"BORG_PASSPHRASE": cs.PASSPHRASE, "BORG_KEYS_DIR": keys}
        rows = cs.expected_rows()
        for rel in ["v1.2.4/repos/" + m for m in ("none", "repokey", "keyfile-blake2", "repokey-history")] + \
                ["corrupt/" + c for c in cs.corrupt_cases()]:
            repo = self.copy_fixture(rel)
            for args in (["--json"], ["--json", "--verify-data"]):
                with self.subTest(repo=rel, args=args):
                    r = self.run_borgcheck(args + [repo], env)
                    self.assertIn(r.rc, (0, 1, 90), r)
                    records = self.check_records(r)
                    self.assertEqual(records[-1]["type"], "summary")
                    self.assertEqual(records[-1]["exit_code"], r.rc)
                    if "--verify-data" in args:
                        bad = sorted({f["chunk_id"] for f in records if f["type"] == "finding"
                                      and f["severity"] == "error"})
                        self.assertEqual(bad, sorted(rows[rel][1]), r)


class ErrorRecords(JsonTestCase):
    def expect_error(self, args, env, rc, code, message=None):
        r = self.run_borgcheck(["--json"] + args, env)
        self.assert_rc(r, rc)
        self.assertEqual(r.stderr, "", r)
        records = self.check_records(r)
        self.assertEqual(len(records), 1, r)
        self.assertEqual((records[0]["type"], records[0]["code"], records[0]["exit_code"]), ("error", code, rc))
        if message is not None:
            self.assertEqual(records[0]["message"], message)
        return records[0]

    def test_fatal_stops_end_with_one_error_record(self):
        missing = os.path.join(self.tmp, "missing")
        self.expect_error([missing], {}, 13, "repository-not-found", "repository %s does not exist" % missing)
        self.expect_error(["ssh://h/r"], {}, 2, "invalid-argument")
        self.expect_error([], {}, 2, "invalid-argument", "no repository given: pass REPO or set BORG_REPO")
        self.expect_error(["--threads", "5000", missing], {}, 2, "invalid-argument",
                          "--threads must be between 1 and 1024 (0 or omitted: all online cores)")
        self.expect_error([self.cwd], {}, 15, "not-a-repository")

        repo = self.copy_fixture("v1.2.4/repos/repokey")
        self.expect_error(["--verify-data", repo], {"BORG_PASSPHRASE": "x"}, 52, "wrong-passphrase")
        self.expect_error(["--verify-data", repo], {}, 2, "invalid-argument")  # no terminal
        self.expect_error(["--verify-data", repo], {"BORG_PASSCOMMAND": "false"}, 2, "invalid-argument")
        os.mkdir(os.path.join(repo, "lock.exclusive"))
        self.expect_error([repo], {}, 73, "lock-held")
        os.rmdir(os.path.join(repo, "lock.exclusive"))
        with open(os.path.join(repo, "config")) as f:
            cfg = f.read()
        with open(os.path.join(repo, "config"), "w") as f:
            f.write(cfg.replace("version = 1", "version = 9"))
        e = self.expect_error([repo], {}, 15, "unsupported")
        self.assertIn("unsupported repository version 9", e["message"])
        with open(os.path.join(repo, "config"), "w") as f:
            f.write(re.sub(r"\nid = [0-9a-f]+\n", "\nid = xyz\n", cfg))
        self.expect_error([repo], {}, 2, "corrupt-metadata", "%s: config: repository id is not 64 hex digits" % repo)

        kf = self.copy_fixture("v1.2.4/repos/keyfile")
        empty = os.path.join(self.tmp, "empty")
        os.mkdir(empty)
        self.expect_error(["--verify-data", kf], {"BORG_PASSPHRASE": "test", "BORG_KEYS_DIR": empty}, 42,
                          "key-not-found")

    def test_command_line_syntax_errors_are_one_error_record_with_json(self):
        # The option parser rejects these; with --json anywhere on the line the JSON contract
        # still holds: one `error` record on stdout, nothing on stderr, exit 2.
        for args in (["--json", "--bogus"], ["--json", "--progress", "often", "x"], ["--json", "--threads", "x", "y"]):
            with self.subTest(args=args):
                r = self.run_borgcheck(args)
                self.assert_rc(r, cs.EXIT_COULD_NOT_RUN)
                self.assertEqual(r.stderr, "")
                records = self.check_records(r)
                self.assertEqual(len(records), 1)
                self.assertEqual((records[0]["type"], records[0]["code"], records[0]["exit_code"]),
                                 ("error", "invalid-argument", 2))
                self.assertTrue(records[0]["message"])


class Progress(JsonTestCase):
    def test_progress_always_emits_progress_records_first(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        r = self.run_borgcheck(["--json", "--progress=always", "--verify-data", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        records = self.check_records(r)
        progress = [x for x in records if x["type"] == "progress"]
        self.assertGreaterEqual(len(progress), 1, r)
        self.assertTrue(progress[-1]["final"])
        self.assertEqual([x["type"] for x in records[len(progress):]], ["finding", "summary"])

    def test_final_progress_record_carries_the_totals(self):
        # The last progress record (final: true) closes the progress stream; its counters must
        # be the run's totals, as the summary reports them, not zeros.
        repo = self.copy_fixture("v1.2.4/repos/repokey")
        r = self.run_borgcheck(["--json", "--progress=always", "--verify-data", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        records = self.check_records(r)
        final, summary = records[-2], records[-1]
        self.assertTrue(final["final"])
        self.assertEqual((final["bytes_done"], final["bytes_total"], final["objects_done"], final["objects_total"]),
                         (summary["bytes_read"], summary["bytes_read"], summary["objects_total"],
                          summary["objects_total"]), r)
        self.assertGreater(final["elapsed_s"], 0, r)

    def test_no_progress_records_unless_always(self):
        repo = self.copy_fixture("v1.2.4/repos/none")
        for args in (["--json"], ["--json", "--progress=auto"], ["--json", "--progress=never"]):
            with self.subTest(args=args):
                r = self.run_borgcheck(args + [repo])
                self.assert_rc(r, cs.EXIT_OK)
                self.assertEqual([x["type"] for x in self.check_records(r)], ["summary"])

    def test_text_progress_goes_to_stderr_only(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        plain = self.run_borgcheck(["--verify-data", "--threads", "2", repo], VERIFY)
        r = self.run_borgcheck(["--verify-data", "--threads", "2", "--progress=always", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(cs.mask_times(r.stdout), cs.mask_times(plain.stdout))
        # Each redraw clears the line; the final one leaves it cleared.
        self.assertRegex(r.stderr, r"\A(\r\x1b\[K[^\r\x1b]+)*\r\x1b\[K\Z")
        never = self.run_borgcheck(["--verify-data", "--progress=never", repo], VERIFY)
        self.assertEqual(never.stderr, "")


class DocsCoverJson(CliTestCase):
    def test_json_md_names_every_field_stage_and_code(self):
        with open(os.path.join(cs.DOCS, "json.md"), encoding="utf-8") as f:
            doc = f.read()
        names = set().union(*KEYS.values(), STAGES, ERROR_CODES, KEYS, VERDICTS.values(),
                            ("not-reread", "agreed", "differed", "passed", "could-not-run"))
        missing = sorted(n for n in names if not re.search(r"`%s`" % re.escape(n), doc))
        self.assertEqual(missing, [], "docs/json.md does not mention these as `name`")


if __name__ == "__main__":
    cs.main()
