#include "checker/repo/borgstore/borgstore_archives.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checker/io/file_cache.h"
#include "checker/repo/borgstore/borgstore_verifier.h"
#include "checker/repo/chunk_id.h"

namespace borgcheck::repo {
namespace {

using archive::FetchProblem;
using archive::FetchStatus;
using archive::ObjectKind;

std::string_view TypeOf(ObjectKind k) {
  switch (k) {
    case ObjectKind::kManifest: return "M";
    case ObjectKind::kArchive: return "A";
    case ObjectKind::kItemPtrs: return "C";
    case ObjectKind::kItemStream: return "S";
  }
  return "";
}

class BorgstoreArchives final : public engine::ArchiveSource, public archive::ObjectFetcher {
 public:
  BorgstoreArchives(const io::Env& env, const BorgstoreLayout& layout, const LoadedChunkIndex& index,
                    const crypto::MasterKeyType* type, const crypto::Borg2KeyMaterial* key,
                    std::function<std::vector<UnindexedBlob>()> unindexed)
      : env_(env),
        unindexed_source_(std::move(unindexed)),
        layout_(layout),
        index_(index),
        type_(type),
        key_(key ? std::optional<crypto::Borg2KeyMaterial>(*key) : std::nullopt),
        verifiers_([this] {
          return std::make_unique<BorgstoreVerifier>(true, type_, key_ ? key_->crypt_key.view() : Bytes(),
                                                     key_ ? key_->id_key.view() : Bytes());
        }) {
    for (const PackFile& p : layout_.packs) packs_[p.id] = &p.path;
  }

  archive::Generation generation() const override { return archive::Generation::kBorg2Master; }
  Result<engine::ArchiveList> ListArchives() override {
    Result<engine::ArchiveList> list = engine::ListArchivesFromManifest(*this, archive::Generation::kBorg2Master);
    if (!list.ok()) return list;
    for (const ChunkId& id : layout_.archives) {
      archive::ManifestArchive a;
      a.id = id;
      list->archives.push_back(a);
    }
    return list;
  }
  void ObjectPassDone() override {
    if (!unindexed_source_) return;
    unindexed_.clear();
    for (const UnindexedBlob& b : unindexed_source_()) {
      if (!index_.Find(b.id) && b.pack < layout_.packs.size()) unindexed_.push_back(b);
    }
    std::sort(unindexed_.begin(), unindexed_.end(), [](const UnindexedBlob& a, const UnindexedBlob& b) { return a.id < b.id; });
    // One blob per id (the first in pack order wins, as any copy verified will do).
    unindexed_.erase(std::unique(unindexed_.begin(), unindexed_.end(),
                                 [](const UnindexedBlob& a, const UnindexedBlob& b) { return a.id == b.id; }),
                     unindexed_.end());
  }
  size_t ObjectCount() const override { return index_.size() + unindexed_.size(); }
  std::optional<size_t> Find(const ChunkId& id) const override {
    if (const IndexedChunk* c = index_.Find(id)) return size_t(c - index_.chunks.data());
    if (const UnindexedBlob* b = FindUnindexed(id)) return index_.size() + size_t(b - unindexed_.data());
    return std::nullopt;
  }
  ChunkId IdAt(size_t i) const override {
    return i < index_.size() ? index_.chunks[i].chunk_id : unindexed_[i - index_.size()].id;
  }
  archive::ObjectFetcher& fetcher() override { return *this; }

