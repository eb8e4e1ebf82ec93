#include "checker/schedule/shard_split.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>

namespace borgcheck::schedule {
namespace {

// Units of a repository-like size mix: mostly ~500 MB segments, a short last one, a few empty
// (missing) ones and some small packs.
std::vector<uint64_t> SomeUnits(size_t count) {
  std::vector<uint64_t> b;
  uint64_t x = 12345;
  for (size_t i = 0; i < count; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    if (i % 17 == 5) b.push_back(0);
    else if (i % 5 == 0) b.push_back(1000 + (x >> 50));
    else b.push_back(500'000'000 + (x >> 40));
  }
  return b;
}

void CheckSplit(const std::vector<uint64_t>& bytes, uint32_t n) {
  INFO("units " << bytes.size() << ", shards " << n);
  std::vector<int> seen(bytes.size(), 0);
  uint64_t max_load = 0, max_unit = 0, total = 0;
  for (uint64_t b : bytes) {
    max_unit = std::max(max_unit, b);
    total += b;
  }
  for (uint32_t k = 1; k <= n; ++k) {
    const std::vector<size_t> mine = UnitsOfShard(bytes, k, n);
    REQUIRE(std::is_sorted(mine.begin(), mine.end()));  // plan order
    uint64_t load = 0;
    for (size_t u : mine) {
      REQUIRE(u < bytes.size());
      seen[u]++;
      load += bytes[u];
    }
    max_load = std::max(max_load, load);
  }
  // Every unit in exactly one shard.
  for (size_t u = 0; u < bytes.size(); ++u) {
    INFO("unit " << u);
    REQUIRE(seen[u] == 1);
  }
  // Balanced: no shard more than the largest unit above the mean.
  REQUIRE(max_load <= total / n + max_unit);
  // Deterministic.
  REQUIRE(SplitIntoShards(bytes, n) == SplitIntoShards(bytes, n));
}

TEST_CASE("every unit is in exactly one shard, balanced by bytes", "[shard]") {
  for (size_t units : {0, 1, 2, 5, 40, 1000}) {
    for (uint32_t n : {1u, 2u, 3u, 7u, 64u}) CheckSplit(SomeUnits(units), n);
  }
}

TEST_CASE("more shards than units: every unit once, the other shards empty", "[shard]") {
  const std::vector<uint64_t> bytes = {10, 0, 30};
  CheckSplit(bytes, 7);
  size_t empty = 0;
  for (uint32_t k = 1; k <= 7; ++k) empty += UnitsOfShard(bytes, k, 7).empty();
  REQUIRE(empty == 4);
}

TEST_CASE("the split of equal units is round-robin by size order, plan order on ties", "[shard]") {
  const std::vector<uint64_t> bytes = {5, 5, 5, 5, 9};
  // unit 4 (9 bytes) -> shard 0; unit 0 -> shard 1 (0 < 9); unit 1 -> shard 1 (5 < 9); unit 2 -> shard 0
  // (9 < 10); unit 3 -> shard 1 (10 < 14).
  const std::vector<uint32_t> s = SplitIntoShards(bytes, 2);
  REQUIRE(s == std::vector<uint32_t>{1, 1, 0, 1, 0});
}

TEST_CASE("units of 0 bytes are spread by count", "[shard]") {
  const std::vector<uint64_t> bytes(6, 0);
  const std::vector<uint32_t> s = SplitIntoShards(bytes, 3);
  REQUIRE(s == std::vector<uint32_t>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("shard K/N (--shard) is parsed strictly", "[shard]") {
  uint32_t k = 0, n = 0;
  REQUIRE(ParseShard("3/8", k, n).ok());
  REQUIRE((k == 3 && n == 8));
  REQUIRE(ParseShard("1/1", k, n).ok());
  for (const char* bad : {"", "3", "0/3", "4/3", "3/", "/3", "a/3", "3/b", "-1/3", "3/8x", " 3/8", "1/100001", "3//8"}) {
    INFO(bad);
    REQUIRE_FALSE(ParseShard(bad, k, n).ok());
  }
}

}  // namespace
}  // namespace borgcheck::schedule
