// Fuzz target: the decrypted inner map of a borg 1.x key blob (the part of
// crypto::DecryptKeyBlob behind the HMAC: msgpack parsing, version, key field types and sizes,
// chunk_seed, tam_required), reached through the public entry point.
//
// Input: the inner plaintext (normally a msgpack map). The target seals it into an authentic
// key blob (fuzz::SealKeyBlob: PBKDF2 with 1 iteration, so every run costs the same, AES-CTR,
// HMAC) and decrypts that with the same passphrase. A random mutation could never forge the
// HMAC, so this is the only way fuzzed bytes reach this code.
// Invariant: the blob always authenticates (never kWrongPassphrase, never kInternal); a failure
// is kCorruptMetadata or kUnsupported with a message; a success has a 32-byte repository id
// and enc_key, enc_hmac_key and id_key of 32 or 128 bytes, and ValidateKeyMaterial accepts it
// for exactly the modes its key lengths fit.
#include <cstdint>

#include "checker/crypto/key_blob.h"
#include "checker/crypto/object_crypto.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20) + 1) return 0;  // DecryptKeyBlob's own size bound; larger adds nothing
  const std::string blob = fuzz::SealKeyBlob(Bytes(data, size), fuzz::kFixedPassphrase, 1);
  Result<crypto::KeyMaterial> k = crypto::DecryptKeyBlob(blob, fuzz::kFixedPassphrase);
  if (!k.ok()) {
    const StatusCode c = k.status().code();
    FUZZ_CHECK(c == StatusCode::kCorruptMetadata || c == StatusCode::kUnsupported);
    FUZZ_CHECK(!k.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(size > 0);
  FUZZ_CHECK(k->repository_id.size() == 32);
  FUZZ_CHECK(k->enc_key.size() == 32);
  FUZZ_CHECK(k->enc_hmac_key.size() == 32 || k->enc_hmac_key.size() == 128);
  FUZZ_CHECK(k->id_key.size() == 32 || k->id_key.size() == 128);
  for (uint8_t sel = 0; sel < 8; ++sel) {
    const crypto::KeyMode mode = fuzz::ModeFromSelector(sel);
    const size_t want = crypto::UsesBlake2(mode) ? 128 : 32;
    const bool fits = !crypto::NeedsKey(mode) ||
                      (k->id_key.size() == want &&
                       (!crypto::IsEncrypted(mode) || k->enc_hmac_key.size() == want));
    FUZZ_CHECK(crypto::ValidateKeyMaterial(mode, &k.value()).ok() == fits);
  }
  return 0;
}
