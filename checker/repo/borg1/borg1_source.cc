#include "checker/repo/borg1/borg1_source.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/keys/key_identity.h"
#include "checker/repo/borg1/borg1_archives.h"
#include "checker/repo/borg1/borg1_key.h"
#include "checker/repo/borg1/borg1_plan.h"
#include "checker/repo/borg1/borg1_verifier.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/key_type_probe.h"
#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/segment_log/segment_format.h"
#include "checker/repo/segment_log/segment_records.h"

namespace borgcheck::repo {
using engine::ObjectRef;
using report::Finding;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;

namespace {

// One unit: a committed segment, or one the live list names that is missing.
struct Unit {
  SegmentFile segment;
  bool missing = false;
  std::string absent_reason;  // missing: "is empty (0 bytes)", "is a FIFO, not a segment file", or ""
  uint64_t limit = 0;   // bytes that belong to the log (its size, or the final COMMIT's end)
  size_t lo = 0, hi = 0;  // its live objects: plan_.live[lo, hi)
};

class Borg1Source final : public engine::EnvUnitSource {
 public:
  Borg1Source(const engine::CheckOptions& opts, const io::Env& env, std::optional<std::string> config_text)
      : engine::EnvUnitSource(env),
        opts_(opts),
        config_text_(std::move(config_text)),
        verify_data_(opts.verify_data),
        record_events_(opts.shard_n > 0) {}

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
  void ReadUnit(size_t index, engine::UnitSink& sink) override;
  bool ForEachLiveId(size_t unit, const std::function<void(const engine::ChunkId&)>& each) const override {
    if (unit >= units_.size()) return false;
    for (size_t i = units_[unit].lo; i < units_[unit].hi; ++i) each(plan_.live[i].id);
    return true;
  }
  bool ChangedSinceStart() const override { return FindIndexTransaction(env_, opts_.repository) != index_txn_at_start_; }
  // Reads of the manifest after the plan, before the units: the key's probe (verify-data) and
  // the archive list (unless --repository-only).
  unsigned ManifestReadsAfterPlan() const { return verify_data_ ? (opts_.repository_only ? 1 : 2) : 0; }
  void WillFinish() const override {
    if (!verify_data_) return;  // CheckManifest reads it again only then
    const LiveObject* m = LiveManifest();
    if (const SegmentFile* seg = m ? SegmentFileOf(m->segment) : nullptr) {
      env_.OpenAhead(seg->path, io::ReadAhead::kParts, m->offset);
    }
  }
  // The live manifest (the last the live list names), or null; the committed segment file
  // `number`, or null.
  const LiveObject* LiveManifest() const {
    const LiveObject* m = nullptr;
    for (const LiveObject& o : plan_.live) {
      if (IsManifestId(o.id)) m = &o;
    }
    return m;
  }
  const SegmentFile* SegmentFileOf(uint32_t number) const {
    const SegmentFile* seg = nullptr;
    for (const SegmentFile& s : plan_.segments) {
      if (s.number == number) seg = &s;
    }
    return seg;
  }
  void Finish(engine::FinishContext& ctx) override;
  void SaveEvidence(nlohmann::json& out, std::span<engine::ObjectVerifier* const> verifiers) override;
  Status LoadEvidence(const nlohmann::json& in) override;
  std::unique_ptr<engine::ArchiveSource> MakeArchiveSource() override {
    if (!mode_known_) return nullptr;
    return MakeBorg1ArchiveSource(env_, plan_, mode_, key_ ? &*key_ : nullptr);
  }
  bool HasArchives() const override { return true; }

 private:
  // The reader of one unit; state lives for one ReadUnit call.
  class SegmentReader;

  // The mode probe and the key (LoadKey's part before the lanes).
  Status ProbeModeAndLoadKey(engine::Plan& plan);

  std::optional<ByteBuffer> ReadEntryAt(const std::string& path, uint64_t offset) const;
  void NoteEntry(engine::UnitSink& sink, uint32_t segment, uint64_t off, const EntryHeader& h, bool live_match);
  // The index places `o` at an entry that is not its PUT (another chunk's, a DELETE, a COMMIT).
  void NoteMisplaced(const LiveObject& o, const EntryHeader& h);
  // Verifies the log's entry at (segment, offset) as chunk `id` on this thread (Finish): the
  // log's copy of an object the index misplaces or does not list. True when it verified.
  bool VerifyFromLog(engine::FinishContext& ctx, const ChunkId& id, uint32_t segment, uint32_t offset,
                     const std::string& what) const;
  void ResolveMisplaced(engine::FinishContext& ctx);
  void FinishIndexComparison(engine::FinishContext& ctx) const;
  void CheckManifest(engine::FinishContext& ctx) const;

  const engine::CheckOptions& opts_;
  const std::optional<std::string> config_text_;  // as format detection read it, or nullopt
  bool verify_data_;  // opts_.verify_data until FallBackToKeyless

