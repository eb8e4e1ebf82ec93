// RunEngine, in the phases listed in engine.h. The pieces, top to bottom:
//   WindowRecycler   reuses read buffers (fragmentation and page faults: see below)
//   UnitTracker      one unit's bytes in flight and progress, until its last block is released
//   Engine           the run: workers, pool, the UnitSink each ReadUnit gets, verify tasks
#include "checker/engine/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "checker/base/stop_signal.h"
#include "checker/engine/archive_pass.h"
#include "checker/engine/byte_budget.h"
#include "checker/engine/key_fallback.h"
#include "checker/engine/object_filter.h"
#include "checker/engine/object_verdict.h"
#include "checker/engine/run_schedule.h"
#include "checker/pool/work_stealing_pool.h"

namespace borgcheck::engine {
using report::Finding;
using report::Reread;
using report::Severity;

namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The wall-clock time of each phase of a run, for the summary's `phases` (-v prints them).
// Main thread only.
class PhaseClock {
 public:
  // Ends the current phase (if any) and starts `next` ("" only ends it).
  void Next(std::string next) {
    const auto now = std::chrono::steady_clock::now();
    if (!name_.empty()) phases_.push_back({std::move(name_), std::chrono::duration<double>(now - since_).count()});
    name_ = std::move(next);
    since_ = now;
  }
  std::vector<report::RunSummary::Phase> Take() {
    Next("");
    return std::move(phases_);
  }

 private:
  std::string name_;
  std::chrono::steady_clock::time_point since_;
  std::vector<report::RunSummary::Phase> phases_;
};

// Recycles read buffers: up to kIdleWindows idle windows (kReadWindowBytes each) and one idle
// larger buffer (an object bigger than a window: up to 8 MiB with borg's default chunker).
// Allocated and freed through malloc at the rate the workers finish them, they fragmented
// glibc's heap (peak RSS about 30 MiB above the budget on a 1 GB repository); mmapped afresh,
// every window's pages fault in again (+0.2 s of kernel time per GB). Few are kept: idle buffers
// stay resident while the budget is full of others.
// Thread contract: safe for concurrent use (guarded by mu_). The reader takes; whichever worker
// drops a block's last reference gives back.
class WindowRecycler {
 public:
  static constexpr size_t kIdleWindows = 2;

  ByteBuffer Take(uint64_t n) {
    ByteBuffer b;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // std::exchange, not a plain move: a moved-from ByteBuffer keeps its old capacity().
      if (n <= kReadWindowBytes && !windows_.empty()) {
        b = std::exchange(windows_.back(), ByteBuffer());
        windows_.pop_back();
      } else if (n > kReadWindowBytes && large_.capacity() >= n) {
        b = std::exchange(large_, ByteBuffer());
      }
    }
    if (b.capacity() == 0) b.Reserve(n <= kReadWindowBytes ? kReadWindowBytes : n);
    b.Resize(n);
    return b;
  }

  void Give(ByteBuffer&& b) {
    std::lock_guard<std::mutex> lock(mu_);
    if (b.capacity() == kReadWindowBytes) {
      if (windows_.size() < kIdleWindows) windows_.push_back(std::move(b));
    } else if (b.capacity() > kReadWindowBytes && b.capacity() > large_.capacity()) {
      large_ = std::move(b);  // keep the largest; the smaller one is freed
    }
  }

 private:
  std::mutex mu_;
  std::vector<ByteBuffer> windows_;  // guarded by mu_; capacity kReadWindowBytes each
  ByteBuffer large_;                 // guarded by mu_; capacity 0 when empty
};

// Calls the progress callback with snapshot() every 100 ms on a thread of its own, until
// Finish(), which then sends the final record on the caller's thread. Without a callback it
// starts no thread. Thread contract: construct, Finish and destroy on the main thread;
// snapshot() runs on the progress thread and reads only atomics and const data.
class ProgressReporter {
 public:
  ProgressReporter(const ProgressCallback& progress, std::function<report::Progress()> snapshot)
      : progress_(progress), snapshot_(std::move(snapshot)) {
    if (!progress_) return;
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return done_; })) {
        progress_(snapshot_(), false);
      }
    });
  }
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;
  // A run that ends early (a signal, an internal error) still sends its final record.
  ~ProgressReporter() { Finish(); }

  void Finish() {
    if (!thread_.joinable()) return;
    Stop();
    progress_(snapshot_(), true);  // the final record carries the totals
  }

 private:
  void Stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  const ProgressCallback& progress_;
  const std::function<report::Progress()> snapshot_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

