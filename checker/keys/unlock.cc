#include "checker/keys/unlock.h"

#include <cstdlib>

#include "checker/base/stop_signal.h"
#include "checker/keys/passphrase.h"

namespace borgcheck::keys {
namespace {

bool EnvSet(const char* name, bool empty_counts) {
  const char* v = std::getenv(name);
  return v && (empty_counts || *v);
}

std::string OfRepository(const UnlockOptions& o) { return o.repository.empty() ? "" : " of repository " + o.repository; }

// "the key in A of repository R" / "the keys in A, B of ...", and the matching "(or ...
// damaged)" clause.
std::string Keys(const std::vector<Candidate>& c, const UnlockOptions& o) {
  std::string where;
  for (const Candidate& k : c) where += (where.empty() ? "" : ", ") + k.where;
  return (c.size() == 1 ? "the key in " : "the keys in ") + where + OfRepository(o) +
         (c.size() == 1 ? " (or that key blob is damaged: the two cannot be told apart)"
                        : " (or those key blobs are damaged: the two cannot be told apart)");
}

// One passphrase against every candidate: the winner's index, kWrongPassphrase, or the last
// other error.
Result<size_t> TryAll(const std::vector<Candidate>& candidates, const std::string& passphrase) {
  Status last(StatusCode::kWrongPassphrase, "");
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (PendingStopSignal()) return Status(StatusCode::kInterrupted, "stopped by a signal while unlocking the key");
    Status s = candidates[i].unlock(passphrase);
    if (s.ok()) return i;
    if (s.code() != StatusCode::kWrongPassphrase) last = s;
  }
  return last;
}

// What to do about a passphrase from `source` that unlocks no key.
std::string WrongPassphraseAdvice(const std::string& source) {
  if (source == "BORG_PASSCOMMAND") {
    return "BORG_PASSCOMMAND ran and printed a passphrase that does not unlock it: make the command print the right "
           "one (its output, without the trailing newline, is the passphrase)";
  }
  if (source == "BORG_PASSPHRASE_FD") return "Pass the right passphrase on BORG_PASSPHRASE_FD";
  if (source.rfind("the systemd credential", 0) == 0) {
    return "Put the right passphrase in the file the unit's LoadCredential=borg-passphrase:... names";
  }
  return "Set the right passphrase in " + source;
}

}  // namespace

Result<size_t> Unlock(const std::vector<Candidate>& candidates, const UnlockOptions& options) {
  if (candidates.empty()) return Status(StatusCode::kKeyNotFound, "no key to unlock");
  if (options.one_passphrase_source &&
      EnvSet("BORG_PASSPHRASE", true) + EnvSet("BORG_PASSCOMMAND", false) + EnvSet("BORG_PASSPHRASE_FD", false) > 1) {
    return Status(StatusCode::kInvalidArgument,
                  "More than one passphrase environment variable is set (BORG_PASSPHRASE, BORG_PASSCOMMAND, "
                  "BORG_PASSPHRASE_FD): borg 2 refuses that; set only one");
  }
  auto wrong = [&](Status s) -> Status {
    const bool wrong_passphrase =
        s.code() == StatusCode::kWrongPassphrase || s.code() == StatusCode::kPasswordRetriesExceeded;
    if (wrong_passphrase && options.instead_of_wrong_passphrase) {
      return *options.instead_of_wrong_passphrase;
    }
    return s;
  };
  Result<PassphraseSource> src = PassphraseFromEnvironment();
  if (!src.ok()) return src.status();
  if (src->passphrase) {
    Result<size_t> r = TryAll(candidates, *src->passphrase);
    WipeString(*src->passphrase);
    if (r.ok() || r.status().code() != StatusCode::kWrongPassphrase) return r;
    return wrong(Status(StatusCode::kWrongPassphrase, "the passphrase supplied in " + src->source +
                                                          " is incorrect for " + Keys(candidates, options) + ". " +
                                                          WrongPassphraseAdvice(src->source) + "."));
  }
  // borg tries the empty passphrase silently before prompting.
  Result<size_t> r = TryAll(candidates, "");
  if (r.ok() || r.status().code() != StatusCode::kWrongPassphrase) return r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::optional<std::string> typed = PromptPassphrase(options.prompt);
    if (!typed) {
      if (PendingStopSignal()) {
        return Status(StatusCode::kInterrupted, "stopped by a signal while waiting for the passphrase");
      }
      return Status(StatusCode::kNoPassphrase,
                    "the key" + OfRepository(options) +
                        " is protected by a passphrase and there is no terminal to ask for it: set BORG_PASSPHRASE, "
                        "BORG_PASSCOMMAND or BORG_PASSPHRASE_FD, or (a systemd unit) pass it as the credential "
                        "borg-passphrase with LoadCredential= (docs/nightly.md)");
    }
    r = TryAll(candidates, *typed);
    WipeString(*typed);
    if (r.ok() || r.status().code() != StatusCode::kWrongPassphrase) return r;
  }
  return wrong(Status(StatusCode::kPasswordRetriesExceeded,
                      "the passphrase typed is incorrect for " + Keys(candidates, options)));
}

}  // namespace borgcheck::keys
