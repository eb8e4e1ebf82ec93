// The text report's lines, as pure functions (the TextReporter in output.cc writes them):
// findings with roll-ups, the one short summary line, the -v details, and the number and
// time formats they share. Documented in docs/cli.md ("Text output").
//
// Roll-up: findings of one kind in one unit -- the same severity, stage, message and reread
// result in the same segment (or pack, or store item) -- are printed as one header line when
// there are at least kRollUpAt of them, then the first kRollUpShown locations (with chunk ids)
// and a count of the rest. `--json` always lists every finding.
//
// Escaping: every string these lines take from the repository, the command line or the
// environment (messages, advice, notes, locations, archive names, paths, the repository path,
// the state file) is written through EscapeText (checker/base/text_escape.h) here, at print
// time, and nowhere before: findings and the summary keep the raw bytes, which JSON prints
// exactly. Our own words are printable ASCII and pass through unchanged.
//
// Thread contract: pure functions of their arguments; safe for concurrent use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/report/finding.h"
#include "checker/report/summary.h"

namespace borgcheck::report {

inline constexpr size_t kRollUpAt = 3;      // a group this large is rolled up
inline constexpr size_t kRollUpShown = 20;  // locations listed under a roll-up header
inline constexpr size_t kAffectedShown = 5;  // uses listed under a finding of the archive pass

// The findings, sorted by FindingLess, as text lines (each ending in '\n'). A rolled-up group
// is printed where its first member would be.
std::string FormatFindings(const std::vector<Finding>& sorted);

// A finding the archive pass annotated (Finding::affected, Finding::advice) is followed by
// "  affects <archive>: <path> [bytes B-E]" for the first kAffectedShown uses, "  and N more
// (--json lists ...)" and "  advice: <text>"; in a roll-up, each member line names its first
// use ("...: affects <archive>: <path> [bytes B-E] (and N more)") and the advice comes once.
std::string FormatAffectedLines(const Finding& f);
std::string FormatAffectedUse(const AffectedUse& u);

// One finding on one line: "<severity>: <stage>[ chunk <hex>][ <location>]: <message>
// [ (second read: <reread>)]".
std::string FormatFindingLine(const Finding& f);

// The unit a location belongs to: "[segment 2, offset 8]" -> "[segment 2]", "[pack <hex>,
// offset 5]" -> "[pack <hex>]"; a location without an offset is its own unit.
std::string LocationUnit(std::string_view location_suffix);

// The summary line (ends in '\n'), which names the repository once:
// "<repo>: <verdict>: <V> of <T> objects verified (<stored>)[, <C> of <A> archives checked],
// <E> error(s), <W> warning(s),
// <elapsed>" (keyless: "objects CRC-checked (<stored>, keyless)").
std::string FormatSummaryLine(const RunSummary& s, int exit_code);

// What a partial run left out, appended to the summary line: "; partial: slice 3/7, 30 of 30
// segments read, 227.1 KiB of 264.7 KiB not read" ("" for a complete run).
std::string FormatPartialSuffix(const RunSummary& s);

// The coverage line after the summary line, when a state file is in use ("" otherwise):
// "coverage: 43.1% of 1.2 TiB verified within 30d (12 of 30 segments, 3 never); full
// verification completed <RFC 3339>; oldest segment verified 12d03h ago; state <path>".
std::string FormatCoverageLine(const RunSummary& s);
std::string FormatAge(double seconds);     // "5h12m03s" under a day, else "3d04h" ("30d" on the hour)

// The -v/--info lines before the summary line: notes, one "details:" line (format, mode,
// segments or packs, transaction, live-list source, plaintext, bytes read, rate, threads,
// version, repository id) and one "phase <name>: <seconds>" line per phase.
std::string FormatVerboseLines(const RunSummary& s);

std::string FormatBytes(uint64_t n);       // "812 B", "1.2 GiB"
std::string FormatCount(uint64_t n);       // "1,543"
// The plural of a unit noun: "segments", "packs", "batches" (a served repository's).
std::string UnitNouns(const std::string& noun);
std::string FormatDuration(double s);      // "0.04s", "2m03s", "1h02m03s"
std::string FormatClock(uint64_t s);       // "0:02:03" (h:mm:ss)
std::string FormatRfc3339(double unix_s);  // "2026-12-01T13:34:57.123Z" (UTC, milliseconds)
// The inverse of FormatRfc3339, for records read back (json_records.h): an RFC 3339 date-time
// as Unix seconds, at whole milliseconds. Accepts "T" or "t", "Z", "z" or an offset "+hh:mm" /
// "-hh:mm", a fraction of 1 to 9 digits (rounded to the millisecond), years 0000-9999; none
// for anything else, a leap second (":60", which FormatRfc3339 never writes) included.
std::optional<double> ParseRfc3339(std::string_view text);

}  // namespace borgcheck::report
