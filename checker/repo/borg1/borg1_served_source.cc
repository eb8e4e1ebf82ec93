#include "checker/repo/borg1/borg1_served_source.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "checker/keys/key_identity.h"
#include "checker/repo/borg1/borg1_archives.h"
#include "checker/repo/borg1/borg1_config.h"
#include "checker/repo/borg1/borg1_key.h"
#include "checker/repo/borg1/borg1_verifier.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/key_type_probe.h"
#include "checker/repo/segment_log/served_source.h"

namespace borgcheck::repo {
using engine::ObjectRef;
using report::Finding;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;

namespace {

class Borg1ServedSource final : public ServedSegmentSource {
 public:
  Borg1ServedSource(const engine::CheckOptions& opts, io::ObjectService& service, const io::ServedRepository& repo)
      : ServedSegmentSource(service, repo, kBorg1ServedPayload, opts), opts_(opts), verify_data_(opts.verify_data) {}

  Result<engine::Plan> MakePlan() override;
  Status LoadKey(engine::Plan& plan) override {
    Status s = ProbeModeAndLoadKey(plan);
    if (s.ok() && opts_.hash_lanes) lane_hashes_ = crypto::Borg1LanesOrNone(mode_, key_ ? &*key_ : nullptr);
    return s;
  }
  void FallBackToKeyless() override {
    verify_data_ = false;
    mode_known_ = false;
    mode_ = crypto::KeyMode::kNone;
    key_.reset();
  }
  std::string ModeName() const override { return mode_known_ ? std::string(crypto::KeyModeName(mode_)) : std::string(); }
  Result<std::unique_ptr<engine::ObjectVerifier>> MakeVerifier() const override;
  void Finish(engine::FinishContext& ctx) override;
  std::unique_ptr<engine::ArchiveSource> MakeArchiveSource() override {
    if (!mode_known_) return nullptr;
    return MakeServedBorg1ArchiveSource(service_, sorted_ids_, mode_, key_ ? &*key_ : nullptr);
  }
  bool HasArchives() const override { return true; }

 private:
  // The mode probe and the key (LoadKey's part before the lanes).
  Status ProbeModeAndLoadKey(engine::Plan& plan);
  void CheckManifest(engine::FinishContext& ctx) const;

