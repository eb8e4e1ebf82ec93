// The check run for repository version 2 (borg 2.0.0b5-era segment files), in phases:
//   1. Identify: INI config with version 2; refuse borg's held lock (repo::IdentifyBorg2Repository).
//   2. Plan: committed transaction, header walk of every committed segment with resync after
//      damage, log replay, cross-check with index.T (repo::PlanBorg2Repository). The plan lists
//      every entry, so the reader never parses headers again.
//   3. Keys (verify-data only): the key class is the type byte of the manifest's data envelope
//      (borg's rule), outvoted only when most of a sample of other objects disagree; the key is
//      loaded and unlocked now, running BORG_PASSCOMMAND before any worker thread exists.
//   4. Read: this thread reads each committed segment's PUT/PUT2 entries in windows of
//      contiguous entries (up to 4 MiB, one pread each) and hands batches to the pool; bytes in
//      flight are bounded by a ByteBudget. Damaged regions the plan skipped are never read.
//   5. Verify (pool workers, Borg2b5ObjectVerifier): checksums for every entry, the verify-data
//      stages for current ones; a failed entry is read once more and the finding says whether
//      the two reads agreed.
//   6. Finish: "repository changed" detection, manifest TAM, which session-key derivation the
//      AEAD sessions used, summary.
//
// What borg's own check does differently (deliberately): borg drops a whole segment at its
// first damaged entry and then skips verify-data altogether; here one damaged entry spoils only
// itself. borg crashes on unauthenticated meta it cannot use (modes none/authenticated); here
// that is an envelope finding against the chunk.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "checker/crypto/tam.h"
#include "checker/pool/work_stealing_pool.h"
#include "checker/repo/borg2_segments.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/file.h"
#include "checker/repo/repo_obj.h"
#include "checker/repo/repository.h"
#include "checker/run/borg2_checks.h"
#include "checker/run/borg2_key_loader.h"
#include "checker/run/borg2b5_verifier.h"
#include "checker/run/byte_budget.h"
#include "checker/run/engine.h"

namespace borgcheck::run {
using report::Finding;
using report::Reread;
using report::Severity;
using report::Stage;
using repo::ChunkId;
using repo::IsManifestId;

namespace {

constexpr uint64_t kWindowBytes = 4 << 20;      // sequential read size
constexpr uint64_t kBatchBytes = 256 << 10;     // work per task
constexpr size_t kBatchObjects = 256;
constexpr uint64_t kMinInFlight = 32ull << 20;  // budget floor
constexpr size_t kModeSamples = 16;             // objects besides the manifest asked for the mode

bool IsPut(const repo::Borg2Entry& e) { return e.tag == repo::kB2TagPut || e.tag == repo::kB2TagPut2; }

// A window of one segment file; see WindowBlock. Written by the reader before it is shared;
// read-only afterwards.
struct Block : WindowBlock {
  const repo::Borg2Segment* segment = nullptr;  // lives in the plan
};

// One entry to check: written by the reader, read by one worker.
struct Item {
  const repo::Borg2Entry* entry = nullptr;  // lives in the plan
  size_t pos = 0;                           // entry start within block->data
};

using Batch = run::Batch<Block, Item>;

using WorkerState = run::WorkerState<Borg2b5ObjectVerifier>;

class Borg2b5Checker {
 public:
  Borg2b5Checker(const CheckOptions& opts, const ProgressCallback& progress)
      : opts_(opts), progress_(progress) {}

  CheckOutcome Run();

 private:
  Status LoadKeyForMode(std::vector<std::string>& notes);
  std::optional<uint8_t> DataEnvelopeType(const repo::Borg2Segment& seg, const repo::Borg2Entry& e);
  void ReadAll();
  void ReadSegment(const repo::Borg2Segment& seg);
  void Submit(Batch&& b);
  void VerifyBatch(const Batch& b, size_t worker);
  void VerifyManifestTam(const repo::Borg2Segment* seg, const repo::Borg2Entry* entry);
  bool Stopping() const { return PendingStopSignal() != 0 || changed_.load(std::memory_order_relaxed); }

  const CheckOptions& opts_;
  const ProgressCallback& progress_;

