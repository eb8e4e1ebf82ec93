// Tests for the work-stealing pool. They are labelled "concurrency" and also run under
// ThreadSanitizer, so every cross-thread observation goes through atomics or the pool's own
// Wait(). Catch2 v2 assertions are not thread-safe: tasks only record into atomics, and the
// test thread checks them after Wait(). A watchdog turns a hang into a failing abort.
#include "checker/pool/work_stealing_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

namespace borgcheck::pool {
namespace {

using namespace std::chrono_literals;

// Aborts the process (a test failure, not a hang) if it is still alive after `limit`.
class Watchdog {
 public:
  Watchdog(const char* what, std::chrono::seconds limit = 120s)
      : thread_([this, what, limit] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: '%s' still running after %lld s: hung\n", what,
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;  // last: starts after the members above exist
};

TEST_CASE("many tiny tasks each run exactly once", "[pool][concurrency]") {
  Watchdog dog("many tiny tasks");
  constexpr size_t kTasks = 200'000;
  std::vector<std::atomic<unsigned>> runs(kTasks);
  WorkStealingPool pool(4);
  for (size_t i = 0; i < kTasks; ++i) {
    pool.Submit([&runs, i](size_t) { runs[i].fetch_add(1, std::memory_order_relaxed); });
  }
  pool.Wait();
  size_t wrong = 0;
  for (size_t i = 0; i < kTasks; ++i) wrong += runs[i].load(std::memory_order_relaxed) != 1;
  CHECK(wrong == 0);
}

TEST_CASE("submitting from several outside threads", "[pool][concurrency]") {
  Watchdog dog("outside submitters");
  constexpr size_t kPerThread = 20'000;
  constexpr size_t kSubmitters = 3;
  std::vector<std::atomic<unsigned>> runs(kPerThread * kSubmitters);
  WorkStealingPool pool(3);
  std::vector<std::thread> submitters;
  for (size_t s = 0; s < kSubmitters; ++s) {
    submitters.emplace_back([&, s] {
      for (size_t i = 0; i < kPerThread; ++i) {
        const size_t id = s * kPerThread + i;
        pool.Submit([&runs, id](size_t) { runs[id].fetch_add(1, std::memory_order_relaxed); });
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  pool.Wait();
  size_t wrong = 0;
  for (const auto& r : runs) wrong += r.load(std::memory_order_relaxed) != 1;
  CHECK(wrong == 0);
}

TEST_CASE("nested submission: Wait covers the whole tree", "[pool][concurrency]") {
  Watchdog dog("nested submission");
  for (size_t threads : {1, 2, 4}) {
    CAPTURE(threads);
    WorkStealingPool pool(threads);
    std::atomic<size_t> leaves{0};
    std::atomic<size_t> inner{0};
    // A binary tree of depth 12 plus a fan-out layer: 2^12 leaves.
    std::function<void(size_t, int)> node = [&](size_t, int depth) {
      if (depth == 0) {
        leaves.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      inner.fetch_add(1, std::memory_order_relaxed);
      for (int child = 0; child < 2; ++child) {
        pool.Submit([&node, depth](size_t w) { node(w, depth - 1); });
      }
    };
    pool.Submit([&node](size_t w) { node(w, 12); });
    pool.Wait();
    CHECK(leaves.load() == (size_t{1} << 12));
    CHECK(inner.load() == (size_t{1} << 12) - 1);

    // Fan-out from outside, each task adding 50 children that each add one grandchild.
    std::atomic<size_t> grandchildren{0};
    for (int i = 0; i < 40; ++i) {
      pool.Submit([&](size_t) {
        for (int c = 0; c < 50; ++c) {
          pool.Submit([&](size_t) {
            pool.Submit([&](size_t) { grandchildren.fetch_add(1, std::memory_order_relaxed); });
          });
        }
      });
    }
    pool.Wait();
    CHECK(grandchildren.load() == 40u * 50u);
  }
}

TEST_CASE("lost wake-up stress: a long chain of one task at a time", "[pool][concurrency]") {
  // Only one task exists at any moment, so every other worker keeps going to sleep and being
  // woken; a lost wake-up (or a Wait() that misses the end) shows up as a hang.
  Watchdog dog("wake-up chain");
  for (size_t threads : {2, 4}) {
    CAPTURE(threads);
    WorkStealingPool pool(threads);
    std::atomic<size_t> links{0};
    std::function<void(size_t)> link = [&](size_t) {
      if (links.fetch_add(1, std::memory_order_relaxed) + 1 < 20'000) pool.Submit(link);
    };
    for (int round = 0; round < 3; ++round) {
      links.store(0);
      pool.Submit(link);
      pool.Wait();
      CHECK(links.load() == 20'000);
    }
  }
}

TEST_CASE("idle workers steal from a busy worker's deque", "[pool][concurrency]") {
  Watchdog dog("stealing");
  WorkStealingPool pool(4);
  REQUIRE(pool.size() == 4);
  std::atomic<size_t> ran{0};
  std::vector<std::atomic<size_t>> ran_on(pool.size());
  // One task puts all the work into its own worker's deque; the others can only get it by
  // stealing.
  pool.Submit([&](size_t) {
    for (int i = 0; i < 200; ++i) {
      pool.Submit([&](size_t w) {
        std::this_thread::sleep_for(200us);
        ran_on[w].fetch_add(1, std::memory_order_relaxed);
        ran.fetch_add(1, std::memory_order_relaxed);
      });
    }
  });
  pool.Wait();
  CHECK(ran.load() == 200);
  CHECK(pool.steals() > 0);
  size_t workers_used = 0;
  for (const auto& r : ran_on) workers_used += r.load() > 0;
  CHECK(workers_used >= 2);
}

TEST_CASE("worker_index is in range and a worker runs one task at a time",
          "[pool][concurrency]") {
  Watchdog dog("worker index");
  for (size_t threads : {1, 2, 5}) {
    CAPTURE(threads);
    WorkStealingPool pool(threads);
    std::vector<std::atomic<bool>> in_use(threads);
    std::atomic<size_t> out_of_range{0};
    std::atomic<size_t> overlaps{0};
    std::atomic<size_t> ran{0};
    auto body = [&](size_t w) {
      if (w >= pool.size()) {
        out_of_range.fetch_add(1);
        return;
      }
      if (in_use[w].exchange(true)) overlaps.fetch_add(1);
      for (int spin = 0; spin < 50; ++spin) ran.fetch_add(0, std::memory_order_relaxed);
      ran.fetch_add(1, std::memory_order_relaxed);
      in_use[w].store(false);
    };
    for (int i = 0; i < 5'000; ++i) {
      pool.Submit([&, i](size_t w) {
        body(w);
        if (i % 10 == 0) pool.Submit(body);  // nested ones too
      });
    }
    pool.Wait();
    CHECK(out_of_range.load() == 0);
    CHECK(overlaps.load() == 0);
    CHECK(ran.load() == 5'000 + 500);
  }
}

TEST_CASE("RequestStop in the middle of a big batch", "[pool][concurrency]") {
  Watchdog dog("request stop");
  constexpr size_t kTasks = 100'000;
  WorkStealingPool pool(2);
  std::atomic<size_t> ran{0};
  for (size_t i = 0; i < kTasks; ++i) {
    pool.Submit([&](size_t) {
      if (ran.fetch_add(1) + 1 == 1'000) pool.RequestStop();
    });
  }
  pool.Wait();
  const size_t after_wait = ran.load();
  CHECK(pool.stop_requested());
  CHECK(after_wait >= 1'000);
  CHECK(after_wait < kTasks);

  // A stopped pool drops new work, and Wait still returns.
  pool.Submit([&](size_t) { ran.fetch_add(1); });
  pool.Wait();
  CHECK(ran.load() == after_wait);
}

TEST_CASE("RequestStop from outside while long tasks poll it", "[pool][concurrency]") {
  Watchdog dog("outside stop");
  WorkStealingPool pool(2);
  std::atomic<size_t> started{0};
  std::atomic<size_t> finished{0};
  for (int i = 0; i < 1'000; ++i) {
    pool.Submit([&](size_t) {
      started.fetch_add(1);
      while (!pool.stop_requested()) std::this_thread::yield();
      finished.fetch_add(1);
    });
  }
  while (started.load() < 2) std::this_thread::yield();  // both workers busy
  pool.RequestStop();
  pool.Wait();
  CHECK(started.load() == finished.load());
  CHECK(started.load() < 1'000);
}

TEST_CASE("exceptions: Wait rethrows the first once, the pool stays usable",
          "[pool][concurrency]") {
  Watchdog dog("exceptions");
  SECTION("first exception is the one rethrown") {
    WorkStealingPool pool(1);
    pool.Submit([&](size_t) {
      pool.Submit([](size_t) { throw std::runtime_error("second"); });
      throw std::runtime_error("first");
    });
    std::string message;
    try {
      pool.Wait();
    } catch (const std::runtime_error& e) {
      message = e.what();
    }
    CHECK(message == "first");
    CHECK_NOTHROW(pool.Wait());  // only once
  }
  SECTION("many throwing tasks on many workers") {
    WorkStealingPool pool(4);
    std::atomic<size_t> ran{0};
    for (int i = 0; i < 2'000; ++i) {
      pool.Submit([&, i](size_t) {
        ran.fetch_add(1);
        if (i % 3 == 0) throw std::logic_error("task " + std::to_string(i));
      });
    }
    CHECK_THROWS_AS(pool.Wait(), std::logic_error);
    CHECK(ran.load() == 2'000);  // a throw does not stop the others
    CHECK_NOTHROW(pool.Wait());
    CHECK_FALSE(pool.stop_requested());

    for (int i = 0; i < 1'000; ++i) pool.Submit([&](size_t) { ran.fetch_add(1); });
    CHECK_NOTHROW(pool.Wait());
    CHECK(ran.load() == 3'000);

    pool.Submit([](size_t) { throw 42; });  // not derived from std::exception
    CHECK_THROWS_AS(pool.Wait(), int);
    CHECK_NOTHROW(pool.Wait());
  }
}

TEST_CASE("a one-thread pool works", "[pool][concurrency]") {
  Watchdog dog("one thread");
  WorkStealingPool pool(1);
  REQUIRE(pool.size() == 1);
  std::atomic<size_t> ran{0};
  std::atomic<size_t> nonzero_index{0};
  for (int i = 0; i < 1'000; ++i) {
    pool.Submit([&](size_t w) {
      nonzero_index.fetch_add(w != 0);
      ran.fetch_add(1);
      pool.Submit([&](size_t w2) {
        nonzero_index.fetch_add(w2 != 0);
        ran.fetch_add(1);
      });
    });
  }
  pool.Wait();
  CHECK(ran.load() == 2'000);
  CHECK(nonzero_index.load() == 0);
  CHECK(pool.steals() == 0);  // nobody to steal from
}

TEST_CASE("repeated Submit/Wait cycles never hang", "[pool][concurrency]") {
  Watchdog dog("repeated cycles");
  for (size_t threads : {2, 4}) {
    CAPTURE(threads);
    WorkStealingPool pool(threads);
    std::atomic<size_t> ran{0};
    size_t expected = 0;
    for (int round = 0; round < 1'000; ++round) {
      const int tasks = round % 5;  // includes rounds with nothing to do
      for (int t = 0; t < tasks; ++t) {
        pool.Submit([&, t](size_t) {
          ran.fetch_add(1, std::memory_order_relaxed);
          if (t == 0) pool.Submit([&](size_t) { ran.fetch_add(1, std::memory_order_relaxed); });
        });
      }
      expected += static_cast<size_t>(tasks) + (tasks > 0 ? 1 : 0);
      pool.Wait();
      if (ran.load(std::memory_order_relaxed) != expected) break;  // checked just below
    }
    CHECK(ran.load() == expected);
  }
}

TEST_CASE("the destructor joins with work still queued", "[pool][concurrency]") {
  Watchdog dog("destructor");
  SECTION("plain queued work; dropped tasks' captures are released") {
    auto token = std::make_shared<int>(0);
    std::atomic<size_t> ran{0};
    {
      WorkStealingPool pool(2);
      for (int i = 0; i < 20'000; ++i) {
        pool.Submit([&ran, token](size_t) {
          ran.fetch_add(1, std::memory_order_relaxed);
          std::this_thread::sleep_for(1us);
        });
      }
    }  // no Wait()
    CHECK(ran.load() <= 20'000);
    CHECK(token.use_count() == 1);
  }
  SECTION("tasks that keep resubmitting themselves") {
    std::atomic<size_t> ran{0};
    {
      // `forever` must outlive the pool's destructor, which still runs tasks that use it.
      // (Tasks use the raw pointer: unique_ptr::reset nulls itself before deleting.)
      auto owner = std::make_unique<WorkStealingPool>(3);
      WorkStealingPool* pool = owner.get();
      std::function<void(size_t)> forever = [&ran, &forever, pool](size_t) {
        ran.fetch_add(1, std::memory_order_relaxed);
        pool->Submit(forever);
        pool->Submit(forever);
      };
      pool->Submit(forever);
      while (ran.load() < 100) std::this_thread::yield();
      owner.reset();
    }
    CHECK(ran.load() >= 100);
  }
  SECTION("an idle pool, and one destroyed right after construction") {
    { WorkStealingPool pool(4); }
    WorkStealingPool pool(2);
    pool.Wait();
  }
}

}  // namespace
}  // namespace borgcheck::pool
