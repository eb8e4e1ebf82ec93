// Partial runs: which units a run reads and in what order (the schedule), what it records in
// the state file as it goes (the StateRecorder), and the coverage the summary reports.
// PartialRun is the engine's UnitSchedule and RunObserver (engine/run_schedule.h); RunScheduled
// wires it into RunEngine. The state file itself is unit_state.h.
//
// The schedule (docs/nightly.md "The time budget: what it covers, and the order"): units that are not on disk first (their loss is
// reported every run, reading costs nothing), then units never verified (or whose identity
// changed: compacted, replaced), in plan order, then the rest by when they were last verified,
// oldest first; units whose last result had findings are always due and, with a time budget,
// take every other place from the start of that list (the least recently re-read first), so
// that known damage is re-read and reported every run without crowding out the rest. With
// --max-age, a unit verified clean within it is not due and is left out; without, every unit is
// due and a time budget decides how far down the list a run gets. A run without a time budget reads its units
// in plan (disk) order: it reads them all anyway, and borg 1.x's index-vs-log comparison needs
// plan order.
//
// Marks (unit_state.h): a unit is marked only after every object the run wanted from it was
// verified and its findings were recorded (the engine calls UnitVerified from the unit's last
// reference), so a crash or kill -9 can only lose marks, never make one up. A run that wants
// every object marks units "whole"; a slice run (--subset, nothing else) adds slice k of t and
// marks the unit once all t slices are done; a sample or an id selection marks nothing.
//
// Coverage (docs/nightly.md "Coverage"): the share of the repository's bytes verified within
// --max-age (of its objects where the units' sizes are not known: an ssh:// repository). A unit with a mark within it counts whole; a unit with only some slices within it
// counts by the share of its live objects in those slices (the source counts them: slices are
// by chunk id, so a unit's share of slice k is what its objects say, not 1/t). A full
// verification is a cycle (unit_state.h): it completes when every unit seen when it started
// and still on disk was verified since; the summary says how far the open cycle got.
//
// Thread contract: MakeSchedule and ComputeCoverage are pure. StateRecorder is safe for
// concurrent use (mu_): workers call UnitVerified, the main thread the rest.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/engine/check_options.h"
#include "checker/engine/engine.h"
#include "checker/engine/object_filter.h"
#include "checker/engine/object_source.h"
#include "checker/engine/run_schedule.h"
#include "checker/schedule/unit_state.h"
#include "checker/io/env.h"
#include "checker/report/finding.h"
#include "checker/report/summary.h"

namespace borgcheck::schedule {

using engine::CheckOptions;
using engine::ChunkId;
using engine::ObjectFilter;
using engine::ObjectSource;
using engine::Plan;
using engine::ReadUnit;

inline constexpr double kDefaultCheckpointS = 60;

// One unit of the plan as the state sees it.
struct UnitView {
  std::string key;   // engine::UnitKey of the plan's unit
  uint64_t bytes = 0;
  uint64_t objects = 0;  // live objects of a unit of no known size (a served batch: bytes 0,
                         // a state_key), its weight in the coverage instead of its bytes
  bool on_disk = true;
  std::optional<UnitIdentity> identity;  // nullopt: could not be stat'ed (never marked)
};

struct ScheduleOptions {
  CheckLevel level = CheckLevel::kData;
  double now = 0;
  double max_age_s = 0;                      // 0: every unit is due
  std::optional<ObjectFilter::Slice> slice;  // a slice run: every unit is due (--max-age only sets coverage)
  bool time_budget = false;                  // false: plan order
};

struct Schedule {
  std::vector<size_t> order;  // plan indices to read, in read order
  size_t not_due = 0;         // units left out: verified (clean) within --max-age
};

Schedule MakeSchedule(const StateFile* state, const std::vector<UnitView>& units, const ScheduleOptions& o);

// How many live objects of unit `unit` (a plan index) each slice k of t holds (element k-1);
// empty when the source cannot tell (then a partly sliced unit counts as not verified).
using SliceCounter = std::function<std::vector<uint64_t>(size_t unit, uint32_t t)>;

// The SliceCounter of a source (ObjectSource::ForEachLiveId). `source` must outlive it.
SliceCounter SliceCounterOf(const ObjectSource& source);

// What the summary's coverage says, from the state (after this run's marks). `slices_t`: the
// rotation's t, for its progress ("3 of 7 slices done"); 0 when the run is not a slice run.
report::RunSummary::Coverage ComputeCoverage(const StateFile& state, const std::vector<UnitView>& units,
                                             CheckLevel level, double now, double max_age_s,
                                             const SliceCounter& slice_objects = {}, uint32_t slices_t = 0);

// The worst result of a unit's findings.
UnitResult ResultOf(uint64_t errors, uint64_t warnings);

class StateRecorder {
 public:
  // `now` gives the Unix time of each mark. `marks`: whether this run marks units at all (see
  // above); `slice`: the slice a slice run marks.
  StateRecorder(StateDir& dir, StateFile state, std::vector<UnitView> units, CheckLevel level,
                bool marks, std::optional<ObjectFilter::Slice> slice, double checkpoint_s,
                std::function<double()> now);

