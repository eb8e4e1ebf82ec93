// Test-only: an in-memory repository for the walker (fetcher and chunk table in one), and
// builders that store borg-like archives in it (item stream cut at given offsets, borg 2
// item_ptrs, the archive object). Header-only; used by the walker tests.
//
// Thread contract: MemoryRepo is safe for concurrent use (one mutex); the builders are not.
#pragma once

#include <cstring>
#include <map>
#include <msgpack.hpp>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "checker/archive/archive_test_util.h"
#include "checker/archive/archive_walker.h"

namespace borgcheck::archive::testing::walker {

using testing::Dir;
using testing::File;
using testing::HexOf;
using testing::PackItem;
using testing::PackItems;
using testing::TestId;
using testing::TestItem;

// A content address for test objects (four FNV-1a lanes; only distinctness matters here).
inline ChunkId ContentId(std::string_view s) {
  ChunkId id{};
  for (int lane = 0; lane < 4; ++lane) {
    uint64_t h = 1469598103934665603ull ^ uint64_t(lane) * 0x9E3779B97F4A7C15ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h ^= s.size();
    std::memcpy(id.data() + 8 * lane, &h, 8);
  }
  return id;
}

// An in-memory repository: the fetcher and the chunk table of the walker.
class MemoryRepo : public ObjectFetcher, public ReferenceTable {
 public:
  ChunkId Put(const std::string& plaintext) {
    const ChunkId id = ContentId(plaintext);
    std::lock_guard<std::mutex> lock(mu_);
    objects_[id] = plaintext;
    return id;
  }
  void Remove(const ChunkId& id) {
    std::lock_guard<std::mutex> lock(mu_);
    objects_.erase(id);
  }
  void Damage(const ChunkId& id) {
    std::lock_guard<std::mutex> lock(mu_);
    damaged_.insert(id);
  }
  // A data chunk that is not stored: its references must be reported as missing.
  void Forget(const ChunkId& id) { Remove(id); }
  void AddData(const ChunkId& id) {
    std::lock_guard<std::mutex> lock(mu_);
    objects_[id] = "data";
  }

  FetchStatus Fetch(const ChunkId& id, ObjectKind, ByteBuffer& plaintext, FetchProblem& problem) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++fetches_[id];
    if (damaged_.count(id)) {
      problem.stage = report::Stage::kAuthentication;
      problem.message = "MAC Authentication failed";
      return FetchStatus::kDamaged;
    }
    auto it = objects_.find(id);
    if (it == objects_.end()) return FetchStatus::kMissing;
    plaintext.Assign(AsBytes(it->second));
    return FetchStatus::kOk;
  }

  RefState Reference(const ChunkId& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++marks_[id];
    if (!objects_.count(id)) return RefState::kMissing;
    return damaged_.count(id) ? RefState::kBad : RefState::kPresent;
  }

  std::map<ChunkId, int> marks() {
    std::lock_guard<std::mutex> lock(mu_);
    return marks_;
  }
  int fetches(const ChunkId& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return fetches_[id];
  }
  std::set<ChunkId> stored() {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<ChunkId> s;
    for (auto& [id, v] : objects_) s.insert(id);
    return s;
  }

 private:
  std::mutex mu_;
  std::map<ChunkId, std::string> objects_;
  std::set<ChunkId> damaged_;
  std::map<ChunkId, int> marks_;
  std::map<ChunkId, int> fetches_;
};

inline std::string PackArchive(Generation g, std::string_view name, const std::vector<ChunkId>& list) {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  auto str = [&](std::string_view s) {
    pk.pack_str(uint32_t(s.size()));
    pk.pack_str_body(s.data(), uint32_t(s.size()));
  };
  auto raw = [&](const void* p, size_t n) {
    if (g == Generation::kBorg1) {
      pk.pack_str(uint32_t(n));
      pk.pack_str_body(static_cast<const char*>(p), uint32_t(n));
    } else {
      pk.pack_bin(uint32_t(n));
      pk.pack_bin_body(static_cast<const char*>(p), uint32_t(n));
    }
  };
  pk.pack_map(4);
  str(g == Generation::kBorg1 ? "items" : "item_ptrs");
  pk.pack_array(uint32_t(list.size()));
  for (const ChunkId& id : list) raw(id.data(), 32);
  str("name");
  str(name);
  str("time");
  str("2026-12-01T00:00:00.000000");
  str("version");
  pk.pack_int(g == Generation::kBorg1 ? 1 : 2);
  return std::string(b.data(), b.size());
}

