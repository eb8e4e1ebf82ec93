#include "checker/repo/borg2b5/borg2b5_archives.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "checker/io/file_cache.h"
#include "checker/repo/borg2b5/borg2b5_verifier.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/segment_log/served_source.h"

namespace borgcheck::repo {
namespace {

using archive::FetchProblem;
using archive::FetchStatus;
using archive::ObjectKind;

bool IsPut(const Borg2Entry& e) { return e.tag == kB2TagPut || e.tag == kB2TagPut2; }

// What both transports share: the archive list from the manifest, and Fetch (read the stored
// object, verify it with a Borg2b5Verifier, hand over the plaintext). How an object is found and
// read is the transport's (ReadStored): a current entry of the replayed log (local and sftp),
// or a payload a server hands over (borg2 serve).
class Borg2b5Archives : public engine::ArchiveSource, public archive::ObjectFetcher {
 public:
  Borg2b5Archives(const crypto::Borg2KeyType* type, const crypto::Borg2KeyMaterial* key)
      : type_(type),
        key_(key ? std::optional<crypto::Borg2KeyMaterial>(*key) : std::nullopt),
        verifiers_([this] { return std::make_unique<Borg2b5Verifier>(true, type_, key_ ? &*key_ : nullptr); }) {}

  archive::Generation generation() const override { return archive::Generation::kBorg2b5; }
  Result<engine::ArchiveList> ListArchives() override {
    return engine::ListArchivesFromManifest(*this, archive::Generation::kBorg2b5);
  }
  archive::ObjectFetcher& fetcher() override { return *this; }

  FetchStatus Fetch(const ChunkId& id, ObjectKind, ByteBuffer& plaintext, FetchProblem& problem) override {
    ByteBuffer stored;
    engine::ObjectRef ref;
    ref.id = id;
    if (FetchStatus s = ReadStored(id, stored, ref, problem); s != FetchStatus::kOk) return s;
    engine::VerifierPool<Borg2b5Verifier>::Handle v = verifiers_.Take();
    if (!v.get() || !v->status().ok()) return Damaged(problem, report::Stage::kEnvelope, "cannot set up the object crypto");
    ref.size = uint32_t(stored.size());
    if (std::optional<engine::Verdict> fail = v->Verify(stored.view(), ref)) return Damaged(problem, fail->stage, fail->message);
    plaintext.Assign(v->plaintext());
    return FetchStatus::kOk;
  }

 protected:
  // Reads the stored bytes of `id` into `stored` and fills `ref` (its offset, variant); kMissing,
  // or kDamaged / could not read (with `problem`) when it cannot. Any thread.
  virtual FetchStatus ReadStored(const ChunkId& id, ByteBuffer& stored, engine::ObjectRef& ref,
                                 FetchProblem& problem) const = 0;
  static FetchStatus Damaged(FetchProblem& p, report::Stage stage, std::string why) {
    p.stage = stage;
    p.message = std::move(why);
    return FetchStatus::kDamaged;
  }

 private:
  const crypto::Borg2KeyType* type_;
  const std::optional<crypto::Borg2KeyMaterial> key_;
  engine::VerifierPool<Borg2b5Verifier> verifiers_;
};

// A repository read as files (io::Env): the current PUT/PUT2 entries of the replayed log.
class EnvBorg2b5Archives final : public Borg2b5Archives {
 public:
  EnvBorg2b5Archives(const io::Env& env, const Borg2Plan& plan, const crypto::Borg2KeyType* type,
                     const crypto::Borg2KeyMaterial* key)
      : Borg2b5Archives(type, key), files_(env), plan_(plan) {
    for (uint32_t s = 0; s < plan_.segments.size(); ++s) {
      const std::vector<Borg2Entry>& entries = plan_.segments[s].entries;
      for (uint32_t e = 0; e < entries.size(); ++e) {
        if (entries[e].live && IsPut(entries[e])) live_.push_back({s, e});
      }
    }
    std::sort(live_.begin(), live_.end(), [&](const Slot& a, const Slot& b) { return EntryOf(a).id < EntryOf(b).id; });
  }

