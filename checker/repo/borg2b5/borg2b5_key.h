// Finding and unlocking the key of a repository version 2 (borg 2.0.0b5) repository
// (spec borg2-format.md §A.2.1, §A.2.4): the repokey from `config` (repokey and authenticated
// modes), a key file through BORG_KEY_FILE or by repository id in the keys directory (keyfile
// modes; keys::FindKeyFiles), then keys::Unlock with borg's passphrase order.
//
// Keys directory: BORG_KEYS_DIR, else BORG_CONFIG_DIR/keys, else — b5's quirk — with
// BORG_BASE_DIR set, $BORG_BASE_DIR/.config/keys (no "borg" component), else
// $XDG_CONFIG_HOME/borg/keys or ~/.config/borg/keys. When BORG_BASE_DIR is set, borg 1.x's and
// master's $BORG_BASE_DIR/.config/borg/keys is searched second, so a key put where a newer borg
// looks is found too.
//
// Thread contract: main thread only, before the workers start (it may run BORG_PASSCOMMAND).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/bytes.h"

#include "checker/base/status.h"
#include "checker/crypto/borg2_key.h"
#include "checker/io/env.h"
#include "checker/repo/borg2b5/borg2b5_segments.h"

namespace borgcheck::repo {

// The type byte of a stored payload's (RepoObj bytes') data envelope, as the key-type probe
// reads it (repo/key_type_probe.h, KeyTypeRule::kManifestUnlessOutvoted: borg's rule, local and
// served sources alike); nullopt when it does not split or has no data. Borg2b5KnownTypeByte:
// whether 2.0.0b5 knows the byte.
std::optional<uint8_t> Borg2b5DataTypeByte(Bytes payload);
bool Borg2b5KnownTypeByte(uint8_t type);

// The directories searched for key files, in order (the first is where b5 writes them).
std::vector<std::string> Borg2b5KeysDirectories();

struct LoadedBorg2Key {
  crypto::Borg2KeyMaterial material;
  std::string where;  // "config" or the key file path, for messages
};

// kKeyNotFound (no key file for this repository), kKeyFileInvalid, kKeyFileMismatch,
// kRepoKeyNotFound, kWrongPassphrase, kNoPassphrase, kPasscommandFailed,
// kPasswordRetriesExceeded, kCorruptMetadata (a malformed blob, key material that does not fit
// `type`), kUnsupported (a key format we do not know).
Result<LoadedBorg2Key> LoadBorg2b5Key(const std::string& repo_path, const Borg2Config& config,
                                      const crypto::Borg2KeyType& type);

}  // namespace borgcheck::repo
