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
// Thread contract: Submit, RequestStop, stop_requested and Wait are safe for concurrent use
// (Wait from any one non-worker thread at a time). Tasks receive the index of the worker that
// runs them (0..size()-1), so callers can keep per-worker state in a vector indexed by it
// without locking: a worker runs one task at a time.
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

  explicit WorkStealingPool(size_t threads);  // threads >= 1
  ~WorkStealingPool();                         // requests stop, joins every worker
  WorkStealingPool(const WorkStealingPool&) = delete;
  WorkStealingPool& operator=(const WorkStealingPool&) = delete;

  // Queues a task. From inside a task it goes to the calling worker's own deque; from
  // outside, round-robin. After RequestStop() tasks are dropped (not run).
  void Submit(Task task);

  // Blocks until every submitted task has finished or been dropped. Rethrows the first
  // exception a task threw (once).
  void Wait();

  // Fatal stop: queued tasks are dropped, running ones finish, Wait() returns.
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

  std::vector<std::unique_ptr<Worker>> workers_;  // const after construction
  std::vector<std::thread> threads_;              // const after construction

  // own synchronisation
  std::atomic<bool> stop_{false};
  std::atomic<bool> shutdown_{false};
  std::atomic<size_t> next_{0};
  std::atomic<size_t> steals_{0};

  std::mutex mu_;                  // guards pending_, error_, and the sleep/wake protocol
  std::condition_variable work_cv_;  // workers wait here for work
  std::condition_variable done_cv_;  // Wait() waits here for pending_ == 0
  size_t pending_ = 0;             // guarded by mu_
  size_t queued_ = 0;              // guarded by mu_: tasks sitting in deques
  std::exception_ptr error_;       // guarded by mu_
};

}  // namespace borgcheck::pool
