// A repository key whose repository id is not the repository's own (issue 13): the config's id
// was changed to another valid id, or the key was copied from another repository. The id is
// only a label of the key: no cipher, MAC or id hash of any generation uses it (borg 1.x:
// AES-CTR with the counter stored in each object, HMAC/BLAKE2b with the key's own keys; 2.0.0b5
// and version 4: session keys from crypt_key and the envelope's session id, AAD from the chunk
// id and header). A key stored in the repository itself (repokey, keys/ items) is therefore
// used, and the mismatch is a warning naming both ids; a key file found outside the repository
// must match (it is found by the id, and another repository's key file is refused, exit 41).
//
// Thread contract: pure functions.
#pragma once

#include <algorithm>
#include <string>

#include "checker/base/bytes.h"
#include "checker/base/status.h"

namespace borgcheck::keys {

// The identity rule of an unlocked key (borg 1.x and 2.0.0b5 key loaders): a key found at
// `where` outside the repository must name the repository's id; the repository's own key
// ("config") is used whatever its id. kKeyFileMismatch "the key in <where> belongs to repository
// <key id>, not to <path> (<config id>)" otherwise.
inline Status KeyBelongsHere(const std::string& where, Bytes key_repository_id, Bytes config_id,
                             const std::string& repo_path, const std::string& config_id_hex) {
  if (where == "config" || (key_repository_id.size() == config_id.size() &&
                            std::equal(key_repository_id.begin(), key_repository_id.end(), config_id.begin()))) {
    return Status::Ok();
  }
  return Status(StatusCode::kKeyFileMismatch, "the key in " + where + " belongs to repository " +
                                                  ToHex(key_repository_id) + ", not to " + repo_path + " (" +
                                                  config_id_hex + ")");
}

// "the repository key in <where> was made for repository <key id>, but <config name> says the
// repository id is <config id>: ...".
inline std::string RepositoryIdMismatch(const std::string& where, const std::string& key_id_hex,
                                        const std::string& config_name, const std::string& config_id_hex) {
  return "the repository key in " + where + " was made for repository " + key_id_hex + ", but " + config_name +
         " says the repository id is " + config_id_hex +
         ": the id was changed (or the key was copied from another repository). The id is only a label of the "
         "key (no cipher, MAC or id hash uses it), so the objects were verified with this key; if it is another "
         "repository's key, they fail authentication. borg's cache and security directory follow the id in " +
         config_name;
}

}  // namespace borgcheck::keys
