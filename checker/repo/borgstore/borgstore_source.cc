#include "checker/repo/borgstore/borgstore_source.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/crypto/borg2master_crypto.h"
#include "checker/repo/borgstore/borgstore_archives.h"
#include "checker/repo/borgstore/borgstore_index.h"
#include "checker/repo/borgstore/borgstore_key.h"
#include "checker/repo/borgstore/borgstore_layout.h"
#include "checker/repo/borgstore/borgstore_verifier.h"
#include "checker/repo/key_type_probe.h"

namespace borgcheck::repo {
using engine::ObjectRef;
using engine::ObjectRole;
using engine::Verdict;
using report::Finding;
using report::Location;
using report::MakeFinding;
using report::Reread;
using report::Severity;
using report::Stage;

namespace {

constexpr uint64_t kInFlightPerThread = 32ull << 20;  // a pack is held whole while it is verified
constexpr uint64_t kMaxManifestSize = 64ull << 20;

std::string Hex(const ChunkId& id) { return ToHex(Bytes(id.data(), id.size())); }
Location PackLocation(const std::string& hex, std::optional<uint64_t> offset = std::nullopt) {
  return Location::Item("pack " + hex, offset);
}

// What the task of pack p found, for Finish. Written by that task only; read after the pool.
struct PackResult {
  bool read = false;                // the pack could be read and walked
  size_t orphans = 0;               // blobs no index entry names
  std::vector<ChunkId> orphan_ids;  // their header chunk ids
  std::vector<std::pair<uint64_t, uint64_t>> orphan_blobs;  // and where: (offset, blob size)
  size_t blobs = 0;
};

class BorgstoreSource final : public engine::EnvUnitSource {
 public:
  BorgstoreSource(const engine::CheckOptions& opts, const io::Env& env)
      : engine::EnvUnitSource(env), opts_(opts), verify_data_(opts.verify_data) {}

  Result<engine::Plan> MakePlan() override;
  Status LoadKey(engine::Plan& plan) override {
    Status s = LoadTypeAndKey(plan);
    if (s.ok() && type_ && opts_.hash_lanes) id_lane_hash_ = crypto::Borg2IdLanesOrNone(type_->id_hash, IdKey());
    return s;
  }
  void FallBackToKeyless() override {
    verify_data_ = false;
    key_.reset();
  }
  // The keyless tier probes the type too (MakePlan) but uses no key: like every generation it
  // names no mode then (docs/json.md: `mode` is null for a keyless check).
  std::string ModeName() const override {
    return verify_data_ && type_ ? std::string(type_->name) : std::string();
  }
  Result<std::unique_ptr<engine::ObjectVerifier>> MakeVerifier() const override;
  void ReadUnit(size_t index, engine::UnitSink& sink) override;
  bool ForEachLiveId(size_t unit, const std::function<void(const engine::ChunkId&)>& each) const override {
    if (unit >= layout_.packs.size()) return false;
    for (const IndexedChunk& e : index_.EntriesOfPack(layout_.packs[unit].id)) each(e.chunk_id);
    return true;
  }
  void Finish(engine::FinishContext& ctx) override;
  // Sharded runs (engine/shard.h): each pack's walk (PackResult), for the orphans, the archives
  // whose metadata only a pack holds, and the archive pass's unindexed blobs.
  void SaveEvidence(nlohmann::json& out, std::span<engine::ObjectVerifier* const> verifiers) override;
  Status LoadEvidence(const nlohmann::json& in) override;
  std::unique_ptr<engine::ArchiveSource> MakeArchiveSource() override {
    if (!type_) return nullptr;
    // After the object pass, the blobs the pack walk found that no index fragment lists are
    // stored objects too (a lost fragment hides nothing: B.8 item 6).
    auto unindexed = [this] {
      std::vector<UnindexedBlob> out;
      for (size_t p = 0; p < pack_results_.size(); ++p) {
        const PackResult& r = pack_results_[p];
        for (size_t i = 0; i < r.orphan_ids.size() && i < r.orphan_blobs.size(); ++i) {
          out.push_back({r.orphan_ids[i], p, r.orphan_blobs[i].first, r.orphan_blobs[i].second});
        }
      }
      return out;
    };
    return MakeBorgstoreArchiveSource(env_, layout_, index_, type_, key_ ? &key_->material : nullptr, unindexed);
  }
  bool HasArchives() const override { return true; }

