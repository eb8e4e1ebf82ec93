// The walker on several threads: WalkArchive runs concurrently for any archives (its memo,
// carry table and item_ptrs cache have their own locks, archive_walker.h) and the results are
// those of a sequential walk, whatever the schedule. Labelled "concurrency" for ci/tsan.
#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "checker/archive/archive_walker.h"
#include "checker/archive/walker_test_util.h"

namespace borgcheck::archive {
namespace {

using namespace testing::walker;

TEST_CASE("walks on several threads give the results of a sequential walk") {
  MemoryRepo repo;
  std::vector<Built> archives;
  for (int i = 0; i < 16; ++i) {
    std::vector<TestItem> items = ManyFiles(120);
    if (i % 3 == 1) items[40 + i].chunks[0].first = TestId(uint32_t(7000 + i));  // diverge mid-stream
    if (i % 4 == 2) items.push_back(File("extra-" + std::to_string(i), {{TestId(8000), 3}}));
    const size_t size = PackItems(items, Generation::kBorg1).size();
    archives.push_back(BuildArchive(repo, Generation::kBorg1, "a" + std::to_string(i), items, EveryNBytes(size, 700)));
  }
  repo.Forget(TestId(8000));
  repo.Forget(TestId(7004));
  repo.Forget(TestId(60));
  repo.Remove(archives[9].stream_chunks[2]);
  std::vector<std::string> sequential;
  {
    ArchiveWalker w(repo, repo, Options(Generation::kBorg1));
    for (uint32_t i = 0; i < archives.size(); ++i) sequential.push_back(Summary(w.WalkArchive(i, archives[i].ref)));
  }
  for (int round = 0; round < 3; ++round) {
    ArchiveWalker w(repo, repo, Options(Generation::kBorg1));
    std::vector<std::string> parallel(archives.size());
    std::atomic<uint32_t> next{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (uint32_t i = next++; i < archives.size(); i = next++) parallel[i] = Summary(w.WalkArchive(i, archives[i].ref));
      });
    }
    for (auto& t : threads) t.join();
    CHECK(parallel == sequential);
  }
}

}  // namespace
}  // namespace borgcheck::archive