  size_t ObjectCount() const override { return live_.size(); }
  std::optional<size_t> Find(const ChunkId& id) const override {
    auto it = std::lower_bound(live_.begin(), live_.end(), id,
                               [&](const Slot& s, const ChunkId& k) { return EntryOf(s).id < k; });
    if (it == live_.end() || EntryOf(*it).id != id) return std::nullopt;
    return size_t(it - live_.begin());
  }
  ChunkId IdAt(size_t i) const override { return EntryOf(live_[i]).id; }
  void WillFetch(std::span<const ChunkId> ids) override {
    std::set<uint32_t> named;  // the FileCache opens a segment once
    for (const ChunkId& id : ids) {
      const std::optional<size_t> i = Find(id);
      if (i && named.insert(live_[*i].segment).second) {
        files_.OpenAhead(plan_.segments[live_[*i].segment].path, EntryOf(live_[*i]).offset);
      }
    }
  }

 private:
  struct Slot {
    uint32_t segment = 0;
    uint32_t entry = 0;
  };
  const Borg2Entry& EntryOf(const Slot& s) const { return plan_.segments[s.segment].entries[s.entry]; }

  FetchStatus ReadStored(const ChunkId& id, ByteBuffer& entry, engine::ObjectRef& ref,
                         FetchProblem& problem) const override {
    const std::optional<size_t> i = Find(id);
    if (!i) return FetchStatus::kMissing;
    const Borg2Segment& seg = plan_.segments[live_[*i].segment];
    const Borg2Entry& e = EntryOf(live_[*i]);
    Result<std::shared_ptr<const io::File>> f = files_.Open(seg.path);
    if (!f.ok()) return archive::CouldNotRead(problem, f.status(), "cannot open " + seg.path);
    entry.Resize(e.size);
    if (Status r = (*f)->ReadAt(e.offset, e.size, entry.data()); !r.ok()) {
      return archive::CouldNotRead(problem, r, "cannot read " + seg.path);
    }
    ref.file_offset = e.offset;
    ref.variant = e.tag;
    return FetchStatus::kOk;
  }

  const io::FileCache files_;  // segments kept open from one fetch to the next (file_cache.h)
  const Borg2Plan& plan_;
  std::vector<Slot> live_;  // the current PUT/PUT2 entries, sorted by id; const after construction
};

// A repository a server hands out by id (io/object_service.h): the ids the server listed as the
// stored objects (sorted), each fetched with a get of its own.
class ServedBorg2b5Archives final : public Borg2b5Archives {
 public:
  ServedBorg2b5Archives(io::ObjectService& service, const std::vector<ChunkId>& sorted_ids,
                        const crypto::Borg2KeyType* type, const crypto::Borg2KeyMaterial* key)
      : Borg2b5Archives(type, key), service_(service), ids_(sorted_ids) {}

  size_t ObjectCount() const override { return ids_.size(); }
  std::optional<size_t> Find(const ChunkId& id) const override { return FindSorted(ids_, id); }
  ChunkId IdAt(size_t i) const override { return ids_[i]; }

 private:
  FetchStatus ReadStored(const ChunkId& id, ByteBuffer& payload, engine::ObjectRef& ref,
                         FetchProblem& problem) const override {
    if (!Find(id)) return FetchStatus::kMissing;
    ref.variant = kBorg2b5ServedPayload;
    return FetchServed(service_, id, payload, problem);
  }

  io::ObjectService& service_;       // safe for concurrent use (object_service.h)
  const std::vector<ChunkId>& ids_;  // sorted; the source's, const while the pass runs
};

}  // namespace

std::unique_ptr<engine::ArchiveSource> MakeBorg2b5ArchiveSource(const io::Env& env, const Borg2Plan& plan,
                                                                const crypto::Borg2KeyType* type,
                                                                const crypto::Borg2KeyMaterial* key) {
  return std::make_unique<EnvBorg2b5Archives>(env, plan, type, key);
}

std::unique_ptr<engine::ArchiveSource> MakeServedBorg2b5ArchiveSource(io::ObjectService& service,
                                                                      const std::vector<ChunkId>& sorted_ids,
                                                                      const crypto::Borg2KeyType* type,
                                                                      const crypto::Borg2KeyMaterial* key) {
  return std::make_unique<ServedBorg2b5Archives>(service, sorted_ids, type, key);
}

}  // namespace borgcheck::repo
