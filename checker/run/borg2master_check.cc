// Repository version 4 (borg 2 master: borgstore + packs), in phases:
//   1. Layout (repo::ReadBorgstoreLayout): config, locks (a live lock refuses the run), the
//      packs/<xx>/<sha256> names, index/, keys/, archives/, cache/chunkindex-invalid.
//   2. Chunk index (repo::LoadChunkIndex): every fragment hashed against its name, parsed and
//      merged; bad fragments are findings and the pack walk below stands in for them.
//   3. Mode and key: the type byte of the manifest's data envelope names the key type (else the
//      first indexed object's); with --verify-data the key is found and unlocked now, before
//      any worker thread exists (BORG_PASSCOMMAND forks).
//   4. Packs (pool workers, one task per pack, bytes in flight bounded by a ByteBudget): read
//      the whole pack, SHA-256 against its name (the keyless tier), walk every blob header,
//      cross-check the walk with the index entries of this pack (repo::CrossCheckPack), then
//      fan the blobs out as verify tasks: every indexed entry (read at its stated offset and
//      size, as borg reads it) and every blob no entry names (orphans: a warning, verified too).
//   5. Verify (pool workers, MasterObjectVerifier per worker): structure, then with
//      --verify-data authenticate/decrypt meta and data, decompress, re-hash; a failed blob is
//      read once more from the file and the finding says whether the reads agreed.
//   6. Finish (main thread): packs the index names that do not exist, objects only the walk
//      found (a lost index fragment), archives/ entries without their metadata object, the
//      manifest (config/manifest, id 00*32, not in a pack), the summary.
//
// Deliberately absent: borg's archive analysis (items, chunk lists, files) is not part of a
// chunk verifier; and nothing is ever written (borg writes cache/checked-packs, locks and
// rebuilt index fragments into a repository it checks, spec §B.1.1).
//
// Thread contract: RunBorgstoreV4Check runs on the main thread. Per-worker state is in
// workers_[i] (worker i only); per-pack results in pack_results_[p] (written by the worker of
// pack p's task, read by the main thread after Wait()); the sink, budget and counters have
// their own synchronisation; everything else is const once the pool starts.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "checker/crypto/borg2master_crypto.h"
#include "checker/pool/work_stealing_pool.h"
#include "checker/repo/borghash_index.h"
#include "checker/repo/borgstore.h"
#include "checker/repo/file.h"
#include "checker/run/borg2_checks.h"
#include "checker/run/borg2master_key_loader.h"
#include "checker/run/borg2master_object.h"
#include "checker/run/byte_budget.h"
#include "checker/run/engine.h"

namespace borgcheck::run {
using report::Finding;
using report::Reread;
using report::Severity;
using report::Stage;
using repo::ChunkId;

namespace {

constexpr uint64_t kBatchBytes = 1 << 20;   // verify work per task
constexpr size_t kBatchObjects = 64;
constexpr uint64_t kMinInFlight = 128ull << 20;
constexpr uint64_t kInFlightPerThread = 32ull << 20;
constexpr uint64_t kMaxManifestSize = 64ull << 20;
constexpr int kModeProbes = 16;

std::string PackLocation(const std::string& hex) { return "pack " + hex; }
std::string Hex(const ChunkId& id) { return ToHex(Bytes(id.data(), id.size())); }

Finding MakeFinding(Severity sev, Stage stage, std::string location, std::optional<uint64_t> offset,
                    const ChunkId* id, std::string msg) {
  Finding f;
  f.severity = sev;
  f.stage = stage;
  f.location = std::move(location);
  f.offset = offset;
  if (id) f.chunk_id = *id;
  f.message = std::move(msg);
  return f;
}

// One pack in memory. Shared by the verify batches cut from it; the last one to finish returns
// its bytes to the budget. Written by the pack task before it is shared; read-only afterwards.
struct PackBlock {
  ByteBuffer data;
  const repo::PackFile* pack = nullptr;
  ByteBudget* budget = nullptr;
  uint64_t reserved = 0;
  ~PackBlock() {
    if (budget) budget->Release(reserved);
  }
};

// One blob to verify. Written by the pack task, read by one verify task.
struct VerifyItem {
  ChunkId id{};          // the chunk id it is checked as (the index's, or the header's for orphans)
  uint64_t offset = 0;   // in the pack
  uint64_t size = 0;     // bytes to read: the index's size, or the header's
  bool orphan = false;
};

struct VerifyBatch {
  std::shared_ptr<PackBlock> block;
  std::vector<VerifyItem> items;
};

// What the task of pack p found, for phase 6. Written by that task only; read after Wait().
struct PackResult {
  bool read = false;                 // the pack could be read and walked
  size_t orphans = 0;                // blobs no index entry names
  std::vector<ChunkId> orphan_ids;   // their header chunk ids
  size_t blobs = 0;
};

using WorkerState = run::WorkerState<MasterObjectVerifier>;

class MasterChecker {
 public:
  MasterChecker(const CheckOptions& opts, const ProgressCallback& progress) : opts_(opts), progress_(progress) {}
  CheckOutcome Run();

