// Repository version 2 segments, index and planning (see borg2_segments.h for the outline).
#include "checker/repo/borg2b5/borg2b5_segments.h"

#include <algorithm>
#include <cctype>
#include <cstring>
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
#include "checker/repo/borg_lock.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/segment_log/segment_files.h"
#include "checker/repo/segment_log/segment_format.h"
#include "checker/repo/segment_log/segment_records.h"
#include "checker/repo/text_util.h"

namespace borgcheck::repo {
using report::Finding;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;
using Id = ChunkId;

namespace {

constexpr uint64_t kResyncWindow = 1 << 20;

// Whether a whole entry starting at `off` validates: header, CRC, and a PUT2's xxh64 (or a
// PUT's whole-entry CRC). Reads what it needs.
bool ValidEntryAt(const io::File& f, uint64_t off, uint64_t limit, const uint8_t* hdr_bytes,
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
uint64_t Resync(const io::File& f, uint64_t from, uint64_t limit) {
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
  auto invalid = [&](std::string msg, bool truncated = false) {
    h.truncated = truncated;
    if (why) *why = std::move(msg);
    return HeaderParse::kInvalid;
  };
  h.truncated = false;
  if (bytes_left_in_file < kB2CommitSize) {
    return invalid(fmt::format("truncated entry header: only {} bytes left in the segment", bytes_left_in_file), true);
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
                               "left): truncated", h.size, bytes_left_in_file),
                   true);
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
      return Status(StatusCode::kInvalidRepositoryConfig, "config: invalid segments_per_dir '" + *s + "'");
    }
    c.segments_per_dir = uint32_t(n);
  }
  const std::string* id = get("id");
  if (!id || id->size() != 64 || !FromHex(*id, c.id)) {
    return Status(StatusCode::kInvalidRepositoryConfig, "config: repository id is not 64 hex digits");
  }
  c.id_hex = Lower(*id);
  if (const std::string* k = get("key")) c.key_base64 = WithoutWhitespace(*k);
  return c;
}

