#include "checker/repo/borg1/borg1_plan.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "checker/repo/borg_lock.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/borg1/borg1_hashindex.h"
#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/segment_log/segment_format.h"
#include "checker/repo/segment_log/segment_records.h"

namespace borgcheck::repo {
using report::Finding;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;

namespace {

// Walks entry headers of a segment with one small pread per entry (data is skipped).
// Calls on_entry(offset, header); stops at `limit`, at the end, or at an invalid header,
// returning the offset where it stopped and, if invalid, why.
struct WalkEnd {
  uint64_t offset = 0;
  bool clean = true;  // reached `limit` exactly
  bool io = false;    // stopped because a read failed (could not check), not because of damage
  std::string why;
};

template <typename F>
WalkEnd WalkHeaders(const io::File& f, uint64_t limit, F&& on_entry) {
  WalkEnd end;
  uint8_t magic[kSegmentMagicSize];
  Status magic_read = limit < kSegmentMagicSize ? Status::Ok() : f.ReadAt(0, kSegmentMagicSize, magic);
  if (!magic_read.ok()) {
    end.clean = false;
    end.io = true;
    end.why = magic_read.message();
    return end;
  }
  if (limit < kSegmentMagicSize || std::memcmp(magic, kSegmentMagic, kSegmentMagicSize) != 0) {
    end.clean = false;
    end.why = "invalid segment magic";
    return end;
  }
  uint64_t off = kSegmentMagicSize;
  uint8_t hdr[kHeaderSizeWithKey];
  while (off < limit) {
    size_t n = size_t(std::min<uint64_t>(kHeaderSizeWithKey, limit - off));
    if (Status s = f.ReadAt(off, n, hdr); !s.ok()) {
      end = {off, false, true, s.message()};
      return end;
    }
    EntryHeader h;
    std::string why;
    HeaderParse p = ParseEntryHeader(Bytes(hdr, n), limit - off, h, &why);
    if (p != HeaderParse::kOk) {
      end = {off, false, false, p == HeaderParse::kNeedMore ? "truncated entry header" : why};
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

// What segment `s` holds for CheckRecordedCommit: the end of its first COMMIT, or why it could
// not be read.
CommitProbe ProbeCommit(const io::Env& env, const SegmentFile& s) {
  CommitProbe p;
  // Planning reads of a segment: the data pass reads it again (io::Env::OpenToReadAgain).
  Result<std::unique_ptr<io::File>> f = env.OpenToReadAgain(s.path);
  if (!f.ok()) {
    if (f.status().code() == StatusCode::kIoError) {
      p.unreadable = true;
      p.why = f.status().message();
    }
    return p;
  }
  WalkEnd end = WalkHeaders(**f, (*f)->size(), [&](uint64_t off, const EntryHeader& h) {
    if (h.tag == kTagCommit) {
      p.commit_end = off + h.size;
      return false;
    }
    return true;
  });
  if (!p.commit_end && end.io) {
    p.unreadable = true;
    p.why = end.why;
  }
  return p;
}

}  // namespace

const LiveObject* RepositoryPlan::FindById(const std::array<uint8_t, 32>& id) const {
  auto it = std::lower_bound(live_by_id.begin(), live_by_id.end(), id,
                             [&](uint32_t i, const std::array<uint8_t, 32>& k) { return live[i].id < k; });
  if (it == live_by_id.end() || live[*it].id != id) return nullptr;
  return &live[*it];
}

Result<RepoConfig> IdentifyRepository(const io::Env& env, const std::string& path, const OpenOptions& opts) {
  Result<std::string> text = ReadSegmentLogConfig(env, path, opts.config_text);
  if (!text.ok()) return text.status();
  Result<RepoConfig> config = ParseRepoConfig(*text);
  if (!config.ok()) {
    const Status& s = config.status();
    if (s.code() == StatusCode::kNotARepository) {
      return Status(s.code(), path + " is not a borg repository: " + s.message());
    }
    return Status(s.code(), path + ": " + s.message());
  }
  if (Status s = CheckBorgLock(env, path, opts.bypass_lock, config->lock_findings); !s.ok()) return s;
  return config;
}

Result<RepositoryPlan> PlanRepository(const io::Env& env, const std::string& path, const RepoConfig& config,
                                      const RepoFolder& folder) {
  const std::optional<uint32_t> index_txn = folder.index_txn;
  RepositoryPlan plan;
  plan.path = path;
  plan.config = config;
  plan.findings = config.lock_findings;

  // 2. Segments and the newest COMMIT.
  Result<SegmentLog> log =
      ListSegmentLog(env, path, config.segments_per_dir, Bytes(kCommitEntry, sizeof kCommitEntry), folder);
  if (!log.ok()) return log.status();

  // 3. The index and its integrity file.
  std::optional<HashIndexContents> index;
  std::optional<std::string> damaged_index;  // the bytes of an index that cannot be used (to name losses)
  std::string damaged_why;
  if (index_txn) {
    std::string name = fmt::format("index.{}", *index_txn);
    // An index for N objects has fewer than 2N+1031 buckets; 64 GiB covers over a billion.
    Result<std::string> bytes = env.ReadWholeFile(path + "/" + name, uint64_t(64) << 30);
    bool usable = bytes.ok();
    bool unreadable = false;  // an io finding says why it is not used
    std::string why = bytes.ok() ? "" : bytes.status().message();
    if (!bytes.ok() && bytes.status().code() == StatusCode::kIoError) {
      unreadable = true;
      plan.findings.push_back(UnreadableFinding(
          Location::None(), nullptr,
          fmt::format("{} cannot be read ({}): the live objects are taken from the log; losses only the index "
                      "could name are not checked",
                      name, why)));
    }
    if (usable) {
      Result<std::string> integ = env.ReadWholeFile(fmt::format("{}/integrity.{}", path, *index_txn), 1 << 20);
      if (integ.ok()) {
        IntegrityOutcome o = CheckIndexIntegrity(AsBytes(*bytes), name, kIndexHeaderSize, AsBytes(*integ), &why);
        usable = o == IntegrityOutcome::kVerified;
      } else if (integ.status().code() == StatusCode::kIoError) {
        usable = false;
        unreadable = true;
        plan.findings.push_back(UnreadableFinding(
            Location::None(), nullptr,
            fmt::format("integrity.{} cannot be read ({}): {} cannot be verified; the live objects are taken from "
                        "the log",
                        *index_txn, integ.status().message(), name)));
      }
    }
    if (usable) {
      Result<HashIndexContents> parsed = ParseHashIndex(AsBytes(*bytes));
      if (parsed.ok()) index = std::move(parsed).value();
      else { usable = false; why = parsed.status().message(); }
    }
    if (!usable && bytes.ok()) {
      damaged_index = std::move(bytes).value();
      damaged_why = why;
    }
    if (!usable && !unreadable) {
      plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kIndex, Location::None(), nullptr,
                                          fmt::format("{} cannot be used ({}); borg would discard and rebuild it; "
                                                      "the live objects are taken from the log instead",
                                                      name, why)));
    }
  }

  // 4. Choose the transaction and the source of the live list. A record of a newer transaction
  // than the log's newest COMMIT (index.T, else hints.T or integrity.T) proves that commit.
  bool use_index = false;
  const std::optional<uint32_t> recorded = log->records.Newest();
  auto check_recorded_commit = [&](uint32_t t) {
    CommitProbe p = CheckRecordedCommit(
        *log, t, [&](const SegmentFile& s) { return ProbeCommit(env, s); }, plan.findings);
    if (p.commit_end) plan.commit_end_of_last_segment = p.commit_end;
    if (p.unreadable) plan.unreadable_segments.insert(t);
  };
  if (index && (!log->newest_commit || *index_txn >= *log->newest_commit)) {
    use_index = true;
    plan.transaction = *index_txn;
    if (!log->newest_commit || *index_txn > *log->newest_commit) {
      check_recorded_commit(*index_txn);
    }
  } else if (recorded && (!log->newest_commit || *recorded > *log->newest_commit)) {
    plan.transaction = *recorded;
    check_recorded_commit(*recorded);
  } else if (log->newest_commit) {
    plan.transaction = *log->newest_commit;
    if (index && *index_txn < *log->newest_commit) {
      plan.notes.push_back(fmt::format(
          "index.{} is older than the log (transaction {}): a crash between COMMIT and index "
          "write; borg would update it on next use. Live objects taken from the log",
          *index_txn, *log->newest_commit));
    }
  } else if (log->segments.empty()) {
    return Status(StatusCode::kCorruptMetadata,
                  "repository " + path + " has no segment files: nothing was ever committed");
  } else {
    return Status(StatusCode::kCorruptMetadata,
                  "repository " + path + " has no committed transaction: no segment ends in "
                  "a COMMIT entry");
  }
  AppendFindingsAfterTransaction(env, *log, plan.transaction, plan.findings);
  for (const SegmentFile& s : log->segments) {
    if (s.number <= plan.transaction) {
      if (s.size == 0) continue;  // logically deleted (borg truncates before unlinking)
      plan.segments.push_back(s);
      plan.total_bytes += s.number == plan.transaction && plan.commit_end_of_last_segment
                              ? *plan.commit_end_of_last_segment : s.size;
    }
  }

  // Live list.
  if (use_index) {
    plan.live_from_index = true;
    plan.live.reserve(index->entries.size());
    for (const IndexEntry& e : index->entries) {
      if (e.segment > plan.transaction || e.offset < kSegmentMagicSize) {
        plan.findings.push_back(MakeFinding(Severity::kError, Stage::kIndex, Location::Segment(e.segment, e.offset),
                                            &e.id,
                                            fmt::format("index.{} places this chunk outside the committed log",
                                                        plan.transaction)));
        continue;
      }
      plan.live.push_back({e.id, e.segment, e.offset});
    }
    index.reset();
  }
  std::unordered_map<std::array<uint8_t, 32>, std::pair<uint32_t, uint32_t>, IdHash> replay;
  if (!use_index) {
    for (const SegmentFile& s : plan.segments) {
      Result<std::unique_ptr<io::File>> f = env.OpenToReadAgain(s.path);  // the verify pass reads it again
      if (!f.ok()) {  // the verify pass reports it
        if (f.status().code() == StatusCode::kIoError) plan.unreadable_segments.insert(s.number);
        continue;
      }
      const io::File& file = **f;
      bool key_unreadable = false;
      WalkEnd end = WalkHeaders(file, file.size(), [&](uint64_t off, const EntryHeader& h) {
        std::array<uint8_t, 32> id;
        if (h.tag == kTagPut || h.tag == kTagDelete) {
          uint8_t key[32];
          if (!file.ReadAt(off + 9, 32, key).ok()) {
            key_unreadable = true;
            return false;
          }
          std::memcpy(id.data(), key, 32);
          if (h.tag == kTagPut) replay[id] = {s.number, uint32_t(off)};
          else replay.erase(id);
        }
        return true;
      });
      // The replay could not see the whole segment: what it holds after the failed read is not
      // known (not lost).
      if (end.io || key_unreadable) plan.unreadable_segments.insert(s.number);
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
    if (log->Absent(seg)) {
      plan.missing_segments.push_back(seg);
      plan.absent_reason[seg] = log->Absence(seg);
    }
  }

  // 5. Every other record of what should exist: hints.T, an index that cannot be used, what
  // stands where a segment should be (segment_log/segment_records.h).
  RecordLossInput in = MakeRecordLossInput(*log, plan.transaction);
  in.unreadable = plan.unreadable_segments;
  in.reported.insert(plan.missing_segments.begin(), plan.missing_segments.end());

  for (const LiveObject& o : plan.live) in.live_per_segment[o.segment]++;
  in.compare_counts = !use_index;
  if (damaged_index && index_txn == plan.transaction && !use_index) {
    UseDamagedIndex(in, SalvageHashIndex(AsBytes(*damaged_index)), damaged_why,
                    [&](const report::ChunkId& id) { return replay.count(id) > 0; });
    damaged_index.reset();
  }
  plan.lost_objects = CheckRecordsOfTransaction(env, *log, std::move(in), plan.findings);
  return plan;
}

}  // namespace borgcheck::repo