// One unit's accounting while its bytes are in flight. Shared by the unit's reader (one
// reference, dropped when ReadUnit returns) and each of its blocks (released on whichever thread
// drops the block). Progress: a block adds its progress_bytes when released, never more than
// the unit's size in all; whatever the blocks did not account for (headers, skipped regions,
// bytes read twice) is added when the last reference goes. A unit read on a worker holds its
// whole size in the budget (`reserved`) until then.
// Fields: const after construction, except the atomics.
struct UnitTracker {
  uint64_t unit_bytes = 0;
  std::atomic<uint64_t>* bytes_done = nullptr;  // the engine's counter
  ByteBudget* budget = nullptr;
  uint64_t reserved = 0;                        // released by the destructor
  RunObserver* observer = nullptr;              // told when the unit is done (run_schedule.h)
  size_t unit = 0;
  bool whole = true;                            // every object of the unit was wanted
  std::atomic<uint64_t> credited{0};

  void Credit(uint64_t n) {
    uint64_t before = credited.fetch_add(n, std::memory_order_relaxed);
    if (before < unit_bytes) bytes_done->fetch_add(std::min(n, unit_bytes - before), std::memory_order_relaxed);
  }
  ~UnitTracker() {
    uint64_t c = credited.load(std::memory_order_relaxed);
    if (observer) observer->Released(unit, whole, c, unit_bytes);
    if (c < unit_bytes) bytes_done->fetch_add(unit_bytes - c, std::memory_order_relaxed);
    if (reserved) budget->Release(reserved);
  }
};

// Per-worker state: owned by worker i, touched only by it while the pool runs; summed by the
// main thread after the pool's Wait().
struct WorkerState {
  std::unique_ptr<ObjectVerifier> verifier;
  uint64_t objects_verified = 0;
  uint64_t stored_bytes = 0;
  uint64_t plaintext_bytes = 0;
  ByteBuffer reread;  // the second read of a failed object
  std::vector<Bytes> stored;          // the current batch's objects, reused (VerifyBatch)
  std::vector<ObjectResult> results;  // their results, reused
};

// One of the store's connections (Engine::connections_), held by one unit's read task. Owned
// by that task; released on the thread that destroys it.
struct ConnectionSlot {
  explicit ConnectionSlot(ByteBudget* c) : connections(c) {}
  ~ConnectionSlot() { connections->Release(1); }
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;
  ByteBudget* connections;
};

class Engine {
 public:
  Engine(ObjectSource& source, const CheckOptions& options, const ProgressCallback& progress,
         UnitSchedule& schedule, RunObserver& observer)
      : source_(source),
        opts_(options),
        progress_(progress),
        archives_(options, options.threads),
        schedule_(schedule),
        observer_(observer) {}

  CheckOutcome Run();
  std::optional<double> StateLastSuccess() const { return schedule_.LastSuccess(); }

 private:
  class Sink;
  // One verify task's objects: written by the reader, read by the worker that runs the task.
  struct VerifyBatch {
    std::shared_ptr<Block> block;
    std::vector<ObjectRef> refs;
    size_t unit = 0;
  };

  bool Stopping() const { return PendingStopSignal() != 0 || changed_.load(std::memory_order_relaxed); }
  std::shared_ptr<Block> TakeBlock(const std::shared_ptr<UnitTracker>& tracker, bool from_budget,
                                   uint64_t file_offset, uint64_t n);
  void SubmitObjects(size_t unit, std::shared_ptr<Block> block, std::vector<ObjectRef> refs);
  void Verify(const VerifyBatch& b, size_t worker);
  void ReadOneUnit(size_t unit, std::shared_ptr<UnitTracker> tracker, bool from_budget);
  void ReadAll();
  // The findings and summary of a run that ends now: `finished` (Finish ran) or not (a signal,
  // a vanished unit, an internal error); saves the state.
  void Summarize(CheckOutcome& out, bool finished, bool by_signal, double started_unix,
                 std::chrono::steady_clock::time_point start, bool findings_taken = false);
  // The store's connection was lost (ObjectSource::Lost): the findings so far, a partial
  // summary (stopped "connection-lost") and the loss as the run's status.
  void ConnectionLost(CheckOutcome& out, const Status& lost, double started_unix,
                      std::chrono::steady_clock::time_point start, bool findings_taken);
  // Sharded runs (shard.h): whether the plan is the one the merged shards saw; a shard's end
  // (no Finish, no archive pass: its record instead); the merge's shards handed to the sink,
  // the summary and the source before Finish.
  Status CheckShardsMatchPlan() const;
  void EndShard(CheckOutcome& out, double started_unix, std::chrono::steady_clock::time_point start);
  Status TakeShards(report::RunSummary& sum);

