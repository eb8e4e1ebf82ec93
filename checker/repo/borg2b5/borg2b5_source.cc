#include "checker/repo/borg2b5/borg2b5_source.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/keys/key_identity.h"
#include "checker/repo/borg2/borg2_repo_obj.h"
#include "checker/repo/borg2b5/borg2b5_archives.h"
#include "checker/repo/borg2b5/borg2b5_key.h"
#include "checker/repo/borg2b5/borg2b5_segments.h"
#include "checker/repo/borg2b5/borg2b5_verifier.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/key_type_probe.h"

namespace borgcheck::repo {
using engine::ObjectRef;
using engine::ObjectRole;
using report::Finding;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;

namespace {

bool IsPut(const Borg2Entry& e) { return e.tag == kB2TagPut || e.tag == kB2TagPut2; }

class Borg2b5Source final : public engine::EnvUnitSource {
 public:
  Borg2b5Source(const engine::CheckOptions& opts, const io::Env& env, std::optional<std::string> config_text)
      : engine::EnvUnitSource(env), opts_(opts), config_text_(std::move(config_text)), verify_data_(opts.verify_data) {}

  Result<engine::Plan> MakePlan() override;
  Status LoadKey(engine::Plan& plan) override {
    Status s = LoadTypeAndKey(plan);
    if (s.ok() && type_ && opts_.hash_lanes) id_lane_hash_ = crypto::Borg2IdLanesOrNone(type_->id_hash, IdKey());
    return s;
  }
  void FallBackToKeyless() override {
    verify_data_ = false;
    type_ = nullptr;
    key_.reset();
  }
  std::string ModeName() const override { return type_ ? std::string(type_->name) : std::string(); }
  Result<std::unique_ptr<engine::ObjectVerifier>> MakeVerifier() const override;
  void ReadUnit(size_t index, engine::UnitSink& sink) override;
  bool ForEachLiveId(size_t unit, const std::function<void(const engine::ChunkId&)>& each) const override {
    if (unit >= plan_.segments.size()) return false;
    for (const Borg2Entry& e : plan_.segments[unit].entries) {
      if (e.live && IsPut(e)) each(e.id);
    }
    return true;
  }
  bool ChangedSinceStart() const override { return FindIndexTransaction(env_, opts_.repository) != index_txn_at_start_; }
  void WillFinish() const override {
    if (!verify_data_ || !type_) return;  // VerifyManifestTam reads it again only then
    if (auto [seg, entry] = LiveManifest(); entry) env_.OpenAhead(seg->path, io::ReadAhead::kParts, entry->offset);
  }
  // The live manifest entry (the last the plan's segments hold) and its segment, or nulls.
  std::pair<const Borg2Segment*, const Borg2Entry*> LiveManifest() const {
    std::pair<const Borg2Segment*, const Borg2Entry*> found{nullptr, nullptr};
    for (const Borg2Segment& s : plan_.segments) {
      for (const Borg2Entry& e : s.entries) {
        if (e.live && IsManifestId(e.id)) found = {&s, &e};
      }
    }
    return found;
  }
  void Finish(engine::FinishContext& ctx) override;
  // Sharded runs (engine/shard.h): the session keys the shard's verifiers authenticated, for
  // the summary's note on their derivation.
  void SaveEvidence(nlohmann::json& out, std::span<engine::ObjectVerifier* const> verifiers) override;
  Status LoadEvidence(const nlohmann::json& in) override;
  std::unique_ptr<engine::ArchiveSource> MakeArchiveSource() override {
    if (!type_) return nullptr;
    return MakeBorg2b5ArchiveSource(env_, plan_, type_, key_ ? &key_->material : nullptr);
  }
  bool HasArchives() const override { return true; }

 private:
  Bytes IdKey() const { return key_ ? key_->material.id_key.view() : Bytes(); }  // the id key (empty without a key)
  // The key type and the key (LoadKey's part before the lanes).
  Status LoadTypeAndKey(engine::Plan& plan);
  // The entry's bytes, read on the main thread (mode probe, manifest), or nullopt.
  std::optional<ByteBuffer> ReadEntry(const Borg2Segment& seg, const Borg2Entry& e) const;
  void VerifyManifestTam(engine::FinishContext& ctx, const Borg2Segment& seg, const Borg2Entry& entry) const;

  const engine::CheckOptions& opts_;
  const std::optional<std::string> config_text_;  // as format detection read it, or nullopt
  bool verify_data_;  // opts_.verify_data until FallBackToKeyless