 private:
  Status DetectMode();
  std::optional<uint8_t> ProbeTypeByte(const std::string& path, uint64_t offset, uint64_t size);
  void CheckPack(size_t p, size_t worker, const std::shared_ptr<PackBlock>& block);
  void VerifyItems(const VerifyBatch& b, size_t worker);
  void FinishIndexAndArchives();
  void VerifyManifest(report::RunSummary& sum);
  bool Stopping() const { return PendingStopSignal() != 0 || changed_.load(std::memory_order_relaxed); }

  const CheckOptions& opts_;
  const ProgressCallback& progress_;

  // const after phase 3 (read by the workers)
  repo::BorgstoreLayout layout_;
  repo::LoadedChunkIndex index_;
  const crypto::MasterKeyType* type_ = nullptr;
  std::optional<MasterKey> key_;

  // own synchronisation
  report::FindingSink sink_;
  std::unique_ptr<ByteBudget> budget_;
  std::unique_ptr<pool::WorkStealingPool> pool_;
  std::atomic<uint64_t> bytes_done_{0};
  std::atomic<uint64_t> objects_done_{0};
  std::atomic<bool> changed_{false};

  std::vector<WorkerState> workers_;      // element i: worker i only
  std::vector<PackResult> pack_results_;  // element p: pack p's task only, then main
  std::chrono::steady_clock::time_point start_;
};

std::optional<uint8_t> MasterChecker::ProbeTypeByte(const std::string& path, uint64_t offset, uint64_t size) {
  Result<repo::ReadOnlyFile> f = repo::ReadOnlyFile::Open(path);
  if (!f.ok() || size < repo::kObjHeaderSize || offset + repo::kObjHeaderSize > f->size()) return std::nullopt;
  uint8_t h[repo::kObjHeaderSize];
  if (!f->ReadAt(offset, sizeof h, h).ok() || std::memcmp(h, repo::kObjMagic.data(), repo::kObjMagic.size()) != 0) {
    return std::nullopt;
  }
  repo::BlobHeader bh = repo::ReadBlobHeader(Bytes(h, sizeof h));
  uint64_t at = offset + repo::kObjHeaderSize + bh.meta_size;
  uint8_t type;
  if (bh.data_size == 0 || at >= f->size() || !f->ReadAt(at, 1, &type).ok()) return std::nullopt;
  return type;
}

// The key type: the first byte of the manifest's data envelope, as borg decides it; when the
// manifest cannot tell, the first indexed objects' (in pack order).
Status MasterChecker::DetectMode() {
  std::vector<uint8_t> seen;
  if (layout_.manifest_present) {
    if (std::optional<uint8_t> t = ProbeTypeByte(layout_.manifest_path, 0, UINT64_MAX)) seen.push_back(*t);
  }
  if (seen.empty() || !crypto::MasterKeyTypeFromByte(seen.back())) {
    int probes = 0;
    std::map<ChunkId, const repo::PackFile*> packs;
    for (const repo::PackFile& p : layout_.packs) packs[p.id] = &p;
    for (const auto& [pack_id, positions] : index_.by_pack) {
      auto it = packs.find(pack_id);
      if (it == packs.end()) continue;
      for (uint32_t pos : positions) {
        const repo::IndexedChunk& c = index_.chunks[pos];
        if (probes++ >= kModeProbes) break;
        if (std::optional<uint8_t> t = ProbeTypeByte(it->second->path, c.entry.offset, c.entry.size)) {
          seen.push_back(*t);
          if (crypto::MasterKeyTypeFromByte(*t)) break;
        }
      }
      if (probes >= kModeProbes || (!seen.empty() && crypto::MasterKeyTypeFromByte(seen.back()))) break;
    }
  }
  if (!seen.empty()) type_ = crypto::MasterKeyTypeFromByte(seen.back());
  if (type_) return Status::Ok();
  if (!opts_.verify_data) return Status::Ok();  // the keyless tier does not need the mode
  if (seen.empty()) {
    if (index_.size() == 0 && !layout_.manifest_present) return Status::Ok();  // nothing to decrypt
    return Status(StatusCode::kUnsupported,
                  "cannot tell the key type: neither config/manifest nor any indexed object has a readable envelope");
  }
  uint8_t t = seen.back();
  std::string what = t <= 0x07  ? " (a borg 1.x type, or borg 2.0.0b22's none/authenticated, which master rejects)"
                     : t == 0x50 ? " (borg 2.0.0b22's blake3 authenticated mode, dropped in master)"
                                 : "";
  return Status(StatusCode::kUnsupported, fmt::format("Unsupported payload type {}{} in repository {}", t, what, layout_.path));
}

void MasterChecker::CheckPack(size_t p, size_t worker, const std::shared_ptr<PackBlock>& block) {
  if (Stopping()) return;
  const repo::PackFile& pack = layout_.packs[p];
  PackResult& res = pack_results_[p];
  const std::string loc = PackLocation(pack.name);

  // Read the whole pack.
  Result<repo::ReadOnlyFile> f = repo::ReadOnlyFile::Open(pack.path);
  if (!f.ok()) {
    if (f.status().code() == StatusCode::kNotFound) {
      changed_.store(true);  // listed in phase 1, gone now: compact ran
      return;
    }
    sink_.Add(MakeFinding(Severity::kError, Stage::kMissing, loc, std::nullopt, nullptr,
                          "cannot open " + repo::PackItemName(pack.name) + ": " + f.status().message()));
  } else {
    block->data.Resize(f->size());
    if (Status s = f->ReadAt(0, f->size(), block->data.data()); !s.ok()) {
      sink_.Add(MakeFinding(Severity::kError, Stage::kMissing, loc, std::nullopt, nullptr,
                            "cannot read " + repo::PackItemName(pack.name) + ": " + s.message()));
    } else {
      res.read = true;
    }
  }
  bytes_done_.fetch_add(pack.size, std::memory_order_relaxed);
  const std::vector<repo::IndexedChunk> entries = index_.EntriesOfPack(pack.id);
  if (!res.read) {
    // Nothing to walk: every indexed object of this pack is lost with it.
    for (const repo::IndexedChunk& c : entries) {
      sink_.Add(MakeFinding(Severity::kError, Stage::kMissing, loc, c.entry.offset, &c.chunk_id,
                            "the pack holding this chunk cannot be read"));
      objects_done_.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  Bytes data = block->data.view();

  // SHA-256 against the name: the keyless tier. A mismatch is read once more.
  ChunkId digest;
  repo::Sha256(data, digest.data());
  if (digest != pack.id) {
    Reread reread = Reread::kNotReread;
    ByteBuffer& again = workers_[worker].reread;
    if (Result<repo::ReadOnlyFile> f2 = repo::ReadOnlyFile::Open(pack.path); f2.ok()) {
      again.Resize(f2->size());
      if (f2->ReadAt(0, f2->size(), again.data()).ok()) {
        ChunkId d2;
        repo::Sha256(again.view(), d2.data());
        bool same = again.size() == data.size() && std::memcmp(again.data(), data.data(), data.size()) == 0;
        reread = d2 == pack.id ? Reread::kPassed : same ? Reread::kAgreed : Reread::kDiffered;
      }
    }
    Finding fnd = MakeFinding(reread == Reread::kPassed ? Severity::kWarning : Severity::kError, Stage::kSegment, loc,
                              std::nullopt, nullptr,
                              "pack is corrupted: content does not match its name (sha256)" +
                                  std::string(reread == Reread::kPassed ? "; the second read matched (a transient read error?)" : ""));
    fnd.reread = reread;
    sink_.Add(std::move(fnd));
  }

  // Walk and cross-check.
  repo::PackWalk walk = repo::WalkPack(data);
  res.blobs = walk.blobs.size();
  if (walk.end != repo::WalkEnd::kClean) {
    std::string msg = walk.message;
    if (walk.broken_header) msg += "; its header names chunk " + Hex(walk.broken_header->chunk_id);
    sink_.Add(MakeFinding(Severity::kError, walk.end == repo::WalkEnd::kPastEof ? Stage::kTruncated : Stage::kSegment, loc,
                          walk.end_offset, nullptr, msg));
  }
  repo::PackCrossCheck cross = repo::CrossCheckPack(entries, walk);

  std::vector<VerifyItem> items;
  items.reserve(cross.matched.size() + cross.unmatched.size() + cross.orphans.size());
  for (const auto& [c, b] : cross.matched) items.push_back({c->chunk_id, b->offset, b->header.blob_size(), false});
  for (const repo::PackCrossCheck::Unmatched& u : cross.unmatched) {
    if (!u.why.empty()) {
      sink_.Add(MakeFinding(Severity::kError, Stage::kIndex, loc, u.chunk->entry.offset, &u.chunk->chunk_id,
                            "index entry (index/" + index_.fragment_names[u.chunk->fragment] +
                                ") does not match the pack: " + u.why));
    }
    items.push_back({u.chunk->chunk_id, u.chunk->entry.offset, u.chunk->entry.size, false});
  }
  for (const repo::WalkedBlob* b : cross.orphans) {
    res.orphans++;
    res.orphan_ids.push_back(b->header.chunk_id);
    std::string msg;
    if (const repo::IndexedChunk* other = index_.Find(b->header.chunk_id)) {
      msg = fmt::format("another copy of this chunk, not the one the chunk index uses ([pack {}, offset {}]): "
                        "left by compact or an interrupted backup; verified all the same",
                        Hex(other->entry.pack_id), other->entry.offset);
    } else {
      msg = "object is in no chunk index fragment (an orphan: a lost index fragment, or left by an interrupted "
            "backup); borg check --verify-data does not see it; verified here";
    }
    sink_.Add(MakeFinding(Severity::kWarning, Stage::kIndex, loc, b->offset, &b->header.chunk_id, msg));
    items.push_back({b->header.chunk_id, b->offset, b->header.blob_size(), true});
  }
  std::sort(items.begin(), items.end(), [](const VerifyItem& a, const VerifyItem& b) { return a.offset < b.offset; });

  // Fan out in batches that share the block.
  VerifyBatch batch;
  batch.block = block;
  uint64_t batch_bytes = 0;
  auto submit = [&] {
    if (batch.items.empty()) return;
    auto shared = std::make_shared<VerifyBatch>(std::move(batch));
    pool_->Submit([this, shared](size_t w) { VerifyItems(*shared, w); });
    batch = VerifyBatch();
    batch.block = block;
    batch_bytes = 0;
  };
  for (const VerifyItem& it : items) {
    batch.items.push_back(it);
    batch_bytes += it.size;
    if (batch_bytes >= kBatchBytes || batch.items.size() >= kBatchObjects) submit();
  }
  submit();
}

void MasterChecker::VerifyItems(const VerifyBatch& b, size_t worker) {
  WorkerState& ws = workers_[worker];
  const repo::PackFile& pack = *b.block->pack;
  Bytes data = b.block->data.view();
  for (const VerifyItem& it : b.items) {
    if (Stopping()) return;
    // Read as borg does: the range [offset, offset + size), cut short at the end of the pack.
    auto slice = [&](Bytes from) {
      uint64_t lo = std::min<uint64_t>(it.offset, from.size());
      uint64_t hi = std::min<uint64_t>(it.offset + it.size, from.size());
      return from.subspan(lo, hi - lo);
    };
    Bytes blob = slice(data);
    std::optional<VerifyFailure> fail = ws.verifier->Verify(blob, it.id);
    if (!fail) {
      ws.objects_verified++;
      ws.stored_bytes += blob.size();
      ws.plaintext_bytes += ws.verifier->plaintext().size();
      objects_done_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // Read the object once more before reporting it.
    Reread reread = Reread::kNotReread;
    Severity severity = fail->severity;
    if (severity == Severity::kError) {
      if (Result<repo::ReadOnlyFile> f = repo::ReadOnlyFile::Open(pack.path); f.ok()) {
        uint64_t lo = std::min<uint64_t>(it.offset, f->size());
        uint64_t hi = std::min<uint64_t>(it.offset + it.size, f->size());
        ws.reread.Resize(hi - lo);
        if (f->ReadAt(lo, hi - lo, ws.reread.data()).ok()) {
          bool same = hi - lo == blob.size() && std::memcmp(ws.reread.data(), blob.data(), blob.size()) == 0;
          reread = Reread::kAgreed;
          if (!same) {
            std::optional<VerifyFailure> again = ws.verifier->Verify(ws.reread.view(), it.id);
            if (!again) {
              reread = Reread::kPassed;
              severity = Severity::kWarning;
              ws.objects_verified++;
              ws.stored_bytes += ws.reread.size();
              ws.plaintext_bytes += ws.verifier->plaintext().size();
            } else {
              reread = Reread::kDiffered;
            }
          }
        }
      }
    }
    std::string msg = fail->message;
    if (reread == Reread::kPassed) msg += "; the second read verified (a transient read error?)";
    if (it.orphan) msg += " (an object in no index fragment)";
    Finding finding = MakeFinding(severity, fail->stage, PackLocation(pack.name), it.offset, &it.id, msg);
    finding.reread = reread;
    sink_.Add(std::move(finding));
    objects_done_.fetch_add(1, std::memory_order_relaxed);
  }
}

// Phase 6, index side: packs the index names that do not exist; objects only the walk found;
// archives/ entries whose metadata object is nowhere.
void MasterChecker::FinishIndexAndArchives() {
  std::set<ChunkId> present;
  for (const repo::PackFile& p : layout_.packs) present.insert(p.id);
  for (const auto& [pack_id, positions] : index_.by_pack) {
    if (present.count(pack_id)) continue;
    const std::vector<repo::IndexedChunk> entries = index_.EntriesOfPack(pack_id);
    const std::string loc = PackLocation(Hex(pack_id));
    sink_.Add(MakeFinding(Severity::kError, Stage::kMissing, loc, std::nullopt, nullptr,
                          fmt::format("pack referenced by the index is missing ({}): its {} chunk(s) are lost",
                                      repo::PackItemName(Hex(pack_id)), entries.size())));
    for (const repo::IndexedChunk& c : entries) {
      sink_.Add(MakeFinding(Severity::kError, Stage::kMissing, loc, c.entry.offset, &c.chunk_id,
                            "Object with key " + Hex(c.chunk_id) + " not found in the repository (its pack is missing)"));
    }
  }
  size_t orphan_objects = 0, orphan_packs = 0;
  std::set<ChunkId> orphan_ids;
  for (size_t p = 0; p < layout_.packs.size(); ++p) {
    const PackResult& r = pack_results_[p];
    orphan_objects += r.orphans;
    orphan_ids.insert(r.orphan_ids.begin(), r.orphan_ids.end());
    if (r.read && r.blobs > 0 && r.orphans == r.blobs) {
      orphan_packs++;
      sink_.Add(MakeFinding(Severity::kWarning, Stage::kIndex, PackLocation(layout_.packs[p].name), std::nullopt, nullptr,
                            fmt::format("pack is not referenced by the chunk index: none of its {} object(s) is in any "
                                        "index fragment (borg reports it as an orphan pack)",
                                        r.blobs)));
    }
  }
  if (orphan_objects > 0) {
    size_t unknown = 0;
    for (const ChunkId& id : orphan_ids) unknown += index_.Find(id) == nullptr;
    if (unknown > 0) {
      sink_.Add(MakeFinding(Severity::kWarning, Stage::kIndex, "index", std::nullopt, nullptr,
                            fmt::format("{} object(s) in the packs ({} whole pack(s)) are in no index fragment: an index "
                                        "fragment was probably lost, or a backup was interrupted. borg check does not "
                                        "verify them and reports archives whose metadata is among them as missing; "
                                        "this check verified them from the packs",
                                        unknown, orphan_packs)));
    }
  }
  for (const ChunkId& a : layout_.archives) {
    if (index_.Find(a)) continue;
    const std::string loc = "archives/" + Hex(a);
    if (orphan_ids.count(a)) {
      sink_.Add(MakeFinding(Severity::kWarning, Stage::kIndex, loc, std::nullopt, &a,
                            "the archive's metadata object is in a pack but in no index fragment: borg reports "
                            "\"Archive metadata block is missing\" for it"));
    } else {
      sink_.Add(MakeFinding(Severity::kError, Stage::kMissing, loc, std::nullopt, &a,
                            "the archive's metadata object is in no pack and no index fragment: the archive is lost"));
    }
  }
}

// Phase 6, manifest: config/manifest is one blob with chunk id 00*32, not in a pack.
void MasterChecker::VerifyManifest(report::RunSummary& sum) {
  const ChunkId zero{};
  const std::string loc = "config/manifest";
  if (!layout_.manifest_present) {
    sink_.Add(MakeFinding(Severity::kError, Stage::kMissing, loc, std::nullopt, &zero,
                          "the repository has no manifest: borg cannot list any archive (borg check --repair rebuilds it)"));
    return;
  }
  Result<std::string> text = repo::ReadWholeFile(layout_.manifest_path, kMaxManifestSize);
  if (!text.ok()) {
    sink_.Add(MakeFinding(Severity::kError, Stage::kMissing, loc, std::nullopt, &zero,
                          "the manifest cannot be read: " + text.status().message()));
    return;
  }
  MasterObjectVerifier v(opts_.verify_data, type_, key_ ? key_->material.crypt_key.view() : Bytes(),
                         key_ ? key_->material.id_key.view() : Bytes());
  std::optional<VerifyFailure> fail = v.Verify(AsBytes(*text), zero);
  if (!fail && opts_.verify_data) {
    std::vector<std::string> features;
    if (std::string why = repo::CheckManifestPlaintext(v.plaintext(), &features); !why.empty()) {
      fail = VerifyFailure{Stage::kEnvelope, "Repository manifest is corrupted: " + why};
    } else if (!features.empty()) {
      std::string names;
      for (const std::string& n : features) names += (names.empty() ? "" : ", ") + n;
      sum.notes.push_back("the manifest requires features borg master does not support: " + names);
    }
  }
  if (fail) {
    Result<std::string> again = repo::ReadWholeFile(layout_.manifest_path, kMaxManifestSize);
    Finding f = MakeFinding(fail->severity, fail->stage, loc, std::nullopt, &zero, fail->message);
    f.reread = !again.ok() ? Reread::kNotReread : *again == *text ? Reread::kAgreed : Reread::kDiffered;
    sink_.Add(std::move(f));
    return;
  }
  sum.stored_bytes += text->size();
}

CheckOutcome MasterChecker::Run() {
  CheckOutcome out;
  start_ = std::chrono::steady_clock::now();
  report::RunSummary& sum = out.summary;
  sum.repository = opts_.repository;
  sum.format = "borgstore-v4";
  sum.verify_data = opts_.verify_data;
  sum.threads = opts_.threads;
  sum.live_list_source = "index+pack-walk";

  // 1. Layout.
  Result<repo::BorgstoreLayout> layout = repo::ReadBorgstoreLayout(opts_.repository, {opts_.bypass_lock, 0});
  if (!layout.ok()) {
    out.status = layout.status();
    return out;
  }
  layout_ = std::move(layout).value();
  for (const Finding& f : layout_.findings) sink_.Add(f);
  sum.notes = layout_.notes;
  if (layout_.chunkindex_invalid) {
    sink_.Add(MakeFinding(Severity::kWarning, Stage::kIndex, "cache/chunkindex-invalid", std::nullopt, nullptr,
                          "the chunk index is marked invalid (an interrupted borg operation): borg rebuilds it from "
                          "the packs on next use; this check walks every pack anyway"));
  }

  // 2. Chunk index.
  index_ = repo::LoadChunkIndex(layout_);
  for (const Finding& f : index_.findings) sink_.Add(f);

  // 3. Mode and key.
  if (Status s = DetectMode(); !s.ok()) {
    out.status = s;
    return out;
  }
  if (type_) sum.mode = std::string(type_->name);
  if (opts_.verify_data && type_ && type_->needs_key) {
    std::vector<Finding> key_findings;
    Result<MasterKey> key = LoadMasterKey(layout_, &key_findings);
    if (!key.ok()) {
      out.status = key.status();
      return out;
    }
    key_ = std::move(key).value();
    for (Finding& f : key_findings) sink_.Add(std::move(f));
    if (key_->material.id_key.size() != 32 || key_->material.crypt_key.size() < 32) {
      out.status = Status(StatusCode::kCorruptMetadata,
                          fmt::format("the key in {} does not fit repository version 4 (id_key {} bytes, crypt_key {} bytes)",
                                      key_->where, key_->material.id_key.size(), key_->material.crypt_key.size()));
      return out;
    }
    sum.notes.push_back("key: " + key_->where);
  }

  // 4-5. Packs and objects.
  unsigned threads = std::max(1u, opts_.threads);
  budget_ = std::make_unique<ByteBudget>(std::max<uint64_t>(kMinInFlight, uint64_t(threads) * kInFlightPerThread));
  workers_.resize(threads);
  for (WorkerState& w : workers_) {
    w.verifier = std::make_unique<MasterObjectVerifier>(opts_.verify_data, type_,
                                                        key_ ? key_->material.crypt_key.view() : Bytes(),
                                                        key_ ? key_->material.id_key.view() : Bytes());
    if (opts_.verify_data && type_ && !w.verifier->status().ok()) {
      out.status = Status(StatusCode::kInternal, "cannot set up the object crypto: " + w.verifier->status().message());
      return out;
    }
  }
  pack_results_.resize(layout_.packs.size());
  uint64_t objects_expected = index_.size();
  pool_ = std::make_unique<pool::WorkStealingPool>(threads);

  ProgressReporter progress(progress_, [&] {
    report::Progress p;
    p.bytes_done = std::min(bytes_done_.load(), layout_.pack_bytes);
    p.bytes_total = layout_.pack_bytes;
    p.objects_done = objects_done_.load();
    p.objects_total = std::max(objects_expected, p.objects_done);
    p.elapsed_s = SecondsSince(start_);
    return p;
  });
  Status internal = FeedAndWait(*pool_, [&] {
    for (size_t p = 0; p < layout_.packs.size() && !Stopping(); ++p) {
      // The block owns the budget reservation from here: it is released when the pack's last
      // verify batch is done, or when a dropped task's capture is destroyed.
      budget_->Acquire(layout_.packs[p].size);
      auto block = std::make_shared<PackBlock>();
      block->pack = &layout_.packs[p];
      block->budget = budget_.get();
      block->reserved = layout_.packs[p].size;
      pool_->Submit([this, p, block](size_t w) { CheckPack(p, w, block); });
    }
  });
  progress.Finish();  // the final record carries the totals, as in the other runs
  pool_.reset();
  if (int sig = PendingStopSignal()) {
    SetInterrupted(out, sig);
    return out;
  }
  if (!internal.ok()) {
    out.status = internal;
    return out;
  }
  if (changed_.load()) {
    out.status = Status(StatusCode::kRepositoryChanged,
                        "repository changed during check (a pack vanished: borg compact may be running): no "
                        "verdict. Run again when borg is not writing to it");
    return out;
  }

  // 6. Finish.
  FinishIndexAndArchives();
  VerifyManifest(sum);
  // Objects: every chunk index entry (also those of missing or unreadable packs) and every blob
  // only the walk found.
  sum.objects_total = index_.size();
  for (const PackResult& r : pack_results_) sum.objects_total += r.orphans;
  AddWorkerTotals(workers_, sum);
  workers_.clear();
  size_t fragments = index_.fragment_names.size();
  sum.notes.push_back(fmt::format("{} index fragment(s) ({} bad), {} pack(s), {} chunk index entries (what borg's "
                                  "\"verified N chunks\" counts), {} archive(s)",
                                  fragments, index_.fragments_bad, layout_.packs.size(), index_.size(),
                                  layout_.archives.size()));
  key_.reset();  // wipes the key material
  sum.segments = layout_.packs.size();
  FinishSummary(sink_, layout_.pack_bytes, start_, out);
  return out;
}

}  // namespace

CheckOutcome RunBorgstoreV4Check(const CheckOptions& options, const ProgressCallback& progress) {
  return RunChecker<MasterChecker>(options, progress);
}

}  // namespace borgcheck::run
