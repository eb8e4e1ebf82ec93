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
#include "checker/repo/segment_log/served_source.h"

namespace borgcheck::repo {
using engine::ObjectRef;
using report::Finding;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;

namespace {

constexpr size_t kModeProbes = 16;  // objects asked for the mode when the manifest cannot tell

class Borg1ServedSource final : public ServedSegmentSource {
 public:
  Borg1ServedSource(const engine::CheckOptions& opts, io::ObjectService& service, const io::ServedRepository& repo)
      : ServedSegmentSource(service, repo, kBorg1ServedPayload, opts), opts_(opts), verify_data_(opts.verify_data) {}

  Result<engine::Plan> MakePlan() override;
  Status LoadKey(engine::Plan& plan) override;
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
  void CheckManifest(engine::FinishContext& ctx) const;

  const engine::CheckOptions& opts_;
  bool verify_data_;  // opts_.verify_data until FallBackToKeyless
  bool has_manifest_ = false;  // const after MakePlan
  // const after LoadKey
  crypto::KeyMode mode_ = crypto::KeyMode::kNone;
  bool mode_known_ = false;
  std::optional<crypto::KeyMaterial> key_;
  mutable std::optional<crypto::Borg1LaneHashes> lane_hashes_;  // as Borg1Source's
  mutable bool lane_hashes_made_ = false;
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

Status Borg1ServedSource::LoadKey(engine::Plan& plan) {
  // The manifest's TYPE byte names the mode (as borg does); without one, the first objects'.
  std::vector<ChunkId> candidates;
  if (has_manifest_) candidates.push_back(ChunkId{});
  for (size_t i = 0; i < order_.size() && candidates.size() < kModeProbes; ++i) candidates.push_back(order_[i]);
  std::optional<crypto::KeyMode> mode;
  ByteBuffer payload;
  for (const ChunkId& id : candidates) {
    const io::GetReply r = GetNow(id, payload);
    if (r.outcome == io::GetOutcome::kLost) return service_.Lost();
    if (r.outcome == io::GetOutcome::kInterrupted) return Status(StatusCode::kInterrupted, r.message);
    if (r.outcome != io::GetOutcome::kOk || payload.size() == 0) continue;
    mode = crypto::KeyModeFromTypeByte(payload.data()[0]);
    if (mode) break;
  }
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
  if (!lane_hashes_made_) {
    lane_hashes_made_ = true;
    if (verify_data_ && opts_.hash_lanes && mode_known_) {
      Result<crypto::Borg1LaneHashes> h = crypto::MakeBorg1LaneHashes(mode_, key_ ? &*key_ : nullptr);
      if (h.ok()) lane_hashes_ = std::move(h).value();
    }
  }
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
  // Where the manifest was read this run, its own finding says why it failed; fetched again
  // here for its TAM.
  const std::optional<size_t> unit = UnitOf(zero);
  const bool unit_read = unit && ctx.UnitRead(*unit);
  ByteBuffer payload;
  const io::GetReply r = GetNow(zero, payload);
  if (r.outcome != io::GetOutcome::kOk) {
    if (!unit_read) {
      ctx.findings.Add(MakeFinding(Severity::kError, r.outcome == io::GetOutcome::kIntegrity ? Stage::kEntryCrc : Stage::kIo,
                                   ServerLocation(r), &zero, "the manifest cannot be fetched: " + r.message));
    }
    return;
  }
  Borg1Verifier v(true, mode_, key_ ? &*key_ : nullptr);
  if (!v.status().ok()) return;
  ObjectRef ref;
  ref.id = zero;
  ref.size = uint32_t(payload.size());
  ref.variant = kBorg1ServedPayload;
  if (std::optional<engine::Verdict> fail = v.Verify(payload.view(), ref)) {
    if (!unit_read) ctx.findings.Add(MakeFinding(fail->severity, fail->stage, Location::None(), &zero, fail->message));
    return;
  }
  std::optional<std::string> why = Borg1ManifestTamProblem(v.plaintext(), mode_, key_ ? &*key_ : nullptr);
  if (!why) return;
  ctx.findings.Add(MakeFinding(Severity::kError, Stage::kAuthentication, Location::None(), &zero, *why));
  ctx.ManifestFailedLater();
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
