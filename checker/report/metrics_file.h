// --metrics-file PATH.prom: the outcome of a run in Prometheus's text exposition format, for
// node_exporter's textfile collector (docs/nightly.md has the alert rules that read it).
//
// The file is replaced atomically: written to a temporary file in the same folder (named
// ".<name>.<pid>.tmp", which the collector ignores because it does not end in .prom),
// flushed to disk, then renamed over PATH; a reader sees the old file or the new one, never
// half of one.
//
// Metrics (all gauges, labels repo="<path>" and repo_id="<64 hex or empty>" on every sample,
// plus stage="<stage>" on borgcheck_findings; no sample timestamps):
//   borgcheck_last_run_timestamp_seconds      when this run ended (Unix time)
//   borgcheck_last_success_timestamp_seconds  when a run last verified the repository (exit 0
//                                             or 1); carried forward from the previous file
//                                             (same repo label) when this run did not; 0 when
//                                             no run ever did; a run of some archives
//                                             only (MetricsRun::archive_selection) carries
//                                             it forward too
//   borgcheck_success                         1 when this run verified the repository, else 0
//   borgcheck_exit_code                       this run's exit code
//   borgcheck_duration_seconds                wall-clock time of this run
// and, only when the check finished (exit 0, 1 or 90):
//   borgcheck_verify_data                     1 for --verify-data, 0 for the keyless check
//   borgcheck_objects                         live objects in the repository
//   borgcheck_objects_verified                live objects that passed every check
//   borgcheck_verified_bytes                  stored bytes of those objects
//   borgcheck_read_bytes                      bytes read
//   borgcheck_errors, borgcheck_warnings      findings by severity
//   borgcheck_findings{stage=...}             findings per stage, every stage (zeros included)
// and, only for a run of some archives (MetricsRun::archive_selection):
//   borgcheck_archive_selection_success_timestamp_seconds  when such a run last verified what
//                                             it selected (carried forward like the above)
// Extension point: MetricsRun::extra carries metrics from other passes in the same format;
// they are written after the ones above. CoverageMetrics makes those of partial runs (written
// by main for partial runs and runs with a state file; the coverage_* and *_timestamp ones only
// when the summary has a coverage):
//   borgcheck_complete                        1 when the run checked every object, else 0
//   borgcheck_skipped_bytes                   bytes this run did not read (slices, budget, age)
//   borgcheck_coverage_ratio                  share of the bytes in units verified within
//                                             --max-age (any age without it)
//   borgcheck_coverage_units_verified         units counted in the ratio
//   borgcheck_coverage_units_never_verified   units with no verification on record
//   borgcheck_full_verification_timestamp_seconds  when a full verification last completed
//                                             (0: never)
//   borgcheck_oldest_verification_timestamp_seconds  the least recently verified unit's time
//                                             (0 while some unit was never verified)
//
// Thread contract: pure functions plus file I/O on PATH; call from one thread (main).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checker/base/status.h"
#include "checker/report/summary.h"

namespace borgcheck::report {

// One more gauge for the file: HELP text, extra labels (besides repo and repo_id), value.
struct ExtraMetric {
  std::string name;  // borgcheck_<what>_<unit>
  std::string help;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};

struct MetricsRun {
  std::string repository;     // the repo label
  std::string repository_id;  // the repo_id label ("" when unknown)
  double finished_at = 0;     // Unix time
  double duration_s = 0;
  int exit_code = 0;
  bool success = false;                  // the repository was verified: exit 0 or 1
  const RunSummary* summary = nullptr;   // the numbers, when the check finished (0, 1, 90)
  std::vector<ExtraMetric> extra;
  // The state file's last success (partial runs): carried forward when the previous metrics
  // file has no borgcheck_last_success_timestamp_seconds for this repository (the later wins).
  std::optional<double> state_last_success;
  // The run checked a selection of archives (REPO::ARCHIVE, -a, --first, --last,
  // --archives-only): borgcheck_last_success_timestamp_seconds is carried forward as for a run
  // that failed, and borgcheck_archive_selection_success_timestamp_seconds says when it ran.
  bool archive_selection = false;
  // The run did nothing (--min-interval: a clean full verification is recent enough). It
  // succeeded (exit 0) but verified nothing: the last success is carried forward as well.
  bool skipped = false;

  // Whether this run's end is the repository's last success (the staleness alert's clock).
  bool Verified() const { return success && !archive_selection && !skipped; }
};

// The partial-run metrics above, from a summary with has_coverage.
std::vector<ExtraMetric> CoverageMetrics(const RunSummary& s);

// The file's text. `last_success` is the carried-forward timestamp for a run that did not
// succeed (ignored when it did).
// `last_selection_success` is the same for borgcheck_archive_selection_success_timestamp_seconds.
std::string FormatMetrics(const MetricsRun& run, std::optional<double> last_success,
                          std::optional<double> last_selection_success = std::nullopt);

inline constexpr std::string_view kLastSuccess = "borgcheck_last_success_timestamp_seconds";
inline constexpr std::string_view kSelectionSuccess = "borgcheck_archive_selection_success_timestamp_seconds";

// The value of `metric` (borgcheck_last_success_timestamp_seconds unless named) for
// `repository` in a previous file's text, if it has one.
std::optional<double> LastSuccessIn(const std::string& text, const std::string& repository,
                                    std::string_view metric = kLastSuccess);

// The repo_id label of `repository` in a previous file's text, if it has a non-empty one.
std::optional<std::string> RepoIdIn(const std::string& text, const std::string& repository);

// Reads PATH (if it exists) for the carried-forward timestamp, and for the repo_id when the run
// does not know it (a run that could not open the repository: the series keep their identity),
// then replaces it atomically.
// kIoError naming PATH when the folder cannot be written.
Status WriteMetricsFile(const std::string& path, const MetricsRun& run);

}  // namespace borgcheck::report
