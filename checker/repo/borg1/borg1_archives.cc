#include "checker/repo/borg1/borg1_archives.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checker/base/secure_bytes.h"
#include "checker/io/file_cache.h"
#include "checker/crypto/tam.h"
#include "checker/repo/borg1/borg1_verifier.h"
#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/segment_log/segment_format.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/segment_log/served_source.h"

namespace borgcheck::repo {
namespace {

using archive::FetchProblem;
using archive::FetchStatus;
using archive::ObjectKind;

// What every borg 1.x archive source shares: the archive list from the manifest, Fetch (read
// the stored object, verify it with a Borg1Verifier, hand over the plaintext) and the archive
// TAM. How an object is found and read is the transport's (ReadStored): a segment entry at its
// indexed location (local and sftp), or a payload a server hands over (borg serve).
class Borg1Archives : public engine::ArchiveSource, public archive::ObjectFetcher {
 public:
  Borg1Archives(crypto::KeyMode mode, const crypto::KeyMaterial* key)
      : mode_(mode),
        key_(key ? std::optional<crypto::KeyMaterial>(*key) : std::nullopt),
        verifiers_([this] { return std::make_unique<Borg1Verifier>(true, mode_, key_ ? &*key_ : nullptr); }) {}

  archive::Generation generation() const override { return archive::Generation::kBorg1; }
  Result<engine::ArchiveList> ListArchives() override {
    return engine::ListArchivesFromManifest(*this, archive::Generation::kBorg1);
  }
  archive::ObjectFetcher& fetcher() override { return *this; }

  FetchStatus Fetch(const ChunkId& id, ObjectKind, ByteBuffer& plaintext, FetchProblem& problem) override;
  std::optional<FetchProblem> VerifyArchive(const ChunkId& id, Bytes plaintext,
                                            const archive::ArchiveInfo& info) override;

 protected:
  // Reads the stored bytes of `id` into `stored` and fills `ref` (its size, offset, variant);
  // kMissing or kDamaged (with `problem`) when it cannot. Any thread.
  virtual FetchStatus ReadStored(const ChunkId& id, ByteBuffer& stored, engine::ObjectRef& ref,
                                 FetchProblem& problem) const = 0;
  static FetchStatus Damaged(FetchProblem& p, report::Stage stage, std::string why) {
    p.stage = stage;
    p.message = std::move(why);
    return FetchStatus::kDamaged;
  }

 private:
  const crypto::KeyMode mode_;
  const std::optional<crypto::KeyMaterial> key_;
  engine::VerifierPool<Borg1Verifier> verifiers_;
};

FetchStatus Borg1Archives::Fetch(const ChunkId& id, ObjectKind, ByteBuffer& plaintext, FetchProblem& problem) {
  ByteBuffer stored;
  engine::ObjectRef ref;
  ref.id = id;
  if (FetchStatus s = ReadStored(id, stored, ref, problem); s != FetchStatus::kOk) return s;
  engine::VerifierPool<Borg1Verifier>::Handle v = verifiers_.Take();
  if (!v.get() || !v->status().ok()) return Damaged(problem, report::Stage::kEnvelope, "cannot set up the object crypto");
  ref.size = uint32_t(stored.size());
  if (std::optional<engine::Verdict> fail = v->Verify(stored.view(), ref)) {
    return Damaged(problem, fail->stage, fail->message);
  }
  plaintext.Assign(v->plaintext());
  return FetchStatus::kOk;
}

// A repository read as files (io::Env): the live list as the stored objects, each read at its
// indexed location.
class EnvBorg1Archives final : public Borg1Archives {
 public:
  EnvBorg1Archives(const io::Env& env, const RepositoryPlan& plan, crypto::KeyMode mode, const crypto::KeyMaterial* key)
      : Borg1Archives(mode, key), files_(env), plan_(plan) {
    // The plan sorts its live list by id in index mode; a log replay has no such list.
    if (plan_.live_by_id.empty()) {
      own_by_id_.resize(plan_.live.size());
      for (uint32_t i = 0; i < own_by_id_.size(); ++i) own_by_id_[i] = i;
      std::sort(own_by_id_.begin(), own_by_id_.end(),
                [&](uint32_t a, uint32_t b) { return plan_.live[a].id < plan_.live[b].id; });
    }
    for (const SegmentFile& s : plan_.segments) paths_[s.number] = &s.path;
  }