  ObjectSource& source_;
  const CheckOptions& opts_;
  const ProgressCallback& progress_;

  // const after planning (read by every thread)
  Plan plan_;
  ObjectFilter filter_;  // what Sink::Wants asks; configured before the pool starts
  ArchivePass archives_;  // the archive pass (archive_pass.h): main thread only
  UnitSchedule& schedule_;  // which units, in what order, the time budget (run_schedule.h)
  RunObserver& observer_;   // told what happened to each unit (any thread; run_schedule.h)
  PhaseClock phases_;     // the summary's phase timings: main thread only

  // own synchronisation
  report::FindingSink sink_;
  std::unique_ptr<ByteBudget> budget_;
  // Units read on workers at once, when the source's store limits it (source.Connections()):
  // a ByteBudget of that many slots, one per unit; nullptr: no limit beyond the workers.
  std::unique_ptr<ByteBudget> connections_;
  WindowRecycler recycler_;  // outlives every block (declared before pool_)
  std::atomic<uint64_t> bytes_done_{0};
  std::atomic<uint64_t> objects_done_{0};
  std::atomic<bool> changed_{false};
  std::unique_ptr<pool::WorkStealingPool> pool_;
  std::vector<WorkerState> workers_;  // element i: worker i only
  // A shard: planning's findings, kept apart from those of its units (the merge plans again).
  std::vector<Finding> planned_;  // main thread only
};

// The UnitSink of one unit: used by the thread that reads the unit.
class Engine::Sink final : public UnitSink {
 public:
  Sink(Engine& e, size_t unit, std::shared_ptr<UnitTracker> tracker, bool from_budget)
      : e_(e), unit_(unit), tracker_(std::move(tracker)), from_budget_(from_budget) {}

  bool Wants(const ChunkId& id) const override { return e_.filter_.Wants(id); }
  bool WantsAll() const override { return e_.filter_.WantsAll(); }
  std::shared_ptr<Block> TakeBlock(uint64_t file_offset, uint64_t n) override {
    return e_.TakeBlock(tracker_, from_budget_, file_offset, n);
  }
  void Objects(std::shared_ptr<Block> block, std::vector<ObjectRef> refs) override {
    e_.SubmitObjects(unit_, std::move(block), std::move(refs));
  }
  void Finding(report::Finding f, bool object_done) override {
    e_.observer_.Finding(unit_, f.severity == Severity::kError);
    e_.sink_.Add(std::move(f));
    if (object_done) e_.objects_done_.fetch_add(1, std::memory_order_relaxed);
  }
  void Vanished() override { e_.changed_.store(true); }
  bool Stopping() const override { return e_.Stopping(); }

 private:
  Engine& e_;
  const size_t unit_;
  const std::shared_ptr<UnitTracker> tracker_;
  const bool from_budget_;
};

std::shared_ptr<Block> Engine::TakeBlock(const std::shared_ptr<UnitTracker>& tracker, bool from_budget,
                                         uint64_t file_offset, uint64_t n) {
  if (from_budget) budget_->Acquire(n);
  auto* b = new Block();
  b->data = recycler_.Take(n);
  b->file_offset = file_offset;
  b->progress_bytes = n;
  ByteBudget* budget = from_budget ? budget_.get() : nullptr;
  WindowRecycler* recycler = &recycler_;
  // The deleter runs on whichever thread drops the last reference. Recycle before releasing the
  // budget: the reader may be waiting for it.
  return std::shared_ptr<Block>(b, [tracker, budget, recycler, n](Block* blk) {
    const uint64_t progress = blk->progress_bytes;
    recycler->Give(std::move(blk->data));
    delete blk;
    if (budget) budget->Release(n);
    tracker->Credit(progress);
  });
}

