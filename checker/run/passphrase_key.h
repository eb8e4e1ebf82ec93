// The steps the borg 1.x and borg 2.0.0b5 key loaders share: finding a key file for a
// repository (BORG_KEY_FILE, else by repository id in the keys directories) and unlocking a
// key blob with borg's passphrase order (an environment source from passphrase.h, else the
// empty passphrase silently, then up to three prompts on the terminal), with the same
// wrong-passphrase messages. (Repository version 4 tries one passphrase against several
// candidate keys with messages of its own: borg2master_key_loader.cc.)
//
// Thread contract: main thread only, before the workers start (BORG_PASSCOMMAND forks).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/run/passphrase.h"

namespace borgcheck::run {

// A key blob's text and where it came from.
struct KeyText {
  std::string base64;
  std::string where;  // "config" or the key file path, for messages
};

// The key file of repository `id_hex`: BORG_KEY_FILE when set (it must belong to this
// repository), else the first file (in name order) of the first of `dirs` that starts with
// "BORG_KEY <id_hex>". kKeyNotFound names `repo_path` and the directories searched;
// kCorruptMetadata when the matching file does not parse.
Result<KeyText> FindKeyFileForRepository(const std::string& repo_path, const std::string& id_hex,
                                         const std::vector<std::string>& dirs);

// Unlocks the key blob at `where` with `decrypt(passphrase)`, trying the passphrase sources
// in borg's order. Returns decrypt's first result that is not kWrongPassphrase, or
// kWrongPassphrase naming the source and `where`, kInvalidArgument when a prompt is needed
// and there is no terminal, or PassphraseFromEnvironment's error. Passphrases are wiped after
// use.
template <class Material>
Result<Material> UnlockWithPassphrase(const std::string& where,
                                      const std::function<Result<Material>(const std::string&)>& decrypt) {
  Result<PassphraseSource> src = PassphraseFromEnvironment();
  if (!src.ok()) return src.status();
  if (src->passphrase) {
    Result<Material> r = decrypt(*src->passphrase);
    WipeString(*src->passphrase);
    if (!r.ok() && r.status().code() == StatusCode::kWrongPassphrase) {
      return Status(StatusCode::kWrongPassphrase,
                    "the passphrase supplied in " + src->source + " is incorrect for the key in " +
                        where + " (or that key blob is damaged: the two cannot be told apart). "
                        "Set the right passphrase in " + src->source + ".");
    }
    return r;
  }
  // borg tries the empty passphrase silently before prompting.
  Result<Material> r = decrypt("");
  if (r.ok() || r.status().code() != StatusCode::kWrongPassphrase) return r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::optional<std::string> typed = PromptPassphrase("Enter passphrase for key " + where + ": ");
    if (!typed) {
      return Status(StatusCode::kInvalidArgument,
                    "the repository key is protected by a passphrase and there is no terminal to "
                    "ask for it: set BORG_PASSPHRASE, BORG_PASSCOMMAND or BORG_PASSPHRASE_FD");
    }
    r = decrypt(*typed);
    WipeString(*typed);
    if (r.ok() || r.status().code() != StatusCode::kWrongPassphrase) return r;
  }
  return Status(StatusCode::kWrongPassphrase,
                "the passphrase typed is incorrect for the key in " + where +
                    " (or that key blob is damaged: the two cannot be told apart)");
}

}  // namespace borgcheck::run
