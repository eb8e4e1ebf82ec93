#include "checker/run/key_loader.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

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
  std::string where;  // "config" or the key file path, for messages
};

Result<KeyText> FindKeyFile(const std::string& repo_path, const repo::RepoConfig& config) {
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
  std::string dir = KeysDirectory();
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());  // deterministic choice if two match
    for (const fs::path& p : files) {
      Result<std::string> text = repo::ReadWholeFile(p.string(), 1 << 20);
      if (!text.ok()) continue;
      if (text->rfind("BORG_KEY " + config.id_hex, 0) != 0) continue;
      Result<crypto::KeyFileContents> kf = crypto::ParseKeyFile(*text);
      if (!kf.ok()) return Status(StatusCode::kCorruptMetadata, "key file " + p.string() + ": " + kf.status().message());
      return KeyText{kf->base64, p.string()};
    }
  }
  return Status(StatusCode::kKeyNotFound,
                "No key file for repository " + repo_path + " found in " + dir +
                    ". Set BORG_KEY_FILE to the key file, or BORG_KEYS_DIR to the folder that holds it.");
}

}  // namespace

std::string KeysDirectory() {
  if (std::string d = Env("BORG_KEYS_DIR"); !d.empty()) return d;
  std::string config_dir = Env("BORG_CONFIG_DIR");
  if (config_dir.empty()) {
    std::string base = Env("BORG_BASE_DIR");
    std::string xdg = Env("XDG_CONFIG_HOME");
    if (base.empty() && !xdg.empty()) {
      config_dir = xdg + "/borg";
    } else {
      if (base.empty()) base = Env("HOME");
      config_dir = base + "/.config/borg";
    }
  }
  return config_dir + "/keys";
}

Result<crypto::KeyMaterial> LoadKey(const std::string& repo_path, const repo::RepoConfig& config,
                                    crypto::KeyMode mode) {
  KeyText key;
  if (crypto::KeyInKeyFile(mode)) {
    Result<KeyText> k = FindKeyFile(repo_path, config);
    if (!k.ok()) return k.status();
    key = std::move(k).value();
  } else {
    if (config.key_base64.empty()) {
      return Status(StatusCode::kCorruptMetadata,
                    "No key entry found in the config of repository " + repo_path +
                        " (its objects say mode " + std::string(crypto::KeyModeName(mode)) + ")");
    }
    key = {config.key_base64, "config"};
  }
  auto check_id = [&](Result<crypto::KeyMaterial> r) -> Result<crypto::KeyMaterial> {
    if (r.ok() && r->repository_id != config.id) {
      return Status(StatusCode::kKeyNotFound, "the key in " + key.where + " belongs to another repository");
    }
    return r;
  };

  Result<PassphraseSource> src = PassphraseFromEnvironment();
  if (!src.ok()) return src.status();
  if (src->passphrase) {
    Result<crypto::KeyMaterial> r = crypto::DecryptKeyBlob(key.base64, *src->passphrase);
    WipeString(*src->passphrase);
    if (!r.ok() && r.status().code() == StatusCode::kWrongPassphrase) {
      return Status(StatusCode::kWrongPassphrase,
                    "the passphrase supplied in " + src->source + " is incorrect for the key in " +
                        key.where + " (or that key blob is damaged: the two cannot be told apart). "
                        "Set the right passphrase in " + src->source + ".");
    }
    return check_id(std::move(r));
  }
  // borg tries the empty passphrase silently before prompting.
  Result<crypto::KeyMaterial> r = crypto::DecryptKeyBlob(key.base64, "");
  if (r.ok() || r.status().code() != StatusCode::kWrongPassphrase) return check_id(std::move(r));
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::optional<std::string> typed = PromptPassphrase("Enter passphrase for key " + key.where + ": ");
    if (!typed) {
      return Status(StatusCode::kInvalidArgument,
                    "the repository key is protected by a passphrase and there is no terminal to "
                    "ask for it: set BORG_PASSPHRASE, BORG_PASSCOMMAND or BORG_PASSPHRASE_FD");
    }
    r = crypto::DecryptKeyBlob(key.base64, *typed);
    WipeString(*typed);
    if (r.ok() || r.status().code() != StatusCode::kWrongPassphrase) return check_id(std::move(r));
  }
  return Status(StatusCode::kWrongPassphrase,
                "the passphrase typed is incorrect for the key in " + key.where +
                    " (or that key blob is damaged: the two cannot be told apart)");
}

}  // namespace borgcheck::run