void Engine::SubmitObjects(size_t unit, std::shared_ptr<Block> block, std::vector<ObjectRef> refs) {
  observer_.Submitted(unit, refs.size());
  size_t i = 0;
  while (i < refs.size()) {
    auto batch = std::make_shared<VerifyBatch>();
    batch->block = block;
    batch->unit = unit;
    uint64_t bytes = 0;
    while (i < refs.size() && bytes < kBatchBytes && batch->refs.size() < kBatchObjects) {
      bytes += refs[i].size;
      batch->refs.push_back(refs[i++]);
    }
    pool_->Submit([this, batch](size_t worker) { Verify(*batch, worker); });
  }
}

void Engine::Verify(const VerifyBatch& b, size_t worker) {
  WorkerState& ws = workers_[worker];
  const ReadUnit& unit = plan_.units[b.unit];
  if (Stopping()) return;
  // The whole batch in one call, so that a verifier can hash several objects at once (hash
  // lanes); each object's result is then handled as if it had been verified alone.
  ws.stored.clear();
  for (const ObjectRef& ref : b.refs) ws.stored.push_back(b.block->data.view().subspan(ref.pos, ref.size));
  ws.results.assign(b.refs.size(), ObjectResult());
  ws.verifier->VerifyBatch(ws.stored, b.refs, ws.results);
  for (size_t i = 0; i < b.refs.size(); ++i) {
    if (Stopping()) return;
    const ObjectRef& ref = b.refs[i];
    const bool counted = ref.role != ObjectRole::kSuperseded;
    auto passed = [&](Bytes stored, uint64_t plaintext_bytes) {
      if (!counted) return;
      ws.objects_verified++;
      ws.stored_bytes += stored.size();
      ws.plaintext_bytes += plaintext_bytes;
    };
    const Bytes stored = ws.stored[i];
    std::optional<Verdict>& fail = ws.results[i].verdict;
    if (!fail) {
      passed(stored, ws.results[i].plaintext_bytes);
      if (counted) objects_done_.fetch_add(1, std::memory_order_relaxed);
      observer_.Verified(b.unit);
      continue;
    }
    // 5. The second read.
    Reread reread = Reread::kNotReread;
    Severity severity = fail->severity;
    switch (source_.ReadAgain(unit, ref.file_offset, stored, ws.reread)) {
      case io::SecondRead::kUnreadable:
        break;
      case io::SecondRead::kSame:
        reread = Reread::kAgreed;
        break;
      case io::SecondRead::kDifferent:
        reread = Reread::kDiffered;
        if (!ws.verifier->Verify(ws.reread.view(), ref)) {
          reread = Reread::kPassed;
          severity = Severity::kWarning;
          passed(ws.reread.view(), ws.verifier->plaintext().size());
        }
        break;
    }
    // 6. Roles.
    std::string msg = std::move(fail->message);
    if (ref.role == ObjectRole::kSuperseded) {
      severity = Severity::kWarning;
      msg += " (in a superseded entry: no current object is affected)";
    } else if (ref.role == ObjectRole::kOrphan) {
      msg += " (an object in no index fragment)";
    }
    if (reread == Reread::kPassed) msg += "; the second read verified (a transient read error?)";
    Finding f = report::MakeFinding(severity, fail->stage, unit.location.At(ref.file_offset), &ref.id, std::move(msg));
    f.reread = reread;
    observer_.Finding(b.unit, f.severity == Severity::kError);  // before Verified: the unit's mark needs it
    sink_.Add(std::move(f));
    if (counted) objects_done_.fetch_add(1, std::memory_order_relaxed);
    observer_.Verified(b.unit);
  }
}

void Engine::ReadOneUnit(size_t unit, std::shared_ptr<UnitTracker> tracker, bool from_budget) {
  Sink sink(*this, unit, std::move(tracker), from_budget);
  source_.ReadUnit(unit, sink);
  // A unit whose read the loss of the store's connection may have cut short counts as not read
  // (only its blocks' bytes are): a lost run never claims a unit it could not finish.
  observer_.ReadReturned(unit, Stopping() || !source_.Lost().ok());
}

