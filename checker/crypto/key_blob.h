// borg 1.x key blobs (spec borg1-format.md §4.1): the base64 text kept in `config` (repokey
// and authenticated modes) or in a key file (keyfile modes), decrypted with the passphrase.
//
//   blob  = base64 -> msgpack {version 1, algorithm "sha256", iterations, salt, hash, data}
//   KEK   = PBKDF2-HMAC-SHA256(passphrase, salt, iterations, 32)
//   inner = AES-256-CTR(KEK, counter 0)(data); HMAC-SHA256(KEK, inner) must equal hash
//   inner = msgpack {version, repository_id, enc_key, enc_hmac_key, id_key, chunk_seed, ...}
//
// Thread contract: free functions, no shared state. A KeyMaterial is built once before the
// workers start and is only read afterwards (const after load); its bytes are wiped when it
// is destroyed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "checker/base/secure_bytes.h"
#include "checker/base/status.h"

namespace borgcheck::crypto {

struct KeyMaterial {
  SecureBytes enc_key;       // 32 bytes, AES-256 key for objects
  SecureBytes enc_hmac_key;  // 32 (HMAC modes) or 128 (BLAKE2b modes) bytes
  SecureBytes id_key;        // 32 or 128 bytes
  std::string repository_id; // 32 raw bytes, must equal config `id`
  bool tam_required = false;
};

// Status codes: kCorruptMetadata (not base64 / not the expected msgpack), kUnsupported (version
// or algorithm we do not know), kWrongPassphrase (HMAC over the decrypted blob did not match:
// a wrong passphrase, or a damaged key blob; the two cannot be told apart).
Result<KeyMaterial> DecryptKeyBlob(std::string_view base64_text, std::string_view passphrase);

// A borg key file: first line `BORG_KEY <64 hex repository id>`, then base64 lines.
struct KeyFileContents {
  std::string repository_id_hex;  // lowercase, 64 chars
  std::string base64;             // all following lines joined, whitespace removed
};
// kCorruptMetadata unless it passes borg 1.4's sanity checks: >= 2 lines, a header of exactly
// `BORG_KEY ` + 64 hex chars, a body that is base64 of >= 20 bytes.
Result<KeyFileContents> ParseKeyFile(std::string_view text);

// Base64 decode ignoring whitespace; false on any other non-alphabet byte.
bool Base64Decode(std::string_view text, std::string& out);

}  // namespace borgcheck::crypto
