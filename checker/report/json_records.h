// The `finding`, `summary` and `error` records of the JSON Lines output (docs/json.md): built
// here for JsonReporter (output.cc), and read back here for `borgcheck merge`, which combines
// the outputs of shards.
//
// The builders are the contract: JsonReporter prints exactly what they return, one record per
// line. The parsers take records from files that are untrusted input (truncated, edited, from
// another version): they check every field the record type has (its JSON type, that it is
// present, names, hex, ranges, RFC 3339 times) and answer a non-ok Result, code
// kInvalidArgument, whose message names the field; they never throw. Fields they do not know
// are ignored (docs/json.md: fields may be added to a record type).
//
// parse(build(x)) == x for every value the run produces, except fields the JSON does not
// carry or derives (they come back default; see each parser), strings that are not UTF-8 (the
// printed line has U+FFFD for their bad bytes) and times, which are printed to the millisecond.
//
// Thread contract: free functions on values; safe for concurrent use.
#pragma once

#include <string_view>
#include <utility>

#include <nlohmann/json_fwd.hpp>

#include "checker/base/status.h"
#include "checker/report/finding.h"
#include "checker/report/summary.h"

namespace borgcheck::report {

// The records as JsonReporter prints them (without the line's "\n").
nlohmann::json FindingJson(const Finding& f);
nlohmann::json SummaryJson(const RunSummary& s, int exit_code);
nlohmann::json ErrorJson(const Status& status, int exit_code);

// A `finding` record. Every field of Finding is carried: `location` (the text) is read back
// into Finding::location with the help of `segment` and `offset` (the inverse of
// LocationSuffix, exact for every finding with a segment or an item but not both, which is
// every finding Location builds).
Result<Finding> ParseFindingJson(const nlohmann::json& j);

// A `summary` record, and its `exit_code` into *exit_code when that is not null. Not carried,
// so default: unit_noun, objects_selected, subset_label, max_duration_s, phases, sample_seed
// without a sample; has_coverage is whether `coverage` is an object. Derived, so not read:
// `throughput_bytes_per_s`, `coverage.oldest_unit_age_s`; `verdict` only sets `skipped`
// ("skipped") and `state_not_saved` ("state-not-saved"; a run that could not save its state
// but found damage says "integrity-errors", and state_not_saved comes back false).
// `version`, `started_at`, `finished_at` and `repository_id` may be missing (added in a later
// version: docs/json.md); every other field is required.
Result<RunSummary> ParseSummaryJson(const nlohmann::json& j, int* exit_code);

// An `error` record: its status (code and message) and exit code. The code "ok" is refused: an
// error record never carries it.
Result<std::pair<Status, int>> ParseErrorJson(const nlohmann::json& j);

// Whether JSON text nests its arrays and objects at most `max` deep (brackets in strings do
// not count). A reader of untrusted lines checks this before parsing: nlohmann::json's copies
// and comparisons recurse, so "[[[[..." a few hundred kilobytes long would overflow the stack.
bool JsonNestingWithin(std::string_view text, size_t max);

}  // namespace borgcheck::report
