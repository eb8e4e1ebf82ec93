// The one unlock loop of every generation: N candidate keys against borg's passphrase order.
//
//   1. an environment source (passphrase.h: BORG_PASSPHRASE, BORG_PASSCOMMAND,
//      BORG_PASSPHRASE_FD, the systemd credential), tried against every candidate; else
//   2. the empty passphrase, silently, against every candidate; then
//   3. up to three prompts on the terminal, each tried against every candidate.
// The first candidate a passphrase unlocks wins. A candidate that fails otherwise than with a
// wrong passphrase (it unlocks but belongs to another repository, its blob is malformed) does
// not stop the search; if nothing unlocks, the last such error is the result, else "wrong
// passphrase" naming the source and the keys. Passphrases are wiped after use; a stop signal
// ends the loop.
//
// Thread contract: main thread only, before the workers start (BORG_PASSCOMMAND forks and the
// prompt reads the terminal).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/status.h"

namespace borgcheck::keys {

struct Candidate {
  std::string where;  // "config", "keys/<hex>", a key file path: for messages
  // Tries one passphrase: Ok when it unlocks (the closure keeps the key material),
  // kWrongPassphrase when it does not, anything else when the key cannot be used.
  std::function<Status(const std::string& passphrase)> unlock;
};

struct UnlockOptions {
  std::string prompt;  // shown at the terminal prompt
  std::string repository;  // named in the messages (a nightly mail may cover several repositories)
  // borg 2 master refuses to run with more than one passphrase variable set.
  bool one_passphrase_source = false;
  // When no candidate unlocks, this explains it better than "wrong passphrase" (a key item
  // known to be damaged).
  std::optional<Status> instead_of_wrong_passphrase;
};

// The index of the candidate that unlocked. Errors: kWrongPassphrase (an environment
// passphrase unlocks none), kPasswordRetriesExceeded (three typed ones did not: borg's 53),
// kNoPassphrase (a prompt is needed and there is no terminal: borg's 50), kInterrupted, the
// environment source's error (kPasscommandFailed: borg's 51), kInvalidArgument (more than one
// source with one_passphrase_source), or a candidate's own error.
Result<size_t> Unlock(const std::vector<Candidate>& candidates, const UnlockOptions& options);

}  // namespace borgcheck::keys
