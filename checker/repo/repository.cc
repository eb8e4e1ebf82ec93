#include "checker/repo/repository.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "checker/repo/chunk_id.h"
#include "checker/repo/file.h"
#include "checker/repo/hashindex.h"
#include "checker/repo/segment_entry.h"
#include "checker/repo/segment_format.h"

namespace borgcheck::repo {
namespace fs = std::filesystem;
using report::Finding;
using report::Severity;
using report::Stage;

namespace {

bool ParseDecimal(const std::string& s, uint32_t& out) {
  if (s.empty() || s.size() > 10) return false;
  for (char c : s) if (c < '0' || c > '9') return false;
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  if (v > UINT32_MAX) return false;
  out = uint32_t(v);
  return true;
}

// Walks entry headers of a segment with one small pread per entry (data is skipped).
// Calls on_entry(offset, header); stops at `limit`, at the end, or at an invalid header,
// returning the offset where it stopped and, if invalid, why.
struct WalkEnd {
  uint64_t offset = 0;
  bool clean = true;  // reached `limit` exactly
  std::string why;
};

template <typename F>
WalkEnd WalkHeaders(const ReadOnlyFile& f, uint64_t limit, F&& on_entry) {
  WalkEnd end;
  uint8_t magic[kSegmentMagicSize];
  if (limit < kSegmentMagicSize || !f.ReadAt(0, kSegmentMagicSize, magic).ok() ||
      std::memcmp(magic, kSegmentMagic, kSegmentMagicSize) != 0) {
    end.clean = false;
    end.why = "invalid segment magic";
    return end;
  }
  uint64_t off = kSegmentMagicSize;
  uint8_t hdr[kHeaderSizeWithKey];
  while (off < limit) {
    size_t n = size_t(std::min<uint64_t>(kHeaderSizeWithKey, limit - off));
    if (Status s = f.ReadAt(off, n, hdr); !s.ok()) {
      end = {off, false, s.message()};
      return end;
    }
    EntryHeader h;
    std::string why;
    HeaderParse p = ParseEntryHeader(Bytes(hdr, n), limit - off, h, &why);
    if (p != HeaderParse::kOk) {
      end = {off, false, p == HeaderParse::kNeedMore ? "truncated entry header" : why};
      return end;
    }
    if (!on_entry(off, h)) {
      end.offset = off + h.size;
      return end;
    }
    off += h.size;
  }
  end.offset = off;
  return end;
}

bool EndsWithCommit(const SegmentFile& s) {
  if (s.size < kSegmentMagicSize + sizeof kCommitEntry) return false;
  Result<ReadOnlyFile> f = ReadOnlyFile::Open(s.path);
  if (!f.ok()) return false;
  uint8_t tail[sizeof kCommitEntry];
  if (!f->ReadAt(f->size() - sizeof tail, sizeof tail, tail).ok()) return false;
  return std::memcmp(tail, kCommitEntry, sizeof tail) == 0;
}

Finding PlanFinding(Severity sev, Stage stage, std::string msg,
                    std::optional<uint32_t> segment = std::nullopt,
                    std::optional<uint64_t> offset = std::nullopt) {
  Finding f;
  f.severity = sev;
  f.stage = stage;
  f.message = std::move(msg);
  f.segment = segment;
  f.offset = offset;
  return f;
}

}  // namespace

std::string SegmentPath(const std::string& repo, uint32_t segments_per_dir, uint32_t segment) {
  return fmt::format("{}/data/{}/{}", repo, segment / segments_per_dir, segment);
}

const LiveObject* RepositoryPlan::FindById(const std::array<uint8_t, 32>& id) const {
  auto it = std::lower_bound(live_by_id.begin(), live_by_id.end(), id,
                             [&](uint32_t i, const std::array<uint8_t, 32>& k) { return live[i].id < k; });
  if (it == live_by_id.end() || live[*it].id != id) return nullptr;
  return &live[*it];
}

Result<RepoConfig> IdentifyRepository(const std::string& path, const OpenOptions& opts) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    return Status(StatusCode::kNotFound, "repository " + path + " does not exist");
  }
  if (!fs::is_directory(st)) {
    return Status(StatusCode::kNotARepository,
                  path + " is not a borg repository: it is not a directory");
  }
  fs::path cfg = fs::path(path) / "config";
  if (fs::is_directory(cfg, ec)) {
    return Status(StatusCode::kUnsupported,
                  path + " looks like a borg 2 (borgstore) repository: its config is a "
                         "directory; borg 2 repositories are not supported yet");
  }
  Result<std::string> text = ReadWholeFile(cfg.string(), 1 << 20);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return Status(StatusCode::kNotARepository,
                    path + " is not a borg repository: it has no 'config' file (expected a "
                           "directory made by 'borg init' with config, data/ and README)");
    }
    return text.status();
  }
  Result<RepoConfig> config = ParseRepoConfig(*text);
  if (!config.ok()) {
    const Status& s = config.status();
    if (s.code() == StatusCode::kNotARepository) {
      return Status(s.code(), path + " is not a borg repository: " + s.message());
    }
    return Status(s.code(), path + ": " + s.message());
  }
  if (fs::exists(fs::path(path) / "lock.exclusive", ec) && !opts.bypass_lock) {
    return Status(StatusCode::kLockHeld,
                  "repository " + path + " is locked by borg (lock.exclusive exists): a backup, "
                  "prune or compact may be writing. Run again when it has finished, or pass "
                  "--bypass-lock to check anyway (results may then report changes in progress)");
  }
  return config;
}