void Engine::ReadAll() {
  // The schedule's units (all of them, in plan order, unless the state or a time budget says
  // otherwise: the UnitSchedule); no unit starts once the time budget is spent.
  const std::vector<size_t>& order = schedule_.order();
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t u = order[i];
    // A lost connection to a remote store: no unit starts (each would only fail to read).
    if (Stopping() || schedule_.OutOfTime() || !source_.Lost().ok()) break;
    schedule_.Admit();
    if (plan_.in_order && !schedule_.MayStart()) break;
    // One reader: the next two units' files may be opened while this one is read (a remote
    // store's open is round trips; the hint is the source's to take or not). Each unit is named
    // once: the first two before the first is read, then the one two ahead.
    if (plan_.in_order) {
      for (size_t next = i == 0 ? 1 : i + 2; next < order.size() && next <= i + 2; ++next) {
        source_.WillRead(plan_.units[order[next]]);
      }
    }
    auto tracker = std::make_shared<UnitTracker>();
    tracker->unit_bytes = plan_.units[u].bytes;
    tracker->bytes_done = &bytes_done_;
    tracker->budget = budget_.get();
    tracker->observer = &observer_;
    tracker->unit = u;
    tracker->whole = filter_.WantsAll();
    if (plan_.in_order) {
      ReadOneUnit(u, std::move(tracker), true);
      continue;
    }
    // A unit read on a worker holds its whole size from here until its last block is verified
    // (or the task is dropped): workers never wait for the budget, so they cannot all wait for
    // each other.
    budget_->Acquire(tracker->unit_bytes);
    tracker->reserved = tracker->unit_bytes;
    // A connection of the store, held while the unit is read; given back when the read returns
    // or the task is dropped (a stop), so this loop never waits for a slot nobody will free.
    std::shared_ptr<ConnectionSlot> slot;
    if (connections_) {
      connections_->Acquire(1);
      slot = std::make_shared<ConnectionSlot>(connections_.get());
    }
    pool_->Submit([this, u, tracker, slot](size_t) mutable {
      if (schedule_.MayStart()) ReadOneUnit(u, std::move(tracker), false);
      slot.reset();
    });
  }
}

