"""--json: JSON Lines on stdout, one object per line keyed by `type` (finding, progress,
summary, error), each with exactly the fields docs/json.md lists."""

import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase  # noqa: E402

FINDING_KEYS = {"type", "severity", "stage", "chunk_id", "segment", "offset", "location", "message", "reread",
                "affected", "affected_total", "advice"}
AFFECTED_KEYS = {"archive", "archive_id", "use", "path", "begin", "end", "via", "items_read", "path_before",
                 "path_after"}
SUMMARY_KEYS = {"type", "repository", "format", "mode", "verify_data", "transaction", "live_list_source",
                "segments", "objects_total", "objects_verified", "stored_bytes", "plaintext_bytes",
                "bytes_read", "errors", "io_errors", "warnings", "findings_by_stage", "elapsed_s",
                "throughput_bytes_per_s", "threads", "notes", "verdict", "exit_code", "version", "started_at",
                "finished_at", "repository_id", "archives_total", "archives_checked", "archives_not_checked",
                # partial runs (docs/nightly.md)
                "complete", "stopped", "subset", "sample_fraction", "sample_seed", "bytes_total", "bytes_skipped",
                "units_total", "units_not_due", "coverage",
                # sharded runs (docs/distributed.md)
                "shard", "merged_shards"}
COVERAGE_KEYS = {"ratio", "max_age_s", "units_verified", "units_partly_verified", "units_never_verified", "cycle",
                 "full_verification_at",
                 "oldest_unit_verified_at", "oldest_unit_age_s", "state_file"}
ERROR_KEYS = {"type", "code", "exit_code", "message"}
PROGRESS_KEYS = {"type", "bytes_done", "bytes_total", "objects_done", "objects_total", "rate_bytes_per_s",
                 "eta_s", "elapsed_s", "phase", "final"}
KEYS = {"finding": FINDING_KEYS, "summary": SUMMARY_KEYS, "error": ERROR_KEYS, "progress": PROGRESS_KEYS}
STAGES = ["entry-crc", "envelope", "authentication", "decompression", "id-hash", "missing", "truncated",
          "index", "segment", "reference", "archive", "io", "key", "lock"]
VERDICTS = {0: "ok", 1: "warnings", 90: "integrity-errors", 2: "state-not-saved",  # 2: the state was not saved
            129: "interrupted", 130: "interrupted", 143: "interrupted"}  # a signal: the findings so far
ERROR_CODES = {"invalid-argument", "repository-not-found", "not-a-repository", "unsupported", "invalid-repository-config", "wrong-passphrase",
               "key-not-found", "key-file-invalid", "key-file-mismatch", "repo-key-not-found", "no-passphrase",
               "passcommand-failed", "password-retries-exceeded", "lock-held", "repository-changed", "io-error", "corrupt-metadata", "interrupted",
               "internal"}

# Per summary `format` (docs/json.md): its `live_list_source` values and key `mode` names.
FORMATS = {
    "borg1": (("index", "log-replay"),
              ("none", "authenticated", "authenticated-blake2", "repokey", "keyfile", "repokey-blake2",
               "keyfile-blake2")),
    "borg2-b5": (("log-replay", "log-replay+index"),
                 ("none", "authenticated", "authenticated-blake2", "repokey-aes-ocb", "repokey-chacha20-poly1305",
                  "keyfile-aes-ocb", "keyfile-chacha20-poly1305", "repokey-blake2-aes-ocb",
                  "repokey-blake2-chacha20-poly1305", "keyfile-blake2-aes-ocb", "keyfile-blake2-chacha20-poly1305")),
    "borgstore-v4": (("index+pack-walk",),
                     ("aes256-ocb (sha256)", "chacha20-poly1305 (sha256)", "aes256-ocb (blake3)",
                      "chacha20-poly1305 (blake3)", "authenticated-sha256", "authenticated-blake3", "none-sha256",
                      "none-blake3")),
}

VERIFY = {"BORG_PASSPHRASE": cs.PASSPHRASE}
# The archive of fixtures/borg1 whose file c-none/text.txt is the one chunk of mac-repokey's damage.
C_NONE_ARCHIVE = "d88d0aa717618f5fb7c61363f970fe7093e5ab48a69254c70ddefcb075e5f062"
BAD_CHUNK_ADVICE = ("borg check --verify-data --repair deletes the damaged chunk and replaces it in these files by an "
                    "all-zero chunk of the same size, keeping the original reference (chunks_healthy); if a later "
                    "borg create stores the same data again, another borg check --repair puts it back")
KEYLESS_NOTE = "archives not checked: keyless run (--verify-data reads the key and checks them)"
with open(os.path.join(os.path.dirname(cs.DOCS), "CMakeLists.txt")) as _f:
    VERSION = re.search(r"project\(borgcheck VERSION ([0-9.]+)", _f.read()).group(1)


