// Finding and unlocking the key of a repository version 4 (borg 2 master; spec
// borg2-format.md §B.2):
//
//   candidates, in borg's order: key files first (keys::FindKeyFiles: BORG_KEY_FILE alone if
//   set, else every file of keys::KeysDirectory() whose first line is "BORG_KEY <repository
//   id>"), then the repokey items keys/<sha256> of the repository (several may exist: one per
//   passphrase). keys::Unlock tries the passphrase against every candidate; more than one
//   passphrase variable set is an error in master.
//
// Unlike borg, a repokey item whose SHA-256 differs from its name is known to be damaged: when
// no key unlocks and such an item exists, the error says so (borg says "wrong passphrase");
// when another key unlocks, the damaged item is a finding.
//
// Thread contract: main thread only, before the workers start (it may run BORG_PASSCOMMAND
// and prompt).
#pragma once

#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/crypto/borg2_key.h"
#include "checker/io/env.h"
#include "checker/report/finding.h"
#include "checker/repo/borgstore/borgstore_layout.h"

namespace borgcheck::repo {

struct MasterKey {
  crypto::Borg2KeyMaterial material;
  std::string where;  // "keys/<hex>" or the key file path, for notes
};

// kKeyNotFound (no key for this repository anywhere), kKeyFileInvalid, kKeyFileMismatch,
// kWrongPassphrase, kNoPassphrase, kPasscommandFailed, kPasswordRetriesExceeded,
// kCorruptMetadata (every candidate is malformed, or the only candidates are damaged repokey
// items), kUnsupported (a key of an algorithm master refuses), kInvalidArgument (more than one
// passphrase variable). Findings about damaged key items go to `findings`.
Result<MasterKey> LoadMasterKey(const io::Env& env, const BorgstoreLayout& layout, std::vector<report::Finding>& findings);

}  // namespace borgcheck::repo