  size_t ObjectCount() const override { return plan_.live.size(); }
  std::optional<size_t> Find(const ChunkId& id) const override {
    const std::vector<uint32_t>& by_id = by_id_list();
    auto it = std::lower_bound(by_id.begin(), by_id.end(), id,
                               [&](uint32_t i, const ChunkId& k) { return plan_.live[i].id < k; });
    if (it == by_id.end() || plan_.live[*it].id != id) return std::nullopt;
    return *it;
  }
  ChunkId IdAt(size_t i) const override { return plan_.live[i].id; }
  void WillFetch(std::span<const ChunkId> ids) override {
    std::set<const std::string*> named;  // the FileCache opens a segment once
    for (const ChunkId& id : ids) {
      const std::optional<size_t> i = Find(id);
      if (!i) continue;
      auto path = paths_.find(plan_.live[*i].segment);
      if (path != paths_.end() && named.insert(path->second).second) files_.OpenAhead(*path->second, plan_.live[*i].offset);
    }
  }

 private:
  FetchStatus ReadStored(const ChunkId& id, ByteBuffer& entry, engine::ObjectRef& ref,
                         FetchProblem& problem) const override;
  const std::vector<uint32_t>& by_id_list() const { return plan_.live_by_id.empty() ? own_by_id_ : plan_.live_by_id; }

  const io::FileCache files_;  // segments kept open from one fetch to the next (file_cache.h)
  const RepositoryPlan& plan_;
  std::vector<uint32_t> own_by_id_;                 // const after construction
  std::map<uint32_t, const std::string*> paths_;    // committed segment -> path; const
};

FetchStatus EnvBorg1Archives::ReadStored(const ChunkId& id, ByteBuffer& entry, engine::ObjectRef& ref,
                                         FetchProblem& problem) const {
  const std::optional<size_t> i = Find(id);
  if (!i) return FetchStatus::kMissing;
  const LiveObject& o = plan_.live[*i];
  auto path = paths_.find(o.segment);
  if (path == paths_.end()) return FetchStatus::kMissing;  // its segment file is gone
  Result<std::shared_ptr<const io::File>> f = files_.Open(*path->second);
  if (!f.ok()) return archive::CouldNotRead(problem, f.status(), "cannot open " + *path->second);
  const uint64_t size = (*f)->size();
  if (o.offset >= size) return Damaged(problem, report::Stage::kTruncated, "the segment ends before this object");
  uint8_t hdr[kHeaderSizeWithKey];
  const size_t n = size_t(std::min<uint64_t>(sizeof hdr, size - o.offset));
  if (Status r = (*f)->ReadAt(o.offset, n, hdr); !r.ok()) return archive::CouldNotRead(problem, r, "cannot read " + *path->second);
  EntryHeader h;
  std::string why;
  if (ParseEntryHeader(Bytes(hdr, n), size - o.offset, h, &why) != HeaderParse::kOk) {
    return Damaged(problem, report::Stage::kEntryCrc, "no valid entry at the indexed location: " + why);
  }
  if (h.tag != kTagPut || std::memcmp(h.key, id.data(), 32) != 0) {
    return Damaged(problem, report::Stage::kMissing, "the entry at the indexed location is not this chunk's PUT");
  }
  entry.Resize(h.size);
  if (Status r = (*f)->ReadAt(o.offset, h.size, entry.data()); !r.ok()) {
    return archive::CouldNotRead(problem, r, "cannot read " + *path->second);
  }
  ref.file_offset = o.offset;
  return FetchStatus::kOk;
}

// A repository a server hands out by id (io/object_service.h): the ids the server listed as
// the stored objects (sorted), each fetched with a get of its own.
class ServedBorg1Archives final : public Borg1Archives {
 public:
  ServedBorg1Archives(io::ObjectService& service, const std::vector<ChunkId>& sorted_ids, crypto::KeyMode mode,
                      const crypto::KeyMaterial* key)
      : Borg1Archives(mode, key), service_(service), ids_(sorted_ids) {}

