// The check run, in phases:
//   1. Identify the repository and refuse a held lock (repo::IdentifyRepository).
//   2. Plan: committed transaction, segments, live objects sorted by (segment, offset)
//      (repo::PlanRepository).
//   3. Keys (verify-data only): the manifest's TYPE byte names the mode; load and unlock the
//      key, running BORG_PASSCOMMAND now, before any worker thread exists.
//   4. Read: this thread streams each committed segment in order in large windows, walks its
//      entries, matches them against the live list and hands batches to the pool; bytes in
//      flight are bounded by a ByteBudget. If a segment's walk breaks (impossible header,
//      lost sync), the remaining live objects of that segment are read at the offsets the
//      live list gives, so one bad entry spoils only itself (borg drops the whole segment).
//   5. Verify (pool workers): CRC -> envelope -> MAC/decrypt -> decompress -> id hash; a
//      failed object is read once more and the finding says whether the reads agreed.
//   6. Finish: manifest TAM, index-vs-log comparison leftovers, "repository changed"
//      detection, summary.
#include "checker/run/check_run.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "checker/crypto/tam.h"
#include "checker/pool/work_stealing_pool.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/file.h"
#include "checker/repo/repository.h"
#include "checker/repo/segment_entry.h"
#include "checker/repo/segment_format.h"
#include "checker/repo/format_detect.h"
#include "checker/run/borg2_checks.h"
#include "checker/run/byte_budget.h"
#include "checker/run/engine.h"
#include "checker/run/key_loader.h"
#include "checker/run/object_verifier.h"

namespace borgcheck::run {
using report::Finding;
using report::Reread;
using report::Severity;
using report::Stage;
using repo::ChunkId;
using repo::IdHash;
using repo::IsManifestId;

namespace {

std::atomic<int> g_stop_signal{0};

constexpr uint64_t kWindowBytes = 4 << 20;      // sequential read size
constexpr uint64_t kBatchBytes = 256 << 10;     // work per task
constexpr size_t kBatchObjects = 256;
constexpr uint64_t kMinInFlight = 16ull << 20;  // budget floor (peak RSS: bench/RESULTS.md)

// A window of one segment file; see WindowBlock. Written by the reader before it is shared;
// read-only afterwards.
struct Block : WindowBlock {
  uint32_t segment = 0;
  const std::string* path = nullptr;  // segment file, for re-reads; lives in the plan
};

// One live entry to verify. Written by the reader, read by one worker. (Dead entries are
// CRC-checked by the reader itself, which must know at once whether its walk is in sync.)
struct Item {
  const repo::LiveObject* live = nullptr;  // the live object this entry holds (never null)
  uint32_t offset = 0;                     // entry offset in the segment
  uint32_t size = 0;                       // entry size
  size_t pos = 0;                          // entry start within block->data
};

using Batch = run::Batch<Block, Item>;

using WorkerState = run::WorkerState<ObjectVerifier>;

class Checker {
 public:
  Checker(const CheckOptions& opts, const ProgressCallback& progress)
      : opts_(opts), progress_(progress) {}

  CheckOutcome Run();

 private:
  Status LoadKeyForMode();
  void ReadAll();
  void ReadSegment(const repo::SegmentFile& seg, size_t lo, size_t hi);
  void ReadByIndex(const repo::SegmentFile& seg, const repo::ReadOnlyFile* file, size_t from,
                   size_t hi);
  void Submit(Batch&& b);
  void VerifyBatch(const Batch& b, size_t worker);
  void NoteEntry(uint32_t segment, uint64_t off, const repo::EntryHeader& h, bool live_match);
  void FinishIndexComparison();
  bool Stopping() const { return g_stop_signal.load(std::memory_order_relaxed) != 0 || changed_.load(); }

  const CheckOptions& opts_;
  const ProgressCallback& progress_;

  // const after planning (read by workers)
  repo::RepoConfig config_;
  repo::RepositoryPlan plan_;
  std::optional<uint32_t> index_txn_at_start_;
  crypto::KeyMode mode_ = crypto::KeyMode::kNone;
  std::optional<crypto::KeyMaterial> key_;

