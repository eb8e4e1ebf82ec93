// Where the passphrase comes from, in borg's order (spec borg1-format.md §4.1):
// BORG_PASSPHRASE (verbatim, even empty), else BORG_PASSCOMMAND (split like a POSIX shell,
// run without a shell, stdout with trailing newlines stripped), else BORG_PASSPHRASE_FD
// (read to EOF), else the systemd credential $CREDENTIALS_DIRECTORY/borg-passphrase (read
// to EOF; borgcheck's addition for LoadCredential= units, dist/systemd/). With none of them,
// the caller tries the empty passphrase and then prompts on the terminal without echo.
//
// BORG_PASSCOMMAND forks a child: it must run before any worker thread or codec context
// exists (a fork beside live threads is how borg's zstd worker pools hung). CheckRun calls
// this during planning, before it creates the pool.
//
// Thread contract: call from the main thread only, before workers start.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checker/base/secure_bytes.h"
#include "checker/base/status.h"

namespace borgcheck::keys {

struct PassphraseSource {
  std::optional<std::string> passphrase;  // set when an environment source gave one
  std::string source;                     // "BORG_PASSPHRASE", "BORG_PASSCOMMAND", ...
};

// kPasscommandFailed when BORG_PASSCOMMAND cannot be parsed or run or exits non-zero (borg: 51);
// kInvalidArgument when BORG_PASSPHRASE_FD is not a readable fd.
Result<PassphraseSource> PassphraseFromEnvironment();

// POSIX-shell-like word splitting (quotes and backslashes, no expansion), as shlex.split.
bool SplitCommandLine(const std::string& cmd, std::vector<std::string>& words);

// Prompts on /dev/tty without echo; nullopt if there is no terminal.
std::optional<std::string> PromptPassphrase(const std::string& prompt);

// Overwrites a string's bytes before it is released.
void WipeString(std::string& s);

}  // namespace borgcheck::keys
