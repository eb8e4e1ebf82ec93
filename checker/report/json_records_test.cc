// The JSON records read back (json_records.h): parse(print(x)) == x for every record type with
// each optional field set and unset, as built in memory and as read from the printed line; and
// malformed records refused with a message naming the field, never a throw.
#include "checker/report/json_records.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "checker/report/exit_codes.h"
#include "checker/report/text_report.h"

namespace borgcheck::report {
namespace {

using nlohmann::json;

ChunkId Id(uint8_t b) {
  ChunkId id{};
  for (size_t i = 0; i < id.size(); ++i)
    id[i] = uint8_t(b + i);
  return id;
}

// The line JsonReporter prints, parsed again: numbers come back as the parser stores them
// (non-negative integers unsigned), unlike the json built in memory.
json Printed(const json& j) {
  return json::parse(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

void CheckFindingRoundTrip(const Finding& f) {
  INFO(FindingJson(f).dump());
  const Result<Finding> direct = ParseFindingJson(FindingJson(f));
  REQUIRE(direct.ok());
  CHECK(*direct == f);
  const Result<Finding> text = ParseFindingJson(Printed(FindingJson(f)));
  REQUIRE(text.ok());
  CHECK(*text == f);
  CHECK(FindingJson(*text).dump() == FindingJson(f).dump());
}

// Checks that `RunSummary` comes back equal, as `expected` when the JSON does not carry all of it.
void CheckSummaryRoundTrip(const RunSummary& s, int exit_code, const RunSummary& expected) {
  INFO(SummaryJson(s, exit_code).dump());
  for (const json& j : {SummaryJson(s, exit_code), Printed(SummaryJson(s, exit_code))}) {
    int code = -1;
    const Result<RunSummary> back = ParseSummaryJson(j, &code);
    REQUIRE(back.ok());
    CHECK(*back == expected);
    CHECK(code == exit_code);
    CHECK(SummaryJson(*back, code).dump() == SummaryJson(s, exit_code).dump());
  }
}
void CheckSummaryRoundTrip(const RunSummary& s, int exit_code) {
  CheckSummaryRoundTrip(s, exit_code, s);
}

// The message of a refused record names `field` (as "`field`").
template <typename T>
void CheckRefused(const Result<T>& r, const std::string& field) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  INFO(r.status().message());
  CHECK(r.status().message().find("`" + field + "`") != std::string::npos);
}

Finding FullFinding() {
  Finding f;
  f.severity = Severity::kError;
  f.stage = Stage::kAuthentication;
  f.chunk_id = Id(0x97);
  f.segment = 2;
  f.offset = 8;
  f.message = "MAC Authentication failed";
  f.reread = Reread::kAgreed;
  f.advice = "borg check --verify-data --repair deletes the damaged chunk";
  f.affected.emplace();
  const char* kUses[] = {"chunks", "chunks_healthy", "hardlink", "archive", "item_ptrs", "items"};
  for (const char* use : kUses) {
    AffectedUse u;
    u.archive = std::string("c-") + use;
    u.archive_id = Id(0xd8);
    u.use = use;
    if (u.use == "chunks" || u.use == "chunks_healthy" || u.use == "hardlink") {
      u.path = "dir/file \"quoted\", ]\n\xc3\xa9";
      u.begin = 0;
      u.end = 4096;
    } else {
      u.items_read = u.use == "archive" ? 0 : 17;
    }
    if (u.use == "hardlink") u.via = "dir/master";
    if (u.use == "items") {
      u.begin = 123456;
      u.path_before = "a/last-before";
      u.path_after = "z/first-after";
    }
    f.affected->uses.push_back(u);
  }
  f.affected->total = 12345;
  return f;
}

TEST_CASE("a finding with a segment and an offset, affected uses of every kind and advice", "[json_records]") {
  CheckFindingRoundTrip(FullFinding());
  Finding f = FullFinding();
  f.affected->uses.clear();  // walked, no archive uses it: "affected": []
  f.affected->total = 0;
  CheckFindingRoundTrip(f);
}

TEST_CASE("a finding with a segment and no offset, no chunk id, nothing optional", "[json_records]") {
  Finding f = MakeFinding(Severity::kWarning, Stage::kSegment, Location::Segment(7), nullptr, "uncommitted");
  CHECK(FindingJson(f)["location"] == "[segment 7]");
  CheckFindingRoundTrip(f);
  f.segment = std::numeric_limits<uint32_t>::max();
  f.offset = std::numeric_limits<uint64_t>::max();
  CheckFindingRoundTrip(f);
}

TEST_CASE("findings located by item: a pack with an offset, config/manifest without", "[json_records]") {
  const std::string pack = "pack " + ChunkIdHex(Id(0x40));
  const ChunkId id = Id(1);
  Finding f = MakeFinding(Severity::kError, Stage::kMissing, Location::Item(pack, 12), &id, "blob missing");
  CHECK(FindingJson(f)["location"] == "[" + pack + ", offset 12]");
  CheckFindingRoundTrip(f);
  f = MakeFinding(Severity::kError, Stage::kAuthentication, Location::Item("config/manifest"), &id, "bad TAM");
  CHECK(FindingJson(f)["location"] == "[config/manifest]");
  CheckFindingRoundTrip(f);
}

TEST_CASE("item locations that look like another form come back verbatim", "[json_records]") {
  // The text alone is ambiguous; `segment` and `offset` decide (json_records.cc, ReadLocation).
  const char* kItems[] = {
      "segment 3",          "x, offset 5",           "archive a], b [c",           "]", "[", ", offset 0",
      "lock.exclusive/h@1", "a, offset 5, offset 6", "archive \"q\"\n\xe2\x82\xac"};
  for (const char* item : kItems) {
    for (const std::optional<uint64_t> offset : {std::optional<uint64_t>(), std::optional<uint64_t>(5)}) {
      Finding f = MakeFinding(Severity::kError, Stage::kArchive, Location::Item(item, offset), nullptr, "m, ]");
      CheckFindingRoundTrip(f);
    }
  }
}

TEST_CASE("a finding without location, and an offset without a unit", "[json_records]") {
  Finding f = MakeFinding(Severity::kWarning, Stage::kReference, Location::None(), nullptr, "3 orphaned objects found");
  CHECK(FindingJson(f)["location"] == "");
  CheckFindingRoundTrip(f);
  f.offset = 99;  // no Location builds it; the record still carries it in `offset`
  CheckFindingRoundTrip(f);
}

TEST_CASE("every stage, reread and severity", "[json_records]") {
  for (int stage = 0; stage < kStageCount; ++stage) {
    for (const Reread reread : {Reread::kNotReread, Reread::kAgreed, Reread::kDiffered, Reread::kPassed}) {
      for (const Severity severity : {Severity::kWarning, Severity::kError}) {
        const ChunkId id = Id(uint8_t(stage));
        Finding f = MakeFinding(severity, Stage(stage), Location::Segment(uint32_t(stage), 40), &id, "m");
        f.reread = reread;
        CheckFindingRoundTrip(f);
      }
    }
  }
}

RunSummary FullSummary() {
  RunSummary s;
  s.repository = "/srv/copy/mac-repokey";
  s.repository_id = ChunkIdHex(Id(0x3f));
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
  for (int i = 0; i < kStageCount; ++i)
    s.findings_by_stage[i] = uint64_t(i) * 3;
  s.errors = 7;
  s.io_errors = 2;
  s.warnings = 4;
  s.elapsed_s = 0.027546293;
  s.threads = 4;
  s.notes = {"key: config", "a \"quoted\" note\nwith a newline, \\ and caf\xc3\xa9 \xe2\x80\xa8 \x01", ""};
  s.complete = false;
  s.stopped = "time-budget";
  s.subset = "3/7";
  s.shard = "2/5";  // not with a subset in a real run; here for the round trip
  s.merged_shards = 4;
  s.sample_fraction = 0.125;
  s.sample_seed = 18446744073709551615u;
  s.bytes_total = 1 << 30;
  s.bytes_skipped = (1 << 30) - 276462;
  s.units_total = 31;
  s.units_not_due = 1;
  s.has_coverage = true;
  s.coverage.ratio = 0.3333333333333333;
  s.coverage.max_age_s = 7 * 86400;
  s.coverage.units_verified = 10;
  s.coverage.units_never_verified = 3;
  s.coverage.units_partly_verified = 18;
  s.coverage.full_verification_at = 1795000000.5;
  s.coverage.oldest_verified_at = 1796000000.001;
  s.coverage.state_file = "/var/lib/borgcheck/state.json";
  s.coverage.cycle_started_at = 1796100000.999;
  s.coverage.cycle_completed_at = 1796132097.123;
  s.coverage.cycle_units = 31;
  s.coverage.cycle_units_done = 30;
  s.coverage.cycle_slices = 7;
  s.coverage.cycle_slices_done = 6;
  s.archives_total = 7;
  s.archives_checked = 5;
  s.version = "0.1.0";
  s.started_at = 1796132097.151;
  s.finished_at = 1796132097.18;
  return s;
}

TEST_CASE("a summary with coverage, a completed slice cycle, a sample and archives", "[json_records]") {
  CheckSummaryRoundTrip(FullSummary(), kExitIntegrityErrors);
}

TEST_CASE("a summary with every optional field unset", "[json_records]") {
  CheckSummaryRoundTrip(RunSummary{}, kExitOk);
  RunSummary s;  // archives not walked, and why
  s.archives_not_checked = "keyless run";
  CheckSummaryRoundTrip(s, kExitOk);
}

TEST_CASE("a summary whose coverage has an open cycle without slices, or no cycle", "[json_records]") {
  RunSummary s = FullSummary();
  s.coverage.cycle_completed_at = 0;
  s.coverage.cycle_slices = 0;
  s.coverage.cycle_slices_done = 0;
  s.coverage.max_age_s = 0;
  s.coverage.full_verification_at = 0;
  s.coverage.oldest_verified_at = 0;
  s.coverage.state_file = "";
  CheckSummaryRoundTrip(s, kExitWarnings);
  s.coverage = {};
  s.coverage.ratio = 1;
  CheckSummaryRoundTrip(s, kExitWarnings);
  s.sample_fraction = 0;  // no sample: no seed either
  s.sample_seed = 0;
  CheckSummaryRoundTrip(s, kExitWarnings);
}

TEST_CASE("the two flags only the verdict carries: skipped, state-not-saved", "[json_records]") {
  RunSummary s;
  s.skipped = true;
  s.complete = false;
  CheckSummaryRoundTrip(s, kExitOk);
  s = FullSummary();
  s.errors = s.io_errors = 0;
  s.state_not_saved = true;
  CHECK(SummaryJson(s, kExitCouldNotRun)["verdict"] == "state-not-saved");
  CheckSummaryRoundTrip(s, kExitCouldNotRun);
  // With damage the verdict says integrity-errors, and state_not_saved is not carried.
  s.errors = 1;
  RunSummary expected = s;
  expected.state_not_saved = false;
  CheckSummaryRoundTrip(s, kExitIntegrityErrors, expected);
}

TEST_CASE("summary fields the JSON does not carry come back default", "[json_records]") {
  // Not printed: unit_noun, objects_selected, subset_label, max_duration_s, phases; sample_seed
  // without a sample; a coverage struct when has_coverage is false.
  RunSummary s = FullSummary();
  s.unit_noun = "pack";
  s.objects_selected = true;
  s.subset_label = "3/7 (daily/week, 2026-12-02, Wednesday)";
  s.max_duration_s = 600;
  s.phases = {{"key", 0.5}, {"read+verify", 2.25}};
  RunSummary expected = FullSummary();
  CheckSummaryRoundTrip(s, kExitIntegrityErrors, expected);
  s = RunSummary{};
  s.sample_seed = 42;      // without sample_fraction
  s.coverage.ratio = 0.5;  // without has_coverage
  CheckSummaryRoundTrip(s, kExitOk, RunSummary{});
}

TEST_CASE("every error code but ok comes back", "[json_records]") {
  for (int c = 1; c <= int(StatusCode::kInternal); ++c) {
    const Status status(StatusCode(c), "the passphrase is \"wrong\"\nreally \xc3\xa9");
    const int exit_code = ExitCodeForStatus(status);
    for (const json& j : {ErrorJson(status, exit_code), Printed(ErrorJson(status, exit_code))}) {
      const auto back = ParseErrorJson(j);
      REQUIRE(back.ok());
      CHECK(back->first.code() == status.code());
      CHECK(back->first.message() == status.message());
      CHECK(back->second == exit_code);
    }
    CHECK(StatusCodeFromName(StatusCodeName(StatusCode(c))) == StatusCode(c));
  }
  CHECK(StatusCodeFromName("unknown") == std::nullopt);
  CheckRefused(ParseErrorJson(ErrorJson(Status(StatusCode::kOk, "fine"), 0)), "code");
}

TEST_CASE("ParseRfc3339 inverts FormatRfc3339 and reads RFC 3339", "[json_records]") {
  for (double t :
       {0.001, 1.0, 951782400.0, 1796132097.123, 1796132097.18, 1796132097.999, 4102444799.999, 253402300799.999}) {
    INFO(FormatRfc3339(t));
    CHECK(ParseRfc3339(FormatRfc3339(t)) == t);
  }
  CHECK(ParseRfc3339("2026-12-01T13:34:57.123Z") == 1796132097.123);
  CHECK(ParseRfc3339("2026-12-01t13:34:57.123z") == 1796132097.123);
  CHECK(ParseRfc3339("2026-12-01T13:34:57Z") == 1796132097.0);
  CHECK(ParseRfc3339("2026-12-01T15:34:57.123+02:00") == 1796132097.123);
  CHECK(ParseRfc3339("2026-12-01T08:04:57.123-05:30") == 1796132097.123);
  CHECK(ParseRfc3339("2026-12-01T13:34:57.1229999Z") == 1796132097.123);  // rounded to the ms
  CHECK(ParseRfc3339("2026-12-01T13:34:57.9996Z") == 1796132098.0);
  CHECK(ParseRfc3339("2024-02-29T00:00:00Z") == 1709164800.0);
  CHECK(ParseRfc3339("1969-12-31T23:59:59Z") == -1.0);
  for (const char* bad :
       {"", "2026-12-01", "2026-12-01T13:34:57", "2026-12-01T13:34:57.Z", "2026-12-01 13:34:57Z",
        "2026-13-01T13:34:57Z", "2026-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-12-01T24:00:00Z",
        "2026-12-01T13:60:00Z", "2026-12-31T23:59:60Z", "2026-12-01T13:34:57.1234567891Z", "2026-12-01T13:34:57+0200",
        "2026-12-01T13:34:57+24:00", "2026-12-01T13:34:57Zjunk", "+2026-12-01T13:34:57Z", "2026-1-01T13:34:57Z",
        "2026-12-01T13:34:57.123Z\n"}) {
    INFO(bad);
    CHECK_FALSE(ParseRfc3339(bad).has_value());
  }
}

// ---- Rejections ---------------------------------------------------------------------------

TEST_CASE("a record that is no object, or of another type, is refused", "[json_records]") {
  const json discarded = json::parse("{\"type\":\"finding\",\"severity\":\"err", nullptr, false);  // a truncated line
  REQUIRE(discarded.is_discarded());
  for (const json& j : {json(nullptr), json::array(), json("finding"), json(3), discarded}) {
    REQUIRE_FALSE(ParseFindingJson(j).ok());
    REQUIRE_FALSE(ParseSummaryJson(j, nullptr).ok());
    REQUIRE_FALSE(ParseErrorJson(j).ok());
    CHECK(ParseFindingJson(j).status().message().find("not a JSON object") != std::string::npos);
  }
  CheckRefused(ParseFindingJson(SummaryJson(RunSummary{}, 0)), "type");
  CheckRefused(ParseSummaryJson(FindingJson(FullFinding()), nullptr), "type");
  CheckRefused(ParseErrorJson(json::object()), "type");
}

// Every field in turn: removed (a record cut short, or from a version without it), and
// replaced by a value of the wrong type.
template <typename Parse>
void CheckEveryField(const json& record, Parse parse, std::initializer_list<std::string> may_be_missing) {
  for (const auto& item : record.items()) {
    const std::string key = item.key();
    INFO(key);
    json missing = record;
    missing.erase(key);
    if (std::find(may_be_missing.begin(), may_be_missing.end(), key) != may_be_missing.end()) {
      CHECK(parse(missing).ok());
    } else if (key != "throughput_bytes_per_s") {  // derived: not read
      CheckRefused(parse(missing), key);
    }
    json wrong = record;
    wrong[key] = item.value().is_object() ? json::array({1}) : json::object({{"x", 1}});
    if (key != "throughput_bytes_per_s") CheckRefused(parse(wrong), key);
  }
}

TEST_CASE("a finding without a field, or with one of the wrong type, is refused", "[json_records]") {
  CheckEveryField(FindingJson(FullFinding()), ParseFindingJson, {});
  const json use = FindingJson(FullFinding())["affected"][0];
  for (const auto& item : use.items()) {
    json missing = FindingJson(FullFinding());
    missing["affected"][0].erase(item.key());
    CheckRefused(ParseFindingJson(missing), "affected[0]." + item.key());
    json wrong = FindingJson(FullFinding());
    wrong["affected"][5][item.key()] = true;
    CheckRefused(ParseFindingJson(wrong), "affected[5]." + item.key());
  }
  json j = FindingJson(FullFinding());
  j["affected"][2] = "chunks";
  CheckRefused(ParseFindingJson(j), "affected[2]");
}

TEST_CASE("a summary without a field, or with one of the wrong type, is refused", "[json_records]") {
  const auto parse = [](const json& j) { return ParseSummaryJson(j, nullptr); };
  CheckEveryField(SummaryJson(FullSummary(), 90), parse, {"version", "started_at", "finished_at", "repository_id", "shard",
                                                                    "merged_shards"});
  // (The full record in a variable: a range-for over a member of a temporary reads freed memory.)
  const json full = SummaryJson(FullSummary(), 90);
  for (const auto& item : full["coverage"].items()) {
    if (item.key() == "oldest_unit_age_s") continue;  // derived: not read
    json j = SummaryJson(FullSummary(), 90);
    j["coverage"][item.key()] = true;
    CheckRefused(parse(j), "coverage." + item.key());
    j["coverage"].erase(item.key());
    CheckRefused(parse(j), "coverage." + item.key());
  }
  for (const auto& item : full["coverage"]["cycle"].items()) {
    json j = SummaryJson(FullSummary(), 90);
    j["coverage"]["cycle"][item.key()] = "7";
    CheckRefused(parse(j), "coverage.cycle." + item.key());
  }
  for (int i = 0; i < kStageCount; ++i) {
    json j = SummaryJson(FullSummary(), 90);
    j["findings_by_stage"].erase(std::string(StageName(Stage(i))));
    CheckRefused(parse(j), "findings_by_stage." + std::string(StageName(Stage(i))));
  }
  json j = SummaryJson(FullSummary(), 90);
  j["notes"][1] = 5;
  CheckRefused(parse(j), "notes[1]");
}

TEST_CASE("an error record without a field, or with one of the wrong type, is refused", "[json_records]") {
  CheckEveryField(ErrorJson(Status(StatusCode::kLockHeld, "held"), kExitLockHeld), ParseErrorJson, {});
}

TEST_CASE("unknown names are refused", "[json_records]") {
  json j = FindingJson(FullFinding());
  j["stage"] = "entry_crc";
  CheckRefused(ParseFindingJson(j), "stage");
  j = FindingJson(FullFinding());
  j["severity"] = "Error";
  CheckRefused(ParseFindingJson(j), "severity");
  j = FindingJson(FullFinding());
  j["reread"] = "unknown";
  CheckRefused(ParseFindingJson(j), "reread");
  j = FindingJson(FullFinding());
  j["affected"][3]["use"] = "file";
  CheckRefused(ParseFindingJson(j), "affected[3].use");
  j = SummaryJson(FullSummary(), 90);
  j["findings_by_stage"]["checksum"] = 0;
  CheckRefused(ParseSummaryJson(j, nullptr), "findings_by_stage");
  j = ErrorJson(Status(StatusCode::kLockHeld, "held"), 73);
  j["code"] = "lock_held";
  CheckRefused(ParseErrorJson(j), "code");
}

TEST_CASE("a chunk id that is not 64 lowercase hex digits is refused", "[json_records]") {
  const std::string good = ChunkIdHex(Id(0xa0));
  std::string upper = good;
  upper[10] = 'A';
  for (const std::string& bad :
       {good.substr(1), good + "0", upper, std::string(63, '0') + "g", std::string(64, ' '), std::string()}) {
    INFO(bad);
    json j = FindingJson(FullFinding());
    j["chunk_id"] = bad;
    CheckRefused(ParseFindingJson(j), "chunk_id");
    j = FindingJson(FullFinding());
    j["affected"][1]["archive_id"] = bad;
    CheckRefused(ParseFindingJson(j), "affected[1].archive_id");
  }
}

TEST_CASE("numbers out of range or not integers are refused", "[json_records]") {
  struct Case {
    const char* field;
    json value;
  };
  const Case kFinding[] = {{"segment", -1}, {"segment", 4294967296u}, {"segment", 2.0}, {"offset", -8},
                           {"offset", 8.5}, {"affected_total", -1},   {"segment", "2"}};
  for (const Case& c : kFinding) {
    INFO(c.field << " = " << c.value.dump());
    json j = FindingJson(FullFinding());
    j[c.field] = c.value;
    CheckRefused(ParseFindingJson(j), c.field);
    CheckRefused(ParseFindingJson(Printed(j)), c.field);
  }
  const Case kSummary[] = {{"bytes_total", -5},
                           {"transaction", 4294967296u},
                           {"threads", -1},
                           {"exit_code", -1},
                           {"exit_code", 256},
                           {"elapsed_s", -0.5},
                           {"elapsed_s", std::numeric_limits<double>::infinity()},
                           {"sample_fraction", 0},
                           {"sample_fraction", -0.25},
                           {"errors", 1e30}};
  for (const Case& c : kSummary) {
    INFO(c.field << " = " << c.value.dump());
    json j = SummaryJson(FullSummary(), 90);
    j[c.field] = c.value;
    CheckRefused(ParseSummaryJson(j, nullptr), c.field);
  }
  json j = SummaryJson(FullSummary(), 90);
  j["coverage"]["cycle"]["slices"] = 4294967296u;
  CheckRefused(ParseSummaryJson(j, nullptr), "coverage.cycle.slices");
  j = SummaryJson(FullSummary(), 90);
  j["coverage"]["ratio"] = -1;
  CheckRefused(ParseSummaryJson(j, nullptr), "coverage.ratio");
  j = ErrorJson(Status(StatusCode::kLockHeld, "held"), 73);
  j["exit_code"] = 1000;
  CheckRefused(ParseErrorJson(j), "exit_code");
}

TEST_CASE("the message names the record, the field and what is wrong", "[json_records]") {
  json j = FindingJson(FullFinding());
  j["segment"] = -1;
  CHECK(ParseFindingJson(j).status().message() ==
        "finding record: field `segment`: -1 is out of range (0 to 4294967295)");
  j = FindingJson(FullFinding());
  j["affected"][1]["begin"] = "0";
  CHECK(ParseFindingJson(j).status().message() ==
        "finding record: field `affected[1].begin`: must be an integer, is string");
  j = SummaryJson(FullSummary(), 90);
  j.erase("bytes_read");
  CHECK(ParseSummaryJson(j, nullptr).status().message() == "summary record: field `bytes_read`: missing");
  j = SummaryJson(FullSummary(), 90);
  j["coverage"]["cycle"]["started_at"] = "2026-12-01T13:34:57.123";
  CHECK(ParseSummaryJson(j, nullptr).status().message() ==
        "summary record: field `coverage.cycle.started_at`: \"2026-12-01T13:34:57.123\" is no RFC 3339 time");
  CHECK(ParseErrorJson(json::array()).status().message() == "error record: not a JSON object (array)");
}

TEST_CASE("fields that must agree with each other", "[json_records]") {
  json j = FindingJson(FullFinding());
  j["location"] = "[segment 3, offset 8]";  // the record says segment 2
  CheckRefused(ParseFindingJson(j), "location");
  j["location"] = "[segment 2]";  // and offset 8
  CheckRefused(ParseFindingJson(j), "location");
  j["location"] = "";
  CheckRefused(ParseFindingJson(j), "location");
  const ChunkId id = Id(1);
  const json item = FindingJson(MakeFinding(Severity::kError, Stage::kMissing, Location::Item("pack a", 12), &id, "m"));
  for (const char* bad : {"pack a, offset 12", "[pack a]", "[pack a, offset 13]", "[, offset 12]", "[pack a, offset 12",
                          "pack a, offset 12]"}) {
    j = item;
    j["location"] = bad;
    INFO(bad);
    CheckRefused(ParseFindingJson(j), "location");
  }
  j = item;
  j["offset"] = nullptr;
  j["location"] = "[]";  // no empty item
  CheckRefused(ParseFindingJson(j), "location");
  j = FindingJson(FullFinding());
  j["affected_total"] = nullptr;
  CheckRefused(ParseFindingJson(j), "affected_total");
  j = FindingJson(FullFinding());
  j["affected"] = nullptr;
  CheckRefused(ParseFindingJson(j), "affected_total");
  j = FindingJson(FullFinding());
  j["affected_total"] = 5;  // fewer than the 6 listed
  CheckRefused(ParseFindingJson(j), "affected_total");
  Finding many = FullFinding();
  many.affected->uses.resize(kMaxAffectedUses + 1, many.affected->uses[0]);
  many.affected->total = kMaxAffectedUses + 1;
  CheckRefused(ParseFindingJson(FindingJson(many)), "affected");
  j = SummaryJson(FullSummary(), 90);
  j["sample_seed"] = nullptr;
  CheckRefused(ParseSummaryJson(j, nullptr), "sample_seed");
  j = SummaryJson(FullSummary(), 90);
  j["coverage"]["cycle"]["slices_done"] = nullptr;
  CheckRefused(ParseSummaryJson(j, nullptr), "coverage.cycle.slices_done");
  j["coverage"]["cycle"]["slices"] = nullptr;
  CHECK(ParseSummaryJson(j, nullptr).ok());  // no slice run
}

TEST_CASE("times that are no RFC 3339 time after 1970 are refused", "[json_records]") {
  for (const char* bad : {"2026-12-01T13:34:57.123", "2026-02-30T00:00:00Z", "1970-01-01T00:00:00.000Z",
                          "1969-12-31T23:59:59Z", "yesterday"}) {
    INFO(bad);
    json j = SummaryJson(FullSummary(), 90);
    j["started_at"] = bad;
    CheckRefused(ParseSummaryJson(j, nullptr), "started_at");
    j = SummaryJson(FullSummary(), 90);
    j["coverage"]["cycle"]["started_at"] = bad;
    CheckRefused(ParseSummaryJson(j, nullptr), "coverage.cycle.started_at");
    j = SummaryJson(FullSummary(), 90);
    j["coverage"]["oldest_unit_verified_at"] = bad;
    CheckRefused(ParseSummaryJson(j, nullptr), "coverage.oldest_unit_verified_at");
  }
  json j = SummaryJson(FullSummary(), 90);
  j["coverage"]["cycle"]["started_at"] = nullptr;  // a cycle always has a start
  CheckRefused(ParseSummaryJson(j, nullptr), "coverage.cycle.started_at");
}

TEST_CASE("invalid UTF-8 in a record built in memory does not throw", "[json_records]") {
  json j = FindingJson(FullFinding());
  j["stage"] = "\xff\xfe";
  CheckRefused(ParseFindingJson(j), "stage");
  j = SummaryJson(FullSummary(), 90);
  j["findings_by_stage"]["\xc3"] = 1;
  CheckRefused(ParseSummaryJson(j, nullptr), "findings_by_stage");
}

}  // namespace
}  // namespace borgcheck::report
