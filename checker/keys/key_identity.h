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

#include <string>

namespace borgcheck::keys {

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