inline std::string PackIdList(const std::vector<ChunkId>& ids) {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  pk.pack_array(uint32_t(ids.size()));
  for (const ChunkId& id : ids) {
    pk.pack_bin(32);
    pk.pack_bin_body(reinterpret_cast<const char*>(id.data()), 32);
  }
  return std::string(b.data(), b.size());
}

struct Built {
  ManifestArchive ref;
  std::vector<ChunkId> stream_chunks;
  std::vector<ChunkId> item_ptrs;
  std::string stream;
};

// Stores an archive: its item stream cut at `cuts`, (borg 2) item_ptrs of `per_ptr` ids, the
// archive object. Data chunks referenced by the items are stored too unless `store_data` is
// false.
inline Built BuildArchive(MemoryRepo& repo, Generation g, const std::string& name, const std::vector<TestItem>& items,
                   const std::vector<size_t>& cuts, bool store_data = true, size_t per_ptr = 3) {
  Built b;
  b.stream = PackItems(items, g);
  size_t prev = 0;
  std::vector<size_t> all = cuts;
  all.push_back(b.stream.size());
  for (size_t c : all) {
    b.stream_chunks.push_back(repo.Put(b.stream.substr(prev, c - prev)));
    prev = c;
  }
  if (store_data) {
    for (const TestItem& t : items) {
      for (auto& c : t.chunks) repo.AddData(c.first);
    }
  }
  std::vector<ChunkId> list = b.stream_chunks;
  if (g != Generation::kBorg1) {
    list.clear();
    for (size_t i = 0; i < b.stream_chunks.size(); i += per_ptr) {
      std::vector<ChunkId> part(b.stream_chunks.begin() + long(i),
                                b.stream_chunks.begin() + long(std::min(i + per_ptr, b.stream_chunks.size())));
      list.push_back(repo.Put(PackIdList(part)));
    }
    b.item_ptrs = list;
  }
  b.ref.name = name;
  b.ref.id = repo.Put(PackArchive(g, name, list));
  b.ref.time = "2026-12-01T00:00:00.000000";
  return b;
}

inline WalkOptions Options(Generation g) {
  WalkOptions o;
  o.generation = g;
  return o;
}

// Everything a walk finds, without the schedule-dependent counters.
inline std::string Summary(const ArchiveResult& r) {
  std::ostringstream o;
  o << "archive " << r.index << " " << r.name << " failure=" << ArchiveFailureName(r.failure)
    << " items=" << r.items << " chunks=" << r.stream_chunks << " bytes=" << r.stream_bytes
    << " refs=" << r.references << " problems=" << r.problems_total << "\n";
  for (const StreamProblem& p : r.problems) {
    o << "  problem " << StreamProblemKindName(p.kind) << " chunk#" << p.chunk_index << "/" << p.chunk_count
      << " " << HexOf(p.chunk).substr(0, 8) << " items_before=" << p.items_before << " at=" << p.stream_offset
      << " in_chunk=" << p.offset_in_chunk << " earlier=" << p.started_in_earlier_chunk << " len=" << p.length
      << " " << p.reason << " " << p.path << "\n";
  }
  for (const BadReference& b : r.bad_refs) {
    o << "  bad " << HexOf(b.chunk).substr(0, 8) << " " << (b.state == RefState::kMissing ? "missing" : "bad")
      << " a" << b.archive << " " << b.path << " [" << b.begin << "," << b.end << ") " << RefListName(b.list)
      << (b.via.empty() ? "" : " via " + b.via) << "\n";
  }
  for (const BadRefTotal& t : r.bad_totals) o << "  total " << HexOf(t.chunk).substr(0, 8) << " " << t.uses << "\n";
  return o.str();
}

inline std::vector<TestItem> ManyFiles(int n, int first_seed = 0) {
  std::vector<TestItem> items{Dir(".")};
  for (int i = 0; i < n; ++i) {
    items.push_back(File("dir/file-" + std::to_string(i), {{TestId(uint32_t(first_seed + i)), 1000},
                                                           {TestId(uint32_t(first_seed + i + 5000)), 24}}));
  }
  return items;
}

inline std::vector<size_t> EveryNBytes(size_t size, size_t n) {
  std::vector<size_t> cuts;
  for (size_t c = n; c < size; c += n) cuts.push_back(c);
  return cuts;
}

}  // namespace borgcheck::archive::testing::walker
