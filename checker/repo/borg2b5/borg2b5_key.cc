#include "checker/repo/borg2b5/borg2b5_key.h"

#include <optional>
#include <utility>

#include <fmt/format.h>

#include "checker/crypto/key_blob.h"
#include "checker/keys/key_files.h"
#include "checker/keys/key_identity.h"
#include "checker/keys/unlock.h"
#include "checker/repo/borg2/borg2_repo_obj.h"

namespace borgcheck::repo {
std::optional<uint8_t> Borg2b5DataTypeByte(Bytes payload) {
  RepoObjEnvelopes parts;
  if (!SplitRepoObjV2(payload, parts, nullptr) || parts.data.empty()) return std::nullopt;
  return parts.data[0];
}

bool Borg2b5KnownTypeByte(uint8_t type) { return crypto::Borg2b5KeyTypeFromByte(type) != nullptr; }

std::vector<std::string> Borg2b5KeysDirectories() {
  using keys::EnvVar;
  if (std::string d = EnvVar("BORG_KEYS_DIR"); !d.empty()) return {d};
  if (std::string d = EnvVar("BORG_CONFIG_DIR"); !d.empty()) return {d + "/keys"};
  if (std::string base = EnvVar("BORG_BASE_DIR"); !base.empty()) {
    return {base + "/.config/keys", base + "/.config/borg/keys"};
  }
  if (std::string xdg = EnvVar("XDG_CONFIG_HOME"); !xdg.empty()) return {xdg + "/borg/keys"};
  return {EnvVar("HOME") + "/.config/borg/keys"};
}

Result<LoadedBorg2Key> LoadBorg2b5Key(const std::string& repo_path, const Borg2Config& config,
                                      const crypto::Borg2KeyType& type) {
  Result<keys::KeyText> located = keys::LocateKey(repo_path, config.id_hex, Borg2b5KeysDirectories(),
                                                  type.location == crypto::Borg2KeyLocation::kKeyFile,
                                                  config.key_base64, type.name);
  if (!located.ok()) return located.status();
  const std::string& where = located->where;
  const std::string& base64 = located->base64;
  // Parse once (a malformed blob is reported as such, before any passphrase is asked for).
  Result<crypto::Borg2EncryptedKey> blob = crypto::ParseBorg2KeyBlob(base64);
  if (!blob.ok()) return Status(blob.status().code(), "the key in " + where + ": " + blob.status().message());
  std::optional<crypto::Borg2KeyMaterial> material;
  keys::Candidate candidate{where, [&](const std::string& passphrase) -> Status {
                              Result<crypto::Borg2KeyMaterial> r = crypto::DecryptBorg2Key(*blob, passphrase);
                              if (!r.ok()) return r.status();
                              // A repokey in this repository's config is used whatever its id;
                              // the caller reports a mismatch.
                              if (Status s = keys::KeyBelongsHere(where, AsBytes(r->repository_id), AsBytes(config.id),
                                                                  repo_path, config.id_hex);
                                  !s.ok()) {
                                return s;
                              }
                              if (Status s = crypto::ValidateBorg2KeyMaterial(type, &*r); !s.ok()) {
                                return Status(s.code(), "the key in " + where + ": " + s.message());
                              }
                              material = std::move(r).value();
                              return Status::Ok();
                            }};
  keys::UnlockOptions options;
  options.prompt = "Enter passphrase for key " + where + ": ";
  options.repository = repo_path;
  Result<size_t> won = keys::Unlock({candidate}, options);
  if (!won.ok()) return won.status();
  return LoadedBorg2Key{std::move(*material), where};
}

}  // namespace borgcheck::repo
