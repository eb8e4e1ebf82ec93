// The archive pass's view of a borgstore (repository version 4, borg 2 master) repository
// (engine/archive_source.h): the merged chunk index as the stored objects, the live
// archives/<id> items as the archive list (names and times are in the archive objects), and a
// fetcher that reads one blob at its index entry (config/manifest for the manifest), verifies
// it with a BorgstoreVerifier and checks its meta type against the kind asked for, as borg
// master's repo_objs.parse(ro_type=...) does: "A" archive, "C" item_ptrs chunk, "S" item
// metadata chunk, "M" manifest. Master writes no archive TAM. After the object pass, the blobs
// the pack walk found in no index fragment (a lost fragment) count as stored too, and are read
// from their packs: borg master would report them missing until `check --repair` rebuilt the
// index, but they are intact, and the source already warns about every one of them.
//
// Thread contract: see engine/archive_source.h. It borrows `layout`, `index` and `type`
// (const, outlive it) and copies the key material (wiped when it goes).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "checker/crypto/borg2master_crypto.h"
#include "checker/crypto/borg2_key.h"
#include "checker/engine/archive_source.h"
#include "checker/io/env.h"
#include "checker/repo/borgstore/borgstore_index.h"
#include "checker/repo/borgstore/borgstore_layout.h"

namespace borgcheck::repo {

// A blob of pack `pack` (layout.packs[pack]) that no index fragment lists.
struct UnindexedBlob {
  ChunkId id{};
  size_t pack = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// `unindexed` is called once, on the main thread, after the object pass (ObjectPassDone).
std::unique_ptr<engine::ArchiveSource> MakeBorgstoreArchiveSource(const io::Env& env, const BorgstoreLayout& layout,
                                                                  const LoadedChunkIndex& index,
                                                                  const crypto::MasterKeyType* type,
                                                                  const crypto::Borg2KeyMaterial* key,
                                                                  std::function<std::vector<UnindexedBlob>()> unindexed);

}  // namespace borgcheck::repo