  size_t ObjectCount() const override { return ids_.size(); }
  std::optional<size_t> Find(const ChunkId& id) const override { return FindSorted(ids_, id); }
  ChunkId IdAt(size_t i) const override { return ids_[i]; }

 private:
  FetchStatus ReadStored(const ChunkId& id, ByteBuffer& payload, engine::ObjectRef& ref,
                         FetchProblem& problem) const override {
    if (!Find(id)) return FetchStatus::kMissing;
    ref.variant = kBorg1ServedPayload;
    return FetchServed(service_, id, payload, problem);
  }

  io::ObjectService& service_;     // safe for concurrent use (object_service.h)
  const std::vector<ChunkId>& ids_;  // sorted; the source's, const while the pass runs
};

std::optional<FetchProblem> Borg1Archives::VerifyArchive(const ChunkId&, Bytes plaintext,
                                                         const archive::ArchiveInfo& info) {
  std::optional<Bytes> ikm;
  SecureBytes material;
  if (crypto::NeedsKey(mode_) && key_) {
    material = SecureBytes(key_->id_key.view());
    material.Append(key_->enc_key.view());
    material.Append(key_->enc_hmac_key.view());
    ikm = material.view();
  }
  const crypto::TamResult tam = crypto::VerifyTamWithIkm(plaintext, ikm, "archive");
  const bool required = crypto::NeedsKey(mode_) && key_ && key_->tam_required;
  if (tam.outcome == crypto::TamOutcome::kVerified) return std::nullopt;
  if (tam.outcome == crypto::TamOutcome::kAbsent && !required) return std::nullopt;
  // Two causes, one verdict (borg 1.2.5+ and 1.4 refuse both; borg check reports them and
  // borg check --repair deletes such archives, CVE-2023-36811): no TAM (archives of borg
  // before 1.0.9), or one that does not verify (borg 1.2.4 and older kept the old TAM in
  // rename, recreate and check --repair, borg #7791; or the archive object was forged).
  const std::string why =
      tam.outcome == crypto::TamOutcome::kAbsent
          ? "the archive has no TAM although the key requires one (borg before 1.0.9 made archives without one)"
          : tam.message + " (a wrong TAM: borg 1.2.4 and older wrote such TAMs in borg rename, recreate and check "
                          "--repair, borg #7791; or the archive was altered)";
  return FetchProblem{report::Stage::kAuthentication, "Archive TAM authentication issue for archive " + info.name +
                                                          ": " + why + "; borg 1.2.5+ and 1.4 refuse it"};
}

}  // namespace

std::unique_ptr<engine::ArchiveSource> MakeBorg1ArchiveSource(const io::Env& env, const RepositoryPlan& plan,
                                                              crypto::KeyMode mode, const crypto::KeyMaterial* key) {
  return std::make_unique<EnvBorg1Archives>(env, plan, mode, key);
}

std::unique_ptr<engine::ArchiveSource> MakeServedBorg1ArchiveSource(io::ObjectService& service,
                                                                    const std::vector<ChunkId>& sorted_ids,
                                                                    crypto::KeyMode mode, const crypto::KeyMaterial* key) {
  return std::make_unique<ServedBorg1Archives>(service, sorted_ids, mode, key);
}

}  // namespace borgcheck::repo
