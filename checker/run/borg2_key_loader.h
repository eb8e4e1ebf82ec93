// Finding and unlocking the key of a repository version 2 (borg 2.0.0b5) repository
// (spec borg2-format.md §A.2.1, §A.2.4): the repokey from `config` (repokey and authenticated
// modes), a key file through BORG_KEY_FILE or by repository id in the keys directory (keyfile
// modes), then the passphrase in borg's order (passphrase.h: BORG_PASSPHRASE, BORG_PASSCOMMAND,
// BORG_PASSPHRASE_FD, else the empty passphrase, else a prompt).
//
// Keys directory: BORG_KEYS_DIR, else BORG_CONFIG_DIR/keys, else — b5's quirk — with
// BORG_BASE_DIR set, $BORG_BASE_DIR/.config/keys (no "borg" component), else
// $XDG_CONFIG_HOME/borg/keys or ~/.config/borg/keys. When BORG_BASE_DIR is set, borg 1.x's and
// master's $BORG_BASE_DIR/.config/borg/keys is searched second, so a key put where a newer borg
// looks is found too.
//
// Thread contract: main thread only, before the workers start (it may run BORG_PASSCOMMAND).
#pragma once

#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/crypto/borg2_key.h"
#include "checker/repo/borg2_segments.h"

namespace borgcheck::run {

// The directories searched for key files, in order (the first is where b5 writes them).
std::vector<std::string> Borg2b5KeysDirectories();

struct LoadedBorg2Key {
  crypto::Borg2KeyMaterial material;
  std::string where;  // "config" or the key file path, for messages
};

// kKeyNotFound (no key file for this repository, or BORG_KEY_FILE names another repository's),
// kWrongPassphrase, kCorruptMetadata (no key in config, a malformed key file or blob, key
// material that does not fit `type`), kUnsupported (a key format we do not know),
// kInvalidArgument (no passphrase available and no terminal to ask on, BORG_PASSCOMMAND failed).
Result<LoadedBorg2Key> LoadBorg2b5Key(const std::string& repo_path, const repo::Borg2Config& config,
                                      const crypto::Borg2KeyType& type);

}  // namespace borgcheck::run