 private:
  Bytes IdKey() const { return key_ ? key_->material.id_key.view() : Bytes(); }  // the id key (empty without a key)
  // The key type and the key (LoadKey's part before the lanes).
  Status LoadTypeAndKey(engine::Plan& plan);
  std::optional<uint8_t> ProbeTypeByte(const std::string& path, uint64_t offset, uint64_t size) const;
  Status DetectMode();
  // id_lanes: the lane hash of the ids (the workers' verifiers), or null (the manifest's).
  std::unique_ptr<BorgstoreVerifier> NewVerifier(const crypto::LaneHash* id_lanes = nullptr) const;
  void ReadWanted(const PackFile& pack, const io::File& file, const std::vector<IndexedChunk>& entries,
                  engine::UnitSink& sink) const;
  void FinishIndexAndArchives(report::FindingSink& sink, bool every_pack_walked) const;
  void VerifyManifest(report::FindingSink& sink, report::RunSummary& sum) const;

  const engine::CheckOptions& opts_;
  bool verify_data_;  // opts_.verify_data until FallBackToKeyless

  // const after LoadKey (read by the workers)
  BorgstoreLayout layout_;
  LoadedChunkIndex index_;
  const crypto::MasterKeyType* type_ = nullptr;
  Status mode_status_;  // why the key type is unknown, when it is
  std::optional<MasterKey> key_;
  // The id hash as the hash lanes compute it (crypto::Borg2IdLanesOrNone): made by LoadKey,
  // then shared by every worker's verifier. Empty without lanes (CheckOptions::hash_lanes
  // false, no LoadKey: not verify-data, or a key that did not load; a BLAKE3 id).
  std::optional<crypto::LaneHash> id_lane_hash_;

