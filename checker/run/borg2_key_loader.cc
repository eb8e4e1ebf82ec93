#include "checker/run/borg2_key_loader.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "checker/crypto/key_blob.h"
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
    Result<KeyText> k = FindKeyFileForRepository(repo_path, config.id_hex, Borg2b5KeysDirectories());
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

  return finish(UnlockWithPassphrase<crypto::Borg2KeyMaterial>(
      key.where, [&](const std::string& passphrase) { return crypto::DecryptBorg2Key(*blob, passphrase); }));
}

}  // namespace borgcheck::run