  // Unit `unit` (plan index) was read and every object it was asked for verified. Saves a
  // checkpoint when checkpoint_s passed since the last save.
  void UnitVerified(size_t unit, UnitResult result);

  // The run finished (Finish ran): its findings and whether it checked everything, for
  // --min-interval. Not called for a run a signal stopped. `succeeded`: the run's outcome is
  // its findings (not a key that could not be loaded, whose keyless fallback finished but
  // exits 52, 42, ...): only then, and without errors, is it the last success.
  // `after_reading_s`: how long the run took after its reading (the finish and the archive
  // pass), which the next run with a time budget keeps back for them.
  void RunFinished(uint64_t errors, uint64_t warnings, bool complete, bool succeeded, double after_reading_s);

  // The final save. Returns the first save error of the run (checkpoints included).
  Status Close();

  // The state after this run's marks (for the coverage), and where it is kept.
  StateFile Snapshot() const;
  const std::vector<UnitView>& units() const { return units_; }
  const std::string& path() const { return dir_.path(); }

 private:
  void SaveLocked();           // requires mu_
  void UpdateFullLocked();     // requires mu_: completes the open cycles that are done

  StateDir& dir_;
  const std::vector<UnitView> units_;
  const CheckLevel level_;
  const bool marks_;
  const std::optional<ObjectFilter::Slice> slice_;
  const double checkpoint_s_;
  const std::function<double()> now_;

  mutable std::mutex mu_;
  StateFile state_;       // guarded by mu_
  double last_save_ = 0;  // guarded by mu_
  bool dirty_ = false;    // guarded by mu_
  Status save_status_;    // guarded by mu_: the first failure
};

// One run's partial-run bookkeeping, for the engine: the state, the schedule, the time budget,
// per-unit counters and the summary's partial and coverage fields. Prepare and the summary
// calls run on the main thread; the per-unit calls on whichever thread reads or verifies the
// unit (atomics); the schedule and filter decisions are const once reading starts.
class PartialRun final : public engine::UnitSchedule, public engine::RunObserver {
 public:
  // `source` (for the coverage's slice counts, SliceCounterOf) must outlive the PartialRun.
  PartialRun(const CheckOptions& options, const ObjectSource& source);
  ~PartialRun();

  // After planning: opens the state (when options.state_dir is set), decides --min-interval,
  // configures the filter's slice and sample, stats the units and makes the schedule.
  // Returns false when the run is to do nothing (--min-interval: `sum` says why); a non-ok
  // status refuses the run (a state of another repository or a newer version, a held state
  // lock). Warnings for the user (a corrupt state set aside, a folder that is not writable)
  // go to `warnings`.
  Result<bool> Prepare(const Plan& plan, ObjectFilter& filter, report::RunSummary& sum,
                       std::vector<std::string>& warnings) override;
  // Right before reading (the filter is final): how units will be marked.
  void StartReading(const ObjectFilter& filter) override;

  const std::vector<size_t>& order() const override { return order_; }
  uint64_t scheduled_bytes() const override { return scheduled_bytes_; }
  // The key could not be loaded (key_fallback.h): this run checks CRCs only, so it records CRC
  // marks. Before StartReading.
  void FallBackToKeyless() override;
  // The time budget (--max-duration): whether no further unit is to be started. The budget
  // counts the whole run: the time since the start plus what the finish and the archive pass
  // took in the last finished run at this level (the state's after_reading_s, kept back). A run
  // starts at least one unit however long planning took, so that a rotation always advances.
  bool OutOfTime() override;
  // The reading is over (the pool is done): what follows is measured for the next run's budget.
  // Main thread only.
  void ReadingEnded() override { reading_ended_ = std::chrono::steady_clock::now(); }
  // The main thread hands a unit to be read (after OutOfTime said no). Main thread only.
  void Admit() override { ++admitted_; }
  // Right before a unit is read: false when the budget is spent (then the unit is not read).
  bool MayStart() override;