def verdict(summary, rc):
    """The summary's verdict for exit code rc: exit 2 after io findings (some file could not be
    read, nothing damaged) is "could-not-check", else (the state was not saved) "state-not-saved"."""
    if rc == cs.EXIT_COULD_NOT_RUN and summary.get("io_errors"):
        return "could-not-check"
    return VERDICTS[rc]


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
            self.assertEqual(records[-1]["verdict"], verdict(records[-1], r.rc), r)
            findings = [x for x in records if x["type"] == "finding"]
            summary = records[-1]
            self.assertEqual(summary["errors"], sum(f["severity"] == "error" for f in findings))
            self.assertEqual(summary["warnings"], sum(f["severity"] == "warning" for f in findings))
            self.assertEqual(summary["io_errors"],
                             sum(f["severity"] == "error" and f["stage"] == "io" for f in findings))
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
        self.assertTrue(f["advice"] is None or (isinstance(f["advice"], str) and f["advice"]), f)
        # affected: null (the archives were not walked), or the uses (docs/json.md), at most
        # 1000 of affected_total.
        if f["affected"] is None:
            self.assertIsNone(f["affected_total"], f)
        else:
            self.assertIsInstance(f["affected_total"], int, f)
            self.assertLessEqual(len(f["affected"]), min(1000, f["affected_total"]), f)
            for u in f["affected"]:
                self.assertEqual(set(u), AFFECTED_KEYS, u)
                self.assertIn(u["use"], ("chunks", "chunks_healthy", "hardlink", "archive", "item_ptrs", "items"))
                self.assertRegex(u["archive_id"], r"^[0-9a-f]{64}$")
                if u["use"] in ("chunks", "chunks_healthy", "hardlink"):
                    self.assertIsInstance(u["path"], str, u)
                    self.assertLessEqual(u["begin"], u["end"], u)
                    self.assertIsNone(u["items_read"], u)
                else:
                    self.assertIsNone(u["path"], u)
                    self.assertIsInstance(u["items_read"], int, u)
                self.assertEqual(u["via"] is not None, u["use"] == "hardlink", u)
                if u["use"] != "items":
                    self.assertEqual((u["path_before"], u["path_after"]), (None, None), u)
        if f["segment"] is None:
            if f["location"].startswith("[archive "):  # an archive's metadata problem
                self.assertIsNone(f["offset"], f)
            elif f["location"] == "":
                self.assertIsNone(f["offset"], f)
            elif f["offset"] is None:  # a named item: borg 2 master's "[pack <hex>]", a lock entry
                self.assertRegex(f["location"], r"^\[[^\[\],]+\]$", f)
            else:  # "[pack <hex>, offset M]"
                self.assertRegex(f["location"], r"^\[[^\[\],]+, offset %d\]$" % f["offset"], f)
        elif f["offset"] is None:
            self.assertEqual(f["location"], "[segment %d]" % f["segment"], f)
        else:
            self.assertEqual(f["location"], "[segment %d, offset %d]" % (f["segment"], f["offset"]), f)

    def check_summary(self, s):
        for k in ("transaction", "segments", "objects_total", "objects_verified", "stored_bytes",
                  "plaintext_bytes", "bytes_read", "errors", "warnings", "threads", "exit_code"):
            self.assertIsInstance(s[k], int, k)
            self.assertGreaterEqual(s[k], 0, k)
        self.assertIn(s["format"], FORMATS)
        sources, modes = FORMATS[s["format"]]
        self.assertIn(s["live_list_source"], sources)
        self.assertIsInstance(s["verify_data"], bool)
        if s["verify_data"]:
            self.assertIn(s["mode"], modes)
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
        self.assertEqual(s["verdict"], verdict(s, s["exit_code"]))
        # Partial runs: what was read of what there is.
        self.assertIsInstance(s["complete"], bool)
        self.assertIn(s["stopped"], (None, "signal", "time-budget"))
        self.assertEqual(s["bytes_read"] + s["bytes_skipped"], s["bytes_total"], s)
        self.assertLessEqual(s["segments"], s["units_total"], s)
        if s["complete"]:
            self.assertEqual((s["bytes_skipped"], s["stopped"], s["subset"], s["sample_fraction"], s["units_not_due"]),
                             (0, None, None, None, 0), s)
            self.assertEqual(s["segments"], s["units_total"], s)
        if s["subset"] is not None:
            self.assertRegex(s["subset"], r"^\d+/\d+$")
        self.assertEqual(s["sample_fraction"] is None, s["sample_seed"] is None, s)
        if s["coverage"] is not None:
            c = s["coverage"]
            self.assertEqual(set(c), COVERAGE_KEYS, c)
            self.assertTrue(0 <= c["ratio"] <= 1, c)
            self.assertLessEqual(c["units_verified"] + c["units_partly_verified"] + c["units_never_verified"],
                                 s["units_total"], c)
            if c["cycle"] is not None:
                self.assertLessEqual(c["cycle"]["units_done"], c["cycle"]["units"], c)
                self.assertEqual(c["cycle"]["slices"] is None, c["cycle"]["slices_done"] is None, c)
            self.assertEqual(c["oldest_unit_verified_at"] is None, c["oldest_unit_age_s"] is None, c)
        else:
            self.assertFalse(s["complete"], s)  # a complete run always knows its coverage
        self.assertRegex(s["version"], r"^\d+\.\d+\.\d+$")
        for k in ("started_at", "finished_at"):  # RFC 3339, UTC, milliseconds
            self.assertRegex(s[k], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", k)
        self.assertLessEqual(s["started_at"], s["finished_at"])
        # The repository id: null until the run layer fills it (then the config's 64 hex digits).
        if s["repository_id"] is not None:
            self.assertRegex(s["repository_id"], r"^[0-9a-f]{64}$")
        # The archive pass: both null (not run) or both counts, checked <= total.
        if s["archives_total"] is None:
            self.assertIsNone(s["archives_checked"])
        else:
            self.assertIsInstance(s["archives_total"], int)
            self.assertLessEqual(s["archives_checked"], s["archives_total"])
            self.assertTrue(s["verify_data"])

    def run_fields_removed(self, summary, repo):
        """The summary without the fields that differ between runs (timings, timestamps), with
        repository_id checked against the repository's config first."""
        config_id = self.config_id(repo)
        self.assertEqual(summary.pop("repository_id"), config_id)
        for k in ("elapsed_s", "throughput_bytes_per_s", "started_at", "finished_at"):
            del summary[k]
        if summary.get("coverage") is not None:  # without a state file: this run's clock
            for k in ("full_verification_at", "oldest_unit_verified_at", "oldest_unit_age_s"):
                del summary["coverage"][k]
        self.assertEqual(summary.pop("version"), VERSION)
        return summary

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
        self.assertIn(p["phase"], ("read", "archives"), p)
        if p["phase"] == "archives":  # the objects are done, the archives are walked
            self.assertEqual(p["bytes_done"], p["bytes_total"], p)


class Records(JsonTestCase):
    def test_integrity_error_records_exact(self):
        repo = self.copy_fixture("corrupt/mac-repokey")
        r = self.run_borgcheck(["--json", "--verify-data", "--threads", "4", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(r.stderr, "")
        records = self.check_records(r)
        self.run_fields_removed(records[-1], repo)
        self.assertEqual(records, [
            {"type": "finding", "severity": "error", "stage": "authentication", "chunk_id": cs.MAC_REPOKEY_CHUNK,
             "segment": 2, "offset": 8, "location": "[segment 2, offset 8]",
             "message": "MAC Authentication failed", "reread": "agreed",
             "affected": [{"archive": "c-none", "archive_id": C_NONE_ARCHIVE, "use": "chunks",
                           "path": "c-none/text.txt", "begin": 0, "end": 4096, "via": None, "items_read": None, "path_before": None, "path_after": None}],
             "affected_total": 1, "advice": BAD_CHUNK_ADVICE},
            {"type": "summary", "repository": repo, "format": "borg1", "mode": "repokey", "verify_data": True,
             "transaction": 29, "live_list_source": "index", "segments": 30, "objects_total": 102,
             "objects_verified": 101, "stored_bytes": 266859, "plaintext_bytes": 284697, "bytes_read": 276462,
             "errors": 1, "io_errors": 0, "warnings": 0, "findings_by_stage": no_stages(authentication=1),
             "threads": 4,
             "notes": ["key: config"], "archives_total": 7, "archives_checked": 7, "archives_not_checked": None, "verdict": "integrity-errors",
             "bytes_total": 276462, "bytes_skipped": 0, "complete": True, "stopped": None, "subset": None, "shard": None, "merged_shards": None, "sample_fraction": None, "sample_seed": None,
             "units_total": 30, "units_not_due": 0,
             "coverage": {"max_age_s": None, "ratio": 1.0, "state_file": None, "units_never_verified": 0,
                          "units_partly_verified": 0, "cycle": None,
                          "units_verified": 30},
             "exit_code": 90}])

    def test_warning_without_location_and_keyless_summary(self):
        repo = self.copy_fixture("corrupt/uncommitted-repokey-history")
        r = self.run_borgcheck(["--json", "--threads", "1", repo])
        self.assert_rc(r, cs.EXIT_WARNINGS)
        records = self.check_records(r)
        self.run_fields_removed(records[-1], repo)
        self.assertEqual(records, [
            {"type": "finding", "severity": "warning", "stage": "segment", "chunk_id": None, "segment": None,
             "offset": None, "location": "",
             "message": "2 uncommitted segment file(s) after transaction 26 ignored (left by an interrupted "
                        "write; borg deletes them on its next write)", "reread": "not-reread",
             "affected": None, "affected_total": None, "advice": None},
            {"type": "summary", "repository": repo, "format": "borg1", "mode": None, "verify_data": False,
             "transaction": 26, "live_list_source": "index", "segments": 12, "objects_total": 17,
             "objects_verified": 17, "stored_bytes": 14636, "plaintext_bytes": 0, "bytes_read": 29249,
             "errors": 0, "io_errors": 0, "warnings": 1, "findings_by_stage": no_stages(segment=1), "threads": 1,
             "notes": [KEYLESS_NOTE], "archives_total": None, "archives_checked": None, "archives_not_checked": "keyless run", "verdict": "warnings",
             "bytes_total": 29249, "bytes_skipped": 0, "complete": True, "stopped": None, "subset": None, "shard": None, "merged_shards": None, "sample_fraction": None, "sample_seed": None,
             "units_total": 12, "units_not_due": 0,
             "coverage": {"max_age_s": None, "ratio": 1.0, "state_file": None, "units_never_verified": 0,
                          "units_partly_verified": 0, "cycle": None,
                          "units_verified": 12},
             "exit_code": 1}])

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
                          s["objects_verified"], s["archives_checked"]), ([note], 30, "log-replay", 31, "none", 102, 7))
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
        self.expect_error(["rest://h/r"], {}, 2, "invalid-argument")
        self.expect_error([], {}, 2, "invalid-argument", "no repository given: pass REPO or set BORG_REPO")
        self.expect_error(["--threads", "5000", missing], {}, 2, "invalid-argument",
                          "--threads must be between 1 and 1024 (0 or omitted: all online cores)")
        self.expect_error([self.cwd], {}, 15, "not-a-repository")

        repo = self.copy_fixture("v1.2.4/repos/repokey")
        self.expect_error(["--verify-data", repo], {"BORG_PASSPHRASE": "x"}, 52, "wrong-passphrase")
        self.expect_error(["--verify-data", repo], {}, 50, "no-passphrase")  # no terminal
        self.expect_error(["--verify-data", repo], {"BORG_PASSCOMMAND": "false"}, 51, "passcommand-failed")
        os.mkdir(os.path.join(repo, "lock.exclusive"))
        open(os.path.join(repo, "lock.exclusive", "otherhost@1.1-0"), "w").close()  # another host's
        self.expect_error([repo], {}, 73, "lock-held")
        os.unlink(os.path.join(repo, "lock.exclusive", "otherhost@1.1-0"))
        os.rmdir(os.path.join(repo, "lock.exclusive"))
        with open(os.path.join(repo, "config")) as f:
            cfg = f.read()
        with open(os.path.join(repo, "config"), "w") as f:
            f.write(cfg.replace("version = 1", "version = 9"))
        e = self.expect_error([repo], {}, 15, "unsupported")
        self.assertIn("unsupported repository version 9", e["message"])
        with open(os.path.join(repo, "config"), "w") as f:
            f.write(re.sub(r"\nid = [0-9a-f]+\n", "\nid = xyz\n", cfg))
        self.expect_error([repo], {}, 16, "invalid-repository-config",
                          "%s: config: repository id is not 64 hex digits" % repo)

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
        # It comes after the archive pass (the progress stream goes on while archives are walked);
        # a keyless run walks none.
        self.assertEqual(final["phase"], "archives", r)
        r = self.run_borgcheck(["--json", "--progress=always", repo], VERIFY)
        self.assert_rc(r, cs.EXIT_OK)
        self.assertEqual(self.check_records(r)[-2]["phase"], "read", r)

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
        # stderr is a pipe, not a terminal: plain lines every --progress-interval seconds (none
        # in a run this short), never a control character (test_progress.py: long runs).
        self.assertEqual(r.stderr, "")
        never = self.run_borgcheck(["--verify-data", "--progress=never", repo], VERIFY)
        self.assertEqual(never.stderr, "")


class DocsCoverJson(CliTestCase):
    def test_json_md_names_every_field_stage_and_code(self):
        with open(os.path.join(cs.DOCS, "json.md"), encoding="utf-8") as f:
            doc = f.read()
        names = set().union(*KEYS.values(), STAGES, ERROR_CODES, KEYS, VERDICTS.values(),
                            ("not-reread", "agreed", "differed", "passed", "could-not-check", "state-not-saved"))
        missing = sorted(n for n in names if not re.search(r"`%s`" % re.escape(n), doc))
        self.assertEqual(missing, [], "docs/json.md does not mention these as `name`")


if __name__ == "__main__":
    cs.main()