Result<Borg2Config> IdentifyBorg2Repository(const io::Env& env, const std::string& path, bool bypass_lock,
                                            const std::optional<std::string>& config_text) {
  Result<std::string> text = ReadSegmentLogConfig(env, path, config_text);
  if (!text.ok()) return text.status();
  Result<Borg2Config> config = ParseBorg2Config(*text);
  if (!config.ok()) return Status(config.status().code(), path + ": " + config.status().message());
  if (Status s = CheckBorgLock(env, path, bypass_lock, config->lock_findings); !s.ok()) return s;
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

std::vector<Borg2IndexEntry> SalvageBorg2Index(Bytes file) {
  std::vector<Borg2IndexEntry> out;
  if (file.size() < kB2IndexHeaderSize) return out;
  for (uint64_t at = kB2IndexHeaderSize; at + kB2IndexBucketSize <= file.size(); at += kB2IndexBucketSize) {
    const uint8_t* p = file.data() + at;
    const uint32_t seg = LoadLE32(p + 32);
    if (seg == kIndexEmpty || seg == kIndexDeleted || seg > kIndexMaxValue) continue;
    Borg2IndexEntry e;
    std::memcpy(e.id.data(), p, 32);
    e.segment = seg;
    e.offset = LoadLE32(p + 36);
    e.size = LoadLE32(p + 40);
    out.push_back(e);
  }
  return out;
}

// ---- planning -----------------------------------------------------------------------------------

namespace {

struct IndexInfo {
  uint32_t transaction = 0;
  std::vector<Borg2IndexEntry> entries;
  // (segment, offset) -> position in entries, for naming objects in damaged regions
  std::map<std::pair<uint32_t, uint32_t>, size_t> by_location;
};

// Reads index.T (T = FindIndexTransaction's answer) and its integrity file; a finding (warning)
// when it exists but cannot be used. An index that exists but cannot be used keeps its bytes in
// *damaged (to name lost objects: segment_log/segment_records.h) and why in *damaged_why.
std::optional<IndexInfo> LoadIndex(const io::Env& env, const std::string& path, std::optional<uint32_t> t,
                                   Borg2Plan& plan, std::optional<std::string>* damaged, std::string* damaged_why) {
  if (!t) {
    plan.notes.push_back("no index.T: the log replay is not cross-checked against an index");
    return std::nullopt;
  }
  std::string name = fmt::format("index.{}", *t);
  Result<std::string> bytes = env.ReadWholeFile(path + "/" + name, uint64_t(64) << 30);
  std::string why;
  if (!bytes.ok() && bytes.status().code() == StatusCode::kIoError) {
    plan.findings.push_back(UnreadableFinding(
        Location::None(), nullptr,
        fmt::format("{} cannot be read ({}): the log replay is not cross-checked; losses only the index could "
                    "name are not checked",
                    name, bytes.status().message())));
    return std::nullopt;
  }
  std::optional<std::string> kept;  // the bytes, while they may still be needed as a damaged index
  if (bytes.ok()) {
    Result<std::string> integ = env.ReadWholeFile(fmt::format("{}/integrity.{}", path, *t), 1 << 20);
    if (integ.ok()) {
      IntegrityOutcome o = CheckIndexIntegrity(AsBytes(*bytes), name, kB2IndexHeaderSize, AsBytes(*integ), &why);
      if (o != IntegrityOutcome::kVerified) {
        kept = std::move(bytes).value();
        bytes = Status(StatusCode::kCorruptMetadata, why);
      }
    } else if (integ.status().code() == StatusCode::kIoError) {
      plan.findings.push_back(UnreadableFinding(
          Location::None(), nullptr,
          fmt::format("integrity.{} cannot be read ({}): {} cannot be verified; the log replay is not cross-checked",
                      *t, integ.status().message(), name)));
      return std::nullopt;
    } else {
      plan.notes.push_back(fmt::format("{} has no integrity.{} file: its checksum was not verified", name, *t));
    }
  }
  Result<std::vector<Borg2IndexEntry>> parsed =
      bytes.ok() ? ParseBorg2Index(AsBytes(*bytes)) : Result<std::vector<Borg2IndexEntry>>(bytes.status());
  if (!parsed.ok()) {
    if (!kept && bytes.ok()) kept = std::move(bytes).value();
    if (kept && damaged) {
      *damaged = std::move(kept);
      if (damaged_why) *damaged_why = parsed.status().message();
    }
    plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kIndex, Location::None(), nullptr, fmt::format("{} cannot be used ({}); borg would rebuild it from the log; the log replay is "
                    "not cross-checked", name, parsed.status().message())));
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
// ids of index entries named by damage findings. When a read fails, seg.unreadable is set and
// seg.unreadable_why says why.
void WalkSegment(const io::Env& env, Borg2Segment& seg, const IndexInfo* index, Borg2Plan& plan,
                 std::set<Id>& reported) {
  // The data pass reads the segment again: the pages this walk's read-ahead brings in stay
  // for it (io::Env::OpenToReadAgain; dropping them made a cold run read 1.5x the segments).
  Result<std::unique_ptr<io::File>> opened = env.OpenToReadAgain(seg.path);
  if (!opened.ok()) {
    if (opened.status().code() == StatusCode::kIoError) {
      seg.unreadable = true;
      seg.unreadable_why = opened.status().message();
      plan.findings.push_back(UnreadableFinding(Location::Segment(seg.number), nullptr,
                                                "cannot read segment file: " + opened.status().message() +
                                                    "; its objects are not checked"));
    } else {
      plan.findings.push_back(MakeFinding(Severity::kError, Stage::kMissing, Location::Segment(seg.number), nullptr,
                                          "cannot open segment: " + opened.status().message()));
    }
    return;
  }
  const io::File& f = **opened;
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
        plan.findings.push_back(MakeFinding(Severity::kError, stage, Location::Segment(seg.number, e.offset), &e.id, msg));
        reported.insert(e.id);
        named = true;
      }
    }
    if (!named) {
      if (stage != Stage::kIo) seg.damage_unnamed++;
      std::string claim;
      if (hdr_len >= 41 && (hdr[8] == kB2TagPut2 || hdr[8] == kB2TagPut || hdr[8] == kB2TagDelete)) {
        claim = " (the damaged header names chunk " + ToHex(Bytes(hdr + 9, 32)) + ")";
      }
      plan.findings.push_back(MakeFinding(Severity::kError, stage, Location::Segment(seg.number, from), nullptr, fmt::format("{}{}; {}", why, claim, region)));
    }
  };

  uint8_t magic[kSegmentMagicSize];
  if (limit < kSegmentMagicSize || !f.ReadAt(0, sizeof magic, magic).ok() ||
      std::memcmp(magic, kSegmentMagic, sizeof magic) != 0) {
    plan.findings.push_back(MakeFinding(Severity::kError, Stage::kSegment, Location::Segment(seg.number, 0), nullptr, "invalid segment magic (expected BORG_SEG); the entries after it are still walked"));
    if (limit < kSegmentMagicSize) return;
  }
  uint64_t off = kSegmentMagicSize;
  uint8_t hdr[kB2Put2HeaderSize];
  while (off < limit) {
    size_t n = size_t(std::min<uint64_t>(sizeof hdr, limit - off));
    if (Status s = f.ReadAt(off, n, hdr); !s.ok()) {
      seg.unreadable = true;  // what follows is not known, not lost
      seg.unreadable_why = s.message();
      damaged(off, limit, Stage::kIo, "cannot read the segment (" + s.message() + "): not checked", hdr, 0);
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
      if (p == HeaderParse::kNeedMore || h.truncated) stage = Stage::kTruncated;
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

Result<Borg2Plan> PlanBorg2Repository(const io::Env& env, const std::string& path, const Borg2Config& config,
                                      const RepoFolder& folder) {
  Borg2Plan plan;
  plan.path = path;
  plan.config = config;
  plan.findings = config.lock_findings;

  // 1. Segments, the newest COMMIT, the index and the other records.
  Result<SegmentLog> log =
      ListSegmentLog(env, path, config.segments_per_dir, Bytes(kCommitEntry, kB2CommitSize), folder);
  if (!log.ok()) return log.status();
  std::optional<std::string> damaged_index;  // an index.T that cannot be used: names lost objects
  std::string damaged_why;
  std::optional<IndexInfo> index = LoadIndex(env, path, folder.index_txn, plan, &damaged_index, &damaged_why);

  // A record of a newer transaction than the log's newest COMMIT (index.T, else hints.T or
  // integrity.T) proves that commit: segment T must hold it.
  std::optional<uint64_t> commit_end;  // of segment `transaction`, when it has stray bytes
  auto check_recorded_commit = [&](uint32_t t) {
    // The walk finds the COMMIT even with stray bytes (or damage) after it.
    auto probe = [&](const SegmentFile& s) {
      CommitProbe p;
      Borg2Segment seg;
      seg.number = s.number;
      seg.path = s.path;
      seg.file_size = seg.read_limit = s.size;
      Borg2Plan scratch;
      std::set<Id> ignored;
      WalkSegment(env, seg, nullptr, scratch, ignored);
      for (const Borg2Entry& e : seg.entries) {
        if (e.tag == kB2TagCommit) p.commit_end = uint64_t(e.offset) + e.size;
      }
      p.unreadable = seg.unreadable;
      p.why = seg.unreadable_why;
      return p;
    };
    commit_end = CheckRecordedCommit(*log, t, probe, plan.findings).commit_end;
  };
  const std::optional<uint32_t> recorded = log->records.Newest();
  if (index && (!log->newest_commit || index->transaction > *log->newest_commit)) {
    plan.transaction = index->transaction;
    check_recorded_commit(plan.transaction);
  } else if (recorded && (!log->newest_commit || *recorded > *log->newest_commit) &&
             (!index || index->transaction < *recorded)) {
    plan.transaction = *recorded;
    check_recorded_commit(plan.transaction);
    if (index) {
      plan.notes.push_back(fmt::format("index.{} is older than transaction {} ({}): it is not compared with the log",
                                       index->transaction, *recorded, log->records.NamesOf(*recorded)));
      index.reset();
    }
  } else if (log->newest_commit) {
    plan.transaction = *log->newest_commit;
    if (index && index->transaction < *log->newest_commit) {
      plan.notes.push_back(fmt::format("index.{} is older than the log (transaction {}): a crash between "
                                       "COMMIT and index write; it is not compared with the log",
                                       index->transaction, *log->newest_commit));
      index.reset();
    }
  } else if (log->segments.empty()) {
    return Status(StatusCode::kCorruptMetadata, "repository " + path + " has no segment files: nothing was ever committed");
  } else {
    return Status(StatusCode::kCorruptMetadata,
                  "repository " + path + " has no committed transaction: no segment ends in a COMMIT entry");
  }
  AppendFindingsAfterTransaction(env, *log, plan.transaction, plan.findings);
  for (const SegmentFile& s : log->segments) {
    // An empty one is logically deleted (borg truncates before unlinking).
    if (s.number > plan.transaction || s.size == 0) continue;
    Borg2Segment seg;
    seg.number = s.number;
    seg.path = s.path;
    seg.file_size = s.size;
    seg.read_limit = s.number == plan.transaction && commit_end ? *commit_end : s.size;
    plan.total_bytes += seg.read_limit;
    plan.segments.push_back(std::move(seg));
  }

  // 2. Walk. 3. Replay.
  std::set<Id> reported;
  std::unordered_map<Id, std::pair<size_t, size_t>, IdHash> current;  // id -> (segment, entry)
  for (size_t si = 0; si < plan.segments.size(); ++si) {
    Borg2Segment& seg = plan.segments[si];
    WalkSegment(env, seg, index ? &*index : nullptr, plan, reported);
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
    // What the log holds at a location: an index entry that points at another chunk's entry
    // says so.
    auto entry_at = [&](uint32_t segment, uint32_t offset) -> const Borg2Entry* {
      auto ps = planned.find(segment);
      if (ps == planned.end()) return nullptr;
      const std::vector<Borg2Entry>& es = ps->second->entries;
      auto e = std::lower_bound(es.begin(), es.end(), offset,
                                [](const Borg2Entry& x, uint32_t o) { return x.offset < o; });
      return e != es.end() && e->offset == offset ? &*e : nullptr;
    };
    for (const Borg2IndexEntry& ie : index->entries) {
      auto it = current.find(ie.id);
      if (it != current.end()) {
        const Borg2Segment& s = plan.segments[it->second.first];
        const Borg2Entry& e = s.entries[it->second.second];
        uint32_t payload = e.size - uint32_t(e.tag == kB2TagPut2 ? kB2Put2HeaderSize : kB2PutHeaderSize);
        if (s.number != ie.segment || e.offset != ie.offset || payload != ie.size) {
          std::string there;
          if (const Borg2Entry* other = entry_at(ie.segment, ie.offset); other && other->id != ie.id) {
            there = other->tag == kB2TagCommit ? ", a COMMIT entry"
                    : fmt::format(", the {} entry of chunk {}", other->tag == kB2TagDelete ? "DELETE" : "PUT",
                                  ToHex(Bytes(other->id.data(), 32)));
          }
          plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kIndex, Location::Segment(s.number, e.offset), &ie.id, fmt::format("index.{} lists this chunk at [segment {}, offset {}]{} with {} bytes; the log has "
                          "it here with {} bytes and it is verified here (borg rebuilds the index from the log)",
                          index->transaction, ie.segment, ie.offset, there, ie.size, payload)));
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
        if (log->Absent(ie.segment)) {
          const std::string what = log->Absence(ie.segment);
          msg = fmt::format("segment file {} {}: this chunk (listed by index.{}) is lost", log->PathOf(ie.segment),
                            what, index->transaction);
          if (missing_reported.insert(ie.segment).second) {
            plan.findings.push_back(MakeFinding(Severity::kError, Stage::kMissing, Location::Segment(ie.segment),
                                                nullptr,
                                                fmt::format("committed segment file {} {}", log->PathOf(ie.segment),
                                                            what)));
          }
        } else {
          msg = fmt::format("index.{} places this chunk in segment {}, after the committed transaction {}",
                            index->transaction, ie.segment, plan.transaction);
          stage = Stage::kIndex;
        }
      } else if (sit->second->unreadable) {
        stage = Stage::kIo;
        msg = fmt::format("index.{} lists this chunk here; the segment cannot be read ({}): not checked",
                          index->transaction, sit->second->unreadable_why);
      } else if (ie.offset >= sit->second->read_limit) {
        stage = Stage::kTruncated;
        // The offset is in the location, not the message, so the text report rolls one
        // truncated segment's chunks up into one group (as borg 1.x's reader does).
        msg = fmt::format("index.{} places this chunk beyond the end of the segment ({} bytes): "
                          "the segment is truncated", index->transaction, sit->second->read_limit);
      } else {
        msg = fmt::format("index.{} lists this chunk here, but the log holds no current copy of it "
                          "(a lost PUT, or a DELETE the index does not know)", index->transaction);
      }
      plan.findings.push_back(MakeFinding(Severity::kError, stage, Location::Segment(ie.segment, ie.offset), &ie.id, msg));
      reported.insert(ie.id);
    }
    for (const Id& id : reported) plan.lost_objects += !current.count(id) && !live_ids.count(id);
    for (const auto& [id, loc] : current) {
      const Borg2Segment& s = plan.segments[loc.first];
      plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kIndex, Location::Segment(s.number, s.entries[loc.second].offset), &id, fmt::format("the log stores this chunk but index.{} does not list it (borg rebuilds the index "
                      "from the log)", index->transaction)));
    }
  }

  // 5. Every other record of what should exist: hints.T, an index that cannot be used, what
  // stands where a segment should be (segment_log/segment_records.h).
  RecordLossInput in = MakeRecordLossInput(*log, plan.transaction);
  for (const Borg2Segment& seg : plan.segments) {
    if (seg.unreadable) in.unreadable.insert(seg.number);
    if (seg.damage_unnamed) in.damage_reported[seg.number] = seg.damage_unnamed;
    for (const Borg2Entry& e : seg.entries) in.live_per_segment[seg.number] += e.live;
  }
  if (index) {
    for (const Borg2IndexEntry& ie : index->entries) in.reported.insert(ie.segment);
  }
  in.compare_counts = !index;
  std::set<Id> log_ids;  // ids the replay gives
  if (damaged_index && log->records.index == plan.transaction && !index) {
    for (const Borg2Segment& seg : plan.segments) {
      for (const Borg2Entry& e : seg.entries) {
        if (e.live) log_ids.insert(e.id);
      }
    }
    UseDamagedIndex(in, SalvageBorg2Index(AsBytes(*damaged_index)), damaged_why,
                    [&](const report::ChunkId& id) { return log_ids.count(id) > 0; });
    damaged_index.reset();
  }
  plan.lost_objects += CheckRecordsOfTransaction(env, *log, std::move(in), plan.findings);
  return plan;
}

}  // namespace borgcheck::repo
