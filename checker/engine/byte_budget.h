// Bounds the bytes of segment data in flight between the reader and the workers, so memory
// does not grow with the repository or with a slow worker.
//
// Thread contract: safe for concurrent use (guarded by mu_). Acquire blocks on a condition
// variable, never polls.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace borgcheck::engine {

class ByteBudget {
 public:
  explicit ByteBudget(uint64_t limit) : limit_(limit) {}

  // Blocks until n more bytes fit. A request larger than the limit is granted when nothing
  // else is in flight (one oversized entry must not deadlock the run).
  void Acquire(uint64_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ == 0 || in_flight_ + n <= limit_; });
    in_flight_ += n;
  }
  void Release(uint64_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_ -= n;
    }
    cv_.notify_all();
  }

 private:
  const uint64_t limit_;       // const after construction
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t in_flight_ = 0;     // guarded by mu_
};

}  // namespace borgcheck::engine