  std::vector<PackResult> pack_results_;  // element p: pack p's task only, then Finish
};

std::optional<uint8_t> BorgstoreSource::ProbeTypeByte(const std::string& path, uint64_t offset, uint64_t size) const {
  Result<std::unique_ptr<io::File>> f = env_.OpenToReadAgain(path);  // a probe: the data pass reads it (io/env.h)
  if (!f.ok() || size < kObjHeaderSize || offset + kObjHeaderSize > (*f)->size()) return std::nullopt;
  uint8_t h[kObjHeaderSize];
  if (!(*f)->ReadAt(offset, sizeof h, h).ok() || std::memcmp(h, kObjMagic.data(), kObjMagic.size()) != 0) {
    return std::nullopt;
  }
  BlobHeader bh = ReadBlobHeader(Bytes(h, sizeof h));
  uint64_t at = offset + kObjHeaderSize + bh.meta_size;
  uint8_t type;
  if (bh.data_size == 0 || at >= (*f)->size() || !(*f)->ReadAt(at, 1, &type).ok()) return std::nullopt;
  return type;
}

// The key type: the first byte of the manifest's data envelope, as borg decides it; when the
// manifest cannot tell, the first known of the indexed objects' (in pack order; KeyTypeProbe).
Status BorgstoreSource::DetectMode() {
  KeyTypeProbe probe(KeyTypeRule::kFirstKnown, [](uint8_t t) { return crypto::MasterKeyTypeFromByte(t) != nullptr; });
  if (layout_.manifest_present) probe.Manifest(ProbeTypeByte(layout_.manifest_path, 0, UINT64_MAX));
  std::map<ChunkId, const PackFile*> packs;
  for (const PackFile& p : layout_.packs) packs[p.id] = &p;
  for (const auto& [pack_id, positions] : index_.by_pack) {
    if (probe.Settled()) break;
    auto it = packs.find(pack_id);
    if (it == packs.end()) continue;
    for (uint32_t pos : positions) {
      if (probe.Settled()) break;
      const IndexedChunk& c = index_.chunks[pos];
      probe.Sample(ProbeTypeByte(it->second->path, c.entry.offset, c.entry.size));
    }
  }
  if (std::optional<uint8_t> t = probe.Choose()) type_ = crypto::MasterKeyTypeFromByte(*t);
  if (type_) return Status::Ok();
  if (!probe.last_seen()) {
    if (index_.size() == 0 && !layout_.manifest_present) return Status::Ok();  // nothing to decrypt
    return Status(StatusCode::kUnsupported,
                  "cannot tell the key type: neither config/manifest nor any indexed object has a readable envelope");
  }
  const uint8_t t = *probe.last_seen();
  std::string what = t <= 0x07  ? " (a borg 1.x type, or borg 2.0.0b22's none/authenticated, which master rejects)"
                     : t == 0x50 ? " (borg 2.0.0b22's blake3 authenticated mode, dropped in master)"
                                 : "";
  return Status(StatusCode::kUnsupported,
                fmt::format("Unsupported payload type {}{} in repository {}", t, what, layout_.path));
}

Result<engine::Plan> BorgstoreSource::MakePlan() {
  Result<BorgstoreLayout> layout = ReadBorgstoreLayout(env_, opts_.repository, {opts_.bypass_lock, 0});
  if (!layout.ok()) return layout.status();
  layout_ = std::move(layout).value();
  engine::Plan plan;
  plan.format = "borgstore-v4";
  plan.repository_id = ToHex(AsBytes(layout_.id));
  plan.unit_noun = "pack";
  plan.live_list_source = "index+pack-walk";
  plan.in_order = false;
  plan.in_flight_per_thread = kInFlightPerThread;
  plan.findings = std::move(layout_.findings);
  layout_.findings.clear();
  plan.notes = layout_.notes;
  if (layout_.chunkindex_invalid) {
    plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kIndex, Location::Item("cache/chunkindex-invalid"),
                                        nullptr,
                                        "the chunk index is marked invalid (an interrupted borg operation): borg "
                                        "rebuilds it from the packs on next use; this check walks every pack anyway"));
  }
  index_ = LoadChunkIndex(env_, layout_);
  for (Finding& f : index_.findings) plan.findings.push_back(std::move(f));
  index_.findings.clear();
  // The keyless tier does not need the mode; a verify-data run fails in LoadKey if it is unknown.
  mode_status_ = DetectMode();
  for (const PackFile& p : layout_.packs) plan.units.push_back({PackLocation(p.name), p.path, p.size});
  pack_results_.resize(layout_.packs.size());
  plan.objects_total = index_.size();
  return plan;
}

Status BorgstoreSource::LoadTypeAndKey(engine::Plan& plan) {
  if (!mode_status_.ok()) return mode_status_;
  if (!type_ || !type_->needs_key) return Status::Ok();
  std::vector<Finding> key_findings;
  Result<MasterKey> key = LoadMasterKey(env_, layout_, key_findings);
  if (!key.ok()) return key.status();
  key_ = std::move(key).value();
  for (Finding& f : key_findings) plan.findings.push_back(std::move(f));
  if (key_->material.id_key.size() != 32 || key_->material.crypt_key.size() < 32) {
    return Status(StatusCode::kCorruptMetadata,
                  fmt::format("the key in {} does not fit repository version 4 (id_key {} bytes, crypt_key {} bytes)",
                              key_->where, key_->material.id_key.size(), key_->material.crypt_key.size()));
  }
  plan.notes.push_back("key: " + key_->where);
  return Status::Ok();
}

std::unique_ptr<BorgstoreVerifier> BorgstoreSource::NewVerifier(const crypto::LaneHash* id_lanes) const {
  return std::make_unique<BorgstoreVerifier>(verify_data_, type_, key_ ? key_->material.crypt_key.view() : Bytes(),
                                             IdKey(), id_lanes);
}

