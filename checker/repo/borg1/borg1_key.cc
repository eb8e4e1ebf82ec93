#include "checker/repo/borg1/borg1_key.h"

#include <optional>
#include <utility>

#include "checker/crypto/object_crypto.h"
#include "checker/keys/key_files.h"
#include "checker/keys/key_identity.h"
#include "checker/keys/unlock.h"

namespace borgcheck::repo {

Result<crypto::KeyMaterial> LoadBorg1Key(const std::string& repo_path, const RepoConfig& config,
                                         crypto::KeyMode mode, std::string* used) {
  Result<keys::KeyText> located = keys::LocateKey(repo_path, config.id_hex, {keys::KeysDirectory()},
                                                  crypto::KeyInKeyFile(mode), config.key_base64,
                                                  crypto::KeyModeName(mode));
  if (!located.ok()) return located.status();
  const std::string& where = located->where;
  const std::string& base64 = located->base64;
  std::optional<crypto::KeyMaterial> material;
  keys::Candidate candidate{where, [&](const std::string& passphrase) -> Status {
                              Result<crypto::KeyMaterial> r = crypto::DecryptKeyBlob(base64, passphrase);
                              if (!r.ok()) return r.status();
                              // A repokey in this repository's config is used whatever its id;
                              // the caller reports a mismatch.
                              if (Status s = keys::KeyBelongsHere(where, AsBytes(r->repository_id), AsBytes(config.id),
                                                                  repo_path, config.id_hex);
                                  !s.ok()) {
                                return s;
                              }
                              material = std::move(r).value();
                              return Status::Ok();
                            }};
  keys::UnlockOptions options;
  options.prompt = "Enter passphrase for key " + where + ": ";
  options.repository = repo_path;
  Result<size_t> won = keys::Unlock({candidate}, options);
  if (!won.ok()) return won.status();
  if (used != nullptr) *used = where;
  return std::move(*material);
}

Result<crypto::KeyMaterial> LoadCheckedBorg1Key(const std::string& repo_path, const RepoConfig& config,
                                                crypto::KeyMode mode, std::vector<report::Finding>& findings,
                                                std::string* used) {
  Result<crypto::KeyMaterial> key = LoadBorg1Key(repo_path, config, mode, used);
  if (!key.ok()) return key.status();
  if (key->repository_id != config.id) {  // a repokey of another id (keys/key_identity.h)
    findings.push_back(report::MakeFinding(report::Severity::kWarning, report::Stage::kKey, report::Location::None(),
                                           nullptr,
                                           keys::RepositoryIdMismatch("config", ToHex(AsBytes(key->repository_id)),
                                                                      "config", config.id_hex)));
  }
  if (Status s = crypto::ValidateKeyMaterial(mode, &*key); !s.ok()) {
    return Status(StatusCode::kCorruptMetadata,
                  "the repository key does not fit mode " + std::string(crypto::KeyModeName(mode)) + ": " + s.message());
  }
  return key;
}

}  // namespace borgcheck::repo
