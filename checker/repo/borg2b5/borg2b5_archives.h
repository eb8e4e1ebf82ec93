// The archive pass's view of a borg 2.0.0b5 repository (engine/archive_source.h): the current
// PUT/PUT2 entries of the replayed log as the stored objects, the manifest's `archives` map as
// the archive list, and a fetcher that reads one current entry, verifies it with a
// Borg2b5Verifier and hands over the plaintext. b5 writes archive TAMs but its check never
// verifies them, so neither does this (docs/formats.md, "Archives").
//
// Thread contract: see engine/archive_source.h. It borrows `plan` and `type` (const, outlive
// it) and copies the key material (wiped when it goes). The served one borrows the service
// (safe for concurrent use) and the id list.
#pragma once

#include <memory>
#include <vector>

#include "checker/crypto/borg2_key.h"
#include "checker/engine/archive_source.h"
#include "checker/io/env.h"
#include "checker/io/object_service.h"
#include "checker/repo/borg2b5/borg2b5_segments.h"
#include "checker/repo/chunk_id.h"

namespace borgcheck::repo {

std::unique_ptr<engine::ArchiveSource> MakeBorg2b5ArchiveSource(const io::Env& env, const Borg2Plan& plan,
                                                                const crypto::Borg2KeyType* type,
                                                                const crypto::Borg2KeyMaterial* key);

// The same for a repository a server hands out by id (io/object_service.h, borg2 serve): the ids
// the server listed (sorted; the caller's, outliving the source) as the stored objects, each
// fetched with a get; the server checks the entry CRC and xxh64, this pass everything after it.
std::unique_ptr<engine::ArchiveSource> MakeServedBorg2b5ArchiveSource(io::ObjectService& service,
                                                                      const std::vector<ChunkId>& sorted_ids,
                                                                      const crypto::Borg2KeyType* type,
                                                                      const crypto::Borg2KeyMaterial* key);

}  // namespace borgcheck::repo