Result<std::unique_ptr<engine::ObjectVerifier>> BorgstoreSource::MakeVerifier() const {
  std::unique_ptr<BorgstoreVerifier> v = NewVerifier(id_lane_hash_ ? &*id_lane_hash_ : nullptr);
  if (verify_data_ && type_ && !v->status().ok()) {
    return Status(StatusCode::kInternal, "cannot set up the object crypto: " + v->status().message());
  }
  return std::unique_ptr<engine::ObjectVerifier>(std::move(v));
}

void BorgstoreSource::ReadUnit(size_t p, engine::UnitSink& sink) {
  if (sink.Stopping()) return;
  const PackFile& pack = layout_.packs[p];
  PackResult& res = pack_results_[p];
  const std::vector<IndexedChunk> entries = index_.EntriesOfPack(pack.id);

  // Read the whole pack.
  std::shared_ptr<engine::Block> block;
  Result<std::unique_ptr<io::File>> f = env_.Open(pack.path);
  // Why nothing of the pack can be checked: it exists and cannot be read (could not check), or it
  // is not a regular file any more (damage).
  Stage unread_stage = Stage::kMissing;
  std::string unread_why;
  if (!f.ok()) {
    const engine::UnitOpenFailure why = engine::ClassifyUnitOpenFailure(f.status());
    if (why == engine::UnitOpenFailure::kVanished) {
      sink.Vanished();  // listed while planning, gone now: compact ran
      return;
    }
    const bool io = why == engine::UnitOpenFailure::kUnreadable;
    unread_stage = io ? Stage::kIo : Stage::kMissing;
    unread_why = io ? "the pack holding this chunk cannot be read (" + f.status().message() + "): not checked"
                    : "the pack holding this chunk is not a regular file: lost";
    sink.Finding(MakeFinding(Severity::kError, unread_stage, PackLocation(pack.name), nullptr,
                             "cannot open " + PackItemName(pack.name) + ": " + f.status().message()));
  } else if (!sink.WantsAll()) {
    ReadWanted(pack, **f, entries, sink);  // a subset: res.read stays false (the pack is not walked)
    return;
  } else {
    block = sink.TakeBlock(0, (*f)->size());
    if (Status s = (*f)->ReadAt(0, block->data.size(), block->data.data()); !s.ok()) {
      unread_stage = Stage::kIo;
      unread_why = "the pack holding this chunk cannot be read (" + s.message() + "): not checked";
      sink.Finding(MakeFinding(Severity::kError, Stage::kIo, PackLocation(pack.name), nullptr,
                               "cannot read " + PackItemName(pack.name) + ": " + s.message()));
    } else {
      res.read = true;
    }
  }
  if (!res.read) {
    // Nothing to walk: every indexed object of this pack is lost with it.
    for (const IndexedChunk& c : entries) {
      sink.Finding(MakeFinding(Severity::kError, unread_stage, PackLocation(pack.name, c.entry.offset), &c.chunk_id,
                               unread_why),
                   /*object_done=*/true);
    }
    return;
  }
  Bytes data = block->data.view();

  // SHA-256 against the name: the keyless tier. A mismatch is read once more.
  ChunkId digest;
  Sha256(data, digest.data());
  if (digest != pack.id) {
    ByteBuffer again;
    Reread reread = Reread::kNotReread;
    switch (io::ReadAgain(env_, pack.path, 0, data, again)) {
      case io::SecondRead::kUnreadable: break;
      case io::SecondRead::kSame: reread = Reread::kAgreed; break;
      case io::SecondRead::kDifferent: {
        ChunkId d2;
        Sha256(again.view(), d2.data());
        reread = d2 == pack.id ? Reread::kPassed : Reread::kDiffered;
        break;
      }
    }
    Finding fnd = MakeFinding(reread == Reread::kPassed ? Severity::kWarning : Severity::kError, Stage::kSegment,
                              PackLocation(pack.name), nullptr,
                              "pack is corrupted: content does not match its name (sha256)" +
                                  std::string(reread == Reread::kPassed ? "; the second read verified (a transient read error?)" : ""));
    fnd.reread = reread;
    sink.Finding(std::move(fnd));
  }

  // Walk and cross-check.
  PackWalk walk = WalkPack(data);
  res.blobs = walk.blobs.size();
  if (walk.end != WalkEnd::kClean) {
    std::string msg = walk.message;
    if (walk.broken_header) msg += "; its header names chunk " + Hex(walk.broken_header->chunk_id);
    sink.Finding(MakeFinding(Severity::kError, walk.end == WalkEnd::kPastEof ? Stage::kTruncated : Stage::kSegment,
                             PackLocation(pack.name, walk.end_offset), nullptr, msg));
  }
  PackCrossCheck cross = CrossCheckPack(entries, walk);

  // Every object is read as borg reads it: the range [offset, offset + size), cut short at the
  // end of the pack.
  std::vector<ObjectRef> refs;
  refs.reserve(cross.matched.size() + cross.unmatched.size() + cross.orphans.size());
  auto add = [&](const ChunkId& id, uint64_t offset, uint64_t size, ObjectRole role) {
    if (!sink.Wants(id)) return;
    const uint64_t lo = std::min<uint64_t>(offset, data.size());
    const uint64_t hi = std::min<uint64_t>(offset + size, data.size());
    ObjectRef r;
    r.id = id;
    r.pos = lo;
    r.file_offset = offset;
    r.size = uint32_t(hi - lo);
    r.role = role;
    refs.push_back(r);
  };
  for (const auto& [c, b] : cross.matched) add(c->chunk_id, b->offset, b->header.blob_size(), ObjectRole::kLive);
  for (const PackCrossCheck::Unmatched& u : cross.unmatched) {
    if (!u.why.empty()) {
      sink.Finding(MakeFinding(Severity::kError, Stage::kIndex, PackLocation(pack.name, u.chunk->entry.offset),
                               &u.chunk->chunk_id,
                               "index entry (index/" + index_.fragment_names[u.chunk->fragment] +
                                   ") does not match the pack: " + u.why));
    }
    add(u.chunk->chunk_id, u.chunk->entry.offset, u.chunk->entry.size, ObjectRole::kLive);
  }
  for (const WalkedBlob* b : cross.orphans) {
    res.orphans++;
    res.orphan_ids.push_back(b->header.chunk_id);
    res.orphan_blobs.emplace_back(b->offset, b->header.blob_size());
    std::string msg;
    if (const IndexedChunk* other = index_.Find(b->header.chunk_id)) {
      msg = fmt::format("another copy of this chunk, not the one the chunk index uses ([pack {}, offset {}]): "
                        "left by compact or an interrupted backup; verified all the same",
                        Hex(other->entry.pack_id), other->entry.offset);
    } else {
      msg = "object is in no chunk index fragment (an orphan: a lost index fragment, or left by an interrupted "
            "backup); borg check --verify-data does not see it; verified here";
    }
    sink.Finding(MakeFinding(Severity::kWarning, Stage::kIndex, PackLocation(pack.name, b->offset), &b->header.chunk_id, msg));
    add(b->header.chunk_id, b->offset, b->header.blob_size(), ObjectRole::kOrphan);
  }
  std::sort(refs.begin(), refs.end(), [](const ObjectRef& a, const ObjectRef& b) { return a.file_offset < b.file_offset; });
  sink.Objects(std::move(block), std::move(refs));
}

