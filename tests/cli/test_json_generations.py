"""--json end to end on borg 2.0.0b5 (repository version 2) and borg 2 master (borgstore version
4) repositories: the same JSON contract as borg 1.x (docs/json.md; every record checked by
test_json.JsonTestCase.check_records), with exact values. Clean repositories exit 0 with one
summary; damaged copies exit 90 with each finding record exactly as documented; keyless and
with --verify-data; key files found through BORG_KEY_FILE (2.0.0b5) and BORG_KEYS_DIR (master);
--threads 1 and 8 print the same records.

Findings and the summary are compared on the fields of the repository pass; the fields other
passes add (the archive pass's affected uses) are checked by check_records against
docs/json.md."""

import os
import re
import shutil
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
import test_json as tj  # noqa: E402

# The finding fields compared exactly: where, what, and the second read.
FINDING_FIELDS = ("type", "severity", "stage", "chunk_id", "segment", "offset", "location", "message", "reread")
# The summary fields compared exactly (everything but timings, timestamps, version, id).
REPOSITORY_PASS = ("repository", "format", "mode", "verify_data", "transaction", "live_list_source", "segments",
                   "objects_total", "objects_verified", "stored_bytes", "plaintext_bytes", "bytes_read", "errors",
                   "io_errors", "warnings", "findings_by_stage", "threads", "notes", "verdict", "exit_code")

# The archive pass's own note on a keyless run: its tests (test_json.py) check it, where it exists.
ARCHIVE_PASS_NOTES = {n for n in (getattr(tj, "KEYLESS_NOTE", None),) if n}

B5_SUPERSEDED = "1 superseded PUT entry (not current; checksummed only)"
B5_SESSIONS = "session keys: 1 AEAD session(s) authenticated: 1 with HKDF-SHA512 (borg 2.0.0b5..b7)"
MASTER_INDEX = ("6 index fragment(s) (0 bad), 10 pack(s), 73 chunk index entries (what borg's \"verified N "
                "chunks\" counts), 5 archive(s)")
MASTER_REPOKEY = "keys/bdd162ecc76e15e2136d22e5caec4d16e577a8f5a265a3a1a60db80d123cc89d"
CHPO_CHUNK = "20d3151918fa7ad402e16c01d707c5cede2e8528f63942aab1bdead085fa1b82"
BITFLIP_PACK = "f4f4b0ae3ad6328c47e99e87c6df4d5842d72677c5d33ebf69a9d619233c0096"
BITFLIP_CHUNK = "3dae7f7548fbac67caf1bc6d3214f147f0552fb79d3a4c3e9f032ba18546290d"


def b5(rel):
    return os.path.join(cs.SHARED, "fixtures", "borg2b5", rel)


def master(rel):
    return os.path.join(cs.SHARED, "fixtures", "borg2master", rel)


def finding(severity, stage, chunk_id, segment, offset, location, message, reread):
    return {"type": "finding", "severity": severity, "stage": stage, "chunk_id": chunk_id, "segment": segment,
            "offset": offset, "location": location, "message": message, "reread": reread}


