// Finding and unlocking the key of a borg 1.x repository: repokey from `config`, key files
// through BORG_KEY_FILE or by repository id in the keys directory (BORG_KEYS_DIR, else
// <config dir>/keys with BORG_CONFIG_DIR, XDG_CONFIG_HOME, BORG_BASE_DIR and HOME honoured
// as borg does), then the passphrase (passphrase.h).
//
// Thread contract: main thread only, before the workers start (it may run BORG_PASSCOMMAND).
#pragma once

#include <string>

#include "checker/base/status.h"
#include "checker/crypto/key_blob.h"
#include "checker/crypto/key_mode.h"
#include "checker/repo/config.h"

namespace borgcheck::run {

// The directory borg searches for key files.
std::string KeysDirectory();

// kKeyNotFound (no key file for this repository), kWrongPassphrase, kCorruptMetadata,
// kInvalidArgument (no passphrase available and no terminal to ask on).
Result<crypto::KeyMaterial> LoadKey(const std::string& repo_path, const repo::RepoConfig& config,
                                    crypto::KeyMode mode);

}  // namespace borgcheck::run
