// Fuzz target: an archive's item metadata stream (checker/archive/item_stream.h) and the
// memoizing walker over it (checker/archive/archive_walker.h).
//
// Input: byte 0 selects the generation (bits 0-1: borg 1.x, 2.0.0b5, master) and the item size
// limit (bit 2: 256 bytes, else 1 MiB); bytes 1-8 seed two chunk layouts (splitmix64); the
// rest is the stream (the plaintexts of its chunks, concatenated).
// Invariant:
//   - no crash, no unbounded allocation: the carry never exceeds the item size limit;
//   - splitting the stream anywhere gives the same items, invalid items and issues as the
//     unsplit stream, up to the first malformed byte (after it, resynchronisation may differ
//     with the layout), and then a malformed issue too;
//   - the walker over three archives - A in layout 1, B sharing A's first chunks and then in
//     layout 2, C equal to A - gives each archive exactly what a plain ItemStreamDecoder pass
//     over the same chunks gives (valid items; the uses of "missing" chunks, every referenced
//     id whose first byte is odd; the problems in order), and C costs no decode at all.
#include <openssl/sha.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <msgpack.hpp>
#include <set>
#include <string>
#include <vector>

#include "checker/archive/archive_test_util.h"
#include "checker/archive/archive_walker.h"
#include "checker/archive/item_stream.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using namespace borgcheck::archive;

namespace {

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Chunk boundaries for `size` bytes: steps of 0..span bytes (0 gives an empty chunk).
std::vector<size_t> Layout(uint64_t seed, size_t size) {
  std::vector<size_t> cuts;
  const uint64_t span = 1 + SplitMix(seed) % 600;
  for (size_t pos = SplitMix(seed) % (span + 1); pos < size; pos += SplitMix(seed) % (span + 1)) {
    cuts.push_back(pos);
  }
  return cuts;
}

std::vector<std::string> Chunks(const std::string& s, const std::vector<size_t>& cuts) {
  std::vector<std::string> out;
  size_t prev = 0;
  for (size_t c : cuts) {
    out.push_back(s.substr(prev, c - prev));
    prev = c;
  }
  out.push_back(s.substr(prev));
  return out;
}

bool Missing(const ChunkId& id) { return id[0] & 1; }

ChunkId Sha(const std::string& s) {
  ChunkId id;
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), id.data());
  return id;
}

bool IsMalformedLine(const std::string& l) {
  return l.rfind("issue malformed", 0) == 0 || l.rfind("issue resync-skipped", 0) == 0;
}

std::vector<std::string> Decode(const std::vector<std::string>& chunks, const StreamOptions& o) {
  ItemStreamDecoder d(o);
  testing::RecordingSink sink;
  sink.record_resync = true;
  for (const std::string& c : chunks) {
    d.Feed(AsBytes(c), sink);
    FUZZ_CHECK(d.carry().bytes.size() <= o.max_item_bytes);
  }
  return sink.lines;
}

// What the walker must report for one archive, computed without the memo.
struct Expected {
  uint64_t items = 0;
  std::vector<std::string> bad;       // "path begin end id list"
  std::vector<std::string> problems;  // kinds in order
};

class MirrorSink : public ItemSink {
 public:
  MirrorSink(Expected& e, ReferenceTable& table) : e_(e), table_(table) {}
  void OnItem(const ItemRecord& item, const ItemPlace&) override {
    ++e_.items;
    const std::string path(reinterpret_cast<const char*>(item.path.data()), item.path.size());
    for (const ChunkRef& c : item.chunks) Use(path, c, RefList::kChunks);
    for (const ChunkRef& c : item.chunks_healthy) Use(path, c, RefList::kChunksHealthy);
    if (item.size && item.has_chunks && *item.size != item.ChunksSize()) e_.problems.push_back("size-mismatch");
  }
  void OnIssue(const StepIssue& i) override {
    e_.problems.push_back(i.kind == IssueKind::kInvalidItem     ? "invalid-item"
                          : i.kind == IssueKind::kResyncSkipped ? "resync-skipped"
                                                                : "malformed");
  }

 private:
  void Use(const std::string& path, const ChunkRef& c, RefList l) {
    if (!IsBad(table_.Reference(c.id))) return;
    e_.bad.push_back(path + " " + std::to_string(c.offset) + " " + std::to_string(c.offset + c.size) + " " +
                     testing::HexOf(c.id) + " " + std::string(RefListName(l)));
  }
  Expected& e_;
  ReferenceTable& table_;
};

class Repo : public ObjectFetcher, public ReferenceTable {
 public:
  ChunkId Put(const std::string& s) {
    const ChunkId id = Sha(s);
    objects_[id] = s;
    return id;
  }
  FetchStatus Fetch(const ChunkId& id, ObjectKind, ByteBuffer& out, FetchProblem&) override {
    auto it = objects_.find(id);
    if (it == objects_.end()) return FetchStatus::kMissing;
    out.Assign(AsBytes(it->second));
    return FetchStatus::kOk;
  }
  RefState Reference(const ChunkId& id) override {
    if (objects_.count(id)) return RefState::kPresent;
    return Missing(id) ? RefState::kMissing : RefState::kPresent;
  }

 private:
  std::map<ChunkId, std::string> objects_;
};

