// Fuzz target: the records `borgcheck merge` reads back from the JSON Lines of runs and shards
// (checker/report/json_records.h: finding, summary, error; checker/engine/shard.h: shard), the
// merge's untrusted input (a file edited, truncated, of another version, or not ours at all).
//
// Input: one line of text nested at most 32 deep (as the merge admits), parsed as JSON (nlohmann, no exceptions) and handed to the parser
// its `type` names.
// Invariant:
//   - no crash, no exception out of a parser, no abort: a record that does not parse is a
//     Status naming the field;
//   - a record that parses prints back (FindingJson, SummaryJson, ErrorJson, ShardRecordJson)
//     to a record that parses to the same value: print(parse(x)) is a fixed point.
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "checker/engine/shard.h"
#include "checker/report/json_records.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (!report::JsonNestingWithin(text, 32)) return 0;  // the merge refuses such a line unparsed (cli/merge.h)
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string()) return 0;
  const std::string type = j["type"].get<std::string>();
  if (type == "finding") {
    Result<report::Finding> f = report::ParseFindingJson(j);
    if (!f.ok()) return 0;
    Result<report::Finding> again = report::ParseFindingJson(report::FindingJson(*f));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(*again == *f);
  } else if (type == "summary") {
    int rc = 0, rc2 = 0;
    Result<report::RunSummary> s = report::ParseSummaryJson(j, &rc);
    if (!s.ok()) return 0;
    Result<report::RunSummary> again = report::ParseSummaryJson(report::SummaryJson(*s, rc), &rc2);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(rc2 == rc);
    FUZZ_CHECK(report::SummaryJson(*again, rc2) == report::SummaryJson(*s, rc));
  } else if (type == "error") {
    Result<std::pair<Status, int>> e = report::ParseErrorJson(j);
    if (!e.ok()) return 0;
    Result<std::pair<Status, int>> again = report::ParseErrorJson(report::ErrorJson(e->first, e->second));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->second == e->second && again->first.code() == e->first.code() &&
               again->first.message() == e->first.message());
  } else if (type == "shard") {
    Result<engine::ShardResult> r = engine::ParseShardRecord(j);
    if (!r.ok()) return 0;
    const nlohmann::json printed = engine::ShardRecordJson(*r);
    Result<engine::ShardResult> again = engine::ParseShardRecord(printed);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(engine::ShardRecordJson(*again) == printed);
  }
  return 0;
}