CheckOutcome Engine::Run() {
  CheckOutcome out;
  const auto start = std::chrono::steady_clock::now();
  report::RunSummary& sum = out.summary;
  sum.repository = opts_.RepositoryName();
  sum.verify_data = opts_.verify_data;
  sum.threads = opts_.threads;

  // 1. Plan.
  phases_.Next("plan");
  Result<Plan> plan = source_.MakePlan();
  if (!plan.ok()) {
    out.status = plan.status();
    return out;
  }
  plan_ = std::move(plan).value();
  sum.repository_id = plan_.repository_id;
  const double started_unix = schedule_.Now();
  if ((opts_.shard_n > 0 || opts_.finish_shards) && !source_.CanShard()) {
    out.status = Status(StatusCode::kUnsupported,
                        "a repository read through borg serve (ssh://) cannot be sharded: its units are runs of the "
                        "server's scan, which another process does not cut the same way. Shard it over sftp:// or "
                        "on a file system the nodes share");
    return out;
  }
  if (opts_.finish_shards) {
    if (Status s = CheckShardsMatchPlan(); !s.ok()) {
      out.status = s;
      return out;
    }
  }

  // Partial runs: the state, --min-interval, the slice and the sample, the schedule.
  Result<bool> go = schedule_.Prepare(plan_, filter_, sum, out.warnings);
  if (!go.ok()) {
    out.status = go.status();
    return out;
  }
  if (!*go) {  // --min-interval: verified recently enough, nothing to do
    sum.format = plan_.format;
    sum.unit_noun = plan_.unit_noun;
    sum.live_list_source = plan_.live_list_source;
    sum.transaction = plan_.transaction.value_or(0);
    sum.objects_total = plan_.objects_total;
    return out;
  }

  // 2. Key, before any thread exists. A key that cannot be loaded still lets the repository
  // layer be checked (key_fallback.h).
  KeyFallback key_fallback;
  if (opts_.verify_data) {
    phases_.Next("key");
    if (Status s = source_.LoadKey(plan_); !s.ok()) {
      // A shard and the merge check with the key or not at all: a keyless fallback in one of
      // them would merge data checks with CRC checks.
      if (!KeyFallback::FallsBack(s) || opts_.shard_n > 0 || opts_.finish_shards) {
        out.status = s;
        return out;
      }
      key_fallback.Failed(std::move(s));
      source_.FallBackToKeyless();
      schedule_.FallBackToKeyless();
      sum.verify_data = false;
    }
  }
  sum.mode = source_.ModeName();
  for (Finding& f : plan_.findings) {
    if (opts_.shard_n > 0) planned_.push_back(std::move(f));
    else sink_.Add(std::move(f));
  }
  plan_.findings.clear();
  sum.format = plan_.format;
  sum.unit_noun = plan_.unit_noun;
  sum.live_list_source = plan_.live_list_source;
  sum.transaction = plan_.transaction.value_or(0);
  sum.notes = plan_.notes;
  phases_.Next("prepare");
  if (key_fallback.active()) sum.notes.push_back(key_fallback.Note());
  else if (opts_.shard_n > 0) sum.notes.push_back("a shard: the merge (borgcheck merge) makes the checks that span "
                                                  "segments or packs and walks the archives");
  else archives_.Start(source_, sink_, sum.notes);  // list and select the archives (verify-data)
  sum.objects_total = plan_.objects_total;
  const uint64_t total_bytes = schedule_.scheduled_bytes();  // progress: the units this run reads

  // 3. Workers, budget, pool.
  const unsigned threads = std::max(1u, opts_.threads);
  workers_.resize(threads);
  for (WorkerState& w : workers_) {
    Result<std::unique_ptr<ObjectVerifier>> v = source_.MakeVerifier();
    if (!v.ok()) {
      out.status = v.status();
      return out;
    }
    w.verifier = std::move(v).value();
  }
  budget_ = std::make_unique<ByteBudget>(std::max<uint64_t>(kMinInFlight, uint64_t(threads) * plan_.in_flight_per_thread));
  pool_ = std::make_unique<pool::WorkStealingPool>(threads);
  if (const unsigned c = source_.Connections(); c > 0 && !plan_.in_order && c < threads) {
    connections_ = std::make_unique<ByteBudget>(c);
  }
  // A selection walks its archives first and verifies only the objects they reference.
  if (Status s = archives_.WalkFirst(filter_, plan_); !s.ok()) {
    out.status = s;
    return out;
  }

  schedule_.StartReading(filter_);

  // 4-6. Read and verify.
  phases_.Next("read+verify");
  std::atomic<bool> walking_archives{false};
  ProgressReporter progress(progress_, [&] {
    report::Progress p;
    if (walking_archives.load(std::memory_order_relaxed)) p.phase = "archives";
    p.bytes_done = std::min(bytes_done_.load(std::memory_order_relaxed), total_bytes);
    p.bytes_total = total_bytes;
    p.objects_done = objects_done_.load(std::memory_order_relaxed);
    p.objects_total = std::max(plan_.objects_total, p.objects_done);
    p.elapsed_s = SecondsSince(start);
    return p;
  });
  Status internal;
  auto stop_after = [&](std::string what) {
    pool_->RequestStop();
    try {
      pool_->Wait();
    } catch (...) {
    }
    internal = Status(StatusCode::kInternal, "internal error: " + std::move(what));
  };
  try {
    ReadAll();
    pool_->Wait();
  } catch (const std::exception& e) {
    stop_after(e.what());
  } catch (...) {  // a task may throw anything: it must not escape the run (std::terminate)
    stop_after("an exception that is not a std::exception");
  }
  pool_.reset();
  observer_.ReadingEnded();

  // 7. Stop and change. A signal still reports what the run found so far.
  if (int sig = PendingStopSignal()) {
    SetInterrupted(out, sig);
    Summarize(out, false, true, started_unix, start);
    return out;
  }
  if (!internal.ok()) {
    out.status = internal;
    Summarize(out, false, false, started_unix, start);  // saves the units verified before it
    return out;
  }
  if (Status lost = source_.Lost(); !lost.ok()) {
    ConnectionLost(out, lost, started_unix, start, false);
    return out;
  }
  // What Finish and the archive pass read first may be opened while the store is asked whether
  // the repository changed (hints: a remote store's opens are round trips). A shard runs neither.
  if (opts_.shard_n == 0) {
    source_.WillFinish();
    archives_.WillWalk();
  }
  if (changed_.load() || source_.ChangedSinceStart()) {
    out.status = Status(StatusCode::kRepositoryChanged,
                        fmt::format("repository changed during check (a {} vanished or a new transaction was "
                                    "committed): no verdict. Run again when borg is not writing to it",
                                    plan_.unit_noun));
    Summarize(out, false, false, started_unix, start);  // the units verified before still count
    return out;
  }

  // A shard ends here: the merge finishes.
  if (opts_.shard_n > 0) {
    EndShard(out, started_unix, start);
    return out;
  }

  // 8. Finish and summary.
  phases_.Next("finish");
  for (const WorkerState& w : workers_) {
    sum.objects_verified += w.objects_verified;
    sum.stored_bytes += w.stored_bytes;
    sum.plaintext_bytes += w.plaintext_bytes;
  }
  if (opts_.finish_shards) {
    if (Status s = TakeShards(sum); !s.ok()) {
      out.status = s;
      return out;
    }
  }
  std::vector<ObjectVerifier*> verifiers;
  for (WorkerState& w : workers_) verifiers.push_back(w.verifier.get());
  const std::vector<uint8_t> unit_read = schedule_.UnitsRead();
  FinishContext ctx{sink_, sum, verifiers, schedule_.Complete(), unit_read};
  source_.Finish(ctx);
  workers_.clear();
  if (int sig = PendingStopSignal()) {  // Finish may read a manifest: a signal there still counts
    SetInterrupted(out, sig);
    Summarize(out, false, true, started_unix, start);
    return out;
  }
  out.findings = sink_.Sorted();
  // A connection lost during the archive pass makes its reads fail: what it would report then
  // is not the repository's. The findings of the objects read before are kept.
  std::vector<Finding> before_archives;
  if (source_.Connections() > 0) before_archives = out.findings;
  phases_.Next("archive pass");
  walking_archives.store(archives_.walks(), std::memory_order_relaxed);  // progress goes on: the archives
  archives_.Finish(out.findings, ObjectVerdicts::Of(out.findings), sum);  // walk, affected uses, archive findings, orphans
  if (int sig = PendingStopSignal()) {
    SetInterrupted(out, sig);
    Summarize(out, false, true, started_unix, start, /*findings_taken=*/true);
    return out;
  }
  if (Status lost = source_.Lost(); !lost.ok()) {
    out.findings = std::move(before_archives);
    ConnectionLost(out, lost, started_unix, start, true);
    return out;
  }
  out.status = key_fallback.Resolve(out.findings);  // the key's status unless damage was found
  for (const Finding& f : out.findings) report::CountFinding(f, sum);
  sum.elapsed_s = SecondsSince(start);
  sum.phases = phases_.Take();
  // A selection of archives is no success of the repository's check (the staleness alert).
  out.state_status = schedule_.Close(sum, true, false, started_unix, out.status.ok() && !opts_.SelectsArchives());
  return out;
}

