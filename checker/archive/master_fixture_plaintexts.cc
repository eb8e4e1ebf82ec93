#include "checker/archive/master_fixture_plaintexts.h"

#include <cstdlib>
#include <optional>
#include <utility>

#include "checker/crypto/borg2master_crypto.h"
#include "checker/io/env.h"
#include "checker/repo/borgstore/borgstore_key.h"
#include "checker/repo/borgstore/borgstore_layout.h"
#include "checker/repo/borgstore/borgstore_verifier.h"

namespace borgcheck::archive::testing {
namespace {

// Sets environment variables for the key lookup and puts the old values back.
class EnvOverride {
 public:
  EnvOverride(std::vector<std::pair<std::string, std::optional<std::string>>> vars) {
    for (auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  ~EnvOverride() {
    for (auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

Result<MasterPlaintexts> LoadMasterPlaintexts(const std::string& path, const std::string& key_file) {
  repo::LayoutOptions lo;
  lo.bypass_lock = true;
  Result<repo::BorgstoreLayout> layout = repo::ReadBorgstoreLayout(io::Env::Default(), path, lo);
  if (!layout.ok()) return layout.status();
  Result<std::string> manifest = io::Env::Default().ReadWholeFile(layout->manifest_path, repo::kMaxBlobSize);
  if (!manifest.ok()) return manifest.status();
  const repo::BlobHeader mh = repo::ReadBlobHeader(AsBytes(*manifest));
  if (manifest->size() <= repo::kObjHeaderSize + mh.meta_size) {
    return Status(StatusCode::kCorruptMetadata, "manifest too short");
  }
  // The key type: the first byte of the manifest's data envelope (borg's rule).
  const crypto::MasterKeyType* type =
      crypto::MasterKeyTypeFromByte(uint8_t((*manifest)[repo::kObjHeaderSize + mh.meta_size]));
  if (type == nullptr) return Status(StatusCode::kUnsupported, "unknown key type");

  std::optional<repo::MasterKey> key;
  if (type->needs_key) {
    EnvOverride env({{"BORG_PASSPHRASE", std::string("test")},
                     {"BORG_PASSCOMMAND", std::nullopt},
                     {"BORG_PASSPHRASE_FD", std::nullopt},
                     {"BORG_KEY_FILE", key_file.empty() ? std::nullopt : std::optional<std::string>(key_file)},
                     {"BORG_KEYS_DIR", std::string("/nonexistent")}});
    std::vector<report::Finding> findings;
    Result<repo::MasterKey> k = repo::LoadMasterKey(io::Env::Default(), *layout, findings);
    if (!k.ok()) return k.status();
    key = std::move(*k);
  }
  const Bytes crypt_key = key ? key->material.crypt_key.view() : Bytes();
  const Bytes id_key = key ? key->material.id_key.view() : Bytes();
  repo::BorgstoreVerifier verifier(true, type, crypt_key, id_key);
  if (!verifier.status().ok()) return verifier.status();

  MasterPlaintexts out;
  out.archives = layout->archives;
  const ChunkId manifest_id{};
  if (!verifier.VerifyAs(AsBytes(*manifest), manifest_id)) {
    const Bytes p = verifier.plaintext();
    out.objects[manifest_id] = std::string(reinterpret_cast<const char*>(p.data()), p.size());
  } else {
    out.failed.push_back(manifest_id);
  }
  for (const repo::PackFile& pack : layout->packs) {
    Result<std::string> bytes = io::Env::Default().ReadWholeFile(pack.path, uint64_t(1) << 30);
    if (!bytes.ok()) return bytes.status();
    const repo::PackWalk walk = repo::WalkPack(AsBytes(*bytes));
    for (const repo::WalkedBlob& b : walk.blobs) {
      const Bytes blob = AsBytes(*bytes).subspan(b.offset, b.header.blob_size());
      out.pack_of[b.header.chunk_id] = pack.name;
      if (verifier.VerifyAs(blob, b.header.chunk_id)) {
        out.failed.push_back(b.header.chunk_id);
        continue;
      }
      const Bytes p = verifier.plaintext();
      out.objects[b.header.chunk_id] = std::string(reinterpret_cast<const char*>(p.data()), p.size());
    }
  }
  return out;
}

}  // namespace borgcheck::archive::testing
