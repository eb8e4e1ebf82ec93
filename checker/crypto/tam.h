// Manifest TAM (tertiary authentication for metadata, spec borg1-format.md §6.4).
//
// The manifest plaintext is a msgpack map with a `tam` map {type "HKDF_HMAC_SHA512", salt 64,
// hmac 64}. Verification: copy the plaintext, overwrite the 64 hmac bytes with zeros,
// tam_key = HKDF-SHA512(IKM = id_key||enc_key||enc_hmac_key, salt, info =
// "borg-metadata-authentication-manifest", L = 64) (mode none: tam_key = salt||"manifest"),
// and compare HMAC-SHA512(tam_key, copy) with hmac in constant time.
//
// Thread contract: pure functions; safe for concurrent use (the archive pass verifies archive
// TAMs on pool workers).
#pragma once

#include <optional>
#include <string>
#include <string_view>

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

// The same with the HKDF input keying material given directly (borg 1.x: id_key || enc_key ||
// enc_hmac_key; borg 2: id_key || crypt_key); nullopt for an unkeyed mode.
TamResult VerifyManifestTamWithIkm(Bytes manifest_plaintext, std::optional<Bytes> ikm);

// The same construction for another metadata object: `context` "manifest" or "archive" (borg's
// pack_and_authenticate_metadata: HKDF info "borg-metadata-authentication-<context>", mode none
// key salt || context). Messages name the object ("archive TAM ...", "Archive authentication
// did not verify").
TamResult VerifyTamWithIkm(Bytes plaintext, std::optional<Bytes> ikm, std::string_view context);

}  // namespace borgcheck::crypto
