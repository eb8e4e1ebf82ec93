#include "checker/repo/borg1/borg1_served_source.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "checker/crypto/tam.h"
#include "checker/keys/key_identity.h"
#include "checker/repo/borg1/borg1_archives.h"
#include "checker/repo/borg1/borg1_config.h"
#include "checker/repo/borg1/borg1_key.h"
#include "checker/repo/borg1/borg1_verifier.h"
#include "checker/repo/chunk_id.h"

namespace borgcheck::repo {
using engine::ObjectRef;
using report::Finding;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;

namespace {

constexpr size_t kModeProbes = 16;  // objects asked for the mode when the manifest cannot tell

// Where a finding the server's words place goes: [segment N, offset M] when it said so.
Location ServerLocation(const io::GetReply& r) {
  if (r.segment) return Location::Segment(*r.segment, r.offset);
  return Location::None();
}

class Borg1ServedSource final : public engine::ObjectSource {
 public:
  Borg1ServedSource(const engine::CheckOptions& opts, io::ObjectService& service, const io::ServedRepository& repo)
      : opts_(opts), service_(service), verify_data_(opts.verify_data), repo_(repo) {}

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
  void ReadUnit(size_t index, engine::UnitSink& sink) override;
  // The second read: the object fetched again (ObjectRef::file_offset is its place in order_).
  io::SecondRead ReadAgain(const engine::ReadUnit& unit, uint64_t offset, Bytes first,
                           ByteBuffer& scratch) const override;
  // A served unit is no file: it has no identity a later run could compare (the CLI refuses
  // the options that would need one for a served repository).
  Result<io::FileStat> StatUnit(const engine::ReadUnit&) const override {
    return Status(StatusCode::kUnsupported, "a served repository's units are no files");
  }
  bool ForEachLiveId(size_t unit, const std::function<void(const engine::ChunkId&)>& each) const override {
    if (unit + 1 >= unit_starts_.size()) return false;
    for (size_t i = unit_starts_[unit]; i < unit_starts_[unit + 1]; ++i) each(order_[i]);
    return true;
  }
  unsigned Connections() const override { return 1; }
  Status Lost() const override { return service_.Lost(); }
  void Finish(engine::FinishContext& ctx) override;
  std::unique_ptr<engine::ArchiveSource> MakeArchiveSource() override {
    if (!mode_known_) return nullptr;
    return MakeServedBorg1ArchiveSource(service_, sorted_ids_, mode_, key_ ? &*key_ : nullptr);
  }
  bool HasArchives() const override { return true; }

 private:
  // Fetches one object now (the main thread, before the pool, or a worker's second read).
  io::GetReply GetNow(const ChunkId& id, ByteBuffer& payload) const {
    return service_.WaitGet(service_.PostGet(id), payload);
  }
  void CheckManifest(engine::FinishContext& ctx) const;

  const engine::CheckOptions& opts_;
  io::ObjectService& service_;
  bool verify_data_;  // opts_.verify_data until FallBackToKeyless

  const io::ServedRepository repo_;  // as the service opened it
  // const after MakePlan (read by the workers and the archive pass)
  std::vector<ChunkId> sorted_ids_;  // every id the server lists, sorted
  std::vector<ChunkId> order_;       // read order: the scan's, then the listed ids it missed
  std::vector<size_t> unit_starts_;  // unit u is order_[unit_starts_[u], unit_starts_[u + 1])
  size_t scanned_ = 0;               // order_[0, scanned_) came from the scan
  bool has_manifest_ = false;
  // const after LoadKey
  crypto::KeyMode mode_ = crypto::KeyMode::kNone;
  bool mode_known_ = false;
  std::optional<crypto::KeyMaterial> key_;
  mutable std::optional<crypto::Borg1LaneHashes> lane_hashes_;  // as Borg1Source's
  mutable bool lane_hashes_made_ = false;

