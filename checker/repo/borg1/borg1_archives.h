// The archive pass's view of a borg 1.x repository (engine/archive_source.h): the live list as
// the stored objects, the manifest's `archives` map as the archive list, and a fetcher that
// reads one live entry at its indexed location, verifies it with a Borg1Verifier and hands
// over the plaintext. The archive TAM is checked as borg 1.2.5+ and 1.4 check it: a TAM that
// does not verify is always a problem, a missing one only where the key says tam_required
// (never in mode none; borg 1.2.4 itself does not check archive TAMs).
//
// Thread contract: see engine/archive_source.h. It borrows `plan` (const, outlives it) and
// copies the key material (wiped when it goes). The served one borrows the service (safe for
// concurrent use) and the id list.
#pragma once

#include <memory>
#include <vector>

#include "checker/crypto/key_blob.h"
#include "checker/crypto/key_mode.h"
#include "checker/engine/archive_source.h"
#include "checker/io/env.h"
#include "checker/io/object_service.h"
#include "checker/repo/borg1/borg1_plan.h"
#include "checker/repo/chunk_id.h"

namespace borgcheck::repo {

std::unique_ptr<engine::ArchiveSource> MakeBorg1ArchiveSource(const io::Env& env, const RepositoryPlan& plan,
                                                              crypto::KeyMode mode, const crypto::KeyMaterial* key);

// The same for a repository a server hands out by id (io/object_service.h, borg serve): the
// ids the server listed (sorted; the caller's, outliving the source) as the stored objects,
// each fetched with a get; the server checks the entry CRC, this pass everything after it.
std::unique_ptr<engine::ArchiveSource> MakeServedBorg1ArchiveSource(io::ObjectService& service,
                                                                    const std::vector<ChunkId>& sorted_ids,
                                                                    crypto::KeyMode mode, const crypto::KeyMaterial* key);

}  // namespace borgcheck::repo