  FetchStatus Fetch(const ChunkId& id, ObjectKind kind, ByteBuffer& plaintext, FetchProblem& problem) override {
    std::string blob;
    if (kind == ObjectKind::kManifest) {
      if (!layout_.manifest_present) return FetchStatus::kMissing;
      Result<std::string> text = env_.ReadWholeFile(layout_.manifest_path, kMaxBlobSize + kObjHeaderSize);
      if (!text.ok()) return archive::CouldNotRead(problem, text.status(), "cannot read config/manifest");
      blob = std::move(text).value();
    } else {
      const std::string* path = nullptr;
      uint64_t offset = 0, want = 0;
      if (const IndexedChunk* c = index_.Find(id)) {
        auto pack = packs_.find(c->entry.pack_id);
        if (pack == packs_.end()) return FetchStatus::kMissing;  // its pack is gone
        path = pack->second;
        offset = c->entry.offset;
        want = c->entry.size;
      } else if (const UnindexedBlob* b = FindUnindexed(id)) {
        path = &layout_.packs[b->pack].path;
        offset = b->offset;
        want = b->size;
      } else {
        return FetchStatus::kMissing;
      }
      Result<std::shared_ptr<const io::File>> f = packs_open_.Open(*path);
      if (!f.ok()) return archive::CouldNotRead(problem, f.status(), "cannot open the pack");
      const uint64_t size = (*f)->size();
      if (offset >= size || want > kMaxBlobSize + kObjHeaderSize) {
        return Damaged(problem, report::Stage::kTruncated, "the index entry points past the end of the pack");
      }
      const uint64_t n = std::min<uint64_t>(want, size - offset);
      blob.resize(n);
      if (Status r = (*f)->ReadAt(offset, n, reinterpret_cast<uint8_t*>(blob.data())); !r.ok()) {
        return archive::CouldNotRead(problem, r, "cannot read " + *path);
      }
    }
    engine::VerifierPool<BorgstoreVerifier>::Handle v = verifiers_.Take();
    if (!v.get() || !v->status().ok()) return Damaged(problem, report::Stage::kEnvelope, "cannot set up the object crypto");
    if (std::optional<engine::Verdict> fail = v->VerifyAs(AsBytes(blob), id)) return Damaged(problem, fail->stage, fail->message);
    const std::string_view want = TypeOf(kind);
    const std::string type = v->meta().type.value_or("");
    if (type != want) {
      return Damaged(problem, report::Stage::kEnvelope,
                     "object type is '" + type + "', not '" + std::string(want) + "' (" +
                         std::string(archive::ObjectKindName(kind)) + ")");
    }
    plaintext.Assign(v->plaintext());
    return FetchStatus::kOk;
  }

 private:
  const UnindexedBlob* FindUnindexed(const ChunkId& id) const {
    auto it = std::lower_bound(unindexed_.begin(), unindexed_.end(), id,
                               [](const UnindexedBlob& b, const ChunkId& k) { return b.id < k; });
    return it != unindexed_.end() && it->id == id ? &*it : nullptr;
  }
  static FetchStatus Damaged(FetchProblem& p, report::Stage stage, std::string why) {
    p.stage = stage;
    p.message = std::move(why);
    return FetchStatus::kDamaged;
  }

  const io::Env& env_;
  const io::FileCache packs_open_{env_};  // packs kept open from one fetch to the next (file_cache.h)
  const std::function<std::vector<UnindexedBlob>()> unindexed_source_;
  std::vector<UnindexedBlob> unindexed_;  // sorted by id; written by ObjectPassDone only, before any walk
  const BorgstoreLayout& layout_;
  const LoadedChunkIndex& index_;
  const crypto::MasterKeyType* type_;
  const std::optional<crypto::Borg2KeyMaterial> key_;
  std::map<ChunkId, const std::string*> packs_;  // pack id -> path; const after construction
  engine::VerifierPool<BorgstoreVerifier> verifiers_;
};

}  // namespace

std::unique_ptr<engine::ArchiveSource> MakeBorgstoreArchiveSource(const io::Env& env, const BorgstoreLayout& layout,
                                                                  const LoadedChunkIndex& index,
                                                                  const crypto::MasterKeyType* type,
                                                                  const crypto::Borg2KeyMaterial* key,
                                                                  std::function<std::vector<UnindexedBlob>()> unindexed) {
  return std::make_unique<BorgstoreArchives>(env, layout, index, type, key, std::move(unindexed));
}

}  // namespace borgcheck::repo
