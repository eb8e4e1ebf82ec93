// Test-only builders for borg-like metadata: items packed as borg packs them (sorted keys,
// byte strings as str in borg 1.x and as bin in borg 2), chunk ids, and summaries of decoded
// items that tests compare. Header-only; used by the archive tests and the item-stream fuzzer.
//
// Thread contract: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <msgpack.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "checker/archive/archive_types.h"
#include "checker/archive/item_stream.h"
#include "checker/base/bytes.h"

namespace borgcheck::archive::testing {

// A distinct, recognisable id per seed.
inline ChunkId TestId(uint32_t seed) {
  ChunkId id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = uint8_t((seed * 131 + i * 7 + (seed >> 8)) & 0xff);
  id[0] = uint8_t(seed);
  id[1] = uint8_t(seed >> 8);
  id[2] = uint8_t(seed >> 16);
  id[31] = uint8_t(seed * 37);
  return id;
}

struct TestItem {
  std::string path;
  uint32_t mode = 0100644;
  std::vector<std::pair<ChunkId, uint64_t>> chunks;  // (id, size)
  bool has_chunks = false;
  std::vector<std::pair<ChunkId, uint64_t>> chunks_healthy;
  std::optional<std::string> source;
  std::optional<bool> hardlink_master;
  std::optional<std::string> hlid;
  std::optional<uint64_t> size;
  bool with_mtime = true;
  std::map<std::string, std::string> extra;  // more str-valued keys (e.g. user)
};

inline TestItem File(std::string path, std::vector<std::pair<ChunkId, uint64_t>> chunks) {
  TestItem t;
  t.path = std::move(path);
  t.chunks = std::move(chunks);
  t.has_chunks = true;
  uint64_t s = 0;
  for (auto& c : t.chunks) s += c.second;
  t.size = s;
  return t;
}

inline TestItem Dir(std::string path) {
  TestItem t;
  t.path = std::move(path);
  t.mode = 040755;
  return t;
}

// Packs `t` like borg: a map with sorted keys; 1.x packs every byte string as str.
inline std::string PackItem(const TestItem& t, Generation g) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  auto raw = [&](std::string_view s) {
    pk.pack_str(uint32_t(s.size()));
    pk.pack_str_body(s.data(), uint32_t(s.size()));
  };
  auto bytes = [&](const void* p, size_t n) {
    if (g == Generation::kBorg1) {
      pk.pack_str(uint32_t(n));
      pk.pack_str_body(static_cast<const char*>(p), uint32_t(n));
    } else {
      pk.pack_bin(uint32_t(n));
      pk.pack_bin_body(static_cast<const char*>(p), uint32_t(n));
    }
  };
  auto chunk_list = [&](const std::vector<std::pair<ChunkId, uint64_t>>& l) {
    pk.pack_array(uint32_t(l.size()));
    for (auto& [id, size] : l) {
      pk.pack_array(g == Generation::kBorg1 ? 3 : 2);
      bytes(id.data(), id.size());
      pk.pack_uint64(size);
      if (g == Generation::kBorg1) pk.pack_uint64(size + 3);
    }
  };
  std::map<std::string, int> keys;  // sorted, as borg's StableDict
  if (t.has_chunks) keys["chunks"] = 0;
  if (!t.chunks_healthy.empty()) keys["chunks_healthy"] = 0;
  keys["mode"] = 0;
  if (t.with_mtime) keys["mtime"] = 0;
  keys["path"] = 0;
  if (t.source) keys["source"] = 0;
  if (t.hardlink_master) keys["hardlink_master"] = 0;
  if (t.hlid) keys["hlid"] = 0;
  if (t.size) keys["size"] = 0;
  for (auto& [k, v] : t.extra) keys[k] = 0;
  pk.pack_map(uint32_t(keys.size()));
  for (auto& [k, unused] : keys) {
    raw(k);
    if (k == "chunks") chunk_list(t.chunks);
    else if (k == "chunks_healthy") chunk_list(t.chunks_healthy);
    else if (k == "mode") pk.pack_uint32(t.mode);
    else if (k == "mtime") pk.pack_uint64(1796131777397367691ull);
    else if (k == "path") bytes(t.path.data(), t.path.size());
    else if (k == "source") bytes(t.source->data(), t.source->size());
    else if (k == "hardlink_master") *t.hardlink_master ? pk.pack_true() : pk.pack_false();
    else if (k == "hlid") bytes(t.hlid->data(), t.hlid->size());
    else if (k == "size") pk.pack_uint64(*t.size);
    else raw(t.extra.at(k));
  }
  return std::string(buf.data(), buf.size());
}

inline std::string PackItems(const std::vector<TestItem>& items, Generation g) {
  std::string s;
  for (const TestItem& t : items) s += PackItem(t, g);
  return s;
}

inline std::string HexOf(const ChunkId& id) { return ToHex(Bytes(id.data(), id.size())); }

// One line per decoded item or issue, in stream order: what tests compare.
class RecordingSink : public ItemSink {
 public:
  void OnItem(const ItemRecord& item, const ItemPlace&) override {
    std::ostringstream o;
    o << "item " << std::string(reinterpret_cast<const char*>(item.path.data()), item.path.size())
      << " " << ItemTypeName(item.type);
    if (item.source) o << " source=" << std::string(item.source->begin(), item.source->end());
    if (item.hardlink_master) o << " master=" << *item.hardlink_master;
    for (const ChunkRef& c : item.chunks) o << " " << HexOf(c.id).substr(0, 8) << "@" << c.offset << "+" << c.size;
    for (const ChunkRef& c : item.chunks_healthy) o << " healthy:" << HexOf(c.id).substr(0, 8) << "@" << c.offset;
    lines.push_back(o.str());
  }
  void OnIssue(const StepIssue& issue) override {
    if (issue.kind == IssueKind::kResyncSkipped && !record_resync) return;
    lines.push_back(std::string("issue ") + std::string(IssueKindName(issue.kind)) + ": " + issue.reason);
  }
  std::vector<std::string> lines;
  bool record_resync = false;
};

}  // namespace borgcheck::archive::testing