  // const after planning and key loading (read by the workers)
  repo::Borg2Plan plan_;
  std::optional<uint32_t> index_txn_at_start_;
  const crypto::Borg2KeyType* type_ = nullptr;
  std::optional<LoadedBorg2Key> key_;

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
};

// Reads one entry and returns the type byte of its data envelope, if the entry is intact enough.
std::optional<uint8_t> Borg2b5Checker::DataEnvelopeType(const repo::Borg2Segment& seg,
                                                        const repo::Borg2Entry& e) {
  Result<repo::ReadOnlyFile> f = repo::ReadOnlyFile::Open(seg.path);
  if (!f.ok()) return std::nullopt;
  ByteBuffer buf;
  buf.Resize(e.size);
  if (!f->ReadAt(e.offset, e.size, buf.data()).ok()) return std::nullopt;
  repo::RepoObjEnvelopes parts;
  if (!repo::SplitRepoObjV2(repo::Borg2EntryPayload(buf.view(), e.tag), parts, nullptr) || parts.data.empty()) {
    return std::nullopt;
  }
  return parts.data[0];
}

Status Borg2b5Checker::LoadKeyForMode(std::vector<std::string>& notes) {
  // The manifest first (borg's rule), then a sample of other current objects.
  std::optional<uint8_t> manifest_type;
  std::map<uint8_t, size_t> votes;
  size_t sampled = 0;
  for (const repo::Borg2Segment& seg : plan_.segments) {
    for (const repo::Borg2Entry& e : seg.entries) {
      if (!e.live || !IsManifestId(e.id)) continue;
      manifest_type = DataEnvelopeType(seg, e);
      if (manifest_type && !crypto::Borg2b5KeyTypeFromByte(*manifest_type)) manifest_type.reset();
    }
  }
  for (const repo::Borg2Segment& seg : plan_.segments) {
    for (const repo::Borg2Entry& e : seg.entries) {
      if (sampled >= kModeSamples) break;
      if (!e.live || IsManifestId(e.id)) continue;
      ++sampled;
      if (std::optional<uint8_t> t = DataEnvelopeType(seg, e); t && crypto::Borg2b5KeyTypeFromByte(*t)) {
        votes[*t]++;
      }
    }
  }
  std::optional<uint8_t> chosen = manifest_type;
  size_t manifest_votes = manifest_type && votes.count(*manifest_type) ? votes[*manifest_type] : 0;
  for (const auto& [t, n] : votes) {
    if (n > manifest_votes && n * 2 > sampled && (!chosen || t != *chosen)) {
      if (manifest_type) {
        notes.push_back(fmt::format("the manifest's data envelope says type {:#04x}, but {} of {} sampled "
                                    "objects say {:#04x}: the repository is checked as {:#04x}",
                                    *manifest_type, n, sampled, t, t));
      }
      chosen = t;
      manifest_votes = n;
    }
  }
  if (!chosen && !votes.empty()) chosen = votes.begin()->first;
  if (!chosen) {
    if (plan_.live_objects == 0) return Status::Ok();  // nothing to decrypt
    return Status(StatusCode::kUnsupported,
                  "cannot tell the encryption mode: no readable object has a type byte of borg "
                  "2.0.0b5 (a legacy borg 1.x envelope, or a newer borg may be required)");
  }
  type_ = crypto::Borg2b5KeyTypeFromByte(*chosen);
  if (!type_->needs_key()) return Status::Ok();
  Result<LoadedBorg2Key> key = LoadBorg2b5Key(plan_.path, plan_.config, *type_);
  if (!key.ok()) return key.status();
  key_ = std::move(key).value();
  notes.push_back("key: " + key_->where);
  return Status::Ok();
}

void Borg2b5Checker::Submit(Batch&& b) {
  if (b.items.empty()) return;
  auto shared = std::make_shared<Batch>(std::move(b));
  pool_->Submit([this, shared](size_t worker) { VerifyBatch(*shared, worker); });
}

void Borg2b5Checker::VerifyBatch(const Batch& b, size_t worker) {
  WorkerState& ws = workers_[worker];
  const repo::Borg2Segment& seg = *b.block->segment;
  for (const Item& it : b.items) {
    if (Stopping()) return;
    const repo::Borg2Entry& e = *it.entry;
    Bytes bytes(b.block->data.data() + it.pos, e.size);
    const bool decrypt = e.live && opts_.verify_data;
    std::optional<VerifyFailure> fail = ws.verifier->Verify(bytes, e, decrypt);
    auto passed = [&] {
      if (!e.live) return;
      ws.objects_verified++;
      ws.stored_bytes += e.size;
      ws.plaintext_bytes += ws.verifier->plaintext().size();
      if (decrypt && IsManifestId(e.id)) {
        std::lock_guard<std::mutex> lock(manifest_mu_);
        Bytes p = ws.verifier->plaintext();
        manifest_plain_.emplace(p.begin(), p.end());
      }
    };
    if (!fail) {
      passed();
      if (e.live) objects_done_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // Read the entry once more before reporting it.
    Reread reread = ReadAgain(seg.path, e.offset, bytes, ws.reread);
    Severity severity = e.live ? fail->severity : Severity::kWarning;
    if (reread == Reread::kDiffered && !ws.verifier->Verify(ws.reread.view(), e, decrypt)) {
      reread = Reread::kPassed;
      severity = Severity::kWarning;
      passed();
    }
    std::string msg = fail->message;
    if (!e.live) msg += " (in a superseded entry: no current object is affected)";
    if (reread == Reread::kPassed) msg += "; the second read verified (a transient read error?)";
    Finding finding = MakeFinding(severity, fail->stage, std::move(msg), seg.number, e.offset, &e.id);
    finding.reread = reread;
    sink_.Add(std::move(finding));
    if (e.live) objects_done_.fetch_add(1, std::memory_order_relaxed);
  }
}

void Borg2b5Checker::ReadSegment(const repo::Borg2Segment& seg) {
  Result<repo::ReadOnlyFile> opened = repo::ReadOnlyFile::Open(seg.path);
  if (!opened.ok()) {
    if (opened.status().code() == StatusCode::kNotFound) {
      changed_.store(true);  // listed while planning, gone now
      return;
    }
    for (const repo::Borg2Entry& e : seg.entries) {
      if (!e.live) continue;
      sink_.Add(MakeFinding(Severity::kError, Stage::kMissing, "cannot open segment: " + opened.status().message(),
                            seg.number, e.offset, &e.id));
    }
    bytes_done_.fetch_add(seg.read_limit, std::memory_order_relaxed);
    return;
  }
  const repo::ReadOnlyFile& file = *opened;
  uint64_t submitted = 0;
  size_t i = 0;
  const size_t n = seg.entries.size();
  while (i < n && !Stopping()) {
    if (!IsPut(seg.entries[i])) { ++i; continue; }
    // A window: consecutive PUT entries that are contiguous in the file, up to kWindowBytes (or
    // one larger entry).
    size_t j = i;
    uint64_t start = seg.entries[i].offset, end = start;
    while (j < n && IsPut(seg.entries[j]) && seg.entries[j].offset == end &&
           (j == i || end + seg.entries[j].size - start <= kWindowBytes)) {
      end += seg.entries[j].size;
      ++j;
    }
    const uint64_t len = end - start;
    budget_->Acquire(len);
    auto block = std::make_shared<Block>();
    block->data = recycler_.Take(len);
    block->recycler = &recycler_;
    block->segment = &seg;
    block->file_offset = start;
    block->budget = budget_.get();
    if (Status s = file.ReadAt(start, len, block->data.data()); !s.ok()) {
      // Unreadable window: each entry is tried on its own so one bad sector spoils only its entry.
      block.reset();
      for (size_t k = i; k < j; ++k) {
        const repo::Borg2Entry& e = seg.entries[k];
        budget_->Acquire(e.size);
        auto one = std::make_shared<Block>();
        one->data = recycler_.Take(e.size);
        one->recycler = &recycler_;
        one->segment = &seg;
        one->file_offset = e.offset;
        one->budget = budget_.get();
        one->bytes_done = &bytes_done_;
        if (Status s2 = file.ReadAt(e.offset, e.size, one->data.data()); !s2.ok()) {
          sink_.Add(MakeFinding(e.live ? Severity::kError : Severity::kWarning, Stage::kMissing,
                                "cannot read the entry: " + s2.message() +
                                    (e.live ? "" : " (a superseded entry: no current object is affected)"),
                                seg.number, e.offset, &e.id));
          if (e.live) objects_done_.fetch_add(1, std::memory_order_relaxed);
          continue;  // `one` releases its budget; its bytes count as done
        }
        Batch b;
        b.block = one;
        b.items.push_back({&e, 0});
        Submit(std::move(b));
      }
      submitted += len;
      i = j;
      continue;
    }
    block->bytes_done = &bytes_done_;
    Batch batch;
    batch.block = block;
    for (size_t k = i; k < j; ++k) {
      const repo::Borg2Entry& e = seg.entries[k];
      batch.items.push_back({&e, size_t(e.offset - start)});
      batch.bytes += e.size;
      if (batch.bytes >= kBatchBytes || batch.items.size() >= kBatchObjects) {
        Batch next;
        next.block = block;
        Submit(std::move(batch));
        batch = std::move(next);
      }
    }
    Submit(std::move(batch));
    block.reset();
    submitted += len;
    i = j;
  }
  // Headers, COMMITs, DELETEs and skipped regions count as done once the segment is handed out.
  if (seg.read_limit > submitted) bytes_done_.fetch_add(seg.read_limit - submitted, std::memory_order_relaxed);
}

void Borg2b5Checker::ReadAll() {
  for (const repo::Borg2Segment& seg : plan_.segments) {
    if (Stopping()) return;
    ReadSegment(seg);
  }
}

void Borg2b5Checker::VerifyManifestTam(const repo::Borg2Segment* seg, const repo::Borg2Entry* entry) {
  std::lock_guard<std::mutex> lock(manifest_mu_);
  if (!manifest_plain_ || !seg || !entry) return;  // the manifest's own finding says why
  Bytes plain(manifest_plain_->data(), manifest_plain_->size());
  // tam.h's key is borg 1.x-shaped: its IKM id_key || enc_key || enc_hmac_key is exactly borg 2's
  // id_key || crypt_key when enc_key || enc_hmac_key = crypt_key.
  crypto::KeyMaterial km;
  crypto::KeyMode mode = crypto::KeyMode::kNone;
  if (type_ && type_->needs_key() && key_) {
    const crypto::Borg2KeyMaterial& k = key_->material;
    km.enc_key = SecureBytes(k.crypt_key.view().first(std::min<size_t>(32, k.crypt_key.size())));
    km.enc_hmac_key = SecureBytes(k.crypt_key.view().subspan(std::min<size_t>(32, k.crypt_key.size())));
    km.id_key = SecureBytes(k.id_key.view());
    mode = crypto::KeyMode::kRepokey;
  }
  crypto::TamResult tam = crypto::VerifyManifestTam(plain, mode, mode == crypto::KeyMode::kNone ? nullptr : &km);
  const ChunkId zero{};
  switch (tam.outcome) {
    case crypto::TamOutcome::kVerified:
      return;
    case crypto::TamOutcome::kAbsent: {
      // b5..b7 write a manifest TAM; b8 replaced it (with meta `type`), manifest version 2.
      std::optional<uint64_t> v = repo::ManifestVersion(plain);
      bool required = key_ ? key_->material.tam_required : true;
      if (required && v && *v < 2) {
        sink_.Add(MakeFinding(Severity::kError, Stage::kAuthentication,
                              "manifest TAM: the manifest has no TAM although the key requires one",
                              seg->number, entry->offset, &zero));
      }
      return;
    }
    case crypto::TamOutcome::kMismatch:
    case crypto::TamOutcome::kMalformed:
      sink_.Add(MakeFinding(Severity::kError, Stage::kAuthentication, "manifest TAM: " + tam.message, seg->number,
                            entry->offset, &zero));
      return;
  }
}

CheckOutcome Borg2b5Checker::Run() {
  CheckOutcome out;
  const auto start = std::chrono::steady_clock::now();
  report::RunSummary& sum = out.summary;
  sum.repository = opts_.repository;
  sum.format = "borg2-b5";
  sum.verify_data = opts_.verify_data;
  sum.threads = opts_.threads;
  sum.live_list_source = "log-replay";

  // 1-2. Identify and plan.
  Result<repo::Borg2Config> config = repo::IdentifyBorg2Repository(opts_.repository, opts_.bypass_lock);
  if (!config.ok()) { out.status = config.status(); return out; }
  index_txn_at_start_ = repo::FindIndexTransaction(opts_.repository);
  Result<repo::Borg2Plan> plan = repo::PlanBorg2Repository(opts_.repository, *config);
  if (!plan.ok()) { out.status = plan.status(); return out; }
  plan_ = std::move(plan).value();
  for (const Finding& f : plan_.findings) sink_.Add(f);
  sum.notes = plan_.notes;
  sum.transaction = plan_.transaction;
  if (plan_.index_checked) sum.live_list_source = "log-replay+index";
  sum.segments = plan_.segments.size();
  // The objects the log still gives, plus those index.T names that damage made unreadable.
  sum.objects_total = plan_.live_objects + plan_.lost_objects;
  if (plan_.superseded_puts) {
    sum.notes.push_back(fmt::format("{} superseded PUT entr{} (not current; checksummed only)",
                                    plan_.superseded_puts, plan_.superseded_puts == 1 ? "y" : "ies"));
  }

  // 3. Keys, before any thread exists.
  if (opts_.verify_data) {
    if (Status s = LoadKeyForMode(sum.notes); !s.ok()) { out.status = s; return out; }
    if (type_) sum.mode = std::string(type_->name);
  }

  // 4-5. Read and verify.
  const unsigned threads = std::max(1u, opts_.threads);
  budget_ = std::make_unique<ByteBudget>(std::max<uint64_t>(kMinInFlight, uint64_t(threads) * 2 * kWindowBytes));
  workers_.resize(threads);
  for (WorkerState& w : workers_) {
    w.verifier = std::make_unique<Borg2b5ObjectVerifier>(opts_.verify_data && type_, type_,
                                                         key_ ? &key_->material : nullptr);
    if (!w.verifier->status().ok()) { out.status = w.verifier->status(); return out; }
  }
  pool_ = std::make_unique<pool::WorkStealingPool>(threads);

  ProgressReporter progress(progress_, [&] {
    report::Progress p;
    p.bytes_done = std::min(bytes_done_.load(), plan_.total_bytes);
    p.bytes_total = plan_.total_bytes;
    p.objects_done = objects_done_.load();
    p.objects_total = plan_.live_objects;
    p.elapsed_s = SecondsSince(start);
    return p;
  });
  Status internal = FeedAndWait(*pool_, [&] { ReadAll(); });
  progress.Finish();  // the final record carries the totals
  pool_.reset();
  if (int sig = PendingStopSignal()) {
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
  const repo::Borg2Segment* manifest_seg = nullptr;
  const repo::Borg2Entry* manifest_entry = nullptr;
  for (const repo::Borg2Segment& s : plan_.segments) {
    for (const repo::Borg2Entry& e : s.entries) {
      if (e.live && IsManifestId(e.id)) { manifest_seg = &s; manifest_entry = &e; }
    }
  }
  if (!manifest_entry && plan_.live_objects > 0) {
    // Named by the plan already if the index knows where it was; otherwise say it here.
    bool reported = false;
    for (const Finding& f : plan_.findings) reported |= f.chunk_id && IsManifestId(*f.chunk_id);
    if (!reported) {
      const ChunkId zero{};
      sink_.Add(MakeFinding(Severity::kError, Stage::kMissing,
                            "the repository has no manifest (chunk 00…00): borg cannot list any archive",
                            std::nullopt, std::nullopt, &zero));
    }
  }
  if (opts_.verify_data && type_) VerifyManifestTam(manifest_seg, manifest_entry);

  // Which session-key derivation the AEAD sessions used (b5..b7 HKDF, b8.. SHA-256).
  std::map<std::string, crypto::SessionKdf> sessions;
  for (const WorkerState& w : workers_) {
    w.verifier->ForEachSession([&](Bytes sid, crypto::SessionKdf kdf) { sessions[ToHex(sid)] = kdf; });
  }
  AddWorkerTotals(workers_, sum);
  if (!sessions.empty()) {
    size_t hkdf = 0, sha = 0;
    for (const auto& [sid, kdf] : sessions) (kdf == crypto::SessionKdf::kHkdfSha512 ? hkdf : sha)++;
    std::string what;
    if (hkdf) what += fmt::format("{} with HKDF-SHA512 (borg 2.0.0b5..b7)", hkdf);
    if (sha) what += fmt::format("{}{} with SHA-256 (borg 2.0.0b8 and later)", what.empty() ? "" : ", ", sha);
    sum.notes.push_back(fmt::format("session keys: {} AEAD session(s) authenticated: {}", sessions.size(), what));
  } else if (opts_.verify_data && type_ && type_->envelope == crypto::EnvelopeKind::kAead) {
    sum.notes.push_back("session keys: no AEAD envelope authenticated under either derivation "
                        "(HKDF-SHA512 of b5..b7, SHA-256 of b8 and later)");
  }
  workers_.clear();
  key_.reset();  // wipes the key material
  FinishSummary(sink_, plan_.total_bytes, start, out);
  return out;
}

}  // namespace

CheckOutcome RunBorg2SegmentsCheck(const CheckOptions& options, const ProgressCallback& progress) {
  return RunChecker<Borg2b5Checker>(options, progress);
}

}  // namespace borgcheck::run