  // const after LoadKey (read by the workers)
  RepoConfig config_;
  RepositoryPlan plan_;
  std::vector<Unit> units_;
  std::optional<uint32_t> index_txn_at_start_;
  crypto::KeyMode mode_ = crypto::KeyMode::kNone;
  bool mode_known_ = false;
  std::optional<crypto::KeyMaterial> key_;
  // The hash lanes' MAC and id functions (crypto::Borg1LanesOrNone): made by LoadKey, then
  // shared by every worker's verifier. Empty without lanes (CheckOptions::hash_lanes false,
  // no LoadKey: not verify-data, or a key that did not load).
  std::optional<crypto::Borg1LaneHashes> lane_hashes_;

  // Reading thread only: the index-vs-log comparison (index mode). PUTs of the log that are not
  // the live entry of their id, still unexplained (no later DELETE or live PUT).
  std::unordered_map<ChunkId, std::pair<uint32_t, uint32_t>, IdHash> unexplained_puts_;
  // Live objects the index places at an entry that is not their PUT: where, and what is there.
  struct Misplaced {
    uint32_t segment = 0, offset = 0;
    std::string found;  // "chunk <hex>'s entry", "a DELETE entry of chunk <hex>", "a COMMIT entry"
  };
  std::map<ChunkId, Misplaced> misplaced_;