Status Engine::CheckShardsMatchPlan() const {
  const std::vector<ShardResult>& shards = opts_.finish_shards->shards;
  if (shards.empty()) return Status(StatusCode::kInvalidArgument, "no shard to merge");
  const ShardResult& s = shards.front();
  const std::string now = fmt::format("{} repository {} at transaction {}", plan_.format, plan_.repository_id,
                                      plan_.transaction.value_or(0));
  const std::string then = fmt::format("{} repository {} at transaction {}", s.format, s.repository_id, s.transaction);
  if (now == then) {
    if (PlanFingerprint(plan_) == s.plan) return Status::Ok();
    return Status(StatusCode::kRepositoryChanged,
                  "the " + now + " has other segments, packs or objects than the shards saw (a backup, prune or "
                  "compact ran since). Run the shards again");
  }
  return Status(StatusCode::kRepositoryChanged,
                "the shards checked the " + then + ", the repository is now the " + now +
                    ": a backup, prune or compact ran since (or the path names another repository). Run the "
                    "shards again");
}

Status Engine::TakeShards(report::RunSummary& sum) {
  for (const ShardResult& s : opts_.finish_shards->shards) {
    if (Status st = source_.LoadEvidence(s.evidence); !st.ok()) {
      return Status(st.code(), fmt::format("shard {}/{}: {}", s.k, s.n, st.message()));
    }
    for (const Finding& f : s.findings) sink_.Add(f);
    // The records are the merge's input: counts that overflow are no shards of one repository.
    if (__builtin_add_overflow(sum.objects_verified, s.objects_verified, &sum.objects_verified) ||
        __builtin_add_overflow(sum.stored_bytes, s.stored_bytes, &sum.stored_bytes) ||
        __builtin_add_overflow(sum.plaintext_bytes, s.plaintext_bytes, &sum.plaintext_bytes)) {
      return Status(StatusCode::kInvalidArgument, fmt::format("shard {}/{}: its counts do not add up", s.k, s.n));
    }
  }
  return Status::Ok();
}