// A subset run (UnitSink::WantsAll false): only the wanted objects' bytes, in pack order, runs
// of adjacent ones in one read. No hash against the name and no walk, which need every byte of
// the pack; so no orphans either. Each object is read as borg reads it (the index's range, cut
// short at the end of the pack), as in the whole-pack path.
void BorgstoreSource::ReadWanted(const PackFile& pack, const io::File& file, const std::vector<IndexedChunk>& entries,
                                 engine::UnitSink& sink) const {
  const uint64_t file_size = file.size();
  size_t i = 0;
  while (i < entries.size() && !sink.Stopping()) {
    if (!sink.Wants(entries[i].chunk_id)) {
      ++i;
      continue;
    }
    const uint64_t start = std::min<uint64_t>(entries[i].entry.offset, file_size);
    uint64_t end = std::min<uint64_t>(uint64_t(entries[i].entry.offset) + entries[i].entry.size, file_size);
    size_t j = i + 1;
    while (j < entries.size() && entries[j].entry.offset == end && sink.Wants(entries[j].chunk_id) &&
           end + entries[j].entry.size - start <= engine::kReadWindowBytes) {
      end = std::min<uint64_t>(end + entries[j].entry.size, file_size);
      ++j;
    }
    std::shared_ptr<engine::Block> block = sink.TakeBlock(start, end - start);
    if (Status s = file.ReadAt(start, end - start, block->data.data()); !s.ok()) {
      for (size_t k = i; k < j; ++k) {
        sink.Finding(MakeFinding(Severity::kError, Stage::kIo, PackLocation(pack.name, entries[k].entry.offset),
                                 &entries[k].chunk_id, "cannot read the object (" + s.message() + "): not checked"),
                     /*object_done=*/true);
      }
      i = j;
      continue;
    }
    std::vector<ObjectRef> refs;
    for (size_t k = i; k < j; ++k) {
      const uint64_t lo = std::min<uint64_t>(entries[k].entry.offset, file_size);
      const uint64_t hi = std::min<uint64_t>(uint64_t(entries[k].entry.offset) + entries[k].entry.size, file_size);
      ObjectRef r;
      r.id = entries[k].chunk_id;
      r.pos = lo - start;
      r.file_offset = entries[k].entry.offset;
      r.size = uint32_t(hi - lo);
      refs.push_back(r);
    }
    sink.Objects(std::move(block), std::move(refs));
    i = j;
  }
}

