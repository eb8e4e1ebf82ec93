// The pool driven the way checker/run/check_run.cc drives it, with the run's own helpers:
// one reader thread (here the test's main thread) takes room from a run::ByteBudget for
// each block it reads, cuts the block into batches that share it through a shared_ptr, and
// submits them; the last batch of a block to finish destroys it on a worker thread, which
// gives its bytes back to the budget the reader is blocked on. Workers keep counters in a
// vector indexed by their worker index (no locking) and hand findings to one
// report::FindingSink; the main thread sums after Wait(). checker/pool/work_stealing_pool_test.cc
// covers the pool alone; this covers the hand-offs between the pool, the budget and the sink.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <vector>

#include "checker/pool/work_stealing_pool.h"
#include "checker/report/finding.h"
#include "checker/run/byte_budget.h"

namespace borgcheck::concurrency_test {
namespace {

// A window of a "segment": the reader writes it before sharing it, workers only read it.
struct Block {
  std::vector<uint8_t> data;
  run::ByteBudget* budget = nullptr;
  std::atomic<uint64_t>* in_flight = nullptr;  // what the test believes is in flight
  std::atomic<uint64_t>* blocks_alive = nullptr;
  ~Block() {
    in_flight->fetch_sub(data.size());
    blocks_alive->fetch_sub(1);
    budget->Release(data.size());
  }
};

struct Batch {
  std::shared_ptr<Block> block;
  size_t begin = 0, end = 0;  // byte range of the block this batch checks
  uint32_t block_number = 0;
};

// Per-worker state: element i is touched only by worker i while the pool runs.
struct WorkerTotals {
  uint64_t bytes = 0;
  uint64_t sum = 0;
  uint64_t batches = 0;
};

struct Run {
  uint64_t bytes = 0, sum = 0, batches = 0;
  std::vector<report::Finding> findings;
  uint64_t max_in_flight = 0;
};

// Reads `blocks` blocks of `block_size` bytes through a budget of `budget_blocks` blocks on
// `threads` workers. Every byte that is 0xff is reported as a finding at its (block, offset).
Run ReadAndVerify(size_t threads, uint32_t blocks, size_t block_size, size_t budget_blocks,
                  size_t batches_per_block) {
  run::ByteBudget budget(uint64_t(block_size) * budget_blocks);
  std::atomic<uint64_t> in_flight{0}, max_in_flight{0}, blocks_alive{0};
  report::FindingSink sink;
  std::vector<WorkerTotals> totals(threads);
  {
    pool::WorkStealingPool pool(threads);
    for (uint32_t b = 0; b < blocks; ++b) {
      budget.Acquire(block_size);  // blocks while budget_blocks blocks are still alive
      const uint64_t now = in_flight.fetch_add(block_size) + block_size;
      uint64_t seen = max_in_flight.load();
      while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
      }
      auto block = std::make_shared<Block>();
      blocks_alive.fetch_add(1);
      block->budget = &budget;
      block->in_flight = &in_flight;
      block->blocks_alive = &blocks_alive;
      block->data.resize(block_size);
      for (size_t i = 0; i < block_size; ++i) block->data[i] = uint8_t((b * 131 + i * 7) % 255);
      if (b % 5 == 0) block->data[(b * 977) % block_size] = 0xff;  // one "bad object"
      const size_t step = block_size / batches_per_block;
      for (size_t k = 0; k < batches_per_block; ++k) {
        auto batch = std::make_shared<Batch>();
        batch->block = block;
        batch->begin = k * step;
        batch->end = k + 1 == batches_per_block ? block_size : (k + 1) * step;
        batch->block_number = b;
        pool.Submit([&, batch](size_t worker) {
          WorkerTotals& t = totals[worker];
          for (size_t i = batch->begin; i < batch->end; ++i) {
            const uint8_t v = batch->block->data[i];
            t.sum += v;
            if (v == 0xff) {
              report::Finding f;
              f.stage = report::Stage::kIdHash;
              f.segment = batch->block_number;
              f.offset = i;
              f.message = "bad byte";
              sink.Add(std::move(f));
            }
          }
          t.bytes += batch->end - batch->begin;
          t.batches++;
        });
      }
      block.reset();  // the batches hold it now; the last one to finish frees it
    }
    pool.Wait();
    // Wait() returns only after every task's captures were destroyed: all blocks are gone.
    CHECK(blocks_alive.load() == 0);
    CHECK(in_flight.load() == 0);
  }
  Run r;
  for (const WorkerTotals& t : totals) {
    r.bytes += t.bytes;
    r.sum += t.sum;
    r.batches += t.batches;
  }
  r.findings = sink.Sorted();
  r.max_in_flight = max_in_flight.load();
  return r;
}

TEST_CASE("reader, budget, shared blocks and per-worker totals as check_run uses them",
          "[concurrency][pool]") {
  constexpr uint32_t kBlocks = 400;
  constexpr size_t kBlockSize = 16 * 1024;
  const Run reference = ReadAndVerify(1, kBlocks, kBlockSize, 3, 4);
  REQUIRE(reference.bytes == uint64_t(kBlocks) * kBlockSize);
  REQUIRE(reference.batches == uint64_t(kBlocks) * 4);
  REQUIRE(reference.findings.size() == kBlocks / 5);
  for (size_t threads : {2, 8, 64}) {
    INFO("threads " << threads);
    const Run r = ReadAndVerify(threads, kBlocks, kBlockSize, 3, 4);
    CHECK(r.bytes == reference.bytes);
    CHECK(r.sum == reference.sum);
    CHECK(r.batches == reference.batches);
    // The budget bounds what is in flight, however many workers there are.
    CHECK(r.max_in_flight <= 3 * kBlockSize);
    REQUIRE(r.findings.size() == reference.findings.size());
    for (size_t i = 0; i < r.findings.size(); ++i) {
      CHECK(r.findings[i].segment == reference.findings[i].segment);
      CHECK(r.findings[i].offset == reference.findings[i].offset);
    }
  }
}

TEST_CASE("a throwing task as check_run handles it: RequestStop, Wait again, budget returned",
          "[concurrency][pool]") {
  // check_run.cc catches the exception Wait() rethrows, calls RequestStop() and Wait() again
  // and then destroys the pool; the blocks of dropped tasks must still return their bytes.
  run::ByteBudget budget(64 * 1024);
  std::atomic<uint64_t> in_flight{0}, blocks_alive{0};
  std::atomic<int> ran{0};
  bool caught = false;
  {
    pool::WorkStealingPool pool(8);
    try {
      for (uint32_t b = 0; b < 200; ++b) {
        budget.Acquire(4096);
        in_flight.fetch_add(4096);
        auto block = std::make_shared<Block>();
        blocks_alive.fetch_add(1);
        block->budget = &budget;
        block->in_flight = &in_flight;
        block->blocks_alive = &blocks_alive;
        block->data.resize(4096);
        pool.Submit([&, block, b](size_t) {
          ran.fetch_add(1);
          if (b == 17) throw std::runtime_error("internal error in a worker");
        });
      }
      pool.Wait();
    } catch (const std::runtime_error& e) {
      caught = true;
      CHECK(std::string(e.what()) == "internal error in a worker");
      pool.RequestStop();
      pool.Wait();
    }
  }
  CHECK(caught);
  CHECK(ran.load() >= 18);
  CHECK(blocks_alive.load() == 0);
  CHECK(in_flight.load() == 0);
  // Everything was given back: the whole budget can be taken at once without blocking.
  budget.Acquire(64 * 1024);
  budget.Release(64 * 1024);
}

}  // namespace
}  // namespace borgcheck::concurrency_test
