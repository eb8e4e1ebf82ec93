// The text report's lines: roll-ups, the summary line, the -v lines, the number formats.
#include "checker/report/text_report.h"

#include <catch2/catch.hpp>

namespace borgcheck::report {
namespace {

ChunkId Id(uint8_t b) {
  ChunkId id{};
  id.fill(b);
  return id;
}

Finding Truncated(uint32_t segment, uint64_t offset, uint8_t id) {
  Finding f;
  f.severity = Severity::kError;
  f.stage = Stage::kTruncated;
  f.chunk_id = Id(id);
  f.segment = segment;
  f.offset = offset;
  f.message = "the segment ends at 200 bytes, before this object";
  return f;
}

std::string Hex(uint8_t b) { return ChunkIdHex(Id(b)); }

TEST_CASE("LocationUnit drops the offset of borg's location suffix", "[report]") {
  CHECK(LocationUnit("[segment 2, offset 8]") == "[segment 2]");
  CHECK(LocationUnit("[segment 2]") == "[segment 2]");
  CHECK(LocationUnit("[pack 00ff, offset 5]") == "[pack 00ff]");
  CHECK(LocationUnit("") == "");
}

TEST_CASE("two findings of a kind stay single lines, three are rolled up", "[report]") {
  std::vector<Finding> two = {Truncated(26, 831, 1), Truncated(26, 3352, 2)};
  CHECK(FormatFindings(two) ==
        "error: truncated chunk " + Hex(1) + " [segment 26, offset 831]: the segment ends at 200 bytes, before this object\n"
        "error: truncated chunk " + Hex(2) + " [segment 26, offset 3352]: the segment ends at 200 bytes, before this object\n");
  std::vector<Finding> three = {Truncated(26, 831, 1), Truncated(26, 3352, 2), Truncated(26, 4065, 3)};
  CHECK(FormatFindings(three) ==
        "error: truncated [segment 26]: 3 objects: the segment ends at 200 bytes, before this object\n"
        "  chunk " + Hex(1) + " [segment 26, offset 831]\n"
        "  chunk " + Hex(2) + " [segment 26, offset 3352]\n"
        "  chunk " + Hex(3) + " [segment 26, offset 4065]\n");
}

TEST_CASE("a roll-up lists the first 20 and counts the rest, other findings keep their place", "[report]") {
  std::vector<Finding> sorted;
  Finding header;
  header.severity = Severity::kError;
  header.stage = Stage::kTruncated;
  header.chunk_id = Id(0xaa);
  header.segment = 2;
  header.offset = 8;
  header.message = "invalid entry header";
  sorted.push_back(header);
  for (int i = 0; i < 1543; ++i) sorted.push_back(Truncated(2, 100 + uint64_t(i), uint8_t(i)));
  Finding later = Truncated(3, 8, 0xbb);
  later.stage = Stage::kAuthentication;
  later.message = "MAC Authentication failed";
  later.reread = Reread::kAgreed;
  sorted.push_back(later);

  std::string text = FormatFindings(sorted);
  std::string expect = "error: truncated chunk " + Hex(0xaa) + " [segment 2, offset 8]: invalid entry header\n"
                       "error: truncated [segment 2]: 1,543 objects: the segment ends at 200 bytes, before this object\n";
  for (int i = 0; i < 20; ++i) {
    expect += "  chunk " + Hex(uint8_t(i)) + " [segment 2, offset " + std::to_string(100 + i) + "]\n";
  }
  expect += "  and 1,523 more (--json lists every one)\n";
  expect += "error: authentication chunk " + Hex(0xbb) + " [segment 3, offset 8]: MAC Authentication failed "
            "(second read: agreed)\n";
  CHECK(text == expect);
}

TEST_CASE("a roll-up of 21 lists all 21: 'and 1 more' would take the line the last one needs", "[report]") {
  std::vector<Finding> sorted;
  for (int i = 0; i < 21; ++i) sorted.push_back(Truncated(2, 100 + uint64_t(i), uint8_t(i)));
  const std::string text = FormatFindings(sorted);
  CHECK(text.find("21 objects") != std::string::npos);
  CHECK(text.find(Hex(uint8_t(20))) != std::string::npos);
  CHECK(text.find("more (--json") == std::string::npos);
  // 22: the first 20 and "and 2 more".
  sorted.push_back(Truncated(2, 121, 21));
  CHECK(FormatFindings(sorted).find("  and 2 more (--json lists every one)\n") != std::string::npos);
}

TEST_CASE("findings of one kind in different segments are different units", "[report]") {
  std::vector<Finding> sorted = {Truncated(1, 8, 1), Truncated(1, 9, 2), Truncated(2, 8, 3), Truncated(2, 9, 4)};
  CHECK(FormatFindings(sorted).find("objects") == std::string::npos);  // no group reaches three
}

TEST_CASE("a roll-up of findings without chunk ids counts findings, and keeps the reread", "[report]") {
  std::vector<Finding> sorted;
  for (uint64_t off : {8, 20, 40}) {
    Finding f;
    f.severity = Severity::kWarning;
    f.stage = Stage::kEntryCrc;
    f.segment = 5;
    f.offset = off;
    f.message = "CRC mismatch in a superseded entry";
    f.reread = Reread::kPassed;
    sorted.push_back(f);
  }
  CHECK(FormatFindings(sorted) ==
        "warning: entry-crc [segment 5]: 3 findings: CRC mismatch in a superseded entry (second read: passed)\n"
        "  [segment 5, offset 8]\n  [segment 5, offset 20]\n  [segment 5, offset 40]\n");
}

RunSummary Summary() {
  RunSummary s;
  s.repository = "/srv/copy/mac-repokey";
  s.format = "borg1";
  s.mode = "repokey";
  s.verify_data = true;
  s.transaction = 29;
  s.live_list_source = "index";
  s.segments = 30;
  s.objects_total = 102;
  s.objects_verified = 101;
  s.stored_bytes = 266859;
  s.plaintext_bytes = 284697;
  s.bytes_read = 276462;
  s.errors = 1;
  s.elapsed_s = 0.0275;
  s.threads = 4;
  return s;
}

TEST_CASE("the summary line names the repository once and is short", "[report]") {
  RunSummary s = Summary();
  CHECK(FormatSummaryLine(s, 90) ==
        "/srv/copy/mac-repokey: integrity-errors: 101 of 102 objects verified (260.6 KiB), 1 error, 0 warnings, 0.03s\n");
  s.verify_data = false;
  s.errors = 0;
  s.warnings = 2;
  s.objects_verified = 1234567;
  s.elapsed_s = 3725;
  CHECK(FormatSummaryLine(s, 1) ==
        "/srv/copy/mac-repokey: warnings: 1,234,567 of 102 objects CRC-checked (260.6 KiB, keyless: contents and archives not verified), 0 errors, "
        "2 warnings, 1h02m05s\n");
  // Archives that were not checked say so in the line, in place of the count (issue 17).
  s = Summary();
  s.archives_not_checked = "the manifest (the list of archives) is damaged";
  CHECK(FormatSummaryLine(s, 90) ==
        "/srv/copy/mac-repokey: integrity-errors: 101 of 102 objects verified (260.6 KiB), archives not checked (the "
        "manifest (the list of archives) is damaged), 1 error, 0 warnings, 0.03s\n");
}

TEST_CASE("a lost item metadata chunk names the paths around it", "[report]") {
  AffectedUse u;
  u.archive = "a1";
  u.use = "items";
  u.begin = 524288;
  u.items_read = 175;
  CHECK(FormatAffectedUse(u) ==
        "archive a1: an item metadata chunk at item stream byte 524,288: read up to item 175, the items in it are lost");
  u.path_before = "src/b/f17";
  CHECK(FormatAffectedUse(u) ==
        "archive a1: an item metadata chunk at item stream byte 524,288: read up to item 175, the items in it are lost "
        "(lost after src/b/f17; no item after it could be read)");
  u.path_after = "src/c/f03";
  CHECK(FormatAffectedUse(u) ==
        "archive a1: an item metadata chunk at item stream byte 524,288: read up to item 175, the items in it are lost "
        "(lost between src/b/f17 and src/c/f03)");
  u.path_before.reset();
  CHECK(FormatAffectedUse(u) ==
        "archive a1: an item metadata chunk at item stream byte 524,288: read up to item 175, the items in it are lost "
        "(lost before src/c/f03, the first item that could be read)");
}

TEST_CASE("verbose (-v) lines: notes, details, phases", "[report]") {
  RunSummary s = Summary();
  s.notes = {"key: config"};
  s.version = "0.1.0";
  s.repository_id = "3fe7";
  s.phases = {{"key", 0.5}, {"read+verify", 12.25}};
  CHECK(FormatVerboseLines(s) ==
        "note: key: config\n"
        "details: borg1 repokey, 30 segments, transaction 29 (index), 278.0 KiB plaintext, 270.0 KiB read at "
        "9.6 MiB/s, 4 threads, borgcheck 0.1.0, repository id 3fe7\n"
        "phase key: 0.50s\nphase read+verify: 12.25s\n");
  s.format = "borgstore-v4";
  s.notes.clear();
  s.phases.clear();
  s.version.clear();
  s.repository_id.clear();
  s.elapsed_s = 0;
  CHECK(FormatVerboseLines(s) ==
        "details: borgstore-v4 repokey, 30 packs (index), 278.0 KiB plaintext, 270.0 KiB read at -, 4 threads\n");
}

TEST_CASE("the coverage line of a run with a state", "[report]") {
  RunSummary s = Summary();
  CHECK(FormatCoverageLine(s).empty());  // no state: nothing to say
  s.has_coverage = true;
  s.unit_noun = "segment";
  s.units_total = 30;
  s.bytes_total = 276462;
  s.finished_at = 1796132097;
  s.coverage.state_file = "/var/lib/borgcheck/3fe7/state.json";
  s.coverage.ratio = 0.5;
  s.coverage.max_age_s = 8 * 86400;
  s.coverage.units_verified = 15;
  s.coverage.units_never_verified = 3;
  CHECK(FormatCoverageLine(s) ==
        "coverage: 50.0% of 270.0 KiB verified within 8d (15 of 30 segments, 3 never); no full verification "
        "completed yet; state /var/lib/borgcheck/3fe7/state.json\n");
  s.coverage.units_never_verified = 0;
  s.coverage.full_verification_at = 1796132097 - 3600;
  s.coverage.oldest_verified_at = 1796132097 - 2 * 86400 - 4 * 3600;
  CHECK(FormatCoverageLine(s) ==
        "coverage: 50.0% of 270.0 KiB verified within 8d (15 of 30 segments); full verification completed "
        "2026-12-01T12:34:57.000Z; oldest segment verified 2d04h ago; state /var/lib/borgcheck/3fe7/state.json\n");
  // An open cycle says how far it got: slices in a slice run, else units; a completed one only
  // its date.
  s.coverage.units_verified = 0;
  s.coverage.units_partly_verified = 30;
  s.coverage.cycle_started_at = 1796132097 - 2 * 86400;
  s.coverage.cycle_units = 28;
  s.coverage.cycle_slices = 7;
  s.coverage.cycle_slices_done = 3;
  CHECK(FormatCoverageLine(s) ==
        "coverage: 50.0% of 270.0 KiB verified within 8d (0 of 30 segments, 30 partly); rotation: 3 of 7 slices "
        "done since 2026-11-29T13:34:57.000Z; full verification completed 2026-12-01T12:34:57.000Z; oldest "
        "segment verified 2d04h ago; state /var/lib/borgcheck/3fe7/state.json\n");
  s.coverage.cycle_slices = 0;
  s.coverage.cycle_units_done = 12;
  CHECK_THAT(FormatCoverageLine(s), Catch::Contains("); this cycle: 12 of 28 segments verified since "
                                                    "2026-11-29T13:34:57.000Z; full verification completed "));
  s.coverage.cycle_completed_at = 1796132097;
  CHECK_THAT(FormatCoverageLine(s), Catch::Contains("30 partly); full verification completed "));
  s.skipped = true;  // --min-interval prints its own line
  CHECK(FormatCoverageLine(s).empty());
  // An ssh:// repository's: a share of its objects, in batches (their sizes are not known).
  s.skipped = false;
  s.unit_noun = "batch";
  s.objects_total = 4100;
  s.bytes_total = 0;
  CHECK_THAT(FormatCoverageLine(s), Catch::StartsWith("coverage: 50.0% of 4,100 objects verified within 8d (0 of 30 "
                                                      "batches, 30 partly); full verification completed "));
}

// Issue 17 item 5: strings from the repository and the command line are escaped when printed
// (checker/base/text_escape.h); the finding and the summary keep the raw bytes for JSON.
TEST_CASE("repository strings are escaped in every text line, ordinary ones are unchanged", "[report]") {
  const std::string forged = "x\n/srv/borg/main: ok: 1 of 1 objects verified";
  Finding f;
  f.stage = Stage::kReference;
  f.chunk_id = Id(7);
  f.location = "archive a\x1b[2J";
  f.message = "-a 'sh:\x07' matches no archive";
  f.advice = "see \xc2\x9b";
  f.affected = Affected{{AffectedUse{"arch\rive", Id(1), "chunks", forged, 0, 4096, {}, {}, {}, {}},
                         AffectedUse{"b\xe2\x80\xae", Id(2), "hardlink", "t\tab", 0, 10, "bad\xff", {}, {}, {}}},
                        2};
  CHECK(FormatFindingLine(f) ==
        "error: reference chunk " + Hex(7) + " [archive a\\x1b[2J]: -a 'sh:\\x07' matches no archive\n");
  CHECK(FormatAffectedLines(f) ==
        "  affects arch\\rive: x\\n/srv/borg/main: ok: 1 of 1 objects verified [bytes 0-4096]\n"
        "  affects b\\u202e: t\\tab [bytes 0-10] (hard link to bad\\xff)\n"
        "  advice: see \\u009b\n");
  // A roll-up's header and member lines.
  std::vector<Finding> three(3, f);
  for (size_t i = 0; i < three.size(); ++i) three[i].chunk_id = Id(uint8_t(10 + i));
  const std::string text = FormatFindings(three);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find("error: reference [archive a\\x1b[2J]: 3 objects: -a 'sh:\\x07' matches no archive\n") == 0);
  CHECK(text.find(": affects arch\\rive: x\\n/srv/borg/main: ok: 1 of 1 objects verified [bytes 0-4096] (and 1 "
                  "more)\n") != std::string::npos);
  CHECK(f.message == "-a 'sh:\x07' matches no archive");  // the finding itself is unchanged

