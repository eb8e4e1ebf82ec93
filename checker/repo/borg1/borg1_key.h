// Finding and unlocking the key of a borg 1.x repository: the repokey from `config`, or a key
// file (keys::FindKeyFiles: BORG_KEY_FILE, else by repository id in keys::KeysDirectory()), then
// keys::Unlock with borg's passphrase order.
//
// Thread contract: main thread only, before the workers start (it may run BORG_PASSCOMMAND).
#pragma once

#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/crypto/key_blob.h"
#include "checker/crypto/key_mode.h"
#include "checker/io/env.h"
#include "checker/repo/borg1/borg1_config.h"
#include "checker/report/finding.h"

namespace borgcheck::repo {

// kKeyNotFound (no key file for this repository), kKeyFileInvalid, kKeyFileMismatch,
// kRepoKeyNotFound, kWrongPassphrase, kNoPassphrase, kPasscommandFailed,
// kPasswordRetriesExceeded, kCorruptMetadata (a malformed key blob). `used` (if given) is set
// to where the key came from: "config" or the key file's path.
Result<crypto::KeyMaterial> LoadBorg1Key(const std::string& repo_path, const RepoConfig& config,
                                         crypto::KeyMode mode, std::string* used = nullptr);

// LoadBorg1Key, then the checks every borg 1.x source makes on what it loaded: a key of another
// repository id than `config`'s is a warning added to `findings`; key material that does not fit
// `mode` is kCorruptMetadata. `used` as LoadBorg1Key's.
Result<crypto::KeyMaterial> LoadCheckedBorg1Key(const std::string& repo_path, const RepoConfig& config,
                                                crypto::KeyMode mode, std::vector<report::Finding>& findings,
                                                std::string* used);

}  // namespace borgcheck::repo
