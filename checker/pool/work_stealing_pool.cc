// The work-stealing pool: see work_stealing_pool.h for the design and the sleep/wake protocol.
#include "checker/pool/work_stealing_pool.h"

#include <utility>

namespace borgcheck::pool {

namespace {

// Which pool and worker the current thread belongs to, so that Submit() from inside a task
// goes to the calling worker's own deque. Written once by each worker thread, read only by it.
thread_local const WorkStealingPool* tls_pool = nullptr;
thread_local size_t tls_index = 0;

}  // namespace

// One worker's deque. Its owner pushes and pops at the back; thieves take from the front;
// outside Submit() pushes at the back. Every access holds mu.
struct alignas(64) WorkStealingPool::Worker {
  std::mutex mu;
  std::deque<Task> tasks;  // guarded by mu
};

WorkStealingPool::WorkStealingPool(size_t threads) {
  if (threads == 0) threads = 1;
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>());
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this, i] { Run(i); });
}

WorkStealingPool::~WorkStealingPool() {
  // Queued tasks are dropped by the workers as they drain the deques; each worker leaves
  // once nothing is queued any more.
  stop_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkStealingPool::Submit(Task task) {
  if (!task || stop_requested()) return;  // dropped: never counted
  const size_t n = workers_.size();
  size_t target;
  if (tls_pool == this) {
    target = tls_index;
  } else {
    target = next_.fetch_add(1, std::memory_order_relaxed) % n;
  }
  {
    std::lock_guard<std::mutex> lock(workers_[target]->mu);
    workers_[target]->tasks.push_back(std::move(task));
  }
  // Only now may a worker reserve it (see the header): count it and wake one sleeper.
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++pending_;
    ++queued_;
  }
  work_cv_.notify_one();
}

void WorkStealingPool::Wait() {
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void WorkStealingPool::RequestStop() {
  // Nothing to wake: a worker only sleeps when nothing is queued, and the ones that are
  // awake drop what they take from now on.
  stop_.store(true, std::memory_order_release);
}

// Own deque from the back first, then the others' fronts in turn starting after our own.
bool WorkStealingPool::TryPop(size_t index, Task& out) {
  {
    Worker& own = *workers_[index];
    std::lock_guard<std::mutex> lock(own.mu);
    if (!own.tasks.empty()) {
      out = std::move(own.tasks.back());
      own.tasks.pop_back();
      return true;
    }
  }
  const size_t n = workers_.size();
  for (size_t k = 1; k < n; ++k) {
    Worker& victim = *workers_[(index + k) % n];
    std::lock_guard<std::mutex> lock(victim.mu);
    if (!victim.tasks.empty()) {
      out = std::move(victim.tasks.front());
      victim.tasks.pop_front();
      steals_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

void WorkStealingPool::FinishOne() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--pending_ == 0) done_cv_.notify_all();  // under mu_: Wait() may destroy us right after
}

void WorkStealingPool::Run(size_t index) {
  tls_pool = this;
  tls_index = index;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return queued_ > 0 || shutdown_; });
      if (queued_ == 0) return;  // shutdown_ and nothing left to drain
      --queued_;                 // our reservation: one task in some deque is ours to pop
    }
    Task task;
    // The reserved task is in a deque already; a failed scan only means other reservation
    // holders took the ones we saw, so another one is there (transient, hence just yield).
    while (!TryPop(index, task)) std::this_thread::yield();

    if (!stop_requested()) {
      try {
        task(index);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    task = nullptr;  // captures die before the task counts as finished
    FinishOne();
  }
}

}  // namespace borgcheck::pool
