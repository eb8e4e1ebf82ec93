// borgcheck's own work-stealing thread pool.
//
// Why our own: Debian's oneTBB is not built with ThreadSanitizer and makes TSan report false
// races; our TSan gate (ci/tsan) must see every synchronisation, so every one is here, in
// plain std::mutex / std::condition_variable / std::atomic.
//
// Design (after ripgrep's parallel walker): one deque per worker; a worker pops from the back
// of its own deque and steals from the front of the others in turn; an outside Submit() goes
// round-robin. `pending_` counts submitted-but-unfinished tasks, so "pending == 0" means all
// done and Wait() returns. Idle workers block on a condition variable (no sleep-polling). A
// stop flag (RequestStop) drops queued tasks for fatal errors. A task that throws does not
// kill its worker: the first exception is kept and rethrown by Wait().
//
// Sleep/wake protocol (why no wake-up is lost): Submit pushes the task into a deque first and
// only then, under mu_, counts it in `queued_` and notifies. An idle worker waits on work_cv_
// for `queued_ > 0` under mu_ and, still under mu_, takes one unit of `queued_` (a
// reservation) before it touches any deque. Every reservation therefore matches a task that is
// already in some deque and that only a reservation holder may pop, so the holder's scan of
// the deques always finds one (it rescans if others got there first). Because both the count
// and the predicate live under mu_, a notify can never fall between a worker's check and its
// sleep.
//
// Stop: RequestStop() only sets a sticky flag. Workers keep draining the deques but drop each
// task (destroy it without running it) instead of running it, so `pending_` still reaches zero
// and Wait() returns as soon as the running tasks finish. Submit() after the stop is a no-op.
// A stopped pool stays stopped; long tasks may poll stop_requested() to finish early.
//
// Thread contract: Submit, RequestStop, stop_requested, size and steals are safe for
// concurrent use from any thread, including from inside a task. Wait must be called from a
// non-worker thread (calling it from inside a task would deadlock), one thread at a time. The
// destructor requires that no outside thread is still calling Submit or Wait; tasks still
// queued are dropped and running ones finish first. Tasks receive the index of the worker
// that runs them (0..size()-1), so callers can keep per-worker state in a vector indexed by it
// without locking: a worker runs one task at a time. A task object (and whatever it captured)
// is destroyed on the worker before that task counts as finished, so after Wait() returns no
// task captures are alive.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace borgcheck::pool {

class WorkStealingPool {
 public:
  using Task = std::function<void(size_t worker_index)>;

  explicit WorkStealingPool(size_t threads);  // threads >= 1 (0 is treated as 1)
  ~WorkStealingPool();                         // requests stop, joins every worker
  WorkStealingPool(const WorkStealingPool&) = delete;
  WorkStealingPool& operator=(const WorkStealingPool&) = delete;

  // Queues a task. From inside a task it goes to the calling worker's own deque; from
  // outside, round-robin. After RequestStop() tasks are dropped (not run).
  // Safe for concurrent use.
  void Submit(Task task);

  // Blocks until every submitted task has finished or been dropped, including tasks that
  // those tasks submitted. Rethrows the first exception a task threw (once; the next Wait()
  // does not throw it again). The pool stays usable afterwards.
  // Call from a non-worker thread, one thread at a time.
  void Wait();

  // Fatal stop: queued tasks are dropped, running ones finish, Wait() returns. Sticky.
  // Safe for concurrent use (also from inside a task).
  void RequestStop();
  bool stop_requested() const { return stop_.load(std::memory_order_acquire); }

  size_t size() const { return workers_.size(); }

  // Statistics for tests: how many tasks were taken from another worker's deque.
  size_t steals() const { return steals_.load(std::memory_order_relaxed); }

 private:
  struct Worker;
  void Run(size_t index);
  bool TryPop(size_t index, Task& out);
  void FinishOne();

  // const after construction
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;  // written by the constructor, joined by the destructor

  // own synchronisation
  std::atomic<bool> stop_{false};
  std::atomic<size_t> next_{0};    // round-robin cursor for outside Submit()
  std::atomic<size_t> steals_{0};

  std::mutex mu_;                    // guards the members below and the sleep/wake protocol
  std::condition_variable work_cv_;  // workers wait here for queued_ > 0 || shutdown_
  std::condition_variable done_cv_;  // Wait() waits here for pending_ == 0
  size_t pending_ = 0;               // guarded by mu_: submitted, not yet finished/dropped
  size_t queued_ = 0;                // guarded by mu_: in deques and not yet reserved
  bool shutdown_ = false;            // guarded by mu_: set once by the destructor
  std::exception_ptr error_;         // guarded by mu_: first exception since the last Wait()
};

}  // namespace borgcheck::pool
