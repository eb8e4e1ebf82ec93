#include "checker/repo/borg1/borg1_hashindex.h"

#include <cstring>

#include <fmt/format.h>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "checker/base/msgpack_util.h"
#include "checker/repo/segment_log/segment_format.h"

namespace borgcheck::repo {

Result<HashIndexContents> ParseHashIndex(Bytes file) {
  auto corrupt = [](std::string m) { return Status(StatusCode::kCorruptMetadata, std::move(m)); };
  if (file.size() < kIndexHeaderSize || std::memcmp(file.data(), kIndexMagic, 8) != 0) {
    return corrupt("index: bad magic or short header");
  }
  int32_t num_entries = int32_t(LoadLE32(file.data() + 8));
  int32_t num_buckets = int32_t(LoadLE32(file.data() + 12));
  int8_t key_size = int8_t(file[16]);
  int8_t value_size = int8_t(file[17]);
  if (key_size != 32 || value_size != 8) {
    return corrupt(fmt::format("index: key/value size {}/{} (expected 32/8)", key_size, value_size));
  }
  if (num_entries < 0 || num_buckets <= 0) return corrupt("index: negative counts in header");
  uint64_t want = kIndexHeaderSize + uint64_t(num_buckets) * 40;
  if (want != file.size()) {
    return corrupt(fmt::format("index: {} buckets need {} bytes, file has {}", num_buckets, want,
                               file.size()));
  }
  HashIndexContents out;
  out.num_buckets = uint32_t(num_buckets);
  out.num_entries_header = uint32_t(num_entries);
  out.entries.reserve(std::min<uint64_t>(uint64_t(num_entries), uint64_t(num_buckets)));
  const uint8_t* p = file.data() + kIndexHeaderSize;
  for (int32_t i = 0; i < num_buckets; ++i, p += 40) {
    uint32_t seg = LoadLE32(p + 32);
    if (seg == kIndexEmpty || seg == kIndexDeleted) continue;
    if (seg > kIndexMaxValue) {
      return corrupt(fmt::format("index: bucket {} has invalid segment value {:#x}", i, seg));
    }
    IndexEntry e;
    std::memcpy(e.id.data(), p, 32);
    e.segment = seg;
    e.offset = LoadLE32(p + 36);
    out.entries.push_back(e);
  }
  if (out.entries.size() != uint64_t(num_entries)) {
    return corrupt(fmt::format("index: header says {} entries, buckets hold {}", num_entries,
                               out.entries.size()));
  }
  return out;
}

std::vector<IndexEntry> SalvageHashIndex(Bytes file) {
  std::vector<IndexEntry> out;
  if (file.size() < kIndexHeaderSize) return out;
  for (uint64_t at = kIndexHeaderSize; at + 40 <= file.size(); at += 40) {
    const uint8_t* p = file.data() + at;
    const uint32_t seg = LoadLE32(p + 32);
    if (seg == kIndexEmpty || seg == kIndexDeleted || seg > kIndexMaxValue) continue;
    IndexEntry e;
    std::memcpy(e.id.data(), p, 32);
    e.segment = seg;
    e.offset = LoadLE32(p + 36);
    out.push_back(e);
  }
  return out;
}

}  // namespace borgcheck::repo
