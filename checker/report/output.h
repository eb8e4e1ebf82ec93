// Text and JSON Lines reporters.
//
// JSON Lines on stdout (one object per line, each keyed by `type`); the contract is
// documented in docs/json.md and produced here:
//   {"type":"finding","severity":"error","stage":"authentication","chunk_id":"<64 hex>"|null,
//    "segment":2|null,"offset":8|null,"location":"[segment 2, offset 8]","message":"...",
//    "reread":"agreed"}
//   {"type":"progress","bytes_done":..,"bytes_total":..,"objects_done":..,"objects_total":..,
//    "rate_bytes_per_s":..,"eta_s":..|null,"elapsed_s":..,"final":false}  (the last one,
//    "final":true, carries the totals reached)
//   {"type":"summary", ... RunSummary fields ..., "verdict":"ok"|"warnings"|"integrity-errors",
//    "exit_code":0}
//   {"type":"error","code":"wrong-passphrase","exit_code":52,"message":"..."}
//
// Thread contract: a Reporter is used by one thread at a time (the run's reporter thread or
// main); PrintProgress may be called from the progress thread while nothing else prints.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/report/finding.h"
#include "checker/report/summary.h"

namespace borgcheck::report {

struct Progress {
  uint64_t bytes_done = 0, bytes_total = 0, objects_done = 0, objects_total = 0;
  double elapsed_s = 0;
};

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void PrintFindings(const std::vector<Finding>& sorted) = 0;
  virtual void PrintSummary(const RunSummary& s, int exit_code) = 0;
  virtual void PrintError(const Status& status, int exit_code) = 0;
  // Progress: JSON writes a record; text redraws one stderr line (only when a terminal).
  virtual void PrintProgress(const Progress& p, bool final) = 0;
};

// quiet: print findings and errors only (no summary line).
std::unique_ptr<Reporter> MakeTextReporter(FILE* out, FILE* err, bool quiet);
std::unique_ptr<Reporter> MakeJsonReporter(FILE* out);

std::string VerdictName(int exit_code);  // "ok", "warnings", "integrity-errors", "could-not-run"
std::string FormatBytes(uint64_t n);     // "1.2 GiB"

}  // namespace borgcheck::report
