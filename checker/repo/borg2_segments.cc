// Repository version 2 segments, index and planning (see borg2_segments.h for the outline).
#include "checker/repo/borg2_segments.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>
// XXH64 states live on the stack (no allocation per entry): needs the struct definition.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "checker/base/msgpack_util.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/config.h"
#include "checker/repo/file.h"
#include "checker/repo/repository.h"
#include "checker/repo/segment_finding.h"
#include "checker/repo/segment_format.h"
#include "checker/repo/text_util.h"

namespace borgcheck::repo {
namespace fs = std::filesystem;
using report::Finding;
using report::Severity;
using report::Stage;
using Id = ChunkId;

namespace {

constexpr uint64_t kResyncWindow = 1 << 20;

bool EndsWithCommit(const std::string& path, uint64_t size) {
  if (size < kSegmentMagicSize + kB2CommitSize) return false;
  Result<ReadOnlyFile> f = ReadOnlyFile::Open(path);
  if (!f.ok()) return false;
  uint8_t tail[kB2CommitSize];
  if (!f->ReadAt(f->size() - sizeof tail, sizeof tail, tail).ok()) return false;
  return std::memcmp(tail, kCommitEntry, sizeof tail) == 0;
}

// Whether a whole entry starting at `off` validates: header, CRC, and a PUT2's xxh64 (or a
// PUT's whole-entry CRC). Reads what it needs.
bool ValidEntryAt(const ReadOnlyFile& f, uint64_t off, uint64_t limit, const uint8_t* hdr_bytes,
                  size_t hdr_avail, ByteBuffer& scratch) {
  Borg2EntryHeader h;
  if (ParseBorg2EntryHeader(Bytes(hdr_bytes, hdr_avail), limit - off, h, nullptr) != HeaderParse::kOk) {
    return false;
  }
  if (h.tag == kB2TagPut2 || h.tag == kB2TagPut) {
    if (h.tag == kB2TagPut2 && !Borg2EntryCrcMatches(Bytes(hdr_bytes, h.header_size), h)) return false;
    scratch.Resize(h.size);
    if (!f.ReadAt(off, h.size, scratch.data()).ok()) return false;
    return h.tag == kB2TagPut2 ? Put2EntryHashMatches(scratch.view())
                               : Borg2EntryCrcMatches(scratch.view(), h);
  }
  return Borg2EntryCrcMatches(Bytes(hdr_bytes, h.size), h);
}

// The first offset in [from, limit) holding a valid entry (see ValidEntryAt), or limit. Scans
// byte by byte like borg's --repair; cheap tests (tag, size) come first. Known limit: a payload
// that itself contains a whole valid entry (an unencrypted, uncompressed backup of a segment
// file) can be taken for the next entry. Such a nested entry ends inside the damaged entry, so
// the walk is back in step by the next real entry (no intact object is skipped), but the nested
// entry is replayed as one of this segment's: with index.T it shows up as an index warning, and
// it may fail verification under this repository's key.
uint64_t Resync(const ReadOnlyFile& f, uint64_t from, uint64_t limit) {
  ByteBuffer window, scratch;
  for (uint64_t base = from; base < limit; base += kResyncWindow) {
    uint64_t len = std::min<uint64_t>(kResyncWindow + kB2Put2HeaderSize, limit - base);
    window.Resize(len);
    if (!f.ReadAt(base, len, window.data()).ok()) return limit;
    uint64_t scan = std::min<uint64_t>(kResyncWindow, len);
    for (uint64_t p = 0; p < scan; ++p) {
      if (len - p < kB2CommitSize) break;
      const uint8_t* b = window.data() + p;
      if (b[8] > kB2TagPut2) continue;
      uint32_t size = LoadLE32(b + 4);
      if (size < kB2CommitSize || size > kB2MaxObjectSize || base + p + size > limit) continue;
      if (ValidEntryAt(f, base + p, limit, b, size_t(std::min<uint64_t>(len - p, kB2Put2HeaderSize)), scratch)) {
        return base + p;
      }
    }
  }
  return limit;
}

}  // namespace

// ---- entries ------------------------------------------------------------------------------------

HeaderParse ParseBorg2EntryHeader(Bytes buf, uint64_t bytes_left_in_file, Borg2EntryHeader& h,
                                  std::string* why) {
  auto invalid = [&](std::string msg) {
    if (why) *why = std::move(msg);
    return HeaderParse::kInvalid;
  };
  if (bytes_left_in_file < kB2CommitSize) {
    return invalid(fmt::format("truncated entry header: only {} bytes left in the segment", bytes_left_in_file));
  }
  if (buf.size() < kB2CommitSize) return HeaderParse::kNeedMore;
  h.crc = LoadLE32(buf.data());
  h.size = LoadLE32(buf.data() + 4);
  h.tag = buf[8];
  if (h.tag > kB2TagPut2) {
    return invalid(fmt::format("invalid segment entry header, did not get acceptable tag {}", h.tag));
  }
  h.header_size = h.tag == kB2TagCommit ? kB2CommitSize : h.tag == kB2TagPut2 ? kB2Put2HeaderSize
                                                                              : kB2PutHeaderSize;
  if (h.size > kB2MaxObjectSize) return invalid(fmt::format("invalid segment entry size {} - too big", h.size));
  if (h.size < h.header_size) return invalid(fmt::format("invalid segment entry size {} - too small", h.size));
  if (h.tag == kB2TagDelete && h.size != kB2DeleteSize) {
    return invalid(fmt::format("invalid DELETE entry size {}", h.size));
  }
  if (h.tag == kB2TagCommit && h.size != kB2CommitSize) {
    return invalid(fmt::format("invalid COMMIT entry size {}", h.size));
  }
  if (h.size > bytes_left_in_file) {
    return invalid(fmt::format("segment entry of {} bytes runs past the end of the segment ({} bytes "
                               "left): truncated", h.size, bytes_left_in_file));
  }
  if (buf.size() < h.header_size) return HeaderParse::kNeedMore;
  h.id = h.tag == kB2TagCommit ? nullptr : buf.data() + 9;
  h.entry_hash = h.tag == kB2TagPut2 ? buf.data() + kB2EntryHashOffset : nullptr;
  return HeaderParse::kOk;
}

bool Borg2EntryCrcMatches(Bytes buf, const Borg2EntryHeader& h) {
  size_t covered = h.tag == kB2TagPut2 ? kB2Put2HeaderSize : h.size;
  if (buf.size() < covered || covered < kB2CommitSize) return false;
  return Crc32(buf.subspan(4, covered - 4)) == LoadLE32(buf.data());
}

uint64_t Put2EntryHash(Bytes entry) {
  XXH64_state_t state;
  XXH64_reset(&state, 0);
  XXH64_update(&state, entry.data() + 4, kB2EntryHashOffset - 4);
  XXH64_update(&state, entry.data() + kB2Put2HeaderSize, entry.size() - kB2Put2HeaderSize);
  return XXH64_digest(&state);
}

bool Put2EntryHashMatches(Bytes entry) {
  if (entry.size() < kB2Put2HeaderSize) return false;
  return Put2EntryHash(entry) == LoadBE64(entry.data() + kB2EntryHashOffset);
}

Bytes Borg2EntryPayload(Bytes entry, uint8_t tag) {
  size_t hs = tag == kB2TagPut2 ? kB2Put2HeaderSize : kB2PutHeaderSize;
  return entry.size() >= hs ? entry.subspan(hs) : Bytes();
}

// ---- config -------------------------------------------------------------------------------------

Result<Borg2Config> ParseBorg2Config(std::string_view text) {
  Result<IniFile> ini = ParseIni(text);
  if (!ini.ok()) return ini.status();
  auto sec = ini->find("repository");
  if (sec == ini->end()) return Status(StatusCode::kNotARepository, "config has no [repository] section");
  const auto& kv = sec->second;
  auto get = [&](const char* k) -> const std::string* {
    auto it = kv.find(k);
    return it == kv.end() ? nullptr : &it->second;
  };
  const std::string* version = get("version");
  if (!version) return Status(StatusCode::kNotARepository, "config has no repository version");
  if (*version != "2") {
    return Status(StatusCode::kUnsupported, "repository version " + *version + " is not version 2");
  }
  Borg2Config c;
  if (const std::string* s = get("segments_per_dir")) {
    uint64_t n = 0;
    if (!ParseSize(*s, n) || n == 0 || n > UINT32_MAX) {
      return Status(StatusCode::kCorruptMetadata, "config: invalid segments_per_dir '" + *s + "'");
    }
    c.segments_per_dir = uint32_t(n);
  }
  const std::string* id = get("id");
  if (!id || id->size() != 64 || !FromHex(*id, c.id)) {
    return Status(StatusCode::kCorruptMetadata, "config: repository id is not 64 hex digits");
  }
  c.id_hex = Lower(*id);
  if (const std::string* k = get("key")) c.key_base64 = WithoutWhitespace(*k);
  return c;
}

Result<Borg2Config> IdentifyBorg2Repository(const std::string& path, bool bypass_lock) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return Status(StatusCode::kNotFound, "repository " + path + " does not exist");
  if (!fs::is_directory(st)) {
    return Status(StatusCode::kNotARepository, path + " is not a borg repository: it is not a directory");
  }
  Result<std::string> text = ReadWholeFile((fs::path(path) / "config").string(), 1 << 20);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return Status(StatusCode::kNotARepository, path + " is not a borg repository: it has no 'config' file");
    }
    return text.status();
  }
  Result<Borg2Config> config = ParseBorg2Config(*text);
  if (!config.ok()) return Status(config.status().code(), path + ": " + config.status().message());
  if (fs::exists(fs::path(path) / "lock.exclusive", ec) && !bypass_lock) {
    return Status(StatusCode::kLockHeld,
                  "repository " + path + " is locked by borg (lock.exclusive exists): a backup, "
                  "prune or compact may be writing. Run again when it has finished, or pass "
                  "--bypass-lock to check anyway (results may then report changes in progress)");
  }
  return config;
}