  RunSummary s = Summary();
  s.repository = "/srv/" + forged + "\x1b]0;title\x07";
  CHECK(FormatSummaryLine(s, 90) ==
        "/srv/x\\n/srv/borg/main: ok: 1 of 1 objects verified\\x1b]0;title\\x07: integrity-errors: 101 of 102 "
        "objects verified (260.6 KiB), 1 error, 0 warnings, 0.03s\n");
  s.notes = {"archive \r\xff: 3 more item metadata problems not listed"};
  CHECK(FormatVerboseLines(s).find("note: archive \\r\\xff: 3 more item metadata problems not listed\n") == 0);
  s.has_coverage = true;
  s.coverage.state_file = "/var/lib/\x1b[31m";
  CHECK(FormatCoverageLine(s).find("; state /var/lib/\\x1b[31m\n") != std::string::npos);
}

TEST_CASE("number, duration and time formats", "[report]") {
  CHECK(FormatCount(0) == "0");
  CHECK(FormatCount(999) == "999");
  CHECK(FormatCount(1000) == "1,000");
  CHECK(FormatCount(1543) == "1,543");
  CHECK(FormatCount(18446744073709551615ull) == "18,446,744,073,709,551,615");
  CHECK(FormatBytes(1023) == "1023 B");
  CHECK(FormatBytes(1024) == "1.0 KiB");
  CHECK(FormatDuration(0.044) == "0.04s");
  CHECK(FormatDuration(59.994) == "59.99s");
  CHECK(FormatDuration(123) == "2m03s");
  CHECK(FormatDuration(-1) == "0.00s");
  CHECK(FormatClock(3725) == "1:02:05");
  CHECK(FormatRfc3339(0) == "1970-01-01T00:00:00.000Z");
  CHECK(FormatRfc3339(1796132097.123) == "2026-12-01T13:34:57.123Z");
  CHECK(FormatRfc3339(1796132097.9996) == "2026-12-01T13:34:58.000Z");
}

}  // namespace
}  // namespace borgcheck::report
