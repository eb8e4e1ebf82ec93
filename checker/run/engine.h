// Engine pieces the three check runs (check_run.cc for borg 1.x, borg2b5_check.cc for
// repository version 2, borg2master_check.cc for version 4) share: the window a reader shares
// with the batches cut from it (with the recycling of its buffer and its budget and progress
// accounting), per-worker counters, the progress thread, and the finishing of a run's
// outcome.
//
// Thread contract: per declaration below. The run's main thread creates and finishes
// everything here; pool workers only drop the last reference to a WindowBlock.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/pool/work_stealing_pool.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/segment_finding.h"
#include "checker/report/finding.h"
#include "checker/report/output.h"
#include "checker/run/byte_budget.h"
#include "checker/run/check_run.h"

namespace borgcheck::run {

// A finding located by segment number and offset in it (repo/segment_finding.h).
using repo::MakeFinding;

// Recycles a reader's window buffers: up to kIdleWindows idle windows (window_bytes each) and
// one idle larger buffer (for an entry bigger than a window: up to 8 MiB with borg's default
// chunker). Allocated and freed through malloc at the rate the workers finish them, they
// fragmented glibc's heap (peak RSS about 30 MiB above the budget on a 1 GB repository);
// mmapped afresh, every window's pages fault in again (+0.2 s of kernel time per GB). Few are
// kept: idle buffers stay resident while the budget is full of others.
// Thread contract: safe for concurrent use (guarded by mu_). The reader takes; whichever
// worker drops a window's last reference gives back. Must outlive every WindowBlock that
// names it.
class WindowRecycler {
 public:
  static constexpr size_t kIdleWindows = 2;

  explicit WindowRecycler(uint64_t window_bytes) : window_bytes_(window_bytes) {}

  // A buffer of size n (contents unspecified).
  ByteBuffer Take(uint64_t n);
  void Give(ByteBuffer&& b);

 private:
  const uint64_t window_bytes_;      // const after construction
  std::mutex mu_;
  std::vector<ByteBuffer> windows_;  // guarded by mu_; capacity window_bytes_ each
  ByteBuffer large_;                 // guarded by mu_; capacity 0 when empty
};

// A window of one segment file in memory, shared (through shared_ptr) by the batches cut from
// it; the last one to finish gives the buffer back to the recycler, releases its bytes to the
// budget and counts them as done. A run derives its own block from this to add where the
// window lies.
// Written by the reader before it is shared; read-only afterwards. The budget, counter and
// recycler it names must outlive it.
struct WindowBlock {
  ByteBuffer data;
  uint64_t file_offset = 0;
  ByteBudget* budget = nullptr;                  // released by data.size() when set
  std::atomic<uint64_t>* bytes_done = nullptr;   // advanced by data.size() when set
  WindowRecycler* recycler = nullptr;            // set when data came from it
  bool counts_progress = true;                   // false: bytes_done is advanced elsewhere

  WindowBlock() = default;
  WindowBlock(const WindowBlock&) = delete;
  WindowBlock& operator=(const WindowBlock&) = delete;
  ~WindowBlock();
};

// One task's worth of entries cut from one window: written by the reader, then read by the
// one worker that runs the task. The block stays alive (and its budget held) until the last
// batch cut from it is done.
template <class BlockT, class ItemT>
struct Batch {
  std::shared_ptr<BlockT> block;
  std::vector<ItemT> items;
  uint64_t bytes = 0;
};

// Per-worker state: owned by worker i, touched only by it while the pool runs; summed by the
// main thread after the pool's Wait() (AddWorkerTotals).
template <class Verifier>
struct WorkerState {
  std::unique_ptr<Verifier> verifier;
  uint64_t objects_verified = 0;
  uint64_t stored_bytes = 0;
  uint64_t plaintext_bytes = 0;
  ByteBuffer reread;  // scratch for the second read of a failed object
};

// Adds the workers' counters to the summary. Main thread, after the pool's Wait().
template <class Verifier>
void AddWorkerTotals(const std::vector<WorkerState<Verifier>>& workers, report::RunSummary& sum) {
  for (const WorkerState<Verifier>& w : workers) {
    sum.objects_verified += w.objects_verified;
    sum.stored_bytes += w.stored_bytes;
    sum.plaintext_bytes += w.plaintext_bytes;
  }
}

// Calls the run's progress callback with snapshot() every 100 ms on a thread of its own, from
// construction until Finish(); Finish() then sends the final record on the caller's thread.
// Without a callback it starts no thread and Finish() sends nothing.
// Thread contract: construct, Finish and destroy on one thread (the run's main thread).
// snapshot() runs on the progress thread, so it may read only what is safe for concurrent use
// (atomics, data const while the pool runs); it and the callback must outlive the reporter.
class ProgressReporter {
 public:
  ProgressReporter(const ProgressCallback& progress, std::function<report::Progress()> snapshot);
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;
  ~ProgressReporter();  // stops the thread; sends no final record

  // Stops and joins the thread, then sends snapshot() (the totals) as the final record.
  void Finish();

 private:
  void Stop();

  const ProgressCallback& progress_;
  const std::function<report::Progress()> snapshot_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

// The second read of a failed object in a segment file: reads `first.size()` bytes at
// `offset` of `path` into `scratch` and compares them with `first`. kNotReread: the file
// cannot be opened or read; kAgreed: the same bytes; kDiffered: other bytes, now in `scratch`
// (the caller verifies them and reports kPassed when they pass). Safe for concurrent use
// (each worker passes its own scratch).
report::Reread ReadAgain(const std::string& path, uint64_t offset, Bytes first, ByteBuffer& scratch);

// Runs feed() (which submits the run's tasks to `pool`) and then waits for the pool. An
// exception from either stops the pool, waits for its running tasks and becomes kInternal
// ("internal error: ..."). Main thread.
Status FeedAndWait(pool::WorkStealingPool& pool, const std::function<void()>& feed);

// Seconds since `start` on the steady clock.
double SecondsSince(std::chrono::steady_clock::time_point start);

// The outcome of a run a signal stopped: kInterrupted, naming the signal.
void SetInterrupted(CheckOutcome& out, int signo);

// Finishes the outcome: the sink's findings sorted by location into out.findings, counted per
// stage and per severity in the summary; bytes_read and the elapsed time. Main thread, after
// the pool is gone.
void FinishSummary(const report::FindingSink& sink, uint64_t bytes_read,
                   std::chrono::steady_clock::time_point start, CheckOutcome& out);

// Runs Checker(options, progress).Run(). A stop signal the run did not see itself (it came
// while planning or waiting for a passphrase) still makes the outcome kInterrupted.
// Main thread.
template <class Checker>
CheckOutcome RunChecker(const CheckOptions& options, const ProgressCallback& progress) {
  Checker c(options, progress);
  CheckOutcome out = c.Run();
  if (int sig = PendingStopSignal(); sig && !out.stop_signal) SetInterrupted(out, sig);
  return out;
}

}  // namespace borgcheck::run