// ---- index.T ------------------------------------------------------------------------------------

Result<std::vector<Borg2IndexEntry>> ParseBorg2Index(Bytes file) {
  auto corrupt = [](std::string m) { return Status(StatusCode::kCorruptMetadata, std::move(m)); };
  if (file.size() < kB2IndexHeaderSize || std::memcmp(file.data(), kB2IndexMagic, 8) != 0) {
    return corrupt("index: bad magic or short header (expected BORG2IDX)");
  }
  int32_t version = int32_t(LoadLE32(file.data() + 8));
  int32_t num_entries = int32_t(LoadLE32(file.data() + 12));
  int32_t num_buckets = int32_t(LoadLE32(file.data() + 16));
  int32_t key_size = int32_t(LoadLE32(file.data() + 24));
  int32_t value_size = int32_t(LoadLE32(file.data() + 28));
  if (version != 2) return corrupt(fmt::format("index: version {} (expected 2)", version));
  if (key_size != 32 || value_size != 16) {
    return corrupt(fmt::format("index: key/value size {}/{} (expected 32/16)", key_size, value_size));
  }
  if (num_entries < 0 || num_buckets <= 0) return corrupt("index: negative counts in header");
  uint64_t want = kB2IndexHeaderSize + uint64_t(num_buckets) * kB2IndexBucketSize;
  if (want != file.size()) {
    return corrupt(fmt::format("index: {} buckets need {} bytes, file has {}", num_buckets, want, file.size()));
  }
  std::vector<Borg2IndexEntry> out;
  out.reserve(std::min<uint64_t>(uint64_t(num_entries), uint64_t(num_buckets)));
  const uint8_t* p = file.data() + kB2IndexHeaderSize;
  for (int32_t i = 0; i < num_buckets; ++i, p += kB2IndexBucketSize) {
    uint32_t seg = LoadLE32(p + 32);
    if (seg == kIndexEmpty || seg == kIndexDeleted) continue;
    if (seg > kIndexMaxValue) return corrupt(fmt::format("index: bucket {} has invalid segment value {:#x}", i, seg));
    Borg2IndexEntry e;
    std::memcpy(e.id.data(), p, 32);
    e.segment = seg;
    e.offset = LoadLE32(p + 36);
    e.size = LoadLE32(p + 40);
    out.push_back(e);
  }
  if (out.size() != uint64_t(num_entries)) {
    return corrupt(fmt::format("index: header says {} entries, buckets hold {}", num_entries, out.size()));
  }
  return out;
}