  // const after LoadKey (read by the workers)
  Borg2Plan plan_;
  std::optional<uint32_t> index_txn_at_start_;
  const crypto::Borg2KeyType* type_ = nullptr;
  std::optional<LoadedBorg2Key> key_;
  // The id hash as the hash lanes compute it (crypto::Borg2IdLanesOrNone): made by LoadKey,
  // then shared by every worker's verifier. Empty without lanes (CheckOptions::hash_lanes
  // false, no LoadKey: not verify-data, or a key that did not load; a BLAKE3 id).
  std::optional<crypto::LaneHash> id_lane_hash_;
  Borg2b5Sessions shard_sessions_;  // the merge's: what the shards' verifiers saw
};

std::optional<ByteBuffer> Borg2b5Source::ReadEntry(const Borg2Segment& seg, const Borg2Entry& e) const {
  // One entry, not the stream: its pages stay for the data pass, or until the run ends
  // (io::Env::OpenToReadAgain; dropped at each close, a small segment was read once per entry).
  Result<std::unique_ptr<io::File>> f = env_.OpenToReadAgain(seg.path);
  if (!f.ok()) return std::nullopt;
  ByteBuffer buf;
  buf.Resize(e.size);
  if (!(*f)->ReadAt(e.offset, e.size, buf.data()).ok()) return std::nullopt;
  return buf;
}

Result<engine::Plan> Borg2b5Source::MakePlan() {
  Result<Borg2Config> config = IdentifyBorg2Repository(env_, opts_.repository, opts_.bypass_lock, config_text_);
  if (!config.ok()) return config.status();
  const RepoFolder folder = ListRepoFolder(env_, opts_.repository);
  index_txn_at_start_ = folder.index_txn;
  OpenIndexFilesAhead(env_, opts_.repository, index_txn_at_start_);
  Result<Borg2Plan> planned = PlanBorg2Repository(env_, opts_.repository, *config, folder);
  if (!planned.ok()) return planned.status();
  plan_ = std::move(planned).value();

  engine::Plan plan;
  plan.format = "borg2-b5";
  plan.repository_id = config->id_hex;
  plan.live_list_source = plan_.index_checked ? "log-replay+index" : "log-replay";
  plan.transaction = plan_.transaction;
  plan.findings = plan_.findings;
  plan.notes = plan_.notes;
  // The objects the log still gives, plus those index.T names that damage made unreadable.
  plan.objects_total = plan_.live_objects + plan_.lost_objects;
  if (plan_.superseded_puts) {
    plan.notes.push_back(fmt::format("{} superseded PUT entr{} (not current; checksummed only)", plan_.superseded_puts,
                                     plan_.superseded_puts == 1 ? "y" : "ies"));
  }
  for (const Borg2Segment& s : plan_.segments) plan.units.push_back({Location::Segment(s.number), s.path, s.read_limit});
  return plan;
}

Status Borg2b5Source::LoadTypeAndKey(engine::Plan& plan) {
  // The manifest first (borg's rule), then a sample of other current objects.
  KeyTypeProbe probe(KeyTypeRule::kManifestUnlessOutvoted, Borg2b5KnownTypeByte);
  auto type_of = [&](const Borg2Segment& seg, const Borg2Entry& e) -> std::optional<uint8_t> {
    std::optional<ByteBuffer> buf = ReadEntry(seg, e);
    if (!buf) return std::nullopt;
    return Borg2b5DataTypeByte(Borg2EntryPayload(buf->view(), e.tag));
  };
  for (const Borg2Segment& seg : plan_.segments) {
    for (const Borg2Entry& e : seg.entries) {
      if (!e.live || !IsManifestId(e.id)) continue;
      // Opened at once for each read (io::Env::OpenAhead): this probe takes one, the archive
      // list (unless --repository-only) the other.
      for (int i = 0; i < (opts_.repository_only ? 1 : 2); ++i) env_.OpenAhead(seg.path, io::ReadAhead::kParts, e.offset);
      probe.Manifest(type_of(seg, e));
    }
  }
  for (const Borg2Segment& seg : plan_.segments) {
    for (const Borg2Entry& e : seg.entries) {
      if (probe.Settled()) break;
      if (e.live && !IsManifestId(e.id)) probe.Sample(type_of(seg, e));
    }
  }
  const std::optional<uint8_t> chosen = probe.Choose(plan.notes);
  if (!chosen) {
    // Nothing to decrypt, unless the records name objects the log lost: the mode is unknown then.
    if (plan_.live_objects == 0 && plan_.lost_objects == 0) return Status::Ok();
    return Status(StatusCode::kUnsupported,
                  "cannot tell the encryption mode: no readable object has a type byte of borg "
                  "2.0.0b5 (a legacy borg 1.x envelope, or a newer borg may be required)");
  }
  type_ = crypto::Borg2b5KeyTypeFromByte(*chosen);
  if (!type_->needs_key()) return Status::Ok();
  Result<LoadedBorg2Key> key = LoadBorg2b5Key(plan_.path, plan_.config, *type_);
  if (!key.ok()) return key.status();
  key_ = std::move(key).value();
  if (key_->material.repository_id != plan_.config.id) {  // a repokey of another id (keys/key_identity.h)
    plan.findings.push_back(MakeFinding(
        Severity::kWarning, Stage::kKey, Location::None(), nullptr,
        keys::RepositoryIdMismatch(key_->where, ToHex(AsBytes(key_->material.repository_id)), "config",
                                   plan_.config.id_hex)));
  }
  plan.notes.push_back("key: " + key_->where);
  return Status::Ok();
}

Result<std::unique_ptr<engine::ObjectVerifier>> Borg2b5Source::MakeVerifier() const {
  auto v = std::make_unique<Borg2b5Verifier>(verify_data_ && type_, type_, key_ ? &key_->material : nullptr,
                                             id_lane_hash_ ? &*id_lane_hash_ : nullptr);
  if (!v->status().ok()) return v->status();
  return std::unique_ptr<engine::ObjectVerifier>(std::move(v));
}

void Borg2b5Source::ReadUnit(size_t index, engine::UnitSink& sink) {
  const Borg2Segment& seg = plan_.segments[index];
  const Location where = Location::Segment(seg.number);
  auto ref_of = [](const Borg2Entry& e, uint64_t pos) {
    ObjectRef r;
    r.id = e.id;
    r.pos = pos;
    r.file_offset = e.offset;
    r.size = e.size;
    r.role = e.live ? ObjectRole::kLive : ObjectRole::kSuperseded;
    r.variant = e.tag;
    return r;
  };
  Result<std::unique_ptr<io::File>> opened = env_.Open(seg.path);
  if (!opened.ok()) {
    const engine::UnitOpenFailure why = engine::ClassifyUnitOpenFailure(opened.status());
    if (why == engine::UnitOpenFailure::kVanished) {
      sink.Vanished();  // listed while planning, gone now
      return;
    }
    const bool io = why == engine::UnitOpenFailure::kUnreadable;
    for (const Borg2Entry& e : seg.entries) {
      if (!e.live) continue;
      sink.Finding(MakeFinding(Severity::kError, io ? Stage::kIo : Stage::kMissing, where.At(e.offset), &e.id,
                               io ? "cannot read the segment (" + opened.status().message() + "): not checked"
                                  : "cannot open segment: " + opened.status().message()),
                   /*object_done=*/true);
    }
    return;
  }
  const io::File& file = **opened;
  size_t i = 0;
  const size_t n = seg.entries.size();
  while (i < n && !sink.Stopping()) {
    if (!IsPut(seg.entries[i]) || !sink.Wants(seg.entries[i].id)) {
      ++i;
      continue;
    }
    // A window: consecutive wanted PUT entries that are contiguous in the file, up to a read
    // window (or one larger entry).
    size_t j = i;
    uint64_t start = seg.entries[i].offset, end = start;
    while (j < n && IsPut(seg.entries[j]) && seg.entries[j].offset == end && sink.Wants(seg.entries[j].id) &&
           (j == i || end + seg.entries[j].size - start <= engine::kReadWindowBytes)) {
      end += seg.entries[j].size;
      ++j;
    }
    std::shared_ptr<engine::Block> block = sink.TakeBlock(start, end - start);
    if (Status s = file.ReadAt(start, end - start, block->data.data()); !s.ok()) {
      // Unreadable window: each entry is tried on its own so one bad sector spoils only its entry.
      block->progress_bytes = 0;  // the single reads below account for these bytes
      block.reset();
      for (size_t k = i; k < j; ++k) {
        const Borg2Entry& e = seg.entries[k];
        std::shared_ptr<engine::Block> one = sink.TakeBlock(e.offset, e.size);
        if (Status s2 = file.ReadAt(e.offset, e.size, one->data.data()); !s2.ok()) {
          sink.Finding(MakeFinding(e.live ? Severity::kError : Severity::kWarning, Stage::kIo, where.At(e.offset),
                                   &e.id,
                                   "cannot read the entry (" + s2.message() + "): not checked" +
                                       (e.live ? "" : " (a superseded entry: no current object is affected)")),
                       /*object_done=*/e.live);
          continue;
        }
        sink.Objects(std::move(one), {ref_of(e, 0)});
      }
      i = j;
      continue;
    }
    std::vector<ObjectRef> refs;
    refs.reserve(j - i);
    for (size_t k = i; k < j; ++k) refs.push_back(ref_of(seg.entries[k], seg.entries[k].offset - start));
    sink.Objects(std::move(block), std::move(refs));
    i = j;
  }
}

void Borg2b5Source::VerifyManifestTam(engine::FinishContext& ctx, const Borg2Segment& seg,
                                      const Borg2Entry& entry) const {
  // Read again for its TAM (FinishContext::RecheckManifest); whether this run read its segment.
  const bool unit_read = ctx.UnitRead(size_t(&seg - plan_.segments.data()));
  engine::ManifestAgain again{Location::Segment(seg.number, entry.offset), entry.id, unit_read};
  std::optional<ByteBuffer> bytes = ReadEntry(seg, entry);
  if (!bytes) {
    again.unreadable =
        MakeFinding(Severity::kError, Stage::kMissing, again.where, &entry.id, "cannot read the manifest entry");
  } else {
    again.stored = bytes->view();
    again.ref.id = entry.id;
    again.ref.size = entry.size;
    again.ref.variant = entry.tag;
  }
  Borg2b5Verifier v(true, type_, key_ ? &key_->material : nullptr);
  ctx.RecheckManifest(again, v.status().ok() ? &v : nullptr, [&](Bytes plain) {
    return Borg2b5ManifestTamProblem(plain, *type_, key_ ? &key_->material : nullptr);
  });
}

void Borg2b5Source::Finish(engine::FinishContext& ctx) {
  const auto [manifest_seg, manifest_entry] = LiveManifest();
  if (!manifest_entry && plan_.live_objects > 0) {
    // Named by the plan already if the index knows where it was; otherwise say it here.
    bool reported = false;
    for (const Finding& f : plan_.findings) reported |= f.chunk_id && IsManifestId(*f.chunk_id);
    if (!reported) {
      const ChunkId zero{};
      ctx.findings.Add(MakeFinding(Severity::kError, Stage::kMissing, Location::None(), &zero, kNoManifestMessage));
    }
  }
  if (verify_data_ && type_ && manifest_entry) VerifyManifestTam(ctx, *manifest_seg, *manifest_entry);

  // Which session-key derivation the AEAD sessions used (b5..b7 HKDF, b8.. SHA-256).
  Borg2b5Sessions sessions = Borg2b5SessionsSeen(ctx.verifiers);
  sessions.insert(shard_sessions_.begin(), shard_sessions_.end());
  if (std::optional<std::string> note = Borg2b5SessionNote(sessions, verify_data_, type_)) {
    ctx.summary.notes.push_back(std::move(*note));
  }
  key_.reset();  // wipes the key material
  id_lane_hash_.reset();  // and the lanes' key states
}

void Borg2b5Source::SaveEvidence(nlohmann::json& out, std::span<engine::ObjectVerifier* const> verifiers) {
  nlohmann::json sessions = nlohmann::json::object();
  for (const auto& [sid, kdf] : Borg2b5SessionsSeen(verifiers)) sessions[sid] = crypto::SessionKdfName(kdf);
  out = {{"sessions", std::move(sessions)}};
  key_.reset();  // wipes the key material, as Finish does
  id_lane_hash_.reset();
}

Status Borg2b5Source::LoadEvidence(const nlohmann::json& in) {
  const Status bad(StatusCode::kInvalidArgument, "a shard's borg 2.0.0b5 evidence does not parse");
  if (!in.is_object() || !in.contains("sessions") || !in["sessions"].is_object()) return bad;
  for (const auto& [sid, kdf] : in["sessions"].items()) {
    std::string raw;
    if (!kdf.is_string() || sid.empty() || sid.size() > 64 || !FromHex(sid, raw)) return bad;
    std::optional<crypto::SessionKdf> k;
    for (crypto::SessionKdf c : {crypto::SessionKdf::kHkdfSha512, crypto::SessionKdf::kSha256}) {
      if (crypto::SessionKdfName(c) == kdf.get<std::string>()) k = c;
    }
    if (!k) return bad;
    shard_sessions_[sid] = *k;
  }
  return Status::Ok();
}

}  // namespace

std::unique_ptr<engine::ObjectSource> MakeBorg2b5Source(const engine::CheckOptions& options, const io::Env& env,
                                                        std::optional<std::string> config_text) {
  return std::make_unique<Borg2b5Source>(options, env, std::move(config_text));
}

}  // namespace borgcheck::repo
