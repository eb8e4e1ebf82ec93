// Test-only: the plaintext of every object of a borgstore (repository version 4) fixture,
// decrypted with the borgstore repository code (repo/borgstore: layout, key, BorgstoreVerifier).
// The archive library itself never depends on repository code; this file is the one place
// its tests do.
//
// Thread contract: call from one thread (it sets BORG_PASSPHRASE / BORG_KEY_FILE for the key
// lookup and restores them).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "checker/archive/archive_types.h"
#include "checker/base/status.h"

namespace borgcheck::archive::testing {

struct MasterPlaintexts {
  std::map<ChunkId, std::string> objects;  // every blob of every pack, and the manifest (00...00)
  std::vector<ChunkId> failed;             // blobs that did not verify (their plaintext is absent)
  std::map<ChunkId, std::string> pack_of;  // blob id -> pack name (64 hex)
  std::vector<ChunkId> archives;           // archives/<id> entries (live), sorted
};

// `repo`: the repository directory; `key_file`: the key file for keyfile repositories, else "".
// The passphrase is the fixtures' "test".
Result<MasterPlaintexts> LoadMasterPlaintexts(const std::string& repo, const std::string& key_file);

}  // namespace borgcheck::archive::testing