  const engine::CheckOptions& opts_;
  bool verify_data_;  // opts_.verify_data until FallBackToKeyless
  bool has_manifest_ = false;  // const after MakePlan
  // const after LoadKey
  crypto::KeyMode mode_ = crypto::KeyMode::kNone;
  bool mode_known_ = false;
  std::optional<crypto::KeyMaterial> key_;
  std::optional<crypto::Borg1LaneHashes> lane_hashes_;  // as Borg1Source's: made by LoadKey
};

Result<engine::Plan> Borg1ServedSource::MakePlan() {
  engine::Plan plan;
  if (Status s = PlanServed(plan); !s.ok()) return s;
  has_manifest_ = Listed(ChunkId{});
  plan.format = "borg1";
  plan.notes.insert(plan.notes.begin(),
                    "read through " + service_.Describe() +
                        ": the server checks each entry's CRC and header, borgcheck everything after it; "
                        "a served repository's index against its log, its dead entries and any bytes after "
                        "the last commit are not checked (sftp:// or a local run checks them)");
  return plan;
}

Status Borg1ServedSource::ProbeModeAndLoadKey(engine::Plan& plan) {
  // The manifest's TYPE byte names the mode (as borg does); without a known one, the first
  // known of the other objects' (KeyTypeProbe, as locally).
  KeyTypeProbe probe(KeyTypeRule::kFirstKnown, [](uint8_t t) { return crypto::KeyModeFromTypeByte(t).has_value(); });
  ByteBuffer payload;
  std::optional<Status> ended;  // the connection was lost or a stop signal came
  auto type_of = [&](const ChunkId& id) -> std::optional<uint8_t> {
    const io::GetReply r = GetNow(id, payload);
    if (r.outcome == io::GetOutcome::kLost) ended = service_.Lost();
    if (r.outcome == io::GetOutcome::kInterrupted) ended = Status(StatusCode::kInterrupted, r.message);
    if (r.outcome != io::GetOutcome::kOk || payload.size() == 0) return std::nullopt;
    return payload.data()[0];
  };
  if (has_manifest_) probe.Manifest(type_of(ChunkId{}));
  for (size_t i = 0; i < order_.size() && !probe.Settled() && !ended; ++i) {
    if (!IsManifestId(order_[i])) probe.Sample(type_of(order_[i]));
  }
  if (ended) return *ended;
  const std::optional<uint8_t> chosen = probe.Choose();
  const std::optional<crypto::KeyMode> mode = chosen ? crypto::KeyModeFromTypeByte(*chosen) : std::nullopt;
  mode_known_ = true;
  if (!mode) {
    if (order_.empty()) return Status::Ok();  // nothing to decrypt
    return Status(StatusCode::kUnsupported,
                  "cannot tell the encryption mode: no readable object has a known TYPE byte "
                  "(unknown payload type: a newer borg may be required)");
  }
  mode_ = *mode;
  if (!crypto::NeedsKey(mode_)) return Status::Ok();
  Result<std::string> blob = service_.LoadKey();
  if (!blob.ok()) return blob.status();
  RepoConfig config;
  config.version = 1;
  config.id.assign(reinterpret_cast<const char*>(repo_.id.data()), repo_.id.size());
  config.id_hex = ToHex(Bytes(repo_.id.data(), repo_.id.size()));
  // The config's `key` value as stored (wrapped over lines); a passphrase-protected blob.
  for (char c : *blob) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') config.key_base64.push_back(c);
  }
  std::string where;
  Result<crypto::KeyMaterial> key = LoadCheckedBorg1Key(opts_.RepositoryName(), config, mode_, plan.findings, &where);
  if (!key.ok()) return key.status();
  plan.notes.push_back("key: " + (where == "config" ? std::string("the repository's (from the server)") : where));  // as every generation says which key it used
  key_ = std::move(key).value();
  return Status::Ok();
}

Result<std::unique_ptr<engine::ObjectVerifier>> Borg1ServedSource::MakeVerifier() const {
  auto v = std::make_unique<Borg1Verifier>(verify_data_, mode_, key_ ? &*key_ : nullptr,
                                           lane_hashes_ ? &*lane_hashes_ : nullptr);
  if (Status s = v->status(); !s.ok()) return Status(StatusCode::kInternal, s.message());
  return std::unique_ptr<engine::ObjectVerifier>(std::move(v));
}

void Borg1ServedSource::CheckManifest(engine::FinishContext& ctx) const {
  const ChunkId zero{};
  if (!has_manifest_) {
    ctx.findings.Add(MakeFinding(Severity::kError, Stage::kMissing, Location::None(), &zero, kNoManifestMessage));
    return;
  }
  // Fetched again for its TAM (FinishContext::RecheckManifest).
  ByteBuffer payload;
  const engine::ManifestAgain again = FetchManifestAgain(ctx, payload);
  Borg1Verifier v(true, mode_, key_ ? &*key_ : nullptr);
  ctx.RecheckManifest(again, v.status().ok() ? &v : nullptr,
                      [&](Bytes plain) { return Borg1ManifestTamProblem(plain, mode_, key_ ? &*key_ : nullptr); });
}

void Borg1ServedSource::Finish(engine::FinishContext& ctx) {
  FinishServed(ctx);
  if (verify_data_ && service_.Lost().ok()) CheckManifest(ctx);
  key_.reset();          // wipes the key material
  lane_hashes_.reset();  // and the lanes' key states
}

}  // namespace

std::unique_ptr<engine::ObjectSource> MakeBorg1ServedSource(const engine::CheckOptions& options,
                                                           io::ObjectService& service,
                                                           const io::ServedRepository& repo) {
  return std::make_unique<Borg1ServedSource>(options, service, repo);
}

}  // namespace borgcheck::repo