  // own synchronisation
  report::FindingSink sink_;
  std::unique_ptr<ByteBudget> budget_;
  WindowRecycler recycler_{kWindowBytes};  // outlives every Block (declared before pool_)
  std::atomic<uint64_t> bytes_done_{0};
  std::atomic<uint64_t> objects_done_{0};
  std::atomic<bool> changed_{false};
  std::unique_ptr<pool::WorkStealingPool> pool_;
  std::vector<WorkerState> workers_;  // element i: worker i only

  std::mutex manifest_mu_;
  std::optional<std::vector<uint8_t>> manifest_plain_;  // guarded by manifest_mu_

  // reader thread only: index-vs-log comparison (index mode). PUTs of the log that are not
  // the live entry of their id, still unexplained (no later DELETE or live PUT).
  std::unordered_map<ChunkId, std::pair<uint32_t, uint32_t>, IdHash> unexplained_puts_;
  std::chrono::steady_clock::time_point start_;
};

Status Checker::LoadKeyForMode() {
  // The manifest's TYPE byte names the mode (borg does the same); without a manifest, the
  // first live object's.
  const repo::LiveObject* probe = nullptr;
  for (const repo::LiveObject& o : plan_.live) {
    if (IsManifestId(o.id)) { probe = &o; break; }
  }
  std::vector<const repo::LiveObject*> candidates;
  if (probe) candidates.push_back(probe);
  for (size_t i = 0; i < plan_.live.size() && candidates.size() < 16; ++i) candidates.push_back(&plan_.live[i]);
  std::map<uint32_t, const std::string*> paths;
  for (const repo::SegmentFile& s : plan_.segments) paths[s.number] = &s.path;
  std::optional<crypto::KeyMode> mode;
  for (const repo::LiveObject* o : candidates) {
    auto it = paths.find(o->segment);
    if (it == paths.end()) continue;
    Result<repo::ReadOnlyFile> f = repo::ReadOnlyFile::Open(*it->second);
    if (!f.ok()) continue;
    uint8_t type;
    if (!f->ReadAt(uint64_t(o->offset) + repo::kHeaderSizeWithKey, 1, &type).ok()) continue;
    mode = crypto::KeyModeFromTypeByte(type);
    if (mode) break;
  }
  if (!mode) {
    if (plan_.live.empty()) return Status::Ok();  // nothing to decrypt
    return Status(StatusCode::kUnsupported,
                  "cannot tell the encryption mode: no readable object has a known TYPE byte "
                  "(unknown payload type: a newer borg may be required)");
  }
  mode_ = *mode;
  if (!crypto::NeedsKey(mode_)) return Status::Ok();
  Result<crypto::KeyMaterial> key = LoadKey(plan_.path, config_, mode_);
  if (!key.ok()) return key.status();
  key_ = std::move(key).value();
  if (Status s = crypto::ValidateKeyMaterial(mode_, &*key_); !s.ok()) {
    return Status(StatusCode::kCorruptMetadata, "the repository key does not fit mode " +
                                                    std::string(crypto::KeyModeName(mode_)) + ": " + s.message());
  }
  return Status::Ok();
}

void Checker::Submit(Batch&& b) {
  if (b.items.empty()) return;
  auto shared = std::make_shared<Batch>(std::move(b));
  pool_->Submit([this, shared](size_t worker) { VerifyBatch(*shared, worker); });
}

void Checker::VerifyBatch(const Batch& b, size_t worker) {
  WorkerState& ws = workers_[worker];
  for (const Item& it : b.items) {
    if (Stopping()) return;
    Bytes entry(b.block->data.data() + it.pos, it.size);
    const uint8_t* id = it.live->id.data();
    std::optional<VerifyFailure> fail = ws.verifier->Verify(entry, id);
    if (!fail) {
      ws.objects_verified++;
      ws.stored_bytes += it.size;
      ws.plaintext_bytes += ws.verifier->plaintext().size();
      if (opts_.verify_data && IsManifestId(it.live->id)) {
        std::lock_guard<std::mutex> lock(manifest_mu_);
        Bytes p = ws.verifier->plaintext();
        manifest_plain_.emplace(p.begin(), p.end());
      }
      objects_done_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // Read the object once more before reporting it.
    Reread reread = ReadAgain(*b.block->path, it.offset, entry, ws.reread);
    Severity severity = fail->severity;
    if (reread == Reread::kDiffered && !ws.verifier->Verify(ws.reread.view(), id)) {
      reread = Reread::kPassed;
      severity = Severity::kWarning;
      ws.objects_verified++;
      ws.stored_bytes += it.size;
      ws.plaintext_bytes += ws.verifier->plaintext().size();
    }
    ChunkId cid = it.live->id;
    Finding finding = MakeFinding(severity, fail->stage,
                                  reread == Reread::kPassed
                                      ? fail->message + "; the second read verified (a transient read error?)"
                                      : fail->message,
                                  b.block->segment, it.offset, &cid);
    finding.reread = reread;
    sink_.Add(std::move(finding));
    objects_done_.fetch_add(1, std::memory_order_relaxed);
  }
}

// Index-vs-log comparison, fed every entry the walk sees (index mode only).
void Checker::NoteEntry(uint32_t segment, uint64_t off, const repo::EntryHeader& h, bool live_match) {
  if (!plan_.live_from_index || h.tag == repo::kTagCommit) return;
  ChunkId id;
  std::memcpy(id.data(), h.key, 32);
  if (h.tag == repo::kTagPut) {
    if (live_match) unexplained_puts_.erase(id);
    else unexplained_puts_[id] = {segment, uint32_t(off)};
    return;
  }
  // DELETE: whatever came before is explained; but the index must not list a PUT before it.
  unexplained_puts_.erase(id);
  if (const repo::LiveObject* o = plan_.FindById(id)) {
    if (o->segment < segment || (o->segment == segment && o->offset < off)) {
      sink_.Add(MakeFinding(Severity::kError, Stage::kIndex,
                            fmt::format("index.{} lists this chunk at [segment {}, offset {}] but the "
                                        "log deletes it later", plan_.transaction, o->segment, o->offset),
                            segment, off, &id));
    }
  }
}

void Checker::FinishIndexComparison() {
  for (const auto& [id, loc] : unexplained_puts_) {
    const repo::LiveObject* o = plan_.FindById(id);
    std::string msg;
    if (!o) {
      msg = fmt::format("the log stores this chunk but index.{} does not list it", plan_.transaction);
    } else if (o->segment < loc.first || (o->segment == loc.first && o->offset < loc.second)) {
      msg = fmt::format("the log stores a newer copy of this chunk than index.{} lists "
                        "([segment {}, offset {}])", plan_.transaction, o->segment, o->offset);
    } else {
      continue;  // an older copy, superseded by the indexed one
    }
    sink_.Add(MakeFinding(Severity::kError, Stage::kIndex, msg, loc.first, loc.second, &id));
  }
}

// Reads live objects [from, hi) of `seg` one by one at their indexed offsets.
void Checker::ReadByIndex(const repo::SegmentFile& seg, const repo::ReadOnlyFile* file, size_t from,
                          size_t hi) {
  for (size_t i = from; i < hi && !Stopping(); ++i) {
    const repo::LiveObject& o = plan_.live[i];
    auto report_bad = [&](Stage stage, const std::string& why) {
      sink_.Add(MakeFinding(Severity::kError, stage, why, seg.number, o.offset, &o.id));
      objects_done_.fetch_add(1, std::memory_order_relaxed);
    };
    if (!file) {
      report_bad(Stage::kMissing, "segment file is missing: " + seg.path);
      continue;
    }
    uint64_t limit = file->size();
    if (seg.number == plan_.transaction && plan_.commit_end_of_last_segment) limit = *plan_.commit_end_of_last_segment;
    if (o.offset >= limit) {
      report_bad(Stage::kTruncated, fmt::format("the segment ends at {} bytes, before this object", limit));
      continue;
    }
    uint8_t hdr[repo::kHeaderSizeWithKey];
    size_t n = size_t(std::min<uint64_t>(sizeof hdr, limit - o.offset));
    if (!file->ReadAt(o.offset, n, hdr).ok()) {
      report_bad(Stage::kMissing, "read error at the indexed offset");
      continue;
    }
    repo::EntryHeader h;
    std::string why;
    repo::HeaderParse p = repo::ParseEntryHeader(Bytes(hdr, n), limit - o.offset, h, &why);
    if (p != repo::HeaderParse::kOk) {
      bool trunc = p == repo::HeaderParse::kNeedMore || why.find("truncated") != std::string::npos;
      report_bad(trunc ? Stage::kTruncated : Stage::kMissing,
                 "no valid entry at the indexed location: " + (why.empty() ? "truncated header" : why));
      continue;
    }
    if (h.tag != repo::kTagPut || std::memcmp(h.key, o.id.data(), 32) != 0) {
      report_bad(Stage::kMissing,
                 h.tag != repo::kTagPut ? "the entry at the indexed location is not a PUT"
                                        : "the entry at the indexed location stores chunk " +
                                              ToHex(Bytes(h.key, 32)));
      continue;
    }
    budget_->Acquire(h.size);
    auto block = std::make_shared<Block>();
    block->data.Resize(h.size);
    block->segment = seg.number;
    block->file_offset = o.offset;
    block->path = &seg.path;
    block->budget = budget_.get();
    block->bytes_done = &bytes_done_;
    block->counts_progress = false;
    if (!file->ReadAt(o.offset, h.size, block->data.data()).ok()) {
      report_bad(Stage::kMissing, "read error at the indexed offset");
      continue;
    }
    Batch b;
    b.block = block;
    b.items.push_back({&o, o.offset, h.size, 0});
    Submit(std::move(b));
  }
}

void Checker::ReadSegment(const repo::SegmentFile& seg, size_t lo, size_t hi) {
  Result<repo::ReadOnlyFile> opened = repo::ReadOnlyFile::Open(seg.path);
  if (!opened.ok()) {
    if (opened.status().code() == StatusCode::kNotFound) {
      changed_.store(true);  // listed while planning, gone now
      return;
    }
    sink_.Add(MakeFinding(Severity::kError, Stage::kMissing, "cannot open segment: " + opened.status().message(),
                          seg.number, std::nullopt, nullptr));
    ReadByIndex(seg, nullptr, lo, hi);
    return;
  }
  const repo::ReadOnlyFile& file = *opened;
  uint64_t limit = file.size();
  if (seg.number == plan_.transaction && plan_.commit_end_of_last_segment) {
    limit = std::min(limit, *plan_.commit_end_of_last_segment);
  }
  size_t cursor = lo;  // next live object of this segment the walk must meet
  // CRC failures of entries no live object depends on, held until the walk reaches the next
  // live object at its indexed offset. A damaged size field makes the walk read garbage as
  // entries; if sync is then lost, only the first held failure (the genuinely damaged entry)
  // is reported and the garbage after it is dropped.
  std::vector<Finding> pending;
  auto flush_pending = [&] {
    for (Finding& f : pending) sink_.Add(std::move(f));
    pending.clear();
  };
  auto keep_first_pending = [&] {
    if (!pending.empty()) {
      pending.front().message += "; the walk lost sync after this entry";
      sink_.Add(std::move(pending.front()));
    }
    pending.clear();
  };
  auto broken = [&](uint64_t at, Stage stage, const std::string& why) {
    keep_first_pending();
    const ChunkId* id = (cursor < hi && plan_.live[cursor].offset == at) ? &plan_.live[cursor].id : nullptr;
    size_t remaining = hi - cursor - (id ? 1 : 0);
    sink_.Add(MakeFinding(Severity::kError, stage,
                          fmt::format("{}; the rest of the segment cannot be walked{}", why,
                                      remaining ? fmt::format(", its {} remaining live object(s) are "
                                                              "read at their indexed offsets", remaining)
                                                : std::string()),
                          seg.number, at, id));
    if (id) { objects_done_.fetch_add(1); ++cursor; }
    ReadByIndex(seg, &file, cursor, hi);
    bytes_done_.fetch_add(limit > at ? limit - at : 0, std::memory_order_relaxed);
  };

  uint8_t magic[repo::kSegmentMagicSize];
  if (limit < repo::kSegmentMagicSize || !file.ReadAt(0, sizeof magic, magic).ok() ||
      std::memcmp(magic, repo::kSegmentMagic, sizeof magic) != 0) {
    broken(0, Stage::kSegment, "invalid segment magic");
    return;
  }
  uint64_t pos = repo::kSegmentMagicSize;
  bytes_done_.fetch_add(pos, std::memory_order_relaxed);
  uint64_t want = kWindowBytes;
  while (pos < limit) {
    if (Stopping()) return;
    uint64_t len = std::min<uint64_t>(std::max(want, kWindowBytes), limit - pos);
    budget_->Acquire(len);
    auto block = std::make_shared<Block>();
    block->data = recycler_.Take(len);
    block->recycler = &recycler_;
    block->segment = seg.number;
    block->file_offset = pos;
    block->path = &seg.path;
    block->budget = budget_.get();
    block->bytes_done = &bytes_done_;
    if (Status s = file.ReadAt(pos, len, block->data.data()); !s.ok()) {
      // Not the data's fault yet: read the remaining objects one by one, so a bad sector
      // spoils only the objects it holds.
      block->counts_progress = false;
      keep_first_pending();
      sink_.Add(MakeFinding(Severity::kWarning, Stage::kSegment,
                            fmt::format("cannot read {} bytes from offset {} ({}); the remaining "
                                        "live objects of this segment were read one by one",
                                        len, pos, s.message()),
                            seg.number, pos, nullptr));
      ReadByIndex(seg, &file, cursor, hi);
      bytes_done_.fetch_add(limit - pos, std::memory_order_relaxed);
      return;
    }
    Batch batch;
    batch.block = block;
    uint64_t p = 0;  // within the block
    want = kWindowBytes;
    while (p < len) {
      uint64_t abs = pos + p;
      repo::EntryHeader h;
      std::string why;
      repo::HeaderParse r = repo::ParseEntryHeader(Bytes(block->data.data() + p, len - p), limit - abs, h, &why);
      if (r == repo::HeaderParse::kNeedMore || (r == repo::HeaderParse::kOk && p + h.size > len)) {
        if (p == 0) want = r == repo::HeaderParse::kOk ? h.size : repo::kHeaderSizeWithKey;
        break;  // the entry continues in the next window
      }
      if (r == repo::HeaderParse::kInvalid) {
        bool trunc = why.find("truncated") != std::string::npos || why.find("bytes left") != std::string::npos;
        Submit(std::move(batch));
        block.reset();
        broken(abs, trunc ? Stage::kTruncated : Stage::kEntryCrc, "invalid entry header: " + why);
        return;
      }
      // Lost sync: the walk stepped over a live object's offset.
      if (cursor < hi && plan_.live[cursor].offset < abs) {
        keep_first_pending();
        Submit(std::move(batch));
        block.reset();
        ReadByIndex(seg, &file, cursor, hi);
        bytes_done_.fetch_add(limit - abs, std::memory_order_relaxed);
        return;
      }
      bool at_live = cursor < hi && plan_.live[cursor].offset == abs;
      bool live_match = at_live && h.tag == repo::kTagPut &&
                        std::memcmp(h.key, plan_.live[cursor].id.data(), 32) == 0;
      if (at_live && !live_match) {
        sink_.Add(MakeFinding(Severity::kError, Stage::kMissing,
                              h.tag == repo::kTagPut
                                  ? "the entry at the indexed location stores chunk " + ToHex(Bytes(h.key, 32))
                                  : "the entry at the indexed location is not a PUT",
                              seg.number, abs, &plan_.live[cursor].id));
        objects_done_.fetch_add(1);
      }
      if (live_match) {
        // A live PUT at exactly the indexed offset: the walk is in sync up to here.
        flush_pending();
        NoteEntry(seg.number, abs, h, true);
        batch.items.push_back({&plan_.live[cursor], uint32_t(abs), h.size, size_t(p)});
        batch.bytes += h.size;
      } else if (repo::EntryCrcMatches(Bytes(block->data.data() + p, h.size))) {
        NoteEntry(seg.number, abs, h, false);
      } else {
        // A superseded/deleted PUT, a DELETE or a COMMIT whose CRC fails. Held back until the
        // walk proves it is still in sync (see flush_pending / keep_first_pending).
        Finding f = MakeFinding(Severity::kError, Stage::kEntryCrc,
                                h.tag == repo::kTagPut
                                    ? "Segment entry checksum mismatch in a superseded or deleted "
                                      "entry (no live data affected)"
                                    : fmt::format("Segment entry checksum mismatch in a {} entry",
                                                  h.tag == repo::kTagCommit ? "COMMIT" : "DELETE"),
                                seg.number, abs, nullptr);
        if (h.tag == repo::kTagPut) f.severity = Severity::kWarning;
        if (h.tag != repo::kTagCommit) {
          ChunkId cid;
          std::memcpy(cid.data(), h.key, 32);
          f.chunk_id = cid;
        }
        pending.push_back(std::move(f));
      }
      if (at_live) ++cursor;
      p += h.size;
      if (batch.bytes >= kBatchBytes || batch.items.size() >= kBatchObjects) {
        Batch next;
        next.block = block;
        Submit(std::move(batch));
        batch = std::move(next);
      }
    }
    if (p < len) {
      // Keep only what was walked in this block's accounting: re-read the rest next time.
      block->counts_progress = false;
      bytes_done_.fetch_add(p, std::memory_order_relaxed);
    }
    Submit(std::move(batch));
    block.reset();
    pos += p;
  }
  flush_pending();
  if (cursor < hi) {
    // Live objects beyond where the walk ended cleanly.
    ReadByIndex(seg, &file, cursor, hi);
  }
}

void Checker::ReadAll() {
  std::map<uint32_t, const repo::SegmentFile*> by_number;
  for (const repo::SegmentFile& s : plan_.segments) by_number[s.number] = &s;
  std::vector<repo::SegmentFile> missing;
  for (uint32_t m : plan_.missing_segments) {
    missing.push_back({m, repo::SegmentPath(plan_.path, config_.segments_per_dir, m), 0});
  }
  // Segments in order, with the live range of each (the live list is sorted the same way).
  std::vector<const repo::SegmentFile*> order;
  for (const repo::SegmentFile& s : plan_.segments) order.push_back(&s);
  for (const repo::SegmentFile& s : missing) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->number < b->number; });
  std::vector<bool> is_missing(order.size());
  for (size_t i = 0; i < order.size(); ++i) is_missing[i] = !by_number.count(order[i]->number);
  size_t lo = 0;
  for (size_t i = 0; i < order.size() && !Stopping(); ++i) {
    const repo::SegmentFile& seg = *order[i];
    while (lo < plan_.live.size() && plan_.live[lo].segment < seg.number) ++lo;  // cannot happen: every live segment is listed
    size_t hi = lo;
    while (hi < plan_.live.size() && plan_.live[hi].segment == seg.number) ++hi;
    if (is_missing[i]) {
      sink_.Add(MakeFinding(Severity::kError, Stage::kMissing,
                            fmt::format("committed segment file {} is missing; {} live object(s) lost",
                                        seg.path, hi - lo),
                            seg.number, std::nullopt, nullptr));
      ReadByIndex(seg, nullptr, lo, hi);
    } else {
      ReadSegment(seg, lo, hi);
    }
    lo = hi;
  }
}

CheckOutcome Checker::Run() {
  CheckOutcome out;
  start_ = std::chrono::steady_clock::now();
  report::RunSummary& sum = out.summary;
  sum.repository = opts_.repository;
  sum.format = "borg1";
  sum.verify_data = opts_.verify_data;
  sum.threads = opts_.threads;

  // 1-2. Identify and plan.
  Result<repo::RepoConfig> config = repo::IdentifyRepository(opts_.repository, {opts_.bypass_lock});
  if (!config.ok()) { out.status = config.status(); return out; }
  config_ = std::move(config).value();
  index_txn_at_start_ = repo::FindIndexTransaction(opts_.repository);
  Result<repo::RepositoryPlan> plan = repo::PlanRepository(opts_.repository, config_);
  if (!plan.ok()) { out.status = plan.status(); return out; }
  plan_ = std::move(plan).value();
  for (Finding& f : plan_.findings) sink_.Add(f);
  sum.notes = plan_.notes;
  sum.transaction = plan_.transaction;
  sum.live_list_source = plan_.live_from_index ? "index" : "log-replay";
  sum.segments = plan_.segments.size();
  sum.objects_total = plan_.live.size();

  // 3. Keys, before any thread exists.
  if (opts_.verify_data) {
    if (Status s = LoadKeyForMode(); !s.ok()) { out.status = s; return out; }
    sum.mode = std::string(crypto::KeyModeName(mode_));
  }

  // 4-5. Read and verify.
  unsigned threads = std::max(1u, opts_.threads);
  budget_ = std::make_unique<ByteBudget>(std::max<uint64_t>(kMinInFlight, uint64_t(threads) * 2 * kWindowBytes));
  workers_.resize(threads);
  for (WorkerState& w : workers_) {
    w.verifier = std::make_unique<ObjectVerifier>(opts_.verify_data, mode_, key_ ? &*key_ : nullptr);
  }
  if (opts_.verify_data && !workers_.front().verifier->status().ok()) {
    out.status = Status(StatusCode::kInternal, workers_.front().verifier->status().message());
    return out;
  }
  pool_ = std::make_unique<pool::WorkStealingPool>(threads);

  ProgressReporter progress(progress_, [&] {
    report::Progress p;
    p.bytes_done = std::min(bytes_done_.load(), plan_.total_bytes);
    p.bytes_total = plan_.total_bytes;
    p.objects_done = objects_done_.load();
    p.objects_total = plan_.live.size();
    p.elapsed_s = SecondsSince(start_);
    return p;
  });
  Status internal = FeedAndWait(*pool_, [&] { ReadAll(); });
  progress.Finish();
  pool_.reset();
  if (int sig = g_stop_signal.load()) {
    SetInterrupted(out, sig);
    return out;
  }
  if (!internal.ok()) { out.status = internal; return out; }

  // 6. Finish.
  if (changed_.load() || repo::FindIndexTransaction(opts_.repository) != index_txn_at_start_) {
    out.status = Status(StatusCode::kRepositoryChanged,
                        "repository changed during check (a segment vanished or a new transaction "
                        "was committed): no verdict. Run again when borg is not writing to it");
    return out;
  }
  FinishIndexComparison();
  bool manifest_tam_failed = false;  // the manifest passed its object checks but not its TAM
  if (opts_.verify_data) {
    std::lock_guard<std::mutex> lock(manifest_mu_);
    bool have_manifest = std::any_of(plan_.live.begin(), plan_.live.end(),
                                     [](const repo::LiveObject& o) { return IsManifestId(o.id); });
    if (!have_manifest) {
      Finding f;
      f.severity = Severity::kError;
      f.stage = Stage::kMissing;
      f.chunk_id = ChunkId{};
      f.message = "the repository has no manifest (chunk 00…00): borg cannot list any archive";
      sink_.Add(std::move(f));
    } else if (manifest_plain_) {
      crypto::TamResult tam = crypto::VerifyManifestTam(Bytes(manifest_plain_->data(), manifest_plain_->size()),
                                                        mode_, key_ ? &*key_ : nullptr);
      const repo::LiveObject* m = nullptr;
      for (const repo::LiveObject& o : plan_.live) if (IsManifestId(o.id)) m = &o;
      bool bad = tam.outcome == crypto::TamOutcome::kMismatch || tam.outcome == crypto::TamOutcome::kMalformed ||
                 (tam.outcome == crypto::TamOutcome::kAbsent && key_ && key_->tam_required);
      if (bad) {
        manifest_tam_failed = true;
        ChunkId zero{};
        sink_.Add(MakeFinding(Severity::kError, Stage::kAuthentication,
                              "manifest TAM: " + (tam.message.empty() ? std::string("no TAM although the key requires one") : tam.message),
                              m->segment, m->offset, &zero));
      }
    }
  }
  AddWorkerTotals(workers_, sum);
  if (manifest_tam_failed && sum.objects_verified) sum.objects_verified--;
  workers_.clear();
  key_.reset();  // wipes the key material
  FinishSummary(sink_, plan_.total_bytes, start_, out);
  return out;
}

}  // namespace

void RequestStopFromSignal(int signo) { g_stop_signal.store(signo); }

int PendingStopSignal() { return g_stop_signal.load(); }

CheckOutcome RunCheck(const CheckOptions& options, const ProgressCallback& progress) {
  Result<repo::DetectedFormat> format = repo::DetectFormat(options.repository);
  if (!format.ok()) {
    CheckOutcome out;
    out.summary.repository = options.repository;
    out.status = format.status();
    return out;
  }
  switch (format->format) {
    case repo::RepoFormat::kBorg1:
      return RunChecker<Checker>(options, progress);
    case repo::RepoFormat::kBorg2Segments:
      return RunBorg2SegmentsCheck(options, progress);
    case repo::RepoFormat::kBorgstoreV4:
      return RunBorgstoreV4Check(options, progress);
    case repo::RepoFormat::kBorgstoreV3:
      break;
  }
  CheckOutcome out;
  out.summary.repository = options.repository;
  out.status = Status(StatusCode::kUnsupported,
                      "unsupported repository version 3 at " + options.repository +
                          " (borg 2.0.0b10..b21, one file per object): not supported; borg 2 "
                          "master (version 4) and 2.0.0b5-era (version 2) repositories are");
  return out;
}

}  // namespace borgcheck::run
