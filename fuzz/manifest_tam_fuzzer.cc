// Fuzz target: the manifest TAM (crypto::VerifyManifestTam): msgpack parsing of the manifest,
// the `tam` map, locating the hmac bytes, HKDF and HMAC-SHA512, for every key mode with the
// fixed test key.
//
// Input: selector byte (mode = selector % 8) | the decrypted, decompressed manifest plaintext.
// The seeds (fuzz/make-corpus) are the fixtures' manifests re-signed with the fixed key.
// Invariant: the verdict is deterministic; every verdict but kVerified says why; and a
// manifest that verified no longer verifies once any one of its bytes is changed (checked for
// the first, middle and last byte).
#include <cstdint>
#include <string>

#include "checker/crypto/tam.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using crypto::TamOutcome;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const crypto::KeyMode mode = fuzz::ModeFromSelector(data[0]);
  const crypto::KeyMaterial* key = crypto::NeedsKey(mode) ? &fuzz::FixedKey(mode) : nullptr;
  const Bytes manifest(data + 1, size - 1);

  const crypto::TamResult r = crypto::VerifyManifestTam(manifest, mode, key);
  const crypto::TamResult again = crypto::VerifyManifestTam(manifest, mode, key);
  FUZZ_CHECK(r.outcome == again.outcome && r.message == again.message);
  if (r.outcome != TamOutcome::kVerified) {
    FUZZ_CHECK(!r.message.empty());
    return 0;
  }
  std::string changed(reinterpret_cast<const char*>(manifest.data()), manifest.size());
  for (size_t at : {size_t{0}, changed.size() / 2, changed.size() - 1}) {
    changed[at] ^= 0x01;
    FUZZ_CHECK(crypto::VerifyManifestTam(AsBytes(changed), mode, key).outcome !=
               TamOutcome::kVerified);
    changed[at] ^= 0x01;
  }
  return 0;
}