namespace {

// borg's IntegrityCheckedFile: one XXH64 state fed with "%10d"-framed names and positions.
class IntegrityHasher {
 public:
  IntegrityHasher() { XXH64_reset(&state_, 0); }
  void Feed(Bytes b) { XXH64_update(&state_, b.data(), b.size()); }
  void FeedStr(const std::string& s) { Feed(AsBytes(s)); }
  void FeedFramed(const std::string& name) {
    FeedStr(fmt::format("{:>10}", name.size()));
    FeedStr(name);
  }
  std::string Digest() const { return fmt::format("{:016x}", XXH64_digest(&state_)); }

 private:
  XXH64_state_t state_;
};

}  // namespace

Borg2IndexIntegrity CheckBorg2IndexIntegrity(Bytes index_bytes, const std::string& index_name,
                                             Bytes integrity_bytes, std::string* why) {
  auto fail = [&](Borg2IndexIntegrity o, std::string m) {
    if (why) *why = std::move(m);
    return o;
  };
  std::string index_json;
  {
    // Limits sized by the input: a forged length prefix cannot make msgpack allocate more
    // than the file could describe.
    msgpack::object_handle oh;
    std::string err;
    if (!msgpack_util::UnpackPrefix(integrity_bytes, 8, oh, err, msgpack_util::Strings::kCopy)) {
      return fail(Borg2IndexIntegrity::kMalformed, "integrity file: " + err);
    }
    const msgpack::object& root = oh.get();
    if (root.type != msgpack::type::MAP) return fail(Borg2IndexIntegrity::kMalformed, "integrity file is not a map");
    // Every "index" entry with a string value is taken in turn: the last one wins.
    for (uint32_t i = 0; i < root.via.map.size; ++i) {
      const auto& kv = root.via.map.ptr[i];
      if (msgpack_util::AsText(kv.key) != "index") continue;
      if (std::optional<std::string_view> v = msgpack_util::AsText(kv.val)) index_json.assign(*v);
    }
  }
  if (index_json.empty()) return fail(Borg2IndexIntegrity::kMalformed, "integrity file has no index entry");
  std::string want_header, want_final;
  try {
    nlohmann::json j = nlohmann::json::parse(index_json);
    if (j.value("algorithm", "") != "XXH64") {
      return fail(Borg2IndexIntegrity::kMalformed, "integrity algorithm is not XXH64");
    }
    want_header = j.at("digests").value("HashHeader", "");
    want_final = j.at("digests").at("final").get<std::string>();
  } catch (const std::exception& e) {
    return fail(Borg2IndexIntegrity::kMalformed, std::string("integrity JSON: ") + e.what());
  }
  if (index_bytes.size() < kB2IndexHeaderSize) {
    return fail(Borg2IndexIntegrity::kMismatch, "index shorter than its header");
  }
  IntegrityHasher h;
  h.FeedFramed(index_name);
  h.Feed(index_bytes.first(kB2IndexHeaderSize));
  h.FeedFramed("HashHeader");
  h.FeedStr(std::to_string(kB2IndexHeaderSize));
  std::string got_header = h.Digest();
  h.Feed(index_bytes.subspan(kB2IndexHeaderSize));
  h.FeedFramed("final");
  h.FeedStr(std::to_string(index_bytes.size()));
  std::string got_final = h.Digest();
  if (!want_header.empty() && want_header != got_header) {
    return fail(Borg2IndexIntegrity::kMismatch, "index header digest " + got_header + " != recorded " + want_header);
  }
  if (want_final != got_final) {
    return fail(Borg2IndexIntegrity::kMismatch, "index digest " + got_final + " != recorded " + want_final);
  }
  return Borg2IndexIntegrity::kVerified;
}