  // Per unit (plan index), from the threads that read and verify it.
  void Submitted(size_t unit, size_t refs) override { units_[unit].submitted.fetch_add(refs, std::memory_order_relaxed); }
  void Verified(size_t unit) override { units_[unit].done.fetch_add(1, std::memory_order_relaxed); }
  void Finding(size_t unit, bool error) override {
    (error ? units_[unit].errors : units_[unit].warnings).fetch_add(1, std::memory_order_relaxed);
  }
  // ReadUnit returned; `stopping`: a stop (signal, vanished unit) may have cut it short.
  void ReadReturned(size_t unit, bool stopping) override {
    if (!stopping) units_[unit].read.store(1, std::memory_order_release);
  }
  // The unit's last reference is gone: every block released, every batch verified or dropped.
  // Marks the unit in the state when it was read and all its objects verified.
  void Released(size_t unit, bool whole, uint64_t credited, uint64_t unit_bytes) override;

  // For Finish.
  bool Complete() const override;  // see FinishContext::complete (valid after the pool is done)
  std::vector<uint8_t> UnitsRead() const override;

  // The summary's partial-run fields and coverage. `finished`: Finish ran (not a signal stop);
  // `stopped_by_signal`; `succeeded`: see StateRecorder::RunFinished. Closes the state (the
  // final save); the state's save error, if any.
  Status Close(report::RunSummary& sum, bool finished, bool stopped_by_signal, double started_unix,
               bool succeeded) override;

  double Now() const override;
  // The t of a slice run (--subset k/t), else 0: the rotation whose progress the coverage tells.
  uint32_t SlicesT() const { return opts_.subset_t > 1 ? opts_.subset_t : 0; }

  // The state's last_success_at (after this run's own, if it finished without errors); none
  // without a state.
  std::optional<double> LastSuccess() const override;

 private:
  struct UnitCounters {
    std::atomic<uint64_t> submitted{0}, done{0}, errors{0}, warnings{0};
    std::atomic<uint8_t> read{0}, completed{0};
  };

  const CheckOptions& opts_;
  const ObjectSource& source_;  // outlives the run; StatUnit only, on the main thread
  const SliceCounter slice_objects_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  const double start_unix_;

  // const after Prepare / StartReading
  CheckLevel level_ = CheckLevel::kData;
  std::vector<UnitView> views_;
  std::vector<size_t> order_;
  bool in_plan_order_ = true;
  size_t not_due_ = 0;
  uint64_t scheduled_bytes_ = 0, total_bytes_ = 0, units_on_disk_ = 0;
  bool wants_all_ = true;
  std::unique_ptr<StateDir> dir_;
  StateFile state_;          // until StartReading hands it to the recorder
  bool have_state_ = false;
  std::unique_ptr<StateRecorder> recorder_;
  std::unique_ptr<UnitCounters[]> units_;
  size_t unit_count_ = 0;

  double reserve_s_ = 0;   // kept back from the budget for the finish and the archive pass
  bool reserve_measured_ = false;  // the state had a measure (else this run's come on top)
  std::optional<std::chrono::steady_clock::time_point> reading_ended_;  // main thread only
  uint64_t admitted_ = 0;  // main thread only (Admit, and OutOfTime under the test clock)
  std::atomic<bool> out_of_time_{false};
  std::atomic<uint64_t> started_{0};
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> unsized_read_{0};  // of those, bytes of units of no known size (plan bytes 0)
  // The merge's final pass (CheckOptions::finish_shards): the shards read every unit, this run
  // reads none (Prepare marks them read and complete from the shards' records).
  bool finishing_shards_ = false;

  // Prepare's part for --shard and for the merge.
  Status PrepareShard(const Plan& plan, report::RunSummary& sum);
  Status PrepareFinishShards(const Plan& plan, report::RunSummary& sum);
};

// A run of `source` with its partial-run schedule and state (PartialRun): what run/ and the
// tests call.
engine::CheckOutcome RunScheduled(ObjectSource& source, const CheckOptions& options,
                                  const engine::ProgressCallback& progress);

}  // namespace borgcheck::schedule