std::string PackList(Generation g, const std::vector<ChunkId>& ids, bool as_archive) {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  auto raw = [&](const void* p, size_t n) {
    if (g == Generation::kBorg1) {
      pk.pack_str(uint32_t(n));
      pk.pack_str_body(static_cast<const char*>(p), uint32_t(n));
    } else {
      pk.pack_bin(uint32_t(n));
      pk.pack_bin_body(static_cast<const char*>(p), uint32_t(n));
    }
  };
  auto str = [&](std::string_view s) {
    pk.pack_str(uint32_t(s.size()));
    pk.pack_str_body(s.data(), uint32_t(s.size()));
  };
  if (as_archive) {
    pk.pack_map(3);
    str(g == Generation::kBorg1 ? "items" : "item_ptrs");
  }
  pk.pack_array(uint32_t(ids.size()));
  for (const ChunkId& id : ids) raw(id.data(), 32);
  if (as_archive) {
    str("name");
    str("fuzz");
    str("version");
    pk.pack_int(g == Generation::kBorg1 ? 1 : 2);
  }
  return std::string(b.data(), b.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  const Generation g = static_cast<Generation>((data[0] & 3) % 3);
  const size_t max_item = (data[0] & 4) ? 256 : (size_t(1) << 20);
  uint64_t seed;
  std::memcpy(&seed, data + 1, 8);
  const std::string stream(reinterpret_cast<const char*>(data + 9), size - 9);

  const ItemKeySet keys(g);
  StreamOptions o;
  o.item.generation = g;
  o.item.item_keys = &keys;
  o.max_item_bytes = max_item;

  // Split invariance.
  const std::vector<std::string> whole = Decode({stream}, o);
  const std::vector<size_t> cuts1 = Layout(seed, stream.size());
  const std::vector<size_t> cuts2 = Layout(seed ^ 0x5555555555555555ull, stream.size());
  for (const auto* cuts : {&cuts1, &cuts2}) {
    const std::vector<std::string> split = Decode(Chunks(stream, *cuts), o);
    size_t i = 0;
    while (i < whole.size() && !IsMalformedLine(whole[i])) {
      FUZZ_CHECK(i < split.size() && split[i] == whole[i]);
      ++i;
    }
    if (i == whole.size()) {
      FUZZ_CHECK(split.size() == whole.size());
    } else {
      FUZZ_CHECK(i < split.size() && IsMalformedLine(split[i]));
    }
  }

  // The walker against plain decodes: A (layout 1), B (A's first chunks, then layout 2), C = A.
  std::vector<size_t> cutsb;
  const size_t mid = stream.size() / 2;
  for (size_t c : cuts1) {
    if (c < mid) cutsb.push_back(c);
  }
  for (size_t c : cuts2) {
    if (c > mid && (cutsb.empty() || c > cutsb.back())) cutsb.push_back(c);
  }
  Repo repo;
  WalkOptions wo;
  wo.generation = g;
  wo.item_keys = keys;
  wo.max_item_bytes = max_item;
  wo.max_refs_per_chunk = wo.max_refs_per_archive = wo.max_problems_per_archive = UINT32_MAX;
  ArchiveWalker walker(repo, repo, wo);
  const std::vector<std::vector<size_t>> layouts = {cuts1, cutsb, cuts1};
  // Everything is stored before the first walk: a referenced id may equal a stored chunk's
  // SHA-256 (a 1-byte chunk "\x01" is sha256(b"\x01")), and the table must not change under
  // the memo.
  std::vector<ManifestArchive> refs;
  for (uint32_t a = 0; a < layouts.size(); ++a) {
    std::vector<ChunkId> ids;
    for (const std::string& c : Chunks(stream, layouts[a])) ids.push_back(repo.Put(c));
    std::vector<ChunkId> list = ids;
    if (g != Generation::kBorg1) list = {repo.Put(PackList(g, ids, false))};
    refs.push_back({"a" + std::to_string(a), repo.Put(PackList(g, list, true)), ""});  // C's is A's
  }
  for (uint32_t a = 0; a < layouts.size(); ++a) {
    const std::vector<std::string> chunks = Chunks(stream, layouts[a]);
    const ManifestArchive& ref = refs[a];

    Expected want;
    MirrorSink mirror(want, repo);
    ItemStreamDecoder d(o);
    for (const std::string& c : chunks) d.Feed(AsBytes(c), mirror);
    if (d.EndsInsideItem()) want.problems.push_back("truncated");

    const ArchiveResult r = walker.WalkArchive(a, ref);
    FUZZ_CHECK(r.failure == ArchiveFailure::kNone);
    FUZZ_CHECK(r.items == want.items);
    FUZZ_CHECK(r.stream_chunks == chunks.size());
    std::vector<std::string> got_bad;
    for (const BadReference& b : r.bad_refs) {
      if (b.list == RefList::kHardlinkSlave) continue;  // the mirror does not resolve hard links
      got_bad.push_back(b.path + " " + std::to_string(b.begin) + " " + std::to_string(b.end) + " " +
                        testing::HexOf(b.chunk) + " " + std::string(RefListName(b.list)));
    }
    FUZZ_CHECK(got_bad == want.bad);
    std::vector<std::string> got_problems;
    for (const StreamProblem& p : r.problems) got_problems.push_back(std::string(StreamProblemKindName(p.kind)));
    FUZZ_CHECK(got_problems == want.problems);
    if (a == 2) FUZZ_CHECK(r.steps_decoded == 0 && r.memo_hits == chunks.size());
  }
  return 0;
}
