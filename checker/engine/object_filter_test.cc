#include "checker/engine/object_filter.h"

#include <random>
#include <set>

#include <catch2/catch.hpp>

namespace borgcheck::engine {
namespace {

using ChunkId = ObjectFilter::ChunkId;

std::vector<ChunkId> RandomIds(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<ChunkId> ids(n);
  for (ChunkId& id : ids) {
    for (uint8_t& b : id) b = uint8_t(rng());
  }
  return ids;
}

ChunkId WithPrefix(uint64_t x) {
  ChunkId id{};
  for (int i = 0; i < 8; ++i) id[size_t(i)] = uint8_t(x >> (56 - 8 * i));
  id[31] = 1;  // not the manifest
  return id;
}

TEST_CASE("a new filter wants every object") {
  ObjectFilter f;
  CHECK(f.WantsAll());
  for (const ChunkId& id : RandomIds(100, 1)) CHECK(f.Wants(id));
  CHECK(f.Describe().empty());
}

TEST_CASE("slices k/t for k = 1..t partition the ids: pairwise disjoint and together all of them") {
  const std::vector<ChunkId> ids = RandomIds(20000, 2);
  for (uint32_t t : {2u, 7u, 28u, 29u, 30u, 31u}) {
    std::vector<ObjectFilter> slices(t);
    for (uint32_t k = 1; k <= t; ++k) {
      slices[k - 1].SetSlice(k, t);
      CHECK_FALSE(slices[k - 1].WantsAll());
    }
    std::vector<size_t> per_slice(t, 0);
    size_t not_exactly_once = 0, wrong_slice = 0;
    for (const ChunkId& id : ids) {
      int hits = 0;
      for (uint32_t k = 1; k <= t; ++k) {
        if (slices[k - 1].Wants(id)) {
          ++hits;
          per_slice[k - 1]++;
          wrong_slice += ObjectFilter::SliceOf(id, t) != k;
        }
      }
      not_exactly_once += hits != 1;
    }
    CHECK(not_exactly_once == 0);
    CHECK(wrong_slice == 0);
    // Uniform ids: each slice holds about 1/t of them (binomial; 5 sigma is far inside 40%).
    for (size_t n : per_slice) {
      CHECK(double(n) > 0.6 * double(ids.size()) / t);
      CHECK(double(n) < 1.4 * double(ids.size()) / t);
    }
  }
}

TEST_CASE("slice boundaries are exact ranges of the 64-bit prefix") {
  // t = 7: slice 1 is [0, ceil(2^64/7)), slice 7 ends at 2^64 - 1.
  const uint64_t b = uint64_t((static_cast<unsigned __int128>(1) << 64) / 7);  // floor(2^64/7)
  CHECK(ObjectFilter::SliceOf(WithPrefix(0), 7) == 1);
  CHECK(ObjectFilter::SliceOf(WithPrefix(b), 7) == 1);      // b * 7 < 2^64
  CHECK(ObjectFilter::SliceOf(WithPrefix(b + 1), 7) == 2);  // (b + 1) * 7 >= 2^64
  CHECK(ObjectFilter::SliceOf(WithPrefix(~0ull), 7) == 7);
  CHECK(ObjectFilter::SliceOf(WithPrefix(~0ull), 1) == 1);
}

TEST_CASE("the manifest is always wanted") {
  const ChunkId manifest{};
  ChunkId last = WithPrefix(~0ull);
  ObjectFilter f;
  f.SetSlice(7, 7);
  CHECK(f.Wants(manifest));  // prefix 0 is slice 1, but the manifest is in every slice
  CHECK(f.Wants(last));
  f.SetSample(1e-9, 5);
  f.SetWantedIds({last});
  CHECK(f.Wants(manifest));
}

TEST_CASE("a sample is seeded: the same seed picks the same objects and about the fraction of them") {
  const std::vector<ChunkId> ids = RandomIds(20000, 3);
  ObjectFilter a, b, c;
  a.SetSample(0.05, 42);
  b.SetSample(0.05, 42);
  c.SetSample(0.05, 43);
  size_t picked = 0, same_as_other_seed = 0;
  size_t differ = 0;
  for (const ChunkId& id : ids) {
    differ += a.Wants(id) != b.Wants(id);
    picked += a.Wants(id);
    same_as_other_seed += a.Wants(id) && c.Wants(id);
  }
  CHECK(differ == 0);
  CHECK(picked > 800);   // expected 1000, sigma ~31
  CHECK(picked < 1200);
  CHECK(same_as_other_seed < 150);  // independent seeds overlap by ~5% of 1000
  CHECK(a.sample_seed() == 42u);
  CHECK(a.Describe() == "sample 5% (seed 42)");
  ObjectFilter all;
  all.SetSample(1.0, 7);
  CHECK(all.WantsAll());
}

TEST_CASE("parts combine with AND") {
  const std::vector<ChunkId> ids = RandomIds(5000, 4);
  std::vector<ChunkId> half(ids.begin(), ids.begin() + 2500);
  ObjectFilter f;
  f.SetSlice(2, 3);
  f.SetWantedIds(half);
  CHECK(f.Describe() == "slice 2/3 and 2500 selected ids");
  const std::set<ChunkId> in_half(half.begin(), half.end());
  size_t wrong = 0, wanted = 0;
  for (const ChunkId& id : ids) {
    wrong += f.Wants(id) != (in_half.count(id) && ObjectFilter::SliceOf(id, 3) == 2);
    wanted += f.Wants(id);
  }
  CHECK(wrong == 0);
  CHECK(wanted > 600);  // about 2500 / 3
  ObjectFilter only_ids;
  only_ids.SetWantedIds({});
  CHECK_FALSE(only_ids.WantsAll());
  CHECK_FALSE(only_ids.Wants(ids[0]));
}

}  // namespace
}  // namespace borgcheck::engine
