#include "checker/run/borg2_key_loader.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "checker/crypto/key_blob.h"
#include "checker/repo/file.h"
#include "checker/run/passphrase.h"

namespace borgcheck::run {
namespace fs = std::filesystem;

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

struct KeyText {
  std::string base64;
  std::string where;
};

Result<KeyText> FindKeyFile(const std::string& repo_path, const repo::Borg2Config& config) {
  if (std::string file = Env("BORG_KEY_FILE"); !file.empty()) {
    Result<std::string> text = repo::ReadWholeFile(fs::absolute(file).string(), 1 << 20);
    if (!text.ok()) {
      return Status(StatusCode::kKeyNotFound,
                    "key file " + file + " (from BORG_KEY_FILE) cannot be read: " + text.status().message());
    }
    Result<crypto::KeyFileContents> kf = crypto::ParseKeyFile(*text);
    if (!kf.ok()) return Status(StatusCode::kCorruptMetadata, "key file " + file + ": " + kf.status().message());
    if (kf->repository_id_hex != config.id_hex) {
      return Status(StatusCode::kKeyNotFound,
                    "key file " + file + " (from BORG_KEY_FILE) belongs to repository " +
                        kf->repository_id_hex + ", not to " + repo_path + " (" + config.id_hex + ")");
    }
    return KeyText{kf->base64, file};
  }
  std::vector<std::string> dirs = Borg2b5KeysDirectories();
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());  // deterministic choice if two match
    for (const fs::path& p : files) {
      Result<std::string> text = repo::ReadWholeFile(p.string(), 1 << 20);
      if (!text.ok() || text->rfind("BORG_KEY " + config.id_hex, 0) != 0) continue;
      Result<crypto::KeyFileContents> kf = crypto::ParseKeyFile(*text);
      if (!kf.ok()) return Status(StatusCode::kCorruptMetadata, "key file " + p.string() + ": " + kf.status().message());
      return KeyText{kf->base64, p.string()};
    }
  }
  std::string searched;
  for (const std::string& d : dirs) searched += (searched.empty() ? "" : " or ") + d;
  return Status(StatusCode::kKeyNotFound,
                "No key file for repository " + repo_path + " found in " + searched +
                    ". Set BORG_KEY_FILE to the key file, or BORG_KEYS_DIR to the folder that holds it.");
}

}  // namespace

std::vector<std::string> Borg2b5KeysDirectories() {
  if (std::string d = Env("BORG_KEYS_DIR"); !d.empty()) return {d};
  if (std::string d = Env("BORG_CONFIG_DIR"); !d.empty()) return {d + "/keys"};
  if (std::string base = Env("BORG_BASE_DIR"); !base.empty()) {
    return {base + "/.config/keys", base + "/.config/borg/keys"};
  }
  if (std::string xdg = Env("XDG_CONFIG_HOME"); !xdg.empty()) return {xdg + "/borg/keys"};
  return {Env("HOME") + "/.config/borg/keys"};
}

Result<LoadedBorg2Key> LoadBorg2b5Key(const std::string& repo_path, const repo::Borg2Config& config,
                                      const crypto::Borg2KeyType& type) {
  KeyText key;
  if (type.location == crypto::Borg2KeyLocation::kKeyFile) {
    Result<KeyText> k = FindKeyFile(repo_path, config);
    if (!k.ok()) return k.status();
    key = std::move(k).value();
  } else {
    if (config.key_base64.empty()) {
      return Status(StatusCode::kCorruptMetadata,
                    "No key entry found in the config of repository " + repo_path +
                        " (its objects say mode " + std::string(type.name) + ")");
    }
    key = {config.key_base64, "config"};
  }
  // Parse once (a malformed blob is reported as such, before any passphrase is asked for).
  Result<crypto::Borg2EncryptedKey> blob = crypto::ParseBorg2KeyBlob(key.base64);
  if (!blob.ok()) {
    return Status(blob.status().code(), "the key in " + key.where + ": " + blob.status().message());
  }
  auto finish = [&](Result<crypto::Borg2KeyMaterial> r) -> Result<LoadedBorg2Key> {
    if (!r.ok()) return r.status();
    if (r->repository_id != config.id) {
      return Status(StatusCode::kKeyNotFound, "the key in " + key.where + " belongs to another repository");
    }
    if (Status s = crypto::ValidateBorg2KeyMaterial(type, &*r); !s.ok()) {
      return Status(s.code(), "the key in " + key.where + ": " + s.message());
    }
    return LoadedBorg2Key{std::move(r).value(), key.where};
  };

  Result<PassphraseSource> src = PassphraseFromEnvironment();
  if (!src.ok()) return src.status();
  if (src->passphrase) {
    Result<crypto::Borg2KeyMaterial> r = crypto::DecryptBorg2Key(*blob, *src->passphrase);
    WipeString(*src->passphrase);
    if (!r.ok() && r.status().code() == StatusCode::kWrongPassphrase) {
      return Status(StatusCode::kWrongPassphrase,
                    "the passphrase supplied in " + src->source + " is incorrect for the key in " +
                        key.where + " (or that key blob is damaged: the two cannot be told apart). "
                        "Set the right passphrase in " + src->source + ".");
    }
    return finish(std::move(r));
  }
  // borg tries the empty passphrase silently before prompting.
  Result<crypto::Borg2KeyMaterial> r = crypto::DecryptBorg2Key(*blob, "");
  if (r.ok() || r.status().code() != StatusCode::kWrongPassphrase) return finish(std::move(r));
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::optional<std::string> typed = PromptPassphrase("Enter passphrase for key " + key.where + ": ");
    if (!typed) {
      return Status(StatusCode::kInvalidArgument,
                    "the repository key is protected by a passphrase and there is no terminal to "
                    "ask for it: set BORG_PASSPHRASE, BORG_PASSCOMMAND or BORG_PASSPHRASE_FD");
    }
    r = crypto::DecryptBorg2Key(*blob, *typed);
    WipeString(*typed);
    if (r.ok() || r.status().code() != StatusCode::kWrongPassphrase) return finish(std::move(r));
  }
  return Status(StatusCode::kWrongPassphrase,
                "the passphrase typed is incorrect for the key in " + key.where +
                    " (or that key blob is damaged: the two cannot be told apart)");
}

}  // namespace borgcheck::run