void Engine::EndShard(CheckOutcome& out, double started_unix, std::chrono::steady_clock::time_point start) {
  phases_.Next("evidence");
  report::RunSummary& sum = out.summary;
  ShardResult r;
  r.k = opts_.shard_k;
  r.n = opts_.shard_n;
  r.repository = opts_.RepositoryName();
  r.repository_id = plan_.repository_id;
  r.format = plan_.format;
  r.transaction = plan_.transaction.value_or(0);
  r.plan = PlanFingerprint(plan_);
  r.verify_data = sum.verify_data;
  r.repository_only = opts_.repository_only;
  for (const WorkerState& w : workers_) {
    r.objects_verified += w.objects_verified;
    r.stored_bytes += w.stored_bytes;
    r.plaintext_bytes += w.plaintext_bytes;
  }
  sum.objects_verified = r.objects_verified;
  sum.stored_bytes = r.stored_bytes;
  sum.plaintext_bytes = r.plaintext_bytes;
  const std::vector<uint8_t> read = schedule_.UnitsRead();
  for (size_t u = 0; u < plan_.units.size(); ++u) {
    if (u < read.size() && read[u]) r.units.push_back(UnitKey(plan_.units[u]));
  }
  std::vector<ObjectVerifier*> verifiers;
  for (WorkerState& w : workers_) verifiers.push_back(w.verifier.get());
  source_.SaveEvidence(r.evidence, verifiers);
  workers_.clear();
  r.findings = sink_.Sorted();
  out.findings = r.findings;
  out.findings.insert(out.findings.end(), planned_.begin(), planned_.end());
  std::stable_sort(out.findings.begin(), out.findings.end(), report::FindingLess);
  for (const Finding& f : out.findings) report::CountFinding(f, sum);
  sum.elapsed_s = SecondsSince(start);
  sum.phases = phases_.Take();
  out.state_status = schedule_.Close(sum, true, false, started_unix, false);
  sum.complete = false;  // the merge decides
  sum.has_coverage = false;
  r.bytes_read = sum.bytes_read;
  out.shard = std::move(r);
}

void Engine::ConnectionLost(CheckOutcome& out, const Status& lost, double started_unix,
                            std::chrono::steady_clock::time_point start, bool findings_taken) {
  out.status = Status(StatusCode::kIoError,
                      lost.message() + "; the run stopped there: what it had not read is not checked");
  Summarize(out, false, false, started_unix, start, findings_taken);
  out.summary.stopped = "connection-lost";
  out.partial_report = true;  // the findings so far and the summary, then the error (exit 2 or 90)
}

void Engine::Summarize(CheckOutcome& out, bool finished, bool by_signal, double started_unix,
                       std::chrono::steady_clock::time_point start, bool findings_taken) {
  report::RunSummary& sum = out.summary;
  if (!workers_.empty()) {  // else Finish ran: the totals are in the summary already
    sum.objects_verified = sum.stored_bytes = sum.plaintext_bytes = 0;
    for (const WorkerState& w : workers_) {
      sum.objects_verified += w.objects_verified;
      sum.stored_bytes += w.stored_bytes;
      sum.plaintext_bytes += w.plaintext_bytes;
    }
  }
  if (!findings_taken) out.findings = sink_.Sorted();
  sum.findings_by_stage = {};
  sum.errors = sum.io_errors = sum.warnings = 0;
  for (const Finding& f : out.findings) report::CountFinding(f, sum);
  sum.elapsed_s = SecondsSince(start);
  sum.phases = phases_.Take();
  out.state_status = schedule_.Close(sum, finished, by_signal, started_unix, out.status.ok());
  out.partial_report = by_signal;
}

}  // namespace

void SetInterrupted(CheckOutcome& out, int signo) {
  out.stop_signal = signo;
  out.status = Status(StatusCode::kInterrupted, fmt::format("stopped by signal {} before the check finished", signo));
}

CheckOutcome RunEngine(ObjectSource& source, const CheckOptions& options, const ProgressCallback& progress,
                       UnitSchedule& schedule, RunObserver& observer) {
  Engine e(source, options, progress, schedule, observer);
  CheckOutcome out = e.Run();
  out.state_last_success_at = e.StateLastSuccess();
  // A stop signal the run did not see itself (it came while planning or unlocking the key).
  if (int sig = PendingStopSignal(); sig && !out.stop_signal) SetInterrupted(out, sig);
  return out;
}

}  // namespace borgcheck::engine
