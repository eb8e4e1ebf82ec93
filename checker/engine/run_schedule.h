// The two seams between the engine's pipeline and whoever decides what a run reads and keeps
// its record (docs/design.md "Partial runs"): a UnitSchedule the engine asks (which units, in
// what order, whether the time budget allows another, what the run's summary says of them) and
// a RunObserver the engine tells what happened to each unit as it goes. checker/schedule/
// implements both (PartialRun: slices, the time budget, the state file, coverage); run/ wires
// it into RunEngine. The engine knows nothing of the state file, marks or coverage.
//
// Thread contract: the UnitSchedule's calls come from the engine's main thread, except
// MayStart (whichever thread is about to read a unit). The RunObserver's calls come from the
// threads that read and verify units (any worker, concurrently; a unit's Released from the
// thread that drops its last reference), except ReadingEnded (main thread, after the pool is
// done): an implementation synchronises them itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/engine/object_filter.h"
#include "checker/engine/object_source.h"
#include "checker/report/summary.h"

namespace borgcheck::engine {

class UnitSchedule {
 public:
  virtual ~UnitSchedule() = default;

  // After planning: configures the filter's slice and sample, decides whether the run does
  // anything (false: nothing to do, `sum` says why), and makes the order. A non-ok status
  // refuses the run; `warnings` are for the user (stderr, the summary's notes).
  virtual Result<bool> Prepare(const Plan& plan, ObjectFilter& filter, report::RunSummary& sum,
                               std::vector<std::string>& warnings) = 0;
  // The key could not be loaded: this run checks CRCs only. Before StartReading.
  virtual void FallBackToKeyless() = 0;
  // Right before reading (the filter is final).
  virtual void StartReading(const ObjectFilter& filter) = 0;

  // The plan indices of the units to read, in read order, and their bytes.
  virtual const std::vector<size_t>& order() const = 0;
  virtual uint64_t scheduled_bytes() const = 0;
  // Whether no further unit is to be started (the time budget); then Admit for the one that is.
  virtual bool OutOfTime() = 0;
  virtual void Admit() = 0;
  // Right before a unit is read: false when it is not to be read after all.
  virtual bool MayStart() = 0;

  // After the pool is done: whether every unit was read whole (FinishContext::complete), and
  // which were read.
  virtual bool Complete() const = 0;
  virtual std::vector<uint8_t> UnitsRead() const = 0;
  // The summary's partial-run fields and coverage; saves what the schedule keeps. `finished`:
  // the source's Finish ran; `succeeded`: the outcome is the findings (not a key that could not
  // be loaded), and the run is a success of the repository's check (not an archive selection).
  virtual Status Close(report::RunSummary& sum, bool finished, bool stopped_by_signal, double started_unix,
                       bool succeeded) = 0;
  // The run's clock (Unix seconds; a test may fix "now").
  virtual double Now() const = 0;
  // When a run last finished without errors, where the schedule keeps a record.
  virtual std::optional<double> LastSuccess() const = 0;
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // `refs` objects of unit `unit` (a plan index) were handed to the verifiers.
  virtual void Submitted(size_t unit, size_t refs) = 0;
  // A batch of them was verified (or dropped by a stop).
  virtual void Verified(size_t unit) = 0;
  // A finding against the unit (before the Verified of its batch).
  virtual void Finding(size_t unit, bool error) = 0;
  // The unit's ReadUnit returned; `stopping`: a stop or a lost connection may have cut it short.
  virtual void ReadReturned(size_t unit, bool stopping) = 0;
  // The unit's last reference is gone: every block released, every batch verified or dropped.
  // `whole`: every object of it was wanted; `credited`: the bytes its blocks accounted for.
  virtual void Released(size_t unit, bool whole, uint64_t credited, uint64_t unit_bytes) = 0;
  // The reading is over (main thread): what follows is the finish and the archive pass.
  virtual void ReadingEnded() = 0;
};

}  // namespace borgcheck::engine