// Packs the index names that do not exist; objects only the walk found; archives/ entries
// whose metadata object is nowhere. Orphans are known only when every pack was walked: a
// partial run says less about archives whose metadata object no index names.
void BorgstoreSource::FinishIndexAndArchives(report::FindingSink& sink, bool every_pack_walked) const {
  std::set<ChunkId> present;
  for (const PackFile& p : layout_.packs) present.insert(p.id);
  for (const auto& [pack_id, positions] : index_.by_pack) {
    if (present.count(pack_id)) continue;
    const std::vector<IndexedChunk> entries = index_.EntriesOfPack(pack_id);
    auto odd = layout_.not_regular_packs.find(Hex(pack_id));
    sink.Add(MakeFinding(Severity::kError, Stage::kMissing, PackLocation(Hex(pack_id)), nullptr,
                         fmt::format("pack referenced by the index {} ({}): its {} chunk(s) are lost",
                                     odd == layout_.not_regular_packs.end() ? "is missing"
                                                                            : "is " + odd->second + ", not a pack file",
                                     PackItemName(Hex(pack_id)), entries.size())));
    for (const IndexedChunk& c : entries) {
      sink.Add(MakeFinding(Severity::kError, Stage::kMissing, PackLocation(Hex(pack_id), c.entry.offset), &c.chunk_id,
                           odd == layout_.not_regular_packs.end()
                               ? "Object not found in the repository (its pack is missing)"
                               : "Object not found in the repository (its pack is " + odd->second +
                                     ", not a pack file)"));
    }
  }
  for (const auto& [name, what] : layout_.not_regular_packs) {
    ChunkId id;
    if (ParseHexName(name, &id) && !index_.by_pack.count(id)) {
      sink.Add(MakeFinding(Severity::kWarning, Stage::kSegment, PackLocation(name), nullptr,
                           "is " + what + ", not a pack file; no index fragment names a chunk in it: ignored"));
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
      sink.Add(MakeFinding(Severity::kWarning, Stage::kIndex, PackLocation(layout_.packs[p].name), nullptr,
                           fmt::format("pack is not referenced by the chunk index: none of its {} object(s) is in any "
                                       "index fragment (borg reports it as an orphan pack)",
                                       r.blobs)));
    }
  }
  if (orphan_objects > 0) {
    size_t unknown = 0;
    for (const ChunkId& id : orphan_ids) unknown += index_.Find(id) == nullptr;
    if (unknown > 0) {
      sink.Add(MakeFinding(Severity::kWarning, Stage::kIndex, Location::Item("index"), nullptr,
                           fmt::format("{} object(s) in the packs ({} whole pack(s)) are in no index fragment: an index "
                                       "fragment was probably lost, or a backup was interrupted. borg check does not "
                                       "verify them and reports archives whose metadata is among them as missing; "
                                       "this check verified them from the packs",
                                       unknown, orphan_packs)));
    }
  }
  for (const ChunkId& a : layout_.archives) {
    if (index_.Find(a)) continue;
    const Location loc = Location::Item("archives/" + Hex(a));
    if (orphan_ids.count(a)) {
      sink.Add(MakeFinding(Severity::kWarning, Stage::kIndex, loc, &a,
                           "the archive's metadata object is in a pack but in no index fragment: borg reports "
                           "\"Archive metadata block is missing\" for it"));
    } else if (!every_pack_walked) {
      sink.Add(MakeFinding(Severity::kWarning, Stage::kIndex, loc, &a,
                           "the archive's metadata object is in no index fragment: borg reports \"Archive metadata "
                           "block is missing\" for it (this partial run did not walk every pack, so whether one "
                           "holds it is not known; a full run tells)"));
    } else {
      sink.Add(MakeFinding(Severity::kError, Stage::kMissing, loc, &a,
                           "the archive's metadata object is in no pack and no index fragment: the archive is lost"));
    }
  }
}

