// The check engine: the one control flow of every repository generation (restic's single
// checking pipeline). A generation supplies an ObjectSource (object_source.h) and its
// ObjectVerifier (object_verifier.h); RunEngine does the rest:
//   1. plan (source), findings of planning to the sink;
//   2. key (source, verify-data only), before any worker thread exists;
//   3. one verifier per worker, the pool, the budget of bytes in flight;
//   4. read: units in order on this thread (segment logs) or on workers (packs); the objects
//      handed over are cut into batches (kBatchBytes / kBatchObjects) and verified on workers;
//   5. the one second-read policy: every object that fails is read once more, by its source
//      (ObjectSource::ReadAgain), before it is reported. The same bytes: "agreed", the damage is on disk; other bytes
//      that fail too: "differed", unstable storage; other bytes that verify: "passed", a
//      warning (a transient read error), and the object counts as verified. Finding::reread
//      always says which; a read that could not be made is "not-reread";
//   6. the one wording and counting policy for object roles (object_verifier.h): superseded
//      entries are warnings and not counted, orphans are counted and say so;
//   7. stop (a signal) and "repository changed" (a unit vanished, or the source says so):
//      no verdict;
//   8. finish (source), then the archive pass (archive_pass.h), handed one verdict per object
//      (object_verdict.h), then the summary: findings sorted by location (identical for every
//      thread count), counted by stage and severity.
// Which units are read, in what order, and what is recorded of them is not the engine's: a
// UnitSchedule and a RunObserver (run_schedule.h) decide and listen.
//
// Budget: bytes in flight (read, not yet verified) are at most max(kMinInFlight, threads x
// plan.in_flight_per_thread); one object or unit larger than that is let through alone.
//
// Thread contract: RunEngine runs on the caller's (main) thread and returns when every thread
// it started has stopped. The source (and the store it reads) must outlive the call. The engine
// itself never opens a file: every byte comes through the source.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/engine/check_options.h"
#include "checker/engine/object_source.h"
#include "checker/engine/run_schedule.h"
#include "checker/engine/shard.h"
#include "checker/io/env.h"
#include "checker/report/finding.h"
#include "checker/report/output.h"
#include "checker/report/summary.h"

namespace borgcheck::engine {

inline constexpr uint64_t kMinInFlight = 16ull << 20;
inline constexpr uint64_t kBatchBytes = 256 << 10;  // verify work per task
inline constexpr size_t kBatchObjects = 256;

struct CheckOutcome {
  Status status;                          // non-ok: the run could not start or finish
  report::RunSummary summary;
  std::vector<report::Finding> findings;  // sorted by location
  int stop_signal = 0;                    // the signal that stopped the run, if any
  // A run a signal stopped after reading began: status is kInterrupted, and yet `findings`
  // (every one made so far) and `summary` (partial: complete false, stopped "signal") are
  // valid and are to be printed (docs/nightly.md). So is a run whose remote store lost its
  // connection: status kIoError, summary stopped "connection-lost" (exit 2, 90 with damage).
  bool partial_report = false;
  // Warnings about the state (a corrupt state file set aside, a folder that is not writable):
  // not findings, for stderr (text) and the summary's notes (JSON).
  std::vector<std::string> warnings;
  // Non-ok: the state file could not be saved; the check itself is valid (main: exit 2 unless
  // integrity errors were found).
  Status state_status;
  // The state's record of the last run without errors, where a state is kept: the metrics
  // file's borgcheck_last_success_timestamp_seconds when its previous file has none.
  std::optional<double> state_last_success_at;
  // A shard (--shard K/N) that finished: what it hands the merge (engine/shard.h), printed as
  // its shard record. `findings` still holds every finding of the run (planning's too).
  std::optional<ShardResult> shard;
};

// Called with a snapshot at most 10 times a second from the progress thread, and once more with
// final = true on the main thread after the last object (the totals reached).
using ProgressCallback = std::function<void(const report::Progress&, bool final)>;

// `schedule` decides which units are read and in what order, `observer` is told what happened
// to each (run_schedule.h; checker/schedule/ implements both, and schedule::RunScheduled wires
// them). Both must outlive the call.
CheckOutcome RunEngine(ObjectSource& source, const CheckOptions& options, const ProgressCallback& progress,
                       UnitSchedule& schedule, RunObserver& observer);

// The outcome of a run a signal stopped: kInterrupted, naming the signal.
void SetInterrupted(CheckOutcome& out, int signo);

}  // namespace borgcheck::engine
