#include "checker/run/key_loader.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "checker/repo/file.h"
#include "checker/run/passphrase_key.h"

namespace borgcheck::run {
namespace fs = std::filesystem;

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
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
    Result<KeyText> k = FindKeyFileForRepository(repo_path, config.id_hex, {KeysDirectory()});
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

  return check_id(UnlockWithPassphrase<crypto::KeyMaterial>(
      key.where, [&](const std::string& passphrase) { return crypto::DecryptKeyBlob(key.base64, passphrase); }));
}

}  // namespace borgcheck::run
