#include "checker/repo/hashindex.h"

#include <cstring>

#include <fmt/format.h>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "checker/base/msgpack_util.h"
#include "checker/repo/segment_format.h"

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

namespace {

// borg's IntegrityCheckedFile: one XXH64 state fed with "%10d"-framed names and positions.
class IntegrityHasher {
 public:
  IntegrityHasher() { state_ = XXH64_createState(); XXH64_reset(state_, 0); }
  ~IntegrityHasher() { XXH64_freeState(state_); }
  void Feed(Bytes b) { XXH64_update(state_, b.data(), b.size()); }
  void FeedStr(const std::string& s) { Feed(AsBytes(s)); }
  void FeedFramed(const std::string& name) {
    FeedStr(fmt::format("{:>10}", name.size()));
    FeedStr(name);
  }
  std::string Digest() const { return fmt::format("{:016x}", XXH64_digest(state_)); }

 private:
  XXH64_state_t* state_;
};

}  // namespace

IntegrityOutcome CheckIndexIntegrity(Bytes index_bytes, const std::string& index_name,
                                     Bytes integrity_bytes, std::string* why) {
  auto fail = [&](IntegrityOutcome o, std::string m) {
    if (why) *why = std::move(m);
    return o;
  };
  std::string index_json;
  {
    // Limits sized by the input: a damaged length prefix must not make msgpack allocate more
    // than the file could describe (found by fuzz/index_fuzzer).
    msgpack::object_handle oh;
    std::string err;
    if (!msgpack_util::UnpackPrefix(integrity_bytes, 32, oh, err, msgpack_util::Strings::kCopy)) {
      return fail(IntegrityOutcome::kMalformed, "integrity file: " + err);
    }
    const msgpack::object& root = oh.get();
    if (root.type != msgpack::type::MAP) return fail(IntegrityOutcome::kMalformed, "integrity file is not a map");
    // Every "index" entry with a string value is taken in turn: the last one wins.
    for (uint32_t i = 0; i < root.via.map.size; ++i) {
      const auto& kv = root.via.map.ptr[i];
      if (msgpack_util::AsText(kv.key) != "index") continue;
      if (std::optional<std::string_view> v = msgpack_util::AsText(kv.val)) index_json.assign(*v);
    }
  }
  if (index_json.empty()) return fail(IntegrityOutcome::kMalformed, "integrity file has no index entry");
  std::string want_header, want_final;
  try {
    nlohmann::json j = nlohmann::json::parse(index_json);
    if (j.value("algorithm", "") != "XXH64") {
      return fail(IntegrityOutcome::kMalformed, "integrity algorithm is not XXH64");
    }
    want_header = j.at("digests").value("HashHeader", "");
    want_final = j.at("digests").at("final").get<std::string>();
  } catch (const std::exception& e) {
    return fail(IntegrityOutcome::kMalformed, std::string("integrity JSON: ") + e.what());
  }
  if (index_bytes.size() < kIndexHeaderSize) return fail(IntegrityOutcome::kMismatch, "index shorter than its header");
  IntegrityHasher h;
  h.FeedFramed(index_name);
  h.Feed(index_bytes.first(kIndexHeaderSize));
  h.FeedFramed("HashHeader");
  h.FeedStr(std::to_string(kIndexHeaderSize));
  std::string got_header = h.Digest();
  h.Feed(index_bytes.subspan(kIndexHeaderSize));
  h.FeedFramed("final");
  h.FeedStr(std::to_string(index_bytes.size()));
  std::string got_final = h.Digest();
  if (!want_header.empty() && want_header != got_header) {
    return fail(IntegrityOutcome::kMismatch, "index header digest " + got_header + " != recorded " + want_header);
  }
  if (want_final != got_final) {
    return fail(IntegrityOutcome::kMismatch, "index digest " + got_final + " != recorded " + want_final);
  }
  return IntegrityOutcome::kVerified;
}

}  // namespace borgcheck::repo
