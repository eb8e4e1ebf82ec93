// The numbers of one check run, filled by checker/run and printed by the reporters.
//
// Thread contract: a plain value; the run fills it after the workers have stopped.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checker/report/finding.h"

namespace borgcheck::report {

struct RunSummary {
  std::string repository;          // path as given
  std::string format;              // "borg1"
  std::string mode;                // key mode name ("repokey", ...) or "" for a keyless check
  bool verify_data = false;        // false: keyless repository-layer check
  uint32_t transaction = 0;        // the committed transaction checked
  std::string live_list_source;    // "index" or "log-replay"
  uint64_t segments = 0;           // units read: segment files, or packs (see unit_noun)
  std::string unit_noun = "segment";  // what a unit of the repository is: "segment" or "pack"
  uint64_t objects_total = 0;      // live objects in the committed state (a selection: those it references)
  bool objects_selected = false;   // objects_total counts what the selected archives reference
  uint64_t objects_verified = 0;   // live objects that passed every check
  uint64_t stored_bytes = 0;       // bytes of live objects read (entry data)
  uint64_t plaintext_bytes = 0;    // decompressed bytes hashed (verify-data only)
  uint64_t bytes_read = 0;         // all segment bytes read
  std::array<uint64_t, kStageCount> findings_by_stage{};
  uint64_t errors = 0;              // findings of severity error, io_errors included
  uint64_t io_errors = 0;           // of them, stage "io": could not be read (could not check)
  uint64_t warnings = 0;
  double elapsed_s = 0;
  unsigned threads = 0;
  std::vector<std::string> notes;  // informational lines that are not findings

  // Partial runs (docs/nightly.md), filled by the engine:
  bool complete = true;            // every object of the repository was checked by this run
  std::string stopped;             // why it ended early: "" (it did not), "signal", "time-budget",
                                   // "connection-lost" (a remote store's connection)
  std::string subset;              // the slice read, "3/7" ("" none)
  std::string shard;               // --shard: "3/8" (engine/shard.h); "" not a shard
  uint32_t merged_shards = 0;      // the merge's final pass: how many shards it merged (0 none)
  std::string subset_label;        // how it was chosen: "3/7", "3/7 (daily/week, 2026-12-02, Wednesday)"
  double sample_fraction = 0;      // --sample: the share of objects sampled (0: no sample)
  uint64_t sample_seed = 0;        // and its seed (repeat with --sample-seed)
  uint64_t bytes_total = 0;        // bytes of every unit (what a full run reads)
  uint64_t bytes_skipped = 0;      // bytes_total - bytes_read: units or objects not read
  uint64_t units_total = 0;        // units on disk (segments read: `segments`)
  uint64_t units_not_due = 0;      // units left out as verified within --max-age
  double max_duration_s = 0;       // --max-duration (0 none)
  bool skipped = false;            // --min-interval: nothing was checked
  bool state_not_saved = false;    // the check finished, its state file could not be saved
  // What is verified, from the state file when one is used (coverage.state_file), else from
  // this run alone when it was complete; absent otherwise.
  struct Coverage {
    double ratio = 0;                  // share of bytes_total in units verified within max_age_s
    double max_age_s = 0;              // 0: any age counts
    uint64_t units_verified = 0;       // units with a mark within max_age_s
    uint64_t units_never_verified = 0; // units with no mark and no slice (new, changed, never read)
    uint64_t units_partly_verified = 0; // units without a mark within max_age_s, some slices within
    double full_verification_at = 0;   // Unix time a full verification (a cycle) last completed; 0 never
    double oldest_verified_at = 0;     // the oldest unit's mark; 0 when some unit has none
    std::string state_file;            // "" without a state file
    // The cycle (full verification) in progress or just completed (docs/nightly.md); all 0
    // when there is none.
    double cycle_started_at = 0;
    double cycle_completed_at = 0;     // 0: still open
    uint64_t cycle_units = 0;          // units of the cycle still on disk
    uint64_t cycle_units_done = 0;     // of them, verified since it started
    uint32_t cycle_slices = 0;         // a slice run's t (0: not a slice run)
    uint32_t cycle_slices_done = 0;    // slices done on every unit of the cycle since it started

    bool operator==(const Coverage&) const = default;
  };
  bool has_coverage = false;
  Coverage coverage;
  // The archive pass (engine/archive_pass.h): archives in the repository and archives walked
  // (the selection); absent when it did not run (keyless, --repository-only, no manifest).
  std::optional<uint64_t> archives_total;
  std::optional<uint64_t> archives_checked;
  // Why the archives were not checked although the repository has some ("keyless run",
  // "--repository-only", "the manifest (the list of archives) is damaged", ...); "" when they
  // were checked or there are none.
  std::string archives_not_checked;

  // Filled by the run layer (empty/none until it does):
  std::string repository_id;       // 64 lowercase hex digits of the repository id; "" unknown
  struct Phase {
    std::string name;              // e.g. "key", "plan", "read+verify"
    double seconds = 0;

    bool operator==(const Phase&) const = default;
  };
  std::vector<Phase> phases;       // wall-clock time per phase, in order (printed with -v)

  // Filled by main (checker/cli), which alone knows the process's view of the run:
  std::string version;             // borgcheck's version, e.g. "0.1.0"
  double started_at = 0;           // Unix time (UTC seconds) when main started the run; 0 unknown
  double finished_at = 0;          // Unix time when the run ended; 0 unknown
  // Every field, doubles exactly (tests: a summary read back from JSON, json_records.h).
  bool operator==(const RunSummary&) const = default;
};

// Counts one finding into the summary's totals (by stage, by severity, io errors apart).
inline void CountFinding(const Finding& f, RunSummary& s) {
  s.findings_by_stage[size_t(f.stage)]++;
  if (f.severity != Severity::kError) {
    s.warnings++;
    return;
  }
  s.errors++;
  if (f.stage == Stage::kIo) s.io_errors++;
}

}  // namespace borgcheck::report