// ---- planning -----------------------------------------------------------------------------------

namespace {

struct IndexInfo {
  uint32_t transaction = 0;
  std::vector<Borg2IndexEntry> entries;
  // (segment, offset) -> position in entries, for naming objects in damaged regions
  std::map<std::pair<uint32_t, uint32_t>, size_t> by_location;
};

// Reads index.T and its integrity file; a finding (warning) when it exists but cannot be used.
std::optional<IndexInfo> LoadIndex(const std::string& path, Borg2Plan& plan) {
  std::optional<uint32_t> t = FindIndexTransaction(path);
  if (!t) {
    plan.notes.push_back("no index.T: the log replay is not cross-checked against an index");
    return std::nullopt;
  }
  std::string name = fmt::format("index.{}", *t);
  Result<std::string> bytes = ReadWholeFile(path + "/" + name, uint64_t(64) << 30);
  std::string why;
  if (bytes.ok()) {
    Result<std::string> integ = ReadWholeFile(fmt::format("{}/integrity.{}", path, *t), 1 << 20);
    if (integ.ok()) {
      Borg2IndexIntegrity o = CheckBorg2IndexIntegrity(AsBytes(*bytes), name, AsBytes(*integ), &why);
      if (o != Borg2IndexIntegrity::kVerified) bytes = Status(StatusCode::kCorruptMetadata, why);
    } else {
      plan.notes.push_back(fmt::format("{} has no integrity.{} file: its checksum was not verified", name, *t));
    }
  }
  Result<std::vector<Borg2IndexEntry>> parsed =
      bytes.ok() ? ParseBorg2Index(AsBytes(*bytes)) : Result<std::vector<Borg2IndexEntry>>(bytes.status());
  if (!parsed.ok()) {
    plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kIndex,
        fmt::format("{} cannot be used ({}); borg would rebuild it from the log; the log replay is "
                    "not cross-checked", name, parsed.status().message()),
        std::nullopt, std::nullopt));
    return std::nullopt;
  }
  IndexInfo info;
  info.transaction = *t;
  info.entries = std::move(parsed).value();
  for (size_t i = 0; i < info.entries.size(); ++i) {
    info.by_location[{info.entries[i].segment, info.entries[i].offset}] = i;
  }
  return info;
}