Result<std::vector<SegmentFile>> ListSegmentFiles(const std::string& path) {
  std::vector<SegmentFile> out;
  std::error_code ec;
  fs::path data = fs::path(path) / "data";
  if (!fs::is_directory(data, ec)) {
    return Status(StatusCode::kNotARepository, path + " has no data/ directory");
  }
  for (const auto& dir : fs::directory_iterator(data, ec)) {
    uint32_t d;
    if (!ParseDecimal(dir.path().filename().string(), d) || !dir.is_directory()) continue;
    std::error_code ec2;
    for (const auto& file : fs::directory_iterator(dir.path(), ec2)) {
      uint32_t s;
      if (!ParseDecimal(file.path().filename().string(), s) || !file.is_regular_file()) continue;
      out.push_back({s, file.path().string(), uint64_t(file.file_size(ec2))});
    }
    if (ec2) return Status(StatusCode::kIoError, dir.path().string() + ": " + ec2.message());
  }
  if (ec) return Status(StatusCode::kIoError, data.string() + ": " + ec.message());
  std::sort(out.begin(), out.end(), [](const SegmentFile& a, const SegmentFile& b) { return a.number < b.number; });
  return out;
}

std::optional<uint32_t> FindIndexTransaction(const std::string& path) {
  std::optional<uint32_t> best;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    std::string name = e.path().filename().string();
    uint32_t t;
    if (name.rfind("index.", 0) != 0 || !ParseDecimal(name.substr(6), t)) continue;
    std::error_code ec2;
    if (!e.is_regular_file() || e.file_size(ec2) == 0) continue;
    if (!best || t > *best) best = t;
  }
  return best;
}