  // Sharded runs (engine/shard.h): the index-vs-log comparison spans segments (a PUT here is
  // explained by a DELETE in a later segment), so a shard records, per segment it walks, the
  // entries NoteEntry applies to unexplained_puts_ (PUTs that are not the live entry, and
  // DELETEs), and the merge's final pass replays them in segment order, as a full walk would
  // have applied them. The live PUTs themselves are not recorded: a live PUT sits at the one
  // place the index names, so replaying without it leaves an id's older copy unexplained where
  // the walk would have cleared it, and FinishIndexComparison passes over an older copy
  // either way; a misplaced id has no live PUT to clear it (ResolveMisplaced).
  struct IndexEvent {
    bool put = false;  // a PUT that is not the live entry; else a DELETE
    ChunkId id{};
    uint32_t offset = 0;
  };
  bool record_events_ = false;  // a shard: reading thread only
  std::map<uint32_t, std::vector<IndexEvent>> events_;  // by segment: a shard's, or the merge's loaded
  void ApplyEvent(uint32_t segment, const IndexEvent& e);
};

Result<engine::Plan> Borg1Source::MakePlan() {
  Result<RepoConfig> config = IdentifyRepository(env_, opts_.repository, {opts_.bypass_lock, config_text_});
  if (!config.ok()) return config.status();
  config_ = std::move(config).value();
  const RepoFolder folder = ListRepoFolder(env_, opts_.repository);
  index_txn_at_start_ = folder.index_txn;
  OpenIndexFilesAhead(env_, opts_.repository, index_txn_at_start_);
  Result<RepositoryPlan> planned = PlanRepository(env_, opts_.repository, config_, folder);
  if (!planned.ok()) return planned.status();
  plan_ = std::move(planned).value();

  // Units in segment order, committed and missing, with the live range of each (the live list
  // is sorted the same way).
  for (const SegmentFile& s : plan_.segments) {
    Unit u;
    u.segment = s;
    u.limit = s.number == plan_.transaction && plan_.commit_end_of_last_segment
                  ? std::min(s.size, *plan_.commit_end_of_last_segment)
                  : s.size;
    units_.push_back(std::move(u));
  }
  for (uint32_t m : plan_.missing_segments) {
    Unit u;
    u.segment = {m, SegmentPath(plan_.path, config_.segments_per_dir, m), 0};
    u.missing = true;
    if (auto r = plan_.absent_reason.find(m); r != plan_.absent_reason.end()) u.absent_reason = r->second;
    units_.push_back(std::move(u));
  }
  std::sort(units_.begin(), units_.end(), [](const Unit& a, const Unit& b) { return a.segment.number < b.segment.number; });
  size_t lo = 0;
  for (Unit& u : units_) {
    while (lo < plan_.live.size() && plan_.live[lo].segment < u.segment.number) ++lo;  // every live segment is a unit
    size_t hi = lo;
    while (hi < plan_.live.size() && plan_.live[hi].segment == u.segment.number) ++hi;
    u.lo = lo;
    u.hi = hi;
    lo = hi;
  }

  engine::Plan plan;
  plan.format = "borg1";
  plan.repository_id = ToHex(AsBytes(config_.id));
  plan.live_list_source = plan_.live_from_index ? "index" : "log-replay";
  plan.transaction = plan_.transaction;
  plan.findings = plan_.findings;
  plan.notes = plan_.notes;
  plan.objects_total = plan_.live.size() + plan_.lost_objects;  // and those only the records show
  for (const Unit& u : units_) {
    engine::ReadUnit r{Location::Segment(u.segment.number), u.segment.path, u.limit};
    r.on_disk = !u.missing;
    plan.units.push_back(std::move(r));
  }
  return plan;
}

std::optional<ByteBuffer> Borg1Source::ReadEntryAt(const std::string& path, uint64_t offset) const {
  // One entry, not the stream: its pages stay for the data pass, or until the run ends
  // (io::Env::OpenToReadAgain; dropped at each close, a small segment was read once per entry).
  Result<std::unique_ptr<io::File>> f = env_.OpenToReadAgain(path);
  if (!f.ok()) return std::nullopt;
  uint8_t hdr[kHeaderSizeWithKey];
  if (offset >= (*f)->size()) return std::nullopt;
  size_t n = size_t(std::min<uint64_t>(sizeof hdr, (*f)->size() - offset));
  if (!(*f)->ReadAt(offset, n, hdr).ok()) return std::nullopt;
  EntryHeader h;
  if (ParseEntryHeader(Bytes(hdr, n), (*f)->size() - offset, h, nullptr) != HeaderParse::kOk) return std::nullopt;
  ByteBuffer buf;
  buf.Resize(h.size);
  if (!(*f)->ReadAt(offset, h.size, buf.data()).ok()) return std::nullopt;
  return buf;
}

Status Borg1Source::ProbeModeAndLoadKey(engine::Plan& plan) {
  // The manifest's TYPE byte names the mode (borg does the same); without a known one, the first
  // known of the live objects' (KeyTypeProbe).
  std::map<uint32_t, const std::string*> paths;
  for (const SegmentFile& s : plan_.segments) paths[s.number] = &s.path;
  auto type_of = [&](const LiveObject& o) -> std::optional<uint8_t> {
    auto it = paths.find(o.segment);
    if (it == paths.end()) return std::nullopt;
    Result<std::unique_ptr<io::File>> f = env_.OpenToReadAgain(*it->second);  // a probe (io/env.h)
    uint8_t type;
    if (!f.ok() || !(*f)->ReadAt(uint64_t(o.offset) + kHeaderSizeWithKey, 1, &type).ok()) return std::nullopt;
    return type;
  };
  KeyTypeProbe probe(KeyTypeRule::kFirstKnown, [](uint8_t t) { return crypto::KeyModeFromTypeByte(t).has_value(); });
  for (const LiveObject& o : plan_.live) {
    if (!IsManifestId(o.id)) continue;
    // Opened at once for each read after the plan (io::Env::OpenAhead): this probe takes one,
    // the archive list the other.
    if (auto it = paths.find(o.segment); it != paths.end()) {
      for (unsigned i = 0; i < ManifestReadsAfterPlan(); ++i) env_.OpenAhead(*it->second, io::ReadAhead::kParts, o.offset);
    }
    probe.Manifest(type_of(o));
  }
  for (size_t i = 0; i < plan_.live.size() && !probe.Settled(); ++i) {
    if (!IsManifestId(plan_.live[i].id)) probe.Sample(type_of(plan_.live[i]));
  }
  const std::optional<uint8_t> chosen = probe.Choose();
  const std::optional<crypto::KeyMode> mode = chosen ? crypto::KeyModeFromTypeByte(*chosen) : std::nullopt;
  mode_known_ = true;
  if (!mode) {
    if (plan_.live.empty() && plan_.lost_objects == 0) return Status::Ok();  // nothing to decrypt
    return Status(StatusCode::kUnsupported,
                  "cannot tell the encryption mode: no readable object has a known TYPE byte "
                  "(unknown payload type: a newer borg may be required)");
  }
  mode_ = *mode;
  if (!crypto::NeedsKey(mode_)) return Status::Ok();
  std::string where;
  Result<crypto::KeyMaterial> key = LoadCheckedBorg1Key(plan_.path, config_, mode_, plan.findings, &where);
  if (!key.ok()) return key.status();
  plan.notes.push_back("key: " + where);  // as every generation says which key it used
  key_ = std::move(key).value();
  return Status::Ok();
}

Result<std::unique_ptr<engine::ObjectVerifier>> Borg1Source::MakeVerifier() const {
  auto v = std::make_unique<Borg1Verifier>(verify_data_, mode_, key_ ? &*key_ : nullptr,
                                           lane_hashes_ ? &*lane_hashes_ : nullptr);
  if (Status s = v->status(); !s.ok()) return Status(StatusCode::kInternal, s.message());
  return std::unique_ptr<engine::ObjectVerifier>(std::move(v));
}

// Index-vs-log comparison, fed every entry the walk sees (index mode only).
void Borg1Source::NoteEntry(engine::UnitSink& sink, uint32_t segment, uint64_t off, const EntryHeader& h,
                            bool live_match) {
  if (!plan_.live_from_index || h.tag == kTagCommit) return;
  ChunkId id;
  std::memcpy(id.data(), h.key, 32);
  if (h.tag == kTagPut && live_match) {
    unexplained_puts_.erase(id);
    return;
  }
  const IndexEvent e{h.tag == kTagPut, id, uint32_t(off)};
  if (record_events_) events_[segment].push_back(e);
  ApplyEvent(segment, e);
  if (h.tag == kTagPut) return;
  // DELETE: the index must not list a PUT before it.
  if (const LiveObject* o = plan_.FindById(id)) {
    if (o->segment < segment || (o->segment == segment && o->offset < off)) {
      sink.Finding(MakeFinding(Severity::kError, Stage::kIndex, Location::Segment(segment, off), &id,
                               fmt::format("index.{} lists this chunk at [segment {}, offset {}] but the log "
                                           "deletes it later",
                                           plan_.transaction, o->segment, o->offset)));
    }
  }
}

void Borg1Source::ApplyEvent(uint32_t segment, const IndexEvent& e) {
  if (e.put) unexplained_puts_[e.id] = {segment, e.offset};
  else unexplained_puts_.erase(e.id);  // a DELETE explains whatever came before
}

void Borg1Source::NoteMisplaced(const LiveObject& o, const EntryHeader& h) {
  Misplaced m;
  m.segment = o.segment;
  m.offset = o.offset;
  const std::string other = h.key ? ToHex(Bytes(h.key, 32)) : "";
  m.found = h.tag == kTagPut      ? "the PUT entry of chunk " + other
            : h.tag == kTagDelete ? "a DELETE entry of chunk " + other
                                  : std::string("a COMMIT entry");
  misplaced_[o.id] = std::move(m);
}

// --------------------------------------------------------------------------------------------
// The reader of one segment (phase 3).
class Borg1Source::SegmentReader {
 public:
  SegmentReader(Borg1Source& src, const Unit& unit, engine::UnitSink& sink)
      : src_(src), plan_(src.plan_), unit_(unit), seg_(unit.segment), sink_(sink), cursor_(unit.lo) {}