// Walks the entry headers of one segment into seg.entries (step 2). `reported` collects the
// ids of index entries named by damage findings.
void WalkSegment(Borg2Segment& seg, const IndexInfo* index, Borg2Plan& plan, std::set<Id>& reported) {
  Result<ReadOnlyFile> opened = ReadOnlyFile::Open(seg.path);
  if (!opened.ok()) {
    plan.findings.push_back(MakeFinding(Severity::kError, Stage::kMissing,
        "cannot open segment: " + opened.status().message(), seg.number, std::nullopt));
    return;
  }
  const ReadOnlyFile& f = *opened;
  const uint64_t limit = std::min(seg.read_limit, f.size());

  // Reports the damaged region [from, to): every index entry inside it by id, or one finding.
  auto damaged = [&](uint64_t from, uint64_t to, Stage stage, const std::string& why,
                     const uint8_t* hdr, size_t hdr_len) {
    std::string region = to >= limit ? "the rest of the segment cannot be read"
                                     : fmt::format("the walk resumes at offset {} ({} bytes skipped)", to, to - from);
    bool named = false;
    if (index) {
      for (auto it = index->by_location.lower_bound({seg.number, uint32_t(from)});
           it != index->by_location.end() && it->first.first == seg.number && it->first.second < to; ++it) {
        const Borg2IndexEntry& e = index->entries[it->second];
        std::string msg = e.offset == from
            ? fmt::format("{}; {}", why, region)
            : fmt::format("unreadable: lies in the damaged region that starts at offset {} ({})", from, why);
        plan.findings.push_back(MakeFinding(Severity::kError, stage, msg, seg.number, e.offset, &e.id));
        reported.insert(e.id);
        named = true;
      }
    }
    if (!named) {
      std::string claim;
      if (hdr_len >= 41 && (hdr[8] == kB2TagPut2 || hdr[8] == kB2TagPut || hdr[8] == kB2TagDelete)) {
        claim = " (the damaged header names chunk " + ToHex(Bytes(hdr + 9, 32)) + ")";
      }
      plan.findings.push_back(MakeFinding(Severity::kError, stage, fmt::format("{}{}; {}", why, claim, region),
                                          seg.number, from));
    }
  };

  uint8_t magic[kSegmentMagicSize];
  if (limit < kSegmentMagicSize || !f.ReadAt(0, sizeof magic, magic).ok() ||
      std::memcmp(magic, kSegmentMagic, sizeof magic) != 0) {
    plan.findings.push_back(MakeFinding(Severity::kError, Stage::kSegment,
        "invalid segment magic (expected BORG_SEG); the entries after it are still walked", seg.number, 0));
    if (limit < kSegmentMagicSize) return;
  }
  uint64_t off = kSegmentMagicSize;
  uint8_t hdr[kB2Put2HeaderSize];
  while (off < limit) {
    size_t n = size_t(std::min<uint64_t>(sizeof hdr, limit - off));
    if (Status s = f.ReadAt(off, n, hdr); !s.ok()) {
      damaged(off, limit, Stage::kMissing, "cannot read the segment: " + s.message(), hdr, 0);
      return;
    }
    Borg2EntryHeader h;
    std::string why;
    HeaderParse p = ParseBorg2EntryHeader(Bytes(hdr, n), limit - off, h, &why);
    Stage stage = Stage::kEntryCrc;
    if (p == HeaderParse::kOk && h.tag != kB2TagPut && !Borg2EntryCrcMatches(Bytes(hdr, n), h)) {
      p = HeaderParse::kInvalid;
      why = "Segment entry header checksum mismatch";
    } else if (p != HeaderParse::kOk) {
      if (p == HeaderParse::kNeedMore) why = "truncated entry header";
      if (why.find("truncated") != std::string::npos) stage = Stage::kTruncated;
      why = "invalid segment entry header: " + why;
    }
    if (p != HeaderParse::kOk) {
      uint64_t next = Resync(f, off + 1, limit);
      damaged(off, next, stage, why, hdr, n);
      off = next;
      continue;
    }
    Borg2Entry e;
    if (h.id) std::memcpy(e.id.data(), h.id, 32);
    e.offset = uint32_t(off);
    e.size = h.size;
    e.tag = h.tag;
    seg.entries.push_back(e);
    off += h.size;
  }
}

}  // namespace

