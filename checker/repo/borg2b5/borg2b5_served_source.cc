#include "checker/repo/borg2b5/borg2b5_served_source.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <openssl/crypto.h>

#include "checker/keys/key_identity.h"
#include "checker/repo/borg2b5/borg2b5_archives.h"
#include "checker/repo/borg2b5/borg2b5_key.h"
#include "checker/repo/borg2b5/borg2b5_segments.h"
#include "checker/repo/borg2b5/borg2b5_verifier.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/key_type_probe.h"
#include "checker/repo/segment_log/served_source.h"

namespace borgcheck::repo {
using engine::ObjectRef;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;

namespace {

// Wipes a string that held key text (the passphrase-protected blob: still not left about).
void WipeString(std::string& s) {
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}

class Borg2b5ServedSource final : public ServedSegmentSource {
 public:
  Borg2b5ServedSource(const engine::CheckOptions& opts, io::ObjectService& service, const io::ServedRepository& repo)
      : ServedSegmentSource(service, repo, kBorg2b5ServedPayload, opts), opts_(opts), verify_data_(opts.verify_data) {}

  Result<engine::Plan> MakePlan() override;
  Status LoadKey(engine::Plan& plan) override {
    Status s = ProbeTypeAndLoadKey(plan);
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
  void Finish(engine::FinishContext& ctx) override;
  std::unique_ptr<engine::ArchiveSource> MakeArchiveSource() override {
    if (!type_) return nullptr;
    return MakeServedBorg2b5ArchiveSource(service_, sorted_ids_, type_, key_ ? &key_->material : nullptr);
  }
  bool HasArchives() const override { return true; }

 private:
  Bytes IdKey() const { return key_ ? key_->material.id_key.view() : Bytes(); }  // the id key (empty without a key)
  // The key type and the key (LoadKey's part before the lanes).
  Status ProbeTypeAndLoadKey(engine::Plan& plan);
  void CheckManifest(engine::FinishContext& ctx) const;

  const engine::CheckOptions& opts_;
  bool verify_data_;           // opts_.verify_data until FallBackToKeyless
  bool has_manifest_ = false;  // const after MakePlan
  // const after LoadKey (read by the workers)
  const crypto::Borg2KeyType* type_ = nullptr;
  std::optional<LoadedBorg2Key> key_;
  std::optional<crypto::LaneHash> id_lane_hash_;  // as Borg2b5Source's: made by LoadKey
};

Result<engine::Plan> Borg2b5ServedSource::MakePlan() {
  engine::Plan plan;
  if (Status s = PlanServed(plan); !s.ok()) return s;
  has_manifest_ = Listed(ChunkId{});
  plan.format = "borg2-b5";
  plan.notes.insert(plan.notes.begin(),
                    "read through " + service_.Describe() +
                        ": the server checks each entry's header CRC and xxh64 digest, borgcheck everything after "
                        "it; a served repository's index against its log, its superseded and dead entries, "
                        "uncommitted segments and any bytes after the last commit are not checked (sftp:// or a "
                        "local run checks them)");
  return plan;
}

Status Borg2b5ServedSource::ProbeTypeAndLoadKey(engine::Plan& plan) {
  // The manifest first (borg's rule), then a sample of other objects in read order.
  KeyTypeProbe probe(KeyTypeRule::kManifestUnlessOutvoted, Borg2b5KnownTypeByte);
  ByteBuffer payload;
  std::optional<Status> ended;  // the connection was lost or a stop signal came
  auto type_of = [&](const ChunkId& id) -> std::optional<uint8_t> {
    const io::GetReply r = GetNow(id, payload);
    if (r.outcome == io::GetOutcome::kLost) ended = service_.Lost();
    if (r.outcome == io::GetOutcome::kInterrupted) ended = Status(StatusCode::kInterrupted, r.message);
    if (r.outcome != io::GetOutcome::kOk) return std::nullopt;
    return Borg2b5DataTypeByte(payload.view());
  };
  if (has_manifest_) probe.Manifest(type_of(ChunkId{}));
  for (size_t i = 0; i < order_.size() && !probe.Settled() && !ended; ++i) {
    if (!IsManifestId(order_[i])) probe.Sample(type_of(order_[i]));
  }
  if (ended) return *ended;
  const std::optional<uint8_t> chosen = probe.Choose(plan.notes);
  if (!chosen) {
    if (order_.empty()) return Status::Ok();  // nothing to decrypt
    return Status(StatusCode::kUnsupported,
                  "cannot tell the encryption mode: no readable object has a type byte of borg "
                  "2.0.0b5 (a legacy borg 1.x envelope, or a newer borg may be required)");
  }
  type_ = crypto::Borg2b5KeyTypeFromByte(*chosen);
  if (!type_->needs_key()) return Status::Ok();

  Borg2Config config;
  config.id.assign(reinterpret_cast<const char*>(repo_.id.data()), repo_.id.size());
  config.id_hex = ToHex(Bytes(repo_.id.data(), repo_.id.size()));
  if (type_->location != crypto::Borg2KeyLocation::kKeyFile) {
    Result<std::string> blob = service_.LoadKey();
    if (!blob.ok()) return blob.status();
    // The config's `key` value as stored (wrapped over lines); a passphrase-protected blob.
    for (char c : *blob) {
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') config.key_base64.push_back(c);
    }
    WipeString(*blob);
  }
  Result<LoadedBorg2Key> key = LoadBorg2b5Key(opts_.RepositoryName(), config, *type_);
  WipeString(config.key_base64);
  if (!key.ok()) return key.status();
  key_ = std::move(key).value();
  if (key_->material.repository_id != config.id) {  // a repokey of another id (keys/key_identity.h)
    plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kKey, Location::None(), nullptr,
                                        keys::RepositoryIdMismatch(key_->where,
                                                                   ToHex(AsBytes(key_->material.repository_id)),
                                                                   "config", config.id_hex)));
  }
  plan.notes.push_back("key: " + (key_->where == "config" ? std::string("the repository's (from the server)")
                                                          : key_->where));
  return Status::Ok();
}

Result<std::unique_ptr<engine::ObjectVerifier>> Borg2b5ServedSource::MakeVerifier() const {
  auto v = std::make_unique<Borg2b5Verifier>(verify_data_ && type_, type_, key_ ? &key_->material : nullptr,
                                             id_lane_hash_ ? &*id_lane_hash_ : nullptr);
  if (!v->status().ok()) return v->status();
  return std::unique_ptr<engine::ObjectVerifier>(std::move(v));
}

void Borg2b5ServedSource::CheckManifest(engine::FinishContext& ctx) const {
  // Fetched again for its TAM (FinishContext::RecheckManifest).
  ByteBuffer payload;
  const engine::ManifestAgain again = FetchManifestAgain(ctx, payload);
  Borg2b5Verifier v(true, type_, key_ ? &key_->material : nullptr);
  ctx.RecheckManifest(again, v.status().ok() ? &v : nullptr, [&](Bytes plain) {
    return Borg2b5ManifestTamProblem(plain, *type_, key_ ? &key_->material : nullptr);
  });
}

void Borg2b5ServedSource::Finish(engine::FinishContext& ctx) {
  FinishServed(ctx);
  if (!has_manifest_ && !order_.empty()) {
    const ChunkId zero{};
    ctx.findings.Add(MakeFinding(Severity::kError, Stage::kMissing, Location::None(), &zero, kNoManifestMessage));
  }
  if (verify_data_ && type_ && has_manifest_ && service_.Lost().ok()) CheckManifest(ctx);
  if (std::optional<std::string> note = Borg2b5SessionNote(Borg2b5SessionsSeen(ctx.verifiers), verify_data_, type_)) {
    ctx.summary.notes.push_back(std::move(*note));
  }
  key_.reset();           // wipes the key material
  id_lane_hash_.reset();  // and the lanes' key states
}

}  // namespace

std::unique_ptr<engine::ObjectSource> MakeBorg2b5ServedSource(const engine::CheckOptions& options,
                                                             io::ObjectService& service,
                                                             const io::ServedRepository& repo) {
  return std::make_unique<Borg2b5ServedSource>(options, service, repo);
}

}  // namespace borgcheck::repo