// config/manifest is one blob with chunk id 00*32, not in a pack: verified here, with the same
// second-read policy as every object.
void BorgstoreSource::VerifyManifest(report::FindingSink& sink, report::RunSummary& sum) const {
  const ChunkId zero{};
  const Location loc = Location::Item("config/manifest");
  if (!layout_.manifest_present) {
    sink.Add(MakeFinding(Severity::kError, Stage::kMissing, loc, &zero,
                         "the repository has no manifest: borg cannot list any archive (borg check --repair rebuilds it)"));
    return;
  }
  Result<std::string> text = env_.ReadWholeFile(layout_.manifest_path, kMaxManifestSize);
  if (!text.ok()) {
    const bool io = text.status().code() == StatusCode::kIoError;
    sink.Add(MakeFinding(Severity::kError, io ? Stage::kIo : Stage::kMissing, loc, &zero,
                         io ? "the manifest cannot be read (" + text.status().message() + "): not checked"
                            : "the manifest cannot be read: " + text.status().message()));
    return;
  }
  std::unique_ptr<BorgstoreVerifier> v = NewVerifier();
  auto verify = [&](Bytes blob) -> std::optional<Verdict> {
    std::optional<Verdict> fail = v->VerifyAs(blob, zero);
    if (!fail && verify_data_) {
      std::vector<std::string> features;
      if (std::string why = CheckManifestPlaintext(v->plaintext(), &features); !why.empty()) {
        return Verdict{Stage::kEnvelope, "Repository manifest is corrupted: " + why};
      }
      if (!features.empty()) {
        std::string names;
        for (const std::string& n : features) names += (names.empty() ? "" : ", ") + n;
        sum.notes.push_back("the manifest requires features borg master does not support: " + names);
      }
    }
    return fail;
  };
  std::optional<Verdict> fail = verify(AsBytes(*text));
  if (!fail) {
    sum.stored_bytes += text->size();
    return;
  }
  Reread reread = Reread::kNotReread;
  Severity severity = fail->severity;
  std::string msg = fail->message;
  ByteBuffer again;
  switch (io::ReadAgain(env_, layout_.manifest_path, 0, AsBytes(*text), again)) {
    case io::SecondRead::kUnreadable: break;
    case io::SecondRead::kSame: reread = Reread::kAgreed; break;
    case io::SecondRead::kDifferent:
      reread = Reread::kDiffered;
      if (!verify(again.view())) {
        reread = Reread::kPassed;
        severity = Severity::kWarning;
        msg += "; the second read verified (a transient read error?)";
        sum.stored_bytes += again.size();
      }
      break;
  }
  Finding f = MakeFinding(severity, fail->stage, loc, &zero, msg);
  f.reread = reread;
  sink.Add(std::move(f));
}

