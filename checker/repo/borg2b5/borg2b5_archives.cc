#include "checker/repo/borg2b5/borg2b5_archives.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "checker/io/file_cache.h"
#include "checker/repo/borg2b5/borg2b5_verifier.h"
#include "checker/repo/chunk_id.h"

namespace borgcheck::repo {
namespace {

using archive::FetchProblem;
using archive::FetchStatus;
using archive::ObjectKind;

bool IsPut(const Borg2Entry& e) { return e.tag == kB2TagPut || e.tag == kB2TagPut2; }

class Borg2b5Archives final : public engine::ArchiveSource, public archive::ObjectFetcher {
 public:
  Borg2b5Archives(const io::Env& env, const Borg2Plan& plan, const crypto::Borg2KeyType* type,
                  const crypto::Borg2KeyMaterial* key)
      : files_(env),
        plan_(plan),
        type_(type),
        key_(key ? std::optional<crypto::Borg2KeyMaterial>(*key) : std::nullopt),
        verifiers_([this] { return std::make_unique<Borg2b5Verifier>(true, type_, key_ ? &*key_ : nullptr); }) {
    for (uint32_t s = 0; s < plan_.segments.size(); ++s) {
      const std::vector<Borg2Entry>& entries = plan_.segments[s].entries;
      for (uint32_t e = 0; e < entries.size(); ++e) {
        if (entries[e].live && IsPut(entries[e])) live_.push_back({s, e});
      }
    }
    std::sort(live_.begin(), live_.end(), [&](const Slot& a, const Slot& b) { return EntryOf(a).id < EntryOf(b).id; });
  }

  archive::Generation generation() const override { return archive::Generation::kBorg2b5; }
  Result<engine::ArchiveList> ListArchives() override {
    return engine::ListArchivesFromManifest(*this, archive::Generation::kBorg2b5);
  }
  size_t ObjectCount() const override { return live_.size(); }
  std::optional<size_t> Find(const ChunkId& id) const override {
    auto it = std::lower_bound(live_.begin(), live_.end(), id,
                               [&](const Slot& s, const ChunkId& k) { return EntryOf(s).id < k; });
    if (it == live_.end() || EntryOf(*it).id != id) return std::nullopt;
    return size_t(it - live_.begin());
  }
  ChunkId IdAt(size_t i) const override { return EntryOf(live_[i]).id; }
  archive::ObjectFetcher& fetcher() override { return *this; }

  FetchStatus Fetch(const ChunkId& id, ObjectKind, ByteBuffer& plaintext, FetchProblem& problem) override {
    const std::optional<size_t> i = Find(id);
    if (!i) return FetchStatus::kMissing;
    const Borg2Segment& seg = plan_.segments[live_[*i].segment];
    const Borg2Entry& e = EntryOf(live_[*i]);
    Result<std::shared_ptr<const io::File>> f = files_.Open(seg.path);
    if (!f.ok()) return archive::CouldNotRead(problem, f.status(), "cannot open " + seg.path);
    ByteBuffer entry;
    entry.Resize(e.size);
    if (Status r = (*f)->ReadAt(e.offset, e.size, entry.data()); !r.ok()) {
      return archive::CouldNotRead(problem, r, "cannot read " + seg.path);
    }
    engine::VerifierPool<Borg2b5Verifier>::Handle v = verifiers_.Take();
    if (!v.get() || !v->status().ok()) return Damaged(problem, report::Stage::kEnvelope, "cannot set up the object crypto");
    engine::ObjectRef ref;
    ref.id = id;
    ref.file_offset = e.offset;
    ref.size = e.size;
    ref.variant = e.tag;
    if (std::optional<engine::Verdict> fail = v->Verify(entry.view(), ref)) return Damaged(problem, fail->stage, fail->message);
    plaintext.Assign(v->plaintext());
    return FetchStatus::kOk;
  }

 private:
  struct Slot {
    uint32_t segment = 0;
    uint32_t entry = 0;
  };
  const Borg2Entry& EntryOf(const Slot& s) const { return plan_.segments[s.segment].entries[s.entry]; }
  static FetchStatus Damaged(FetchProblem& p, report::Stage stage, std::string why) {
    p.stage = stage;
    p.message = std::move(why);
    return FetchStatus::kDamaged;
  }

  const io::FileCache files_;  // segments kept open from one fetch to the next (file_cache.h)
  const Borg2Plan& plan_;
  const crypto::Borg2KeyType* type_;
  const std::optional<crypto::Borg2KeyMaterial> key_;
  std::vector<Slot> live_;  // the current PUT/PUT2 entries, sorted by id; const after construction
  engine::VerifierPool<Borg2b5Verifier> verifiers_;
};

}  // namespace

std::unique_ptr<engine::ArchiveSource> MakeBorg2b5ArchiveSource(const io::Env& env, const Borg2Plan& plan,
                                                                const crypto::Borg2KeyType* type,
                                                                const crypto::Borg2KeyMaterial* key) {
  return std::make_unique<Borg2b5Archives>(env, plan, type, key);
}

}  // namespace borgcheck::repo
