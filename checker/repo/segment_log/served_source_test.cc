// The batches of a served repository (served_source.h): where they are cut, and that a later
// run, after the repository changed, cuts the same batches around the change (their names and
// identities are what a partial run's state recognises).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include <xxhash.h>

#include "checker/repo/segment_log/served_source.h"

namespace borgcheck::repo {
namespace {

// Ids as a keyed hash gives them: uniform bytes (splitmix64 of the id's number).
ChunkId IdOf(uint64_t n) {
  ChunkId id{};
  uint64_t x = n * 4 + 1;
  for (size_t i = 0; i < id.size(); i += 8) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    for (size_t b = 0; b < 8; ++b) id[i + b] = uint8_t(z >> (8 * b));
  }
  return id;
}

std::vector<ChunkId> Ids(uint64_t from, uint64_t to) {
  std::vector<ChunkId> out;
  for (uint64_t n = from; n < to; ++n) out.push_back(IdOf(n));
  return out;
}

// Each batch as a state sees it: its first id -> (object count, digest).
std::map<ChunkId, std::tuple<uint64_t, uint64_t>> Batches(const std::vector<ChunkId>& order, size_t scanned,
                                                          size_t mean) {
  std::vector<size_t> starts = CutServedBatches(order, scanned, mean);
  starts.push_back(order.size());
  std::map<ChunkId, std::tuple<uint64_t, uint64_t>> out;
  for (size_t u = 0; u + 1 < starts.size(); ++u) {
    const io::FileStat st = ServedBatchIdentity(order.data() + starts[u], starts[u + 1] - starts[u]);
    out[order[starts[u]]] = {st.size, st.inode};
  }
  return out;
}

size_t Common(const std::map<ChunkId, std::tuple<uint64_t, uint64_t>>& a,
              const std::map<ChunkId, std::tuple<uint64_t, uint64_t>>& b) {
  size_t n = 0;
  for (const auto& [id, identity] : a) {
    auto it = b.find(id);
    if (it != b.end() && it->second == identity) ++n;
  }
  return n;
}

TEST_CASE("served batches: cut on average every `mean` ids, never longer than the limit", "[served]") {
  const std::vector<ChunkId> order = Ids(0, 200000);
  const size_t mean = 64;
  const std::vector<size_t> starts = CutServedBatches(order, order.size(), mean);
  REQUIRE(!starts.empty());
  CHECK(starts.front() == 0);
  CHECK(std::is_sorted(starts.begin(), starts.end()));
  size_t longest = 0;
  for (size_t u = 0; u < starts.size(); ++u) {
    const size_t end = u + 1 < starts.size() ? starts[u + 1] : order.size();
    CHECK(end > starts[u]);
    longest = std::max(longest, end - starts[u]);
  }
  CHECK(longest <= mean * kServedUnitMaxFactor);
  const double average = double(order.size()) / double(starts.size());
  CHECK(average > mean * 0.85);
  CHECK(average < mean * 1.05);  // the size limit shortens a few
  CHECK(CutServedBatches({}, 0, mean).empty());
}

TEST_CASE("served batches: the scan's part and the rest are cut apart", "[served]") {
  const std::vector<ChunkId> order = Ids(0, 1000);
  for (size_t scanned : {size_t{0}, size_t{1}, size_t{377}, size_t{999}, size_t{1000}}) {
    const std::vector<size_t> starts = CutServedBatches(order, scanned, 4096);
    const bool split = scanned > 0 && scanned < order.size();
    CHECK(std::count(starts.begin(), starts.end(), scanned) == (split ? 1 : scanned == 0 ? 1 : 0));
  }
}

TEST_CASE("served batches: ids that offer no cut are cut at the size limit", "[served]") {
  std::vector<ChunkId> order = Ids(0, 1000);
  for (ChunkId& id : order) id[0] = 0xff;  // never below 2^32 / mean
  const std::vector<size_t> starts = CutServedBatches(order, order.size(), 16);
  REQUIRE(starts.size() == (1000 + 63) / 64);
  for (size_t u = 0; u < starts.size(); ++u) CHECK(starts[u] == u * 64);
}

TEST_CASE("served batches: a later run cuts the same batches around what changed", "[served]") {
  const size_t mean = 64;
  const std::vector<ChunkId> before = Ids(0, 20000);
  const auto old_batches = Batches(before, before.size(), mean);

  // A new backup: new ids after the old ones. Only the last old batch can change (it now ends
  // at its next cut, past the old end).
  std::vector<ChunkId> grown = before;
  for (const ChunkId& id : Ids(20000, 21000)) grown.push_back(id);
  CHECK(Common(old_batches, Batches(grown, grown.size(), mean)) >= old_batches.size() - 1);

  // A compacted segment: 300 ids in the middle are gone. The batches holding them and the one
  // before change (its cut may have been among them); all others stay.
  std::vector<ChunkId> compacted = before;
  compacted.erase(compacted.begin() + 9000, compacted.begin() + 9300);
  const size_t touched = 300 / mean + 3;
  CHECK(Common(old_batches, Batches(compacted, compacted.size(), mean)) >= old_batches.size() - touched);

  // The same ids in another order inside a batch: same name and count, another digest.
  std::vector<ChunkId> swapped = before;
  std::swap(swapped[1], swapped[2]);
  const auto now = Batches(swapped, swapped.size(), mean);
  CHECK(Common(old_batches, now) == old_batches.size() - 1);
  CHECK(std::get<0>(now.at(before[0])) == std::get<0>(old_batches.at(before[0])));
}

TEST_CASE("served batches: the identity counts the ids and hashes them in order", "[served]") {
  const std::vector<ChunkId> ids = Ids(0, 10);
  const io::FileStat a = ServedBatchIdentity(ids.data(), ids.size());
  CHECK(a.type == io::EntryType::kRegular);
  CHECK(a.size == 10);
  CHECK(a.mtime_ns == 0);
  CHECK(a.ctime_ns == 0);
  CHECK(a.inode == ServedBatchIdentity(ids.data(), ids.size()).inode);
  CHECK(a.inode != ServedBatchIdentity(ids.data(), 9).inode);
  CHECK(a.inode != ServedBatchIdentity(ids.data() + 1, 9).inode);
  // The digest is XXH3-64 over the ids' bytes in order, as the states written since the served
  // state began hold it (computed here id by id, as it was then).
  XXH3_state_t* h = XXH3_createState();
  REQUIRE(h != nullptr);
  REQUIRE(XXH3_64bits_reset(h) == XXH_OK);
  for (const ChunkId& id : ids) XXH3_64bits_update(h, id.data(), id.size());
  CHECK(a.inode == XXH3_64bits_digest(h));
  XXH3_freeState(h);
  CHECK(ServedBatchIdentity(ids.data(), 0).inode == XXH3_64bits(nullptr, 0));
}

}  // namespace
}  // namespace borgcheck::repo
