// What a repository generation provides for the archive pass (archive_pass.h): the facts the
// archive decoders need (which generation, where the archives are listed), a numbering of the
// stored objects for the engine's reference table, and an ObjectFetcher that reads, verifies
// and decrypts one metadata object by chunk id. Headers only: a generation implements this
// (ObjectSource::MakeArchiveSource) next to its ObjectSource; the engine drives it.
//
// Made on the engine's main thread after ObjectSource::LoadKey (verify-data runs only) and
// destroyed before RunEngine returns. It copies the key material it needs, so that the source
// may wipe its own in Finish; it borrows the source's plan, which outlives it.
//
// Thread contract: ListArchives runs on the main thread. ObjectCount, Find, IdAt and the fetcher are
// called from every walking thread at once and must be safe for concurrent use (the fetcher
// keeps its verifiers in a pool of its own: see object_fetcher.h).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "checker/archive/archive_types.h"
#include "checker/archive/metadata_decode.h"
#include "checker/archive/object_fetcher.h"
#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/engine/object_verifier.h"

namespace borgcheck::engine {

struct ArchiveList {
  // 1.x and 2.0.0b5: the manifest's `archives` map, in its order; master: one entry per live
  // archives/<id> item with an empty name and time (the archive object holds them: the engine
  // reads them before it selects).
  std::vector<archive::ManifestArchive> archives;
  // The decoded manifest (item keys for the item decoder; the manifest's own archives list
  // is `archives` above for 1.x and b5).
  archive::ManifestInfo manifest;
};

class ArchiveSource {
 public:
  virtual ~ArchiveSource() = default;

  virtual archive::Generation generation() const = 0;

  // The archive list. Non-ok: the archive pass cannot run, and the status says why (the
  // manifest is missing or does not verify: its own finding says so; kCorruptMetadata: it
  // verified but does not decode, which only the archive pass reports).
  virtual Result<ArchiveList> ListArchives() = 0;

  // The stored objects the reference table has one mark for: indices 0 .. ObjectCount()-1.
  // Find gives the index of a stored chunk id, nullopt for one the repository does not have
  // (borg's "missing": no index entry / no current entry in the log).
  // Called once on the main thread after the object pass (and the source's Finish), before
  // the walk that follows it: a generation whose object list grows with what reading found
  // (borgstore: blobs in no index fragment) adds them here. ObjectCount may grow only here.
  virtual void ObjectPassDone() {}
  virtual size_t ObjectCount() const = 0;
  virtual std::optional<size_t> Find(const ChunkId& id) const = 0;
  virtual ChunkId IdAt(size_t index) const = 0;

  // Reads, verifies (with a verifier of this generation) and decrypts one object by id.
  virtual archive::ObjectFetcher& fetcher() = 0;
  // A hint that the walk fetches these objects first (the first archives' metadata): a source
  // read through a remote store may open their files now (io::Env::OpenAhead). Main thread.
  virtual void WillFetch(std::span<const ChunkId> ids) { (void)ids; }
};

// The archive list of borg 1.x and 2.0.0b5 (the manifest's `archives`) and the item keys of
// every generation, from the manifest as `fetcher` reads it. kNotFound: no manifest; kIoError:
// it does not verify (its own finding says why); kCorruptMetadata: it does not decode.
inline Result<ArchiveList> ListArchivesFromManifest(archive::ObjectFetcher& fetcher, archive::Generation g) {
  ByteBuffer buf;
  archive::FetchProblem problem;
  const ChunkId zero{};
  switch (fetcher.Fetch(zero, archive::ObjectKind::kManifest, buf, problem)) {
    case archive::FetchStatus::kOk:
      break;
    case archive::FetchStatus::kMissing:
      return Status(StatusCode::kNotFound, "the repository has no manifest");
    case archive::FetchStatus::kDamaged:
      return Status(StatusCode::kIoError, "the manifest cannot be read (" + problem.message + ")");
  }
  ArchiveList list;
  std::string error;
  if (!archive::DecodeManifest(buf.view(), g, list.manifest, error)) return Status(StatusCode::kCorruptMetadata, error);
  list.archives = list.manifest.archives;
  return list;
}

// A fetcher's verifiers: one per concurrent Fetch, made on demand and reused (a verifier owns
// its crypto and codec contexts and is not safe for concurrent use). Safe for concurrent use.
template <typename Verifier>
class VerifierPool {
 public:
  using Factory = std::function<std::unique_ptr<Verifier>()>;
  explicit VerifierPool(Factory make) : make_(std::move(make)) {}

  // A verifier for the caller alone, back into the pool when the handle goes.
  class Handle {
   public:
    Handle(VerifierPool& pool, std::unique_ptr<Verifier> v) : pool_(pool), v_(std::move(v)) {}
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() {
      if (!v_) return;
      std::lock_guard<std::mutex> lock(pool_.mu_);
      pool_.idle_.push_back(std::move(v_));
    }
    Verifier* get() const { return v_.get(); }
    Verifier* operator->() const { return v_.get(); }

   private:
    VerifierPool& pool_;
    std::unique_ptr<Verifier> v_;
  };

  Handle Take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<Verifier> v = std::move(idle_.back());
        idle_.pop_back();
        return Handle(*this, std::move(v));
      }
    }
    return Handle(*this, make_());
  }

 private:
  const Factory make_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Verifier>> idle_;  // guarded by mu_
};

}  // namespace borgcheck::engine