void BorgstoreSource::Finish(engine::FinishContext& ctx) {
  FinishIndexAndArchives(ctx.findings, ctx.complete);
  VerifyManifest(ctx.findings, ctx.summary);
  // Objects: every chunk index entry (also those of missing or unreadable packs) and every blob
  // only the walk found.
  for (const PackResult& r : pack_results_) ctx.summary.objects_total += r.orphans;
  ctx.summary.notes.push_back(fmt::format("{} index fragment(s) ({} bad), {} pack(s), {} chunk index entries (what "
                                          "borg's \"verified N chunks\" counts), {} archive(s)",
                                          index_.fragment_names.size(), index_.fragments_bad, layout_.packs.size(),
                                          index_.size(), layout_.archives.size()));
  key_.reset();  // wipes the key material
  id_lane_hash_.reset();  // and the lanes' key states
}

void BorgstoreSource::SaveEvidence(nlohmann::json& out, std::span<engine::ObjectVerifier* const>) {
  nlohmann::json packs = nlohmann::json::array();
  for (size_t p = 0; p < pack_results_.size(); ++p) {
    const PackResult& r = pack_results_[p];
    if (!r.read) continue;  // not read by this shard, or could not be (its findings say so)
    nlohmann::json orphans = nlohmann::json::array();
    for (size_t i = 0; i < r.orphan_ids.size() && i < r.orphan_blobs.size(); ++i) {
      orphans.push_back({Hex(r.orphan_ids[i]), r.orphan_blobs[i].first, r.orphan_blobs[i].second});
    }
    packs.push_back({layout_.packs[p].name, r.blobs, r.orphans, std::move(orphans)});
  }
  out = {{"packs_walked", std::move(packs)}};
  key_.reset();  // wipes the key material, as Finish does
  id_lane_hash_.reset();
}

Status BorgstoreSource::LoadEvidence(const nlohmann::json& in) {
  const Status bad(StatusCode::kInvalidArgument, "a shard's borgstore evidence does not parse");
  if (!in.is_object() || !in.contains("packs_walked") || !in["packs_walked"].is_array()) return bad;
  std::map<std::string, size_t> by_name;
  for (size_t p = 0; p < layout_.packs.size(); ++p) by_name[layout_.packs[p].name] = p;
  auto count = [](const nlohmann::json& j) {
    return j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0);
  };
  for (const nlohmann::json& e : in["packs_walked"]) {
    if (!e.is_array() || e.size() != 4 || !e[0].is_string() || !count(e[1]) || !count(e[2]) || !e[3].is_array()) {
      return bad;
    }
    auto it = by_name.find(e[0].get<std::string>());
    if (it == by_name.end() || pack_results_[it->second].read) {
      return Status(StatusCode::kInvalidArgument, "a shard's evidence names a pack that is no unit of this plan, "
                                                  "or one two shards walked");
    }
    PackResult r;
    r.read = true;
    r.blobs = e[1].get<uint64_t>();
    r.orphans = e[2].get<uint64_t>();
    for (const nlohmann::json& o : e[3]) {
      ChunkId id;
      if (!o.is_array() || o.size() != 3 || !o[0].is_string() || !ParseHexId(o[0].get<std::string>(), id) ||
          !count(o[1]) || !count(o[2])) {
        return bad;
      }
      r.orphan_ids.push_back(id);
      r.orphan_blobs.emplace_back(o[1].get<uint64_t>(), o[2].get<uint64_t>());
    }
    if (r.orphans != r.orphan_ids.size() || r.orphans > r.blobs) return bad;
    pack_results_[it->second] = std::move(r);
  }
  return Status::Ok();
}

}  // namespace

std::unique_ptr<engine::ObjectSource> MakeBorgstoreSource(const engine::CheckOptions& options, const io::Env& env) {
  return std::make_unique<BorgstoreSource>(options, env);
}

}  // namespace borgcheck::repo
