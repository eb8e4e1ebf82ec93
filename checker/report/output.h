// Text and JSON Lines reporters.
//
// JSON Lines on stdout (one object per line, each keyed by `type`); the contract is
// documented in docs/json.md and produced here (the finding, summary and error records by
// json_records.h, which also reads them back):
//   {"type":"finding","severity":"error","stage":"authentication","chunk_id":"<64 hex>"|null,
//    "segment":2|null,"offset":8|null,"location":"[segment 2, offset 8]","message":"...",
//    "reread":"agreed"}
//   {"type":"progress","bytes_done":..,"bytes_total":..,"objects_done":..,"objects_total":..,
//    "rate_bytes_per_s":..,"eta_s":..|null,"elapsed_s":..,"final":false}  (the last one,
//    "final":true, carries the totals reached)
//   {"type":"summary", ... RunSummary fields ..., "version":"0.1.0",
//    "started_at":"2026-12-01T13:34:57.123Z","finished_at":"...","repository_id":"<hex>"|null,
//    "verdict":"ok"|"warnings"|"integrity-errors","exit_code":0}
//   {"type":"error","code":"wrong-passphrase","exit_code":52,"message":"..."}
//
// Text: findings (rolled up, text_report.h) and one summary line on stdout; the progress
// line and errors on stderr (progress_line.h). Strings from the repository or the command line
// are escaped (checker/base/text_escape.h) as text_report.h says; error messages as a whole.
//
// Every byte goes through an OutputStream (output_stream.h): a failed write never throws or
// aborts; the stream remembers it and main chooses the exit code. Progress stops once its
// stream broke.
//
// Thread contract: a Reporter is used by one thread at a time (the run's progress thread or
// main); PrintProgress may be called from the progress thread while nothing else prints.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/report/finding.h"
#include "checker/report/output_stream.h"
#include "checker/report/summary.h"
#include "checker/report/text_report.h"

namespace borgcheck::report {

struct Progress {
  uint64_t bytes_done = 0, bytes_total = 0, objects_done = 0, objects_total = 0;
  double elapsed_s = 0;
  // The phase: "read" (objects are read and verified) or "archives" (the objects are done and
  // the archive pass walks the archives; the clock keeps running).
  const char* phase = "read";
};

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void PrintFindings(const std::vector<Finding>& sorted) = 0;
  virtual void PrintSummary(const RunSummary& s, int exit_code) = 0;
  virtual void PrintError(const Status& status, int exit_code) = 0;
  // Progress: JSON writes a record; text redraws one stderr line (terminal) or writes a plain
  // line every TextOptions::progress_interval_s (not a terminal).
  virtual void PrintProgress(const Progress& p, bool final) = 0;
};

enum class Verbosity {
  kQuiet,    // -q: nothing for a clean run (exit 0); else as kNormal
  kNormal,   // findings and one summary line
  kVerbose,  // -v/--info: also notes, a details line and phase timings
};

struct TextOptions {
  Verbosity verbosity = Verbosity::kNormal;
  // How progress is drawn on stderr: redrawn in place (a terminal) or one plain line every
  // progress_interval_s seconds (a log).
  bool progress_on_terminal = false;
  double progress_interval_s = 60;
};

// `out` and `err` must outlive the reporter.
std::unique_ptr<Reporter> MakeTextReporter(OutputStream& out, OutputStream& err, const TextOptions& options);
std::unique_ptr<Reporter> MakeJsonReporter(OutputStream& out);

std::string VerdictName(int exit_code);  // "ok", "warnings", "integrity-errors", "could-not-run"
// The verdict of a run's summary: as above, but "could-not-check" for exit 2 after io findings,
// and "state-not-saved" for exit 2 of a check that finished but could not save its state
// (the run finished, some file could not be read, nothing was found damaged).
std::string VerdictName(const RunSummary& s, int exit_code);

}  // namespace borgcheck::report