Result<Borg2Plan> PlanBorg2Repository(const std::string& path, const Borg2Config& config) {
  Borg2Plan plan;
  plan.path = path;
  plan.config = config;

  // 1. Segments, the newest COMMIT, the index.
  Result<std::vector<SegmentFile>> all = ListSegmentFiles(path);
  if (!all.ok()) return all.status();
  std::optional<uint32_t> segments_txn;
  for (auto it = all->rbegin(); it != all->rend(); ++it) {
    if (EndsWithCommit(it->path, it->size)) { segments_txn = it->number; break; }
  }
  std::map<uint32_t, const SegmentFile*> by_number;
  for (const SegmentFile& s : *all) by_number[s.number] = &s;
  std::optional<IndexInfo> index = LoadIndex(path, plan);

  std::optional<uint64_t> commit_end;  // of segment `transaction`, when it has stray bytes
  if (index && (!segments_txn || index->transaction > *segments_txn)) {
    plan.transaction = index->transaction;
    auto it = by_number.find(plan.transaction);
    if (it == by_number.end() || it->second->size == 0) {
      plan.findings.push_back(MakeFinding(Severity::kError, Stage::kMissing,
          fmt::format("segment {} holding the COMMIT of transaction {} (recorded by index.{}) is missing",
                      plan.transaction, plan.transaction, plan.transaction),
          plan.transaction, std::nullopt));
    } else {
      // Find the COMMIT: the segment may have stray bytes after it.
      Borg2Segment probe{it->second->number, it->second->path, it->second->size, it->second->size, {}};
      Borg2Plan scratch;
      std::set<Id> ignored;
      WalkSegment(probe, nullptr, scratch, ignored);
      for (const Borg2Entry& e : probe.entries) {
        if (e.tag == kB2TagCommit) commit_end = uint64_t(e.offset) + e.size;
      }
      if (commit_end) {
        plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kSegment,
            fmt::format("{} stray bytes after the final COMMIT of transaction {} (a crashed or damaged "
                        "write); the transaction is committed (index.{} records it) and is verified in "
                        "full; borg would drop this whole transaction",
                        it->second->size - *commit_end, plan.transaction, plan.transaction),
            plan.transaction, *commit_end));
      } else {
        plan.findings.push_back(MakeFinding(Severity::kError, Stage::kTruncated,
            fmt::format("segment {} should end transaction {} (recorded by index.{}) but holds no "
                        "COMMIT: it is truncated or damaged", plan.transaction, plan.transaction, plan.transaction),
            plan.transaction, std::nullopt));
      }
    }
  } else if (segments_txn) {
    plan.transaction = *segments_txn;
    if (index && index->transaction < *segments_txn) {
      plan.notes.push_back(fmt::format("index.{} is older than the log (transaction {}): a crash between "
                                       "COMMIT and index write; it is not compared with the log",
                                       index->transaction, *segments_txn));
      index.reset();
    }
  } else if (all->empty()) {
    return Status(StatusCode::kCorruptMetadata, "repository " + path + " has no segment files: nothing was ever committed");
  } else {
    return Status(StatusCode::kCorruptMetadata,
                  "repository " + path + " has no committed transaction: no segment ends in a COMMIT entry");
  }

  size_t uncommitted = 0;
  for (const SegmentFile& s : *all) {
    if (s.number > plan.transaction) { ++uncommitted; continue; }
    if (s.size == 0) continue;  // logically deleted (borg truncates before unlinking)
    Borg2Segment seg;
    seg.number = s.number;
    seg.path = s.path;
    seg.file_size = s.size;
    seg.read_limit = s.number == plan.transaction && commit_end ? *commit_end : s.size;
    plan.total_bytes += seg.read_limit;
    plan.segments.push_back(std::move(seg));
  }
  if (uncommitted) {
    plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kSegment,
        fmt::format("{} uncommitted segment file(s) after transaction {} ignored (left by an interrupted "
                    "write; borg deletes them on its next write)", uncommitted, plan.transaction),
        std::nullopt, std::nullopt));
  }

  // 2. Walk. 3. Replay.
  std::set<Id> reported;
  std::unordered_map<Id, std::pair<size_t, size_t>, IdHash> current;  // id -> (segment, entry)
  for (size_t si = 0; si < plan.segments.size(); ++si) {
    Borg2Segment& seg = plan.segments[si];
    WalkSegment(seg, index ? &*index : nullptr, plan, reported);
    for (size_t ei = 0; ei < seg.entries.size(); ++ei) {
      Borg2Entry& e = seg.entries[ei];
      if (e.tag == kB2TagCommit) continue;
      auto it = current.find(e.id);
      if (it != current.end()) {
        plan.segments[it->second.first].entries[it->second.second].live = false;
        if (e.tag == kB2TagDelete) current.erase(it);
      }
      if (e.tag == kB2TagPut || e.tag == kB2TagPut2) {
        e.live = true;
        current[e.id] = {si, ei};
      }
    }
  }
  plan.live_objects = current.size();
  for (const Borg2Segment& s : plan.segments) {
    for (const Borg2Entry& e : s.entries) {
      if ((e.tag == kB2TagPut || e.tag == kB2TagPut2) && !e.live) ++plan.superseded_puts;
    }
  }

  // 4. Cross-check with the index. Ids it names that the log cannot give are lost objects.
  if (index) {
    plan.index_checked = true;
    std::map<uint32_t, const Borg2Segment*> planned;
    for (const Borg2Segment& s : plan.segments) planned[s.number] = &s;
    std::set<uint32_t> missing_reported;
    std::set<Id> live_ids;  // current ids the loop below has already matched (and erased)
    for (const Borg2IndexEntry& ie : index->entries) {
      auto it = current.find(ie.id);
      if (it != current.end()) {
        const Borg2Segment& s = plan.segments[it->second.first];
        const Borg2Entry& e = s.entries[it->second.second];
        uint32_t payload = e.size - uint32_t(e.tag == kB2TagPut2 ? kB2Put2HeaderSize : kB2PutHeaderSize);
        if (s.number != ie.segment || e.offset != ie.offset || payload != ie.size) {
          plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kIndex,
              fmt::format("index.{} lists this chunk at [segment {}, offset {}] with {} bytes; the log has "
                          "it here with {} bytes (borg rebuilds the index from the log)",
                          index->transaction, ie.segment, ie.offset, ie.size, payload),
              s.number, e.offset, &ie.id));
        }
        live_ids.insert(ie.id);
        current.erase(it);
        continue;
      }
      if (reported.count(ie.id)) continue;  // named by a damage finding already
      auto sit = planned.find(ie.segment);
      Stage stage = Stage::kMissing;
      std::string msg;
      if (sit == planned.end()) {
        auto fit = by_number.find(ie.segment);
        if (fit == by_number.end() || fit->second->size == 0) {
          msg = fmt::format("segment file {} is missing: this chunk (listed by index.{}) is lost",
                            SegmentPath(path, config.segments_per_dir, ie.segment), index->transaction);
          if (missing_reported.insert(ie.segment).second) {
            plan.findings.push_back(MakeFinding(Severity::kError, Stage::kMissing,
                fmt::format("committed segment file {} is missing", SegmentPath(path, config.segments_per_dir, ie.segment)),
                ie.segment, std::nullopt));
          }
        } else {
          msg = fmt::format("index.{} places this chunk in segment {}, after the committed transaction {}",
                            index->transaction, ie.segment, plan.transaction);
          stage = Stage::kIndex;
        }
      } else if (ie.offset >= sit->second->read_limit) {
        stage = Stage::kTruncated;
        msg = fmt::format("index.{} places this chunk at offset {}, beyond the end of the segment ({} bytes): "
                          "the segment is truncated", index->transaction, ie.offset, sit->second->read_limit);
      } else {
        msg = fmt::format("index.{} lists this chunk here, but the log holds no current copy of it "
                          "(a lost PUT, or a DELETE the index does not know)", index->transaction);
      }
      plan.findings.push_back(MakeFinding(Severity::kError, stage, msg, ie.segment, ie.offset, &ie.id));
      reported.insert(ie.id);
    }
    for (const Id& id : reported) plan.lost_objects += !current.count(id) && !live_ids.count(id);
    for (const auto& [id, loc] : current) {
      const Borg2Segment& s = plan.segments[loc.first];
      plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kIndex,
          fmt::format("the log stores this chunk but index.{} does not list it (borg rebuilds the index "
                      "from the log)", index->transaction),
          s.number, s.entries[loc.second].offset, &id));
    }
  }
  return plan;
}

}  // namespace borgcheck::repo