class Generations(tj.JsonTestCase):
    def copy_repo(self, source):
        return self.copy_generation(os.path.relpath(source, os.path.join(cs.SHARED, "fixtures")),
                                    os.path.basename(source))

    def repository_id(self, repo):
        """The id in the repository's config: version 2's INI file, or version 4's config/id."""
        if os.path.isdir(os.path.join(repo, "config")):
            with open(os.path.join(repo, "config", "id")) as f:
                return f.read().strip()
        with open(os.path.join(repo, "config")) as f:
            return re.search(r"\nid = ([0-9a-f]{64})\n", f.read()).group(1)

    def run_json(self, args, env, rc):
        """One --json run: its exit code, nothing on stderr, every record checked; returns the
        findings as printed and the summary's repository-pass fields."""
        r = self.run_borgcheck(["--json"] + args, env)
        self.assert_rc(r, rc)
        self.assertEqual(r.stderr, "", r)
        records = self.check_records(r)
        summary = records[-1]
        self.assertEqual(summary["type"], "summary", r)
        self.assertIn(summary["repository_id"], (None, self.repository_id(args[-1])), r)
        self.assertEqual(summary["version"], tj.VERSION)
        findings = [{k: f[k] for k in FINDING_FIELDS} for f in records[:-1]]
        fields = {k: summary[k] for k in REPOSITORY_PASS}
        fields["notes"] = [n for n in summary["notes"] if n not in ARCHIVE_PASS_NOTES]
        return findings, fields

    def summary(self, repo, fmt, mode, verify_data, live, segments, total, verified, stored, plaintext, read,
                notes, transaction, stages=None, errors=0, warnings=0, threads=2):
        rc = 90 if errors else 1 if warnings else 0
        return {"repository": repo, "format": fmt, "mode": mode, "verify_data": verify_data,
                "transaction": transaction, "live_list_source": live, "segments": segments,
                "objects_total": total, "objects_verified": verified, "stored_bytes": stored,
                "plaintext_bytes": plaintext, "bytes_read": read, "errors": errors, "io_errors": 0, "warnings": warnings,
                "findings_by_stage": tj.no_stages(**(stages or {})), "threads": threads, "notes": notes,
                "verdict": tj.VERDICTS[rc], "exit_code": rc}

    # -- borg 2.0.0b5 ---------------------------------------------------------------------------

    def test_b5_clean_verify_data_and_keyless(self):
        repo = self.copy_repo(b5("repokey-aes-ocb"))
        findings, s = self.run_json(["--verify-data", "--threads", "2", repo], tj.VERIFY, cs.EXIT_OK)
        self.assertEqual(findings, [])
        self.assertEqual(s, self.summary(repo, "borg2-b5", "repokey-aes-ocb", True, "log-replay+index", 6, 154, 154,
                                         373670, 819653, 374414, [B5_SUPERSEDED, "key: config", B5_SESSIONS], 5))
        findings, s = self.run_json(["--threads", "2", repo], {}, cs.EXIT_OK)
        self.assertEqual(findings, [])
        self.assertEqual(s, self.summary(repo, "borg2-b5", None, False, "log-replay+index", 6, 154, 154, 373670, 0,
                                         374414, [B5_SUPERSEDED], 5))

    def test_b5_keyfile_through_borg_key_file(self):
        repo = self.copy_repo(b5("keyfile-blake2-chacha20-poly1305"))
        key = b5("keyfile-blake2-chacha20-poly1305.key")
        findings, s = self.run_json(["--verify-data", "--threads", "2", repo],
                                    {"BORG_PASSPHRASE": cs.PASSPHRASE, "BORG_KEY_FILE": key}, cs.EXIT_OK)
        self.assertEqual(findings, [])
        self.assertEqual(s, self.summary(repo, "borg2-b5", "keyfile-blake2-chacha20-poly1305", True,
                                         "log-replay+index", 6, 152, 152, 566710, 819443, 567454,
                                         [B5_SUPERSEDED, "key: " + key, B5_SESSIONS], 5))

    def test_b5_damaged_objects_finding_records(self):
        repo = self.copy_repo(b5("corrupt/chpo-data-authfail"))
        findings, s = self.run_json(["--verify-data", "--threads", "2", repo], tj.VERIFY, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(findings, [finding("error", "authentication", CHPO_CHUNK, 2, 8171, "[segment 2, offset 8171]",
                                            "Authentication / EVP_DecryptFinal_ex failed (data envelope)", "agreed")])
        self.assertEqual(s, self.summary(repo, "borg2-b5", "repokey-chacha20-poly1305", True, "log-replay+index", 6,
                                         146, 145, 370327, 807919, 377036, [B5_SUPERSEDED, "key: config", B5_SESSIONS],
                                         5, {"authentication": 1}, errors=1))
        # Keyless: the checksums were repaired after the flip, so nothing is visible.
        findings, s = self.run_json([repo], {}, cs.EXIT_OK)
        self.assertEqual(findings, [])
        stale = self.copy_repo(b5("corrupt/chpo-data-stale-xxh64"))
        for args in (["--verify-data"], []):
            with self.subTest(args=args):
                findings, s = self.run_json(args + ["--threads", "2", stale], tj.VERIFY, cs.EXIT_INTEGRITY_ERRORS)
                self.assertEqual(findings, [finding("error", "entry-crc", CHPO_CHUNK, 2, 8171, "[segment 2, offset 8171]",
                                                    "Segment entry hash mismatch", "agreed")])
                self.assertEqual((s["objects_total"], s["objects_verified"], s["errors"], s["findings_by_stage"]),
                                 (146, 145, 1, tj.no_stages(entry_crc=1)))
        header = self.copy_repo(b5("corrupt/chpo-entry-header-crc"))
        findings, s = self.run_json(["--threads", "2", header], {}, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(findings, [finding(
            "error", "entry-crc", CHPO_CHUNK, 2, 8171, "[segment 2, offset 8171]",
            "Segment entry header checksum mismatch; the walk resumes at offset 14136 (5965 bytes skipped)",
            "not-reread")])  # found while planning, from the headers: nothing was read twice
        self.assertEqual(s, self.summary(header, "borg2-b5", None, False, "log-replay+index", 6, 146, 145, 370327, 0,
                                         377036, [B5_SUPERSEDED], 5, {"entry_crc": 1}, errors=1))

    # -- borg 2 master (borgstore version 4) ------------------------------------------------------

    def test_master_clean_verify_data_and_keyless(self):
        repo = self.copy_repo(master("repos/aes256-ocb_sha256_repokey"))
        findings, s = self.run_json(["--verify-data", "--threads", "2", repo], tj.VERIFY, cs.EXIT_OK)
        self.assertEqual(findings, [])
        self.assertEqual(s, self.summary(repo, "borgstore-v4", "aes256-ocb (sha256)", True, "index+pack-walk", 10, 73,
                                         73, 1704630, 12399631, 1704155, ["key: " + MASTER_REPOKEY, MASTER_INDEX], 0))
        # Keyless: no key is read and no mode is named (docs/json.md: `mode` is null).
        findings, s = self.run_json(["--threads", "2", repo], {}, cs.EXIT_OK)
        self.assertEqual(findings, [])
        self.assertEqual(s, self.summary(repo, "borgstore-v4", None, False, "index+pack-walk", 10, 73, 73, 1704630, 0,
                                         1704155, [MASTER_INDEX], 0))

    def test_master_keyfile_through_borg_keys_dir(self):
        repo = self.copy_repo(master("repos/aes256-ocb_sha256_keyfile"))
        keys = self.copy_repo(master("keys"))
        findings, s = self.run_json(["--verify-data", "--threads", "2", repo],
                                    {"BORG_PASSPHRASE": cs.PASSPHRASE, "BORG_KEYS_DIR": keys}, cs.EXIT_OK)
        self.assertEqual(findings, [])
        self.assertEqual(s, self.summary(repo, "borgstore-v4", "aes256-ocb (sha256)", True, "index+pack-walk", 10, 73,
                                         73, 1585533, 12399625, 1585058,
                                         ["key: " + os.path.join(keys, "aes256-ocb_sha256_keyfile.key"), MASTER_INDEX],
                                         0))

    def test_master_bit_flip_finding_records(self):
        repo = self.copy_repo(master("corrupt/aes256-ocb_sha256_repokey__bitflip"))
        pack = finding("error", "segment", None, None, None, "[pack %s]" % BITFLIP_PACK,
                       "pack is corrupted: content does not match its name (sha256)", "agreed")
        findings, s = self.run_json(["--verify-data", "--threads", "2", repo], tj.VERIFY, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(findings, [
            finding("error", "authentication", BITFLIP_CHUNK, None, 1295867,
                    "[pack %s, offset 1295867]" % BITFLIP_PACK,
                    "Could not decrypt [Authentication / EVP_DecryptFinal_ex failed]", "agreed"),
            pack])
        self.assertEqual(s, self.summary(repo, "borgstore-v4", "aes256-ocb (sha256)", True, "index+pack-walk", 10, 73,
                                         72, 1638904, 12334095, 1704155, ["key: " + MASTER_REPOKEY, MASTER_INDEX], 0,
                                         {"authentication": 1, "segment": 1}, errors=2))
        # Keyless: the flip is inside an encrypted payload; only the pack's content hash shows it.
        findings, s = self.run_json(["--threads", "2", repo], {}, cs.EXIT_INTEGRITY_ERRORS)
        self.assertEqual(findings, [pack])
        self.assertEqual(s, self.summary(repo, "borgstore-v4", None, False, "index+pack-walk", 10, 73, 73, 1704630, 0,
                                         1704155, [MASTER_INDEX], 0, {"segment": 1}, errors=1))

    # -- both -----------------------------------------------------------------------------------

    def test_threads_1_and_8_print_the_same_records(self):
        cases = [(b5("corrupt/chpo-data-authfail"), cs.EXIT_INTEGRITY_ERRORS, cs.EXIT_OK),
                 (b5("compression-mix"), cs.EXIT_OK, cs.EXIT_OK),
                 (master("corrupt/aes256-ocb_sha256_repokey__bitflip"), cs.EXIT_INTEGRITY_ERRORS,
                  cs.EXIT_INTEGRITY_ERRORS)]
        for source, rc_verify, rc_keyless in cases:
            repo = self.copy_repo(source)
            for args, rc in ((["--verify-data"], rc_verify), ([], rc_keyless)):
                with self.subTest(repo=source, args=args):
                    runs = []
                    for threads in ("1", "8"):
                        findings, s = self.run_json(args + ["--threads", threads, repo], tj.VERIFY, rc)
                        self.assertEqual(s.pop("threads"), int(threads))
                        runs.append((findings, s))
                    self.assertEqual(runs[0], runs[1])


if __name__ == "__main__":
    cs.main()
