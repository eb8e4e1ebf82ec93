// RFC 5869 HKDF with SHA-512, through OpenSSL's EVP_KDF: borg's key derivation for the manifest
// TAM (tam.cc: one 64-byte block) and for borg 2.0.0b5's session keys (aead.cc). One helper for
// both (review w3 §3.5: it was written in each).
// Thread contract: a pure function; each call makes and frees its own OpenSSL context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "checker/base/bytes.h"

namespace borgcheck::crypto {

// Writes out_len bytes of HKDF-SHA512(ikm, salt, info) to out; false if OpenSSL fails.
bool HkdfSha512(Bytes ikm, Bytes salt, std::string_view info, uint8_t* out, size_t out_len);

}  // namespace borgcheck::crypto