Result<RepositoryPlan> PlanRepository(const std::string& path, const RepoConfig& config) {
  RepositoryPlan plan;
  plan.path = path;
  plan.config = config;

  // 2. Segments and the newest COMMIT.
  Result<std::vector<SegmentFile>> all = ListSegmentFiles(path);
  if (!all.ok()) return all.status();
  std::optional<uint32_t> segments_txn;
  for (auto it = all->rbegin(); it != all->rend(); ++it) {
    if (EndsWithCommit(*it)) { segments_txn = it->number; break; }
  }
  std::map<uint32_t, const SegmentFile*> by_number;
  for (const SegmentFile& s : *all) by_number[s.number] = &s;

  // 3. The index and its integrity file.
  std::optional<uint32_t> index_txn = FindIndexTransaction(path);
  std::optional<HashIndexContents> index;
  if (index_txn) {
    std::string name = fmt::format("index.{}", *index_txn);
    // An index for N objects has fewer than 2N+1031 buckets; 64 GiB covers over a billion.
    Result<std::string> bytes = ReadWholeFile(path + "/" + name, uint64_t(64) << 30);
    bool usable = bytes.ok();
    std::string why = bytes.ok() ? "" : bytes.status().message();
    if (usable) {
      Result<std::string> integ = ReadWholeFile(fmt::format("{}/integrity.{}", path, *index_txn), 1 << 20);
      if (integ.ok()) {
        IntegrityOutcome o = CheckIndexIntegrity(AsBytes(*bytes), name, AsBytes(*integ), &why);
        usable = o == IntegrityOutcome::kVerified;
      }
    }
    if (usable) {
      Result<HashIndexContents> parsed = ParseHashIndex(AsBytes(*bytes));
      if (parsed.ok()) index = std::move(parsed).value();
      else { usable = false; why = parsed.status().message(); }
    }
    if (!usable) {
      plan.findings.push_back(PlanFinding(Severity::kWarning, Stage::kIndex,
          fmt::format("{} cannot be used ({}); borg would discard and rebuild it; the live "
                      "objects are taken from the log instead", name, why)));
    }
  }

  // 4. Choose the transaction and the source of the live list.
  bool use_index = false;
  if (index && (!segments_txn || *index_txn >= *segments_txn)) {
    use_index = true;
    plan.transaction = *index_txn;
    if (!segments_txn || *index_txn > *segments_txn) {
      // index.T names a transaction whose segment does not end in COMMIT.
      auto it = by_number.find(*index_txn);
      if (it == by_number.end()) {
        plan.findings.push_back(PlanFinding(Severity::kError, Stage::kMissing,
            fmt::format("segment {} holding the COMMIT of transaction {} (recorded by index.{}) "
                        "is missing", *index_txn, *index_txn, *index_txn), *index_txn));
      } else {
        Result<ReadOnlyFile> f = ReadOnlyFile::Open(it->second->path);
        std::optional<uint64_t> commit_end;
        if (f.ok()) {
          WalkHeaders(*f, f->size(), [&](uint64_t off, const EntryHeader& h) {
            if (h.tag == kTagCommit) { commit_end = off + h.size; return false; }
            return true;
          });
        }
        if (commit_end) {
          plan.commit_end_of_last_segment = commit_end;
          plan.findings.push_back(PlanFinding(Severity::kWarning, Stage::kSegment,
              fmt::format("{} stray bytes after the final COMMIT of transaction {} (a crashed or "
                          "damaged write); the transaction is committed (index.{} records it) and "
                          "was verified in full. borg would silently drop this whole transaction",
                          it->second->size - *commit_end, *index_txn, *index_txn),
              *index_txn, *commit_end));
        } else {
          plan.findings.push_back(PlanFinding(Severity::kError, Stage::kTruncated,
              fmt::format("segment {} should end transaction {} (recorded by index.{}) but holds "
                          "no COMMIT: it is truncated or damaged", *index_txn, *index_txn, *index_txn),
              *index_txn));
        }
      }
    }
  } else if (segments_txn) {
    plan.transaction = *segments_txn;
    if (index && *index_txn < *segments_txn) {
      plan.notes.push_back(fmt::format(
          "index.{} is older than the log (transaction {}): a crash between COMMIT and index "
          "write; borg would update it on next use. Live objects taken from the log",
          *index_txn, *segments_txn));
    }
  } else if (all->empty()) {
    return Status(StatusCode::kCorruptMetadata,
                  "repository " + path + " has no segment files: nothing was ever committed");
  } else {
    return Status(StatusCode::kCorruptMetadata,
                  "repository " + path + " has no committed transaction: no segment ends in "
                  "a COMMIT entry");
  }

  for (const SegmentFile& s : *all) {
    if (s.number <= plan.transaction) {
      if (s.size == 0) continue;  // logically deleted (borg truncates before unlinking)
      plan.segments.push_back(s);
      plan.total_bytes += s.number == plan.transaction && plan.commit_end_of_last_segment
                              ? *plan.commit_end_of_last_segment : s.size;
    }
  }
  size_t uncommitted = std::count_if(all->begin(), all->end(),
                                     [&](const SegmentFile& s) { return s.number > plan.transaction; });
  if (uncommitted) {
    plan.findings.push_back(PlanFinding(Severity::kWarning, Stage::kSegment,
        fmt::format("{} uncommitted segment file(s) after transaction {} ignored (left by an "
                    "interrupted write; borg deletes them on its next write)",
                    uncommitted, plan.transaction)));
  }

  // Live list.
  if (use_index) {
    plan.live_from_index = true;
    plan.live.reserve(index->entries.size());
    for (const IndexEntry& e : index->entries) {
      if (e.segment > plan.transaction || e.offset < kSegmentMagicSize) {
        Finding f = PlanFinding(Severity::kError, Stage::kIndex,
            fmt::format("index.{} places this chunk outside the committed log", plan.transaction),
            e.segment, e.offset);
        f.chunk_id = e.id;
        plan.findings.push_back(std::move(f));
        continue;
      }
      plan.live.push_back({e.id, e.segment, e.offset});
    }
    index.reset();
  } else {
    std::unordered_map<std::array<uint8_t, 32>, std::pair<uint32_t, uint32_t>, IdHash> replay;
    for (const SegmentFile& s : plan.segments) {
      Result<ReadOnlyFile> f = ReadOnlyFile::Open(s.path);
      if (!f.ok()) continue;  // the verify pass reports it
      WalkHeaders(*f, f->size(), [&](uint64_t off, const EntryHeader& h) {
        std::array<uint8_t, 32> id;
        if (h.tag == kTagPut || h.tag == kTagDelete) {
          uint8_t key[32];
          if (!f->ReadAt(off + 9, 32, key).ok()) return false;
          std::memcpy(id.data(), key, 32);
          if (h.tag == kTagPut) replay[id] = {s.number, uint32_t(off)};
          else replay.erase(id);
        }
        return true;
      });
    }
    plan.live.reserve(replay.size());
    for (const auto& [id, loc] : replay) plan.live.push_back({id, loc.first, loc.second});
  }
  std::sort(plan.live.begin(), plan.live.end(), [](const LiveObject& a, const LiveObject& b) {
    return a.segment != b.segment ? a.segment < b.segment : a.offset < b.offset;
  });
  if (plan.live_from_index) {
    plan.live_by_id.resize(plan.live.size());
    for (uint32_t i = 0; i < plan.live.size(); ++i) plan.live_by_id[i] = i;
    std::sort(plan.live_by_id.begin(), plan.live_by_id.end(),
              [&](uint32_t a, uint32_t b) { return plan.live[a].id < plan.live[b].id; });
  }
  // Segments the live list needs that are not on disk.
  for (size_t i = 0; i < plan.live.size(); ++i) {
    uint32_t seg = plan.live[i].segment;
    if (i && plan.live[i - 1].segment == seg) continue;
    auto it = by_number.find(seg);
    if (it == by_number.end() || it->second->size == 0) plan.missing_segments.push_back(seg);
  }
  return plan;
}

}  // namespace borgcheck::repo