  // The pipeline (main thread, ReadUnit): gets posted ahead of the reader, in order_.
  struct Posted {
    size_t index;
    uint64_t ticket;
  };
  std::deque<Posted> posted_;
  size_t next_post_ = 0;
};

Result<engine::Plan> Borg1ServedSource::MakePlan() {
  if (Status s = service_.ListIds(sorted_ids_); !s.ok()) return s;
  std::sort(sorted_ids_.begin(), sorted_ids_.end());
  sorted_ids_.erase(std::unique(sorted_ids_.begin(), sorted_ids_.end()), sorted_ids_.end());
  std::vector<ChunkId> scanned;
  std::optional<std::string> no_scan;  // why the server could not scan, when it could not
  if (Status s = service_.ScanIds(scanned); !s.ok()) {
    if (!service_.Lost().ok()) return s;
    // The server's own error (borg 2.0.0b5's scan fails on a version-1 repository: its index
    // entries have no `segment`): the objects are read in the list's order instead.
    no_scan = s.message();
    scanned = sorted_ids_;
  }

  // The scan's order, then what the list has and the scan did not return (in id order). An id
  // the scan returns twice, or one the list does not have, is read once / not at all: the list
  // is the committed transaction's content.
  std::vector<uint8_t> seen(sorted_ids_.size(), 0);
  order_.reserve(sorted_ids_.size());
  for (const ChunkId& id : scanned) {
    auto it = std::lower_bound(sorted_ids_.begin(), sorted_ids_.end(), id);
    if (it == sorted_ids_.end() || *it != id) continue;
    const size_t k = size_t(it - sorted_ids_.begin());
    if (seen[k]) continue;
    seen[k] = 1;
    order_.push_back(id);
  }
  scanned_ = order_.size();
  for (size_t k = 0; k < sorted_ids_.size(); ++k) {
    if (!seen[k]) order_.push_back(sorted_ids_[k]);
  }
  has_manifest_ = std::binary_search(sorted_ids_.begin(), sorted_ids_.end(), ChunkId{});

  engine::Plan plan;
  plan.format = "borg1";
  plan.repository_id = ToHex(Bytes(repo_.id.data(), repo_.id.size()));
  plan.unit_noun = "batch";
  plan.live_list_source = "server";
  plan.objects_total = sorted_ids_.size();
  plan.in_order = true;
  plan.notes.push_back("read through " + service_.Describe() +
                       ": the server checks each entry's CRC and header, borgcheck everything after it; "
                       "a served repository's index against its log, its dead entries and any bytes after "
                       "the last commit are not checked (sftp:// or a local run checks them)");
  if (no_scan) {
    plan.notes.push_back("the server could not list its objects in on-disk order (" + *no_scan +
                         "): they are fetched in index order, which costs the server more seeks");
  }
  for (size_t start = 0; start < order_.size();) {
    // The scanned objects in runs of kServedUnitObjects, then those the scan missed.
    const size_t end = start < scanned_ ? std::min(scanned_, start + kServedUnitObjects)
                                        : std::min(order_.size(), start + kServedUnitObjects);
    unit_starts_.push_back(start);
    start = end;
  }
  unit_starts_.push_back(order_.size());
  for (size_t u = 0; u + 1 < unit_starts_.size(); ++u) {
    // No byte count is known before the gets: progress counts what arrives.
    engine::ReadUnit r{Location::None(), fmt::format("objects {}..{}", unit_starts_[u], unit_starts_[u + 1]), 0};
    plan.units.push_back(std::move(r));
  }
  if (scanned_ < order_.size()) {
    plan.findings.push_back(MakeFinding(
        Severity::kError, Stage::kTruncated, Location::None(), nullptr,
        fmt::format("the server's walk of its segments (scan) stopped early: {} of the {} objects its index lists "
                    "were not in it (a damaged entry header ends the walk of a segment; borg check "
                    "--verify-data does not read these objects); each is fetched and verified on its own",
                    order_.size() - scanned_, order_.size())));
  }
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
  Result<crypto::KeyMaterial> key = LoadBorg1Key(opts_.RepositoryName(), config, mode_, &where);
  if (!key.ok()) return key.status();
  plan.notes.push_back("key: " + (where == "config" ? std::string("the repository's (from the server)") : where));
  key_ = std::move(key).value();
  if (key_->repository_id != config.id) {
    plan.findings.push_back(MakeFinding(Severity::kWarning, Stage::kKey, Location::None(), nullptr,
                                        keys::RepositoryIdMismatch("config", ToHex(AsBytes(key_->repository_id)),
                                                                   "config", config.id_hex)));
  }
  if (Status s = crypto::ValidateKeyMaterial(mode_, &*key_); !s.ok()) {
    return Status(StatusCode::kCorruptMetadata,
                  "the repository key does not fit mode " + std::string(crypto::KeyModeName(mode_)) + ": " + s.message());
  }
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

void Borg1ServedSource::ReadUnit(size_t index, engine::UnitSink& sink) {
  const size_t lo = unit_starts_[index], hi = unit_starts_[index + 1];
  // Drops what was posted for objects before this unit (a partial run skipped units).
  while (!posted_.empty() && posted_.front().index < lo) {
    service_.Forget(posted_.front().ticket);
    posted_.pop_front();
  }
  if (next_post_ < lo) next_post_ = lo;
  auto post_ahead = [&] {
    // Ahead across units: the next unit's first gets are on the link while this one ends. Only
    // wanted objects (the filter is by id, the same for every unit).
    while (posted_.size() < kServedGetsAhead && next_post_ < order_.size()) {
      const size_t i = next_post_++;
      if (!sink.Wants(order_[i])) continue;
      posted_.push_back({i, service_.PostGet(order_[i])});
    }
  };
  ByteBuffer payload;
  for (;;) {
    post_ahead();
    if (posted_.empty() || posted_.front().index >= hi) return;
    if (sink.Stopping()) return;
    const Posted p = posted_.front();
    posted_.pop_front();
    const ChunkId& id = order_[p.index];
    const io::GetReply r = service_.WaitGet(p.ticket, payload);
    switch (r.outcome) {
      case io::GetOutcome::kOk: {
        std::shared_ptr<engine::Block> block = sink.TakeBlock(p.index, payload.size());
        if (!block) return;  // stopping
        if (payload.size()) std::memcpy(block->data.data(), payload.data(), payload.size());
        ObjectRef ref;
        ref.id = id;
        ref.pos = 0;
        ref.file_offset = p.index;  // ReadAgain's key; the location stays the server's (none)
        ref.size = uint32_t(payload.size());
        ref.variant = kBorg1ServedPayload;
        sink.Objects(std::move(block), {ref});
        break;
      }
      case io::GetOutcome::kNotFound:
        sink.Finding(MakeFinding(Severity::kError, Stage::kMissing, Location::None(), &id,
                                 "the server's index lists this object, but the server has none (ObjectNotFound)"),
                     true);
        break;
      case io::GetOutcome::kIntegrity:
        sink.Finding(MakeFinding(Severity::kError, Stage::kEntryCrc, ServerLocation(r), &id,
                                 "the server found its entry damaged: " + r.message),
                     true);
        break;
      case io::GetOutcome::kCouldNotRead:
        sink.Finding(MakeFinding(Severity::kError, Stage::kIo, Location::None(), &id,
                                 "the server could not read it: " + r.message + "; not checked"),
                     true);
        break;
      case io::GetOutcome::kLost:
        // The engine sees Lost() and ends the run (stopped: connection-lost).
        for (const Posted& q : posted_) service_.Forget(q.ticket);
        posted_.clear();
        return;
    }
  }
}

io::SecondRead Borg1ServedSource::ReadAgain(const engine::ReadUnit&, uint64_t offset, Bytes first,
                                            ByteBuffer& scratch) const {
  if (offset >= order_.size()) return io::SecondRead::kUnreadable;
  if (GetNow(order_[offset], scratch).outcome != io::GetOutcome::kOk) return io::SecondRead::kUnreadable;
  const bool same = scratch.size() == first.size() && std::memcmp(scratch.data(), first.data(), first.size()) == 0;
  return same ? io::SecondRead::kSame : io::SecondRead::kDifferent;
}

void Borg1ServedSource::CheckManifest(engine::FinishContext& ctx) const {
  const ChunkId zero{};
  if (!has_manifest_) {
    ctx.findings.Add(MakeFinding(Severity::kError, Stage::kMissing, Location::None(), &zero,
                                 "the repository has no manifest (chunk 00…00): borg cannot list any archive"));
    return;
  }
  // Where the manifest was read this run, its own finding says why it failed; fetched again
  // here for its TAM.
  size_t at = 0;
  while (at < order_.size() && order_[at] != zero) ++at;
  size_t unit = 0;
  while (unit + 1 < unit_starts_.size() && unit_starts_[unit + 1] <= at) ++unit;
  const bool unit_read = ctx.UnitRead(unit);
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
  crypto::TamResult tam = crypto::VerifyManifestTam(v.plaintext(), mode_, key_ ? &*key_ : nullptr);
  const bool bad = tam.outcome == crypto::TamOutcome::kMismatch || tam.outcome == crypto::TamOutcome::kMalformed ||
                   (tam.outcome == crypto::TamOutcome::kAbsent && key_ && key_->tam_required);
  if (!bad) return;
  ctx.findings.Add(MakeFinding(
      Severity::kError, Stage::kAuthentication, Location::None(), &zero,
      "manifest TAM: " + (tam.message.empty() ? std::string("no TAM although the key requires one") : tam.message)));
  ctx.ManifestFailedLater();
}

void Borg1ServedSource::Finish(engine::FinishContext& ctx) {
  for (const Posted& q : posted_) service_.Forget(q.ticket);
  posted_.clear();
  if (verify_data_ && service_.Lost().ok()) CheckManifest(ctx);
  if (service_.ServerRebuiltIndex()) {
    ctx.findings.Add(MakeFinding(
        Severity::kWarning, Stage::kIndex, Location::None(), nullptr,
        "the server rebuilt its index from the log for this session (its index was missing or behind the "
        "segments, as after a crash): it wrote index, hints and integrity files into the repository, which a "
        "client of borg serve cannot prevent"));
  }
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