  void Run();

 private:
  Location At(uint64_t offset) const { return Location::Segment(seg_.number, offset); }
  void ReportLost(const LiveObject& o, Stage stage, const std::string& why) {
    sink_.Finding(MakeFinding(Severity::kError, stage, At(o.offset), &o.id, why), /*object_done=*/true);
  }
  void ReadByIndex(size_t from);
  void Broken(uint64_t at, Stage stage, const std::string& why);
  void FlushPending() {
    for (Finding& f : pending_) sink_.Finding(std::move(f));
    pending_.clear();
  }
  void KeepFirstPending() {
    if (!pending_.empty()) {
      pending_.front().message += "; the walk lost sync after this entry";
      sink_.Finding(std::move(pending_.front()));
    }
    pending_.clear();
  }
  void Walk();

  Borg1Source& src_;
  const RepositoryPlan& plan_;
  const Unit& unit_;
  const SegmentFile& seg_;
  engine::UnitSink& sink_;
  std::unique_ptr<io::File> file_;
  // Without file_: how each live object of the segment is reported (missing, or not checked).
  Stage no_file_stage_ = Stage::kMissing;
  std::string no_file_why_;
  uint64_t limit_ = 0;  // the file's size when opened, or the final COMMIT's end in the last segment
  size_t cursor_;  // next live object of this segment the walk must meet
  // CRC failures of entries no live object depends on, held until the walk reaches the next
  // live object at its indexed offset. A damaged size field makes the walk read garbage as
  // entries; if sync is then lost, only the first held failure (the genuinely damaged entry) is
  // reported and the garbage after it is dropped.
  std::vector<Finding> pending_;
};

// Reads live objects [from, hi) one by one at their indexed offsets.
void Borg1Source::SegmentReader::ReadByIndex(size_t from) {
  for (size_t i = from; i < unit_.hi && !sink_.Stopping(); ++i) {
    const LiveObject& o = plan_.live[i];
    if (!sink_.Wants(o.id)) continue;
    if (!file_) {
      ReportLost(o, no_file_stage_, no_file_why_);
      continue;
    }
    const uint64_t limit = limit_;
    if (o.offset >= limit) {
      ReportLost(o, Stage::kTruncated, fmt::format("the segment ends at {} bytes, before this object", limit));
      continue;
    }
    uint8_t hdr[kHeaderSizeWithKey];
    size_t n = size_t(std::min<uint64_t>(sizeof hdr, limit - o.offset));
    if (Status r = file_->ReadAt(o.offset, n, hdr); !r.ok()) {
      ReportLost(o, Stage::kIo, "cannot read the entry at the indexed offset (" + r.message() + "): not checked");
      continue;
    }
    EntryHeader h;
    std::string why;
    HeaderParse p = ParseEntryHeader(Bytes(hdr, n), limit - o.offset, h, &why);
    if (p != HeaderParse::kOk) {
      bool trunc = p == HeaderParse::kNeedMore || h.problem == HeaderProblem::kTruncated;
      ReportLost(o, trunc ? Stage::kTruncated : Stage::kMissing,
                 "no valid entry at the indexed location: " + (why.empty() ? "truncated header" : why));
      continue;
    }
    if (h.tag != kTagPut || std::memcmp(h.key, o.id.data(), 32) != 0) {
      src_.NoteMisplaced(o, h);  // resolved against the log in Finish
      continue;
    }
    std::shared_ptr<engine::Block> block = sink_.TakeBlock(o.offset, h.size);
    // A whole read: the unit's remainder accounts for these bytes. A subset: these are the bytes
    // it read.
    if (sink_.WantsAll()) block->progress_bytes = 0;
    if (Status r = file_->ReadAt(o.offset, h.size, block->data.data()); !r.ok()) {
      block->progress_bytes = 0;
      ReportLost(o, Stage::kIo, "cannot read the entry at the indexed offset (" + r.message() + "): not checked");
      continue;
    }
    ObjectRef r;
    r.id = o.id;
    r.file_offset = o.offset;
    r.size = h.size;
    sink_.Objects(std::move(block), {r});
  }
}

// The walk cannot go on from `at`: report it, and read the rest by the index.
void Borg1Source::SegmentReader::Broken(uint64_t at, Stage stage, const std::string& why) {
  KeepFirstPending();
  const ChunkId* id =
      (cursor_ < unit_.hi && plan_.live[cursor_].offset == at) ? &plan_.live[cursor_].id : nullptr;
  size_t remaining = unit_.hi - cursor_ - (id ? 1 : 0);
  sink_.Finding(MakeFinding(Severity::kError, stage, At(at), id,
                            fmt::format("{}; the rest of the segment cannot be walked{}", why,
                                        remaining ? fmt::format(", its {} remaining live object(s) are "
                                                                "read at their indexed offsets",
                                                                remaining)
                                                  : std::string())),
                /*object_done=*/id != nullptr);
  if (id) ++cursor_;
  ReadByIndex(cursor_);
}

void Borg1Source::SegmentReader::Run() {
  if (unit_.missing) {
    const std::string what = unit_.absent_reason.empty() ? "is missing" : unit_.absent_reason;
    sink_.Finding(MakeFinding(Severity::kError, Stage::kMissing, Location::Segment(seg_.number), nullptr,
                              fmt::format("committed segment file {} {}; {} live object(s) lost", seg_.path, what,
                                          unit_.hi - unit_.lo)));
    no_file_why_ = "segment file " + what + ": " + seg_.path;
    ReadByIndex(unit_.lo);
    return;
  }
  Result<std::unique_ptr<io::File>> opened = src_.env_.Open(seg_.path);
  if (!opened.ok()) {
    const Status& st = opened.status();
    const engine::UnitOpenFailure why = engine::ClassifyUnitOpenFailure(st);
    if (why == engine::UnitOpenFailure::kVanished) {
      sink_.Vanished();  // listed while planning, gone now
      return;
    }
    const bool io = why == engine::UnitOpenFailure::kUnreadable;
    no_file_stage_ = io ? Stage::kIo : Stage::kMissing;
    no_file_why_ = io ? "the segment cannot be read (" + st.message() + "): not checked"
                      : "the segment is not a readable segment file (" + st.message() + "): lost";
    const size_t n = unit_.hi - unit_.lo;
    sink_.Finding(MakeFinding(Severity::kError, no_file_stage_, Location::Segment(seg_.number), nullptr,
                              io ? fmt::format("cannot read segment file: {}{}", st.message(),
                                               n ? fmt::format("; its {} live object(s) are not checked", n) : "")
                                 : "cannot open segment: " + st.message()));
    ReadByIndex(unit_.lo);
    return;
  }
  file_ = std::move(opened).value();
  const bool last = seg_.number == plan_.transaction && plan_.commit_end_of_last_segment;
  limit_ = last ? std::min(file_->size(), *plan_.commit_end_of_last_segment) : file_->size();
  if (!sink_.WantsAll()) {
    // A subset reads only the wanted live objects, at their indexed offsets (in disk order): no
    // walk, so no CRC check of dead entries and no index-vs-log comparison (docs/nightly.md).
    ReadByIndex(unit_.lo);
    return;
  }
  Walk();
}

void Borg1Source::SegmentReader::Walk() {
  const uint64_t limit = limit_;
  const size_t hi = unit_.hi;
  uint8_t magic[kSegmentMagicSize];
  if (limit >= kSegmentMagicSize) {
    if (Status r = file_->ReadAt(0, sizeof magic, magic); !r.ok()) {
      sink_.Finding(MakeFinding(Severity::kWarning, Stage::kIo, At(0), nullptr,
                                "cannot read the segment magic (" + r.message() +
                                    "); the live objects of this segment were read one by one"));
      ReadByIndex(cursor_);
      return;
    }
  }
  if (limit < kSegmentMagicSize || std::memcmp(magic, kSegmentMagic, sizeof magic) != 0) {
    Broken(0, Stage::kSegment, "invalid segment magic");
    return;
  }
  uint64_t pos = kSegmentMagicSize;
  uint64_t want = engine::kReadWindowBytes;
  while (pos < limit) {
    if (sink_.Stopping()) return;
    const uint64_t len = std::min<uint64_t>(std::max(want, engine::kReadWindowBytes), limit - pos);
    std::shared_ptr<engine::Block> block = sink_.TakeBlock(pos, len);
    if (Status s = file_->ReadAt(pos, len, block->data.data()); !s.ok()) {
      // Not the data's fault yet: read the remaining objects one by one, so a bad sector spoils
      // only the objects it holds.
      block->progress_bytes = 0;
      block.reset();
      KeepFirstPending();
      sink_.Finding(MakeFinding(Severity::kWarning, Stage::kIo, At(pos), nullptr,
                                fmt::format("cannot read {} bytes from offset {} ({}); the remaining live objects "
                                            "of this segment were read one by one (the other entries there are not "
                                            "checked)",
                                            len, pos, s.message())));
      ReadByIndex(cursor_);
      return;
    }
    std::vector<ObjectRef> refs;
    auto hand_over = [&] {
      if (block) sink_.Objects(std::move(block), std::move(refs));
      block.reset();
      refs.clear();
    };
    uint64_t p = 0;  // within the block
    want = engine::kReadWindowBytes;
    while (p < len) {
      const uint64_t abs = pos + p;
      EntryHeader h;
      std::string why;
      HeaderParse r = ParseEntryHeader(Bytes(block->data.data() + p, len - p), limit - abs, h, &why);
      if (r == HeaderParse::kNeedMore || (r == HeaderParse::kOk && p + h.size > len)) {
        if (p == 0) want = r == HeaderParse::kOk ? h.size : kHeaderSizeWithKey;
        break;  // the entry continues in the next window
      }
      if (r == HeaderParse::kInvalid) {
        hand_over();
        Broken(abs, h.problem == HeaderProblem::kTruncated ? Stage::kTruncated : Stage::kEntryCrc,
               "invalid entry header: " + why);
        return;
      }
      // Lost sync: the walk stepped over a live object's offset.
      if (cursor_ < hi && plan_.live[cursor_].offset < abs) {
        KeepFirstPending();
        hand_over();
        ReadByIndex(cursor_);
        return;
      }
      // The live objects the index places at this offset: one, or more when an index entry
      // points at another chunk's entry (issue 13). The one whose id the entry stores is live
      // here; the others are index inconsistencies, resolved against the log in Finish.
      size_t here_end = cursor_;
      while (here_end < hi && plan_.live[here_end].offset == abs) ++here_end;
      size_t match = hi;
      for (size_t k = cursor_; h.tag == kTagPut && k < here_end && match == hi; ++k) {
        if (std::memcmp(h.key, plan_.live[k].id.data(), 32) == 0) match = k;
      }
      const bool live_match = match != hi;
      for (size_t k = cursor_; k < here_end; ++k) {
        if (k != match) src_.NoteMisplaced(plan_.live[k], h);
      }
      if (live_match) {
        // A live PUT at exactly the indexed offset: the walk is in sync up to here.
        FlushPending();
        src_.NoteEntry(sink_, seg_.number, abs, h, true);
        if (sink_.Wants(plan_.live[match].id)) {
          ObjectRef ref;
          ref.id = plan_.live[match].id;
          ref.pos = p;
          ref.file_offset = abs;
          ref.size = h.size;
          refs.push_back(ref);
        }
      } else if (EntryCrcMatches(Bytes(block->data.data() + p, h.size))) {
        src_.NoteEntry(sink_, seg_.number, abs, h, false);
      } else {
        // A superseded/deleted PUT, a DELETE or a COMMIT whose CRC fails. Held back until the
        // walk proves it is still in sync (FlushPending / KeepFirstPending).
        ChunkId cid;
        if (h.tag != kTagCommit) std::memcpy(cid.data(), h.key, 32);
        Finding f = MakeFinding(
            h.tag == kTagPut ? Severity::kWarning : Severity::kError, Stage::kEntryCrc, At(abs),
            h.tag != kTagCommit ? &cid : nullptr,
            h.tag == kTagPut ? "Segment entry checksum mismatch in a superseded or deleted entry (no live data affected)"
                             : fmt::format("Segment entry checksum mismatch in a {} entry",
                                           h.tag == kTagCommit ? "COMMIT" : "DELETE"));
        pending_.push_back(std::move(f));
      }
      cursor_ = here_end;
      p += h.size;
    }
    // Keep only what was walked in this block's progress: the rest is read again next time.
    block->progress_bytes = p;
    hand_over();
    pos += p;
  }
  FlushPending();
  if (cursor_ < hi) ReadByIndex(cursor_);  // live objects beyond where the walk ended cleanly
}

void Borg1Source::ReadUnit(size_t index, engine::UnitSink& sink) {
  SegmentReader(*this, units_[index], sink).Run();
}

// --------------------------------------------------------------------------------------------
// Phase 4.

bool Borg1Source::VerifyFromLog(engine::FinishContext& ctx, const ChunkId& id, uint32_t segment, uint32_t offset,
                                const std::string& what) const {
  const SegmentFile* seg = nullptr;
  for (const SegmentFile& s : plan_.segments) {
    if (s.number == segment) seg = &s;
  }
  const Location at = Location::Segment(segment, offset);
  std::optional<ByteBuffer> entry = seg ? ReadEntryAt(seg->path, offset) : std::nullopt;
  if (!entry) {
    ctx.findings.Add(UnreadableFinding(at, &id, "cannot read " + what + " again to verify it: not checked"));
    return false;
  }
  Borg1Verifier v(verify_data_, mode_, key_ ? &*key_ : nullptr);
  if (!v.status().ok()) return false;
  engine::ObjectRef ref;
  ref.id = id;
  ref.file_offset = offset;
  ref.size = uint32_t(entry->size());
  std::optional<engine::Verdict> fail = v.Verify(entry->view(), ref);
  if (!fail) {
    ctx.summary.stored_bytes += entry->size();
    ctx.summary.plaintext_bytes += v.plaintext().size();
    return true;
  }
  // The one second-read policy, as for every object.
  report::Reread reread = report::Reread::kNotReread;
  std::optional<ByteBuffer> again = ReadEntryAt(seg->path, offset);
  if (again) {
    const bool same = again->size() == entry->size() && std::memcmp(again->data(), entry->data(), entry->size()) == 0;
    reread = same ? report::Reread::kAgreed : report::Reread::kDiffered;
    if (!same && !v.Verify(again->view(), ref)) {
      Finding f = MakeFinding(Severity::kWarning, fail->stage, at, &id,
                              fail->message + " (" + what + "); the second read verified (a transient read error?)");
      f.reread = report::Reread::kPassed;
      ctx.findings.Add(std::move(f));
      return true;
    }
  }
  Finding f = MakeFinding(fail->severity, fail->stage, at, &id, fail->message + " (" + what + ")");
  f.reread = reread;
  ctx.findings.Add(std::move(f));
  return false;
}

// The index placed these objects at entries that are not their PUTs. The walk has seen every
// segment (a complete run): the log's newest PUT of the id, if no DELETE followed it, is the
// object, and it is verified from there (borg's rebuilt index would point at it).
void Borg1Source::ResolveMisplaced(engine::FinishContext& ctx) {
  for (const auto& [id, m] : misplaced_) {
    const Location at = Location::Segment(m.segment, m.offset);
    const std::string where = fmt::format("index.{} places this chunk at [segment {}, offset {}], where the log holds {} "
                                          "(an index entry that points at another entry)",
                                          plan_.transaction, m.segment, m.offset, m.found);
    auto it = ctx.complete ? unexplained_puts_.find(id) : unexplained_puts_.end();
    if (it != unexplained_puts_.end()) {
      const auto [s, o] = it->second;
      unexplained_puts_.erase(it);
      ctx.findings.Add(MakeFinding(Severity::kError, Stage::kIndex, at, &id,
                                   fmt::format("{}; the log's own copy of this chunk, at [segment {}, offset {}], "
                                               "is verified instead",
                                               where, s, o)));
      if (VerifyFromLog(ctx, id, s, o, "the log's copy of a chunk the index misplaces")) ctx.summary.objects_verified++;
    } else if (ctx.complete) {
      ctx.findings.Add(MakeFinding(Severity::kError, Stage::kMissing, at, &id,
                                   where + "; the log holds no current copy of this chunk: it is lost"));
    } else {
      ctx.findings.Add(MakeFinding(Severity::kError, Stage::kIndex, at, &id,
                                   where + "; this run did not walk every segment, so whether the log holds this "
                                           "chunk elsewhere is not known (a full run tells)"));
    }
  }
}

void Borg1Source::FinishIndexComparison(engine::FinishContext& ctx) const {
  report::FindingSink& sink = ctx.findings;
  for (const auto& [id, loc] : unexplained_puts_) {
    const LiveObject* o = plan_.FindById(id);
    std::string msg;
    if (!o) {
      msg = fmt::format("the log stores this chunk but index.{} does not list it", plan_.transaction);
    } else if (o->segment < loc.first || (o->segment == loc.first && o->offset < loc.second)) {
      msg = fmt::format("the log stores a newer copy of this chunk than index.{} lists ([segment {}, offset {}])",
                        plan_.transaction, o->segment, o->offset);
    } else {
      continue;  // an older copy, superseded by the indexed one
    }
    sink.Add(MakeFinding(Severity::kError, Stage::kIndex, Location::Segment(loc.first, loc.second), &id, msg));
    // The log is the truth (borg's rebuilt index names this copy): an object the index does not
    // list counts, and is verified; the newer copy of a listed one is verified, not counted twice.
    if (!o) ctx.summary.objects_total++;
    if (VerifyFromLog(ctx, id, loc.first, loc.second, o ? "a newer copy than the index lists" : "not in the index") &&
        !o) {
      ctx.summary.objects_verified++;
    }
  }
}

void Borg1Source::CheckManifest(engine::FinishContext& ctx) const {
  const LiveObject* m = LiveManifest();
  const ChunkId zero{};
  if (!m) {
    ctx.findings.Add(MakeFinding(Severity::kError, Stage::kMissing, Location::None(), &zero, kNoManifestMessage));
    return;
  }
  // Read again for its TAM (FinishContext::RecheckManifest).
  const SegmentFile* seg = SegmentFileOf(m->segment);
  if (!seg) return;  // its segment is missing: reported by ReadUnit
  // Whether this run read the manifest's segment (and so reported the object's own failures).
  bool unit_read = false;
  for (size_t i = 0; i < units_.size(); ++i) {
    if (units_[i].segment.number == m->segment) unit_read = ctx.UnitRead(i);
  }
  engine::ManifestAgain again{Location::Segment(m->segment, m->offset), zero, unit_read};
  std::optional<ByteBuffer> entry = ReadEntryAt(seg->path, m->offset);
  if (!entry) {
    again.unreadable = MakeFinding(Severity::kError, Stage::kMissing, again.where, &zero,
                                   "no valid manifest entry at the indexed location");
  } else {
    again.stored = entry->view();
    again.ref.id = zero;
    again.ref.size = uint32_t(entry->size());
  }
  Borg1Verifier v(true, mode_, key_ ? &*key_ : nullptr);
  ctx.RecheckManifest(again, v.status().ok() ? &v : nullptr,
                      [&](Bytes plain) { return Borg1ManifestTamProblem(plain, mode_, key_ ? &*key_ : nullptr); });
}

void Borg1Source::SaveEvidence(nlohmann::json& out, std::span<engine::ObjectVerifier* const>) {
  nlohmann::json events = nlohmann::json::array();
  for (const auto& [segment, list] : events_) {
    nlohmann::json entries = nlohmann::json::array();
    for (const IndexEvent& e : list) entries.push_back({e.put ? "put" : "delete", ToHex(Bytes(e.id.data(), e.id.size())), e.offset});
    events.push_back({segment, std::move(entries)});
  }
  nlohmann::json misplaced = nlohmann::json::array();
  for (const auto& [id, m] : misplaced_) misplaced.push_back({ToHex(Bytes(id.data(), id.size())), m.segment, m.offset, m.found});
  out = {{"index_events", std::move(events)}, {"misplaced", std::move(misplaced)}};
  key_.reset();  // wipes the key material, as Finish does
  lane_hashes_.reset();
}

Status Borg1Source::LoadEvidence(const nlohmann::json& in) {
  const Status bad(StatusCode::kInvalidArgument, "a shard's borg 1.x evidence does not parse");
  auto id_of = [](const nlohmann::json& j, ChunkId& id) {
    return j.is_string() && ParseHexId(j.get<std::string>(), id);
  };
  auto u32 = [](const nlohmann::json& j) {
    return (j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0)) && j.get<uint64_t>() <= UINT32_MAX;
  };
  if (!in.is_object() || !in.contains("index_events") || !in.contains("misplaced") || !in["index_events"].is_array() ||
      !in["misplaced"].is_array()) {
    return bad;
  }
  std::map<uint32_t, bool> units;
  for (const Unit& u : units_) units[u.segment.number] = true;
  for (const nlohmann::json& seg : in["index_events"]) {
    if (!seg.is_array() || seg.size() != 2 || !u32(seg[0]) || !seg[1].is_array()) return bad;
    const uint32_t number = seg[0].get<uint32_t>();
    if (!units.count(number) || events_.count(number)) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("a shard's evidence names segment {}, which is no unit of this plan or was "
                                "walked by two shards",
                                number));
    }
    std::vector<IndexEvent>& list = events_[number];
    for (const nlohmann::json& e : seg[1]) {
      IndexEvent ev;
      if (!e.is_array() || e.size() != 3 || !e[0].is_string() || !id_of(e[1], ev.id) || !u32(e[2])) return bad;
      const std::string kind = e[0].get<std::string>();
      if (kind != "put" && kind != "delete") return bad;
      ev.put = kind == "put";
      ev.offset = e[2].get<uint32_t>();
      list.push_back(ev);
    }
  }
  for (const nlohmann::json& m : in["misplaced"]) {
    ChunkId id;
    if (!m.is_array() || m.size() != 4 || !id_of(m[0], id) || !u32(m[1]) || !u32(m[2]) || !m[3].is_string()) return bad;
    misplaced_[id] = Misplaced{m[1].get<uint32_t>(), m[2].get<uint32_t>(), m[3].get<std::string>()};
  }
  return Status::Ok();
}

void Borg1Source::Finish(engine::FinishContext& ctx) {
  // The merge's final pass: the shards' walks, replayed in segment order (read nothing itself).
  if (!record_events_) {
    for (const auto& [segment, list] : events_) {
      for (const IndexEvent& e : list) ApplyEvent(segment, e);
    }
  }
  // The leftovers of the index-vs-log comparison are findings only when the walk saw every
  // segment, in order: a PUT in a segment read is explained by a DELETE in a later one.
  ResolveMisplaced(ctx);
  if (ctx.complete) FinishIndexComparison(ctx);
  if (verify_data_) CheckManifest(ctx);
  key_.reset();  // wipes the key material
  lane_hashes_.reset();  // and the lanes' key states
}

}  // namespace

std::unique_ptr<engine::ObjectSource> MakeBorg1Source(const engine::CheckOptions& options, const io::Env& env,
                                                      std::optional<std::string> config_text) {
  return std::make_unique<Borg1Source>(options, env, std::move(config_text));
}

}  // namespace borgcheck::repo
