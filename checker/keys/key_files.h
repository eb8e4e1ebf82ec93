// Finding key files the way borg does: BORG_KEY_FILE when set, else the files of the keys
// directories whose first line is "BORG_KEY <repository id>". Every generation uses this; each
// supplies its directories (borg 1.x and master: KeysDirectory(); 2.0.0b5 adds its quirk).
//
// Thread contract: main thread only, before the workers start.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "checker/base/status.h"
#include "checker/io/env.h"

namespace borgcheck::keys {

// An environment variable, or "" when unset.
std::string EnvVar(const char* name);

// The directory borg 1.x and borg 2 master search for key files: BORG_KEYS_DIR, else
// <config dir>/keys, where the config dir is BORG_CONFIG_DIR, else $XDG_CONFIG_HOME/borg (when
// BORG_BASE_DIR is unset), else $BORG_BASE_DIR/.config/borg, else ~/.config/borg.
std::string KeysDirectory();

struct KeyFile {
  std::string where;  // the path, as BORG_KEY_FILE gave it or as found
  std::string text;   // the whole file
};

// The key files of repository `id_hex` (64 lowercase hex; `repo_path` for messages): BORG_KEY_FILE alone when it is set,
// else every regular file of `dirs`, in that order and by name within each, that starts with
// "BORG_KEY <id_hex>". Errors for BORG_KEY_FILE: kKeyNotFound (it cannot be read),
// kKeyFileInvalid (it is not a borg key file: borg's 40), kKeyFileMismatch (it belongs to
// another repository: borg's 41). No file found is an empty list, not an error. Key files are
// on this machine (read through io::Env::Default()), wherever the repository is.
Result<std::vector<KeyFile>> FindKeyFiles(const std::string& repo_path, const std::string& id_hex,
                                          const std::vector<std::string>& dirs);

// "No key file for repository PATH (id ID) found in DIRS. Set BORG_KEY_FILE ..." (kKeyNotFound).
Status NoKeyFile(const std::string& repo_path, const std::string& id_hex, const std::vector<std::string>& dirs);

// A key blob's text and where it came from ("config" or the key file's path, for messages).
struct KeyText {
  std::string where;
  std::string base64;
};

// The one key of a segment-log repository (borg 1.x, 2.0.0b5): the first key file of
// FindKeyFiles when `in_key_file`, else the repokey from the config (`repokey_base64`, empty if
// the config has none: kRepoKeyNotFound naming `mode_name`). A key file that does not parse is
// kKeyFileInvalid.
Result<KeyText> LocateKey(const std::string& repo_path, const std::string& id_hex,
                          const std::vector<std::string>& dirs, bool in_key_file, const std::string& repokey_base64,
                          std::string_view mode_name);

}  // namespace borgcheck::keys
