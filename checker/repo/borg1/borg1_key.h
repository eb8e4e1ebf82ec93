// Finding and unlocking the key of a borg 1.x repository: the repokey from `config`, or a key
// file (keys::FindKeyFiles: BORG_KEY_FILE, else by repository id in keys::KeysDirectory()), then
// keys::Unlock with borg's passphrase order.
//
// Thread contract: main thread only, before the workers start (it may run BORG_PASSCOMMAND).
#pragma once

#include <string>

#include "checker/base/status.h"
#include "checker/crypto/key_blob.h"
#include "checker/crypto/key_mode.h"
#include "checker/io/env.h"
#include "checker/repo/borg1/borg1_config.h"

namespace borgcheck::repo {

// kKeyNotFound (no key file for this repository), kKeyFileInvalid, kKeyFileMismatch,
// kRepoKeyNotFound, kWrongPassphrase, kNoPassphrase, kPasscommandFailed,
// kPasswordRetriesExceeded, kCorruptMetadata (a malformed key blob). `used` (if given) is set
// to where the key came from: "config" or the key file's path.
Result<crypto::KeyMaterial> LoadBorg1Key(const std::string& repo_path, const RepoConfig& config,
                                         crypto::KeyMode mode, std::string* used = nullptr);

}  // namespace borgcheck::repo
