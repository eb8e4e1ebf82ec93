// Manifest TAM (tertiary authentication for metadata, spec borg1-format.md §6.4).
//
// The manifest plaintext is a msgpack map with a `tam` map {type "HKDF_HMAC_SHA512", salt 64,
// hmac 64}. Verification: copy the plaintext, overwrite the 64 hmac bytes with zeros,
// tam_key = HKDF-SHA512(IKM = id_key||enc_key||enc_hmac_key, salt, info =
// "borg-metadata-authentication-manifest", L = 64) (mode none: tam_key = salt||"manifest"),
// and compare HMAC-SHA512(tam_key, copy) with hmac in constant time.
//
// Thread contract: a pure function; called once per run for the one manifest.
#pragma once

#include <string>

#include "checker/base/bytes.h"
#include "checker/crypto/key_blob.h"
#include "checker/crypto/key_mode.h"

namespace borgcheck::crypto {

enum class TamOutcome {
  kVerified,
  kAbsent,     // no `tam` key (legacy manifest); a finding only if the key says tam_required
  kMismatch,   // HMAC did not verify: the manifest was altered
  kMalformed,  // the plaintext is not a msgpack map, or the tam map is malformed
};

struct TamResult {
  TamOutcome outcome = TamOutcome::kMalformed;
  std::string message;  // e.g. "Manifest authentication did not verify"
};

// key may be null only for KeyMode::kNone.
TamResult VerifyManifestTam(Bytes manifest_plaintext, KeyMode mode, const KeyMaterial* key);

}  // namespace borgcheck::crypto
