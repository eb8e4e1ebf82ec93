// Opening borg 1.x object envelopes and recomputing chunk ids (spec borg1-format.md §4.2-4.3).
//
//   AES modes:          obj = TYPE | MAC 32 | IV 8 (BE) | AES-256-CTR(enc_key, 00*8||IV)(C)
//                       MAC = HMAC-SHA256(enc_hmac_key, IV||ct)            (0x00 0x01 0x03)
//                           = BLAKE2b-256(enc_hmac_key(128) || IV||ct)     (0x04 0x05)
//   none/authenticated: obj = TYPE | C
//   id                = SHA-256(P) | HMAC-SHA256(id_key, P) | BLAKE2b-256(id_key(128) || P)
//
// MACs and ids are compared in constant time (CRYPTO_memcmp).
//
// Thread contract: ObjectOpener and IdHasher are NOT safe for concurrent use; each worker
// owns one of each (OpenSSL cipher/MAC contexts are made once in the constructor and reused
// for every chunk). They borrow the KeyMaterial, which must outlive them and is only read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "checker/base/bytes.h"
#include "checker/crypto/key_blob.h"
#include "checker/crypto/key_mode.h"

namespace borgcheck::crypto {

enum class OpenOutcome {
  kOk,
  kBadEnvelope,  // TYPE byte not this repository's, or object too short for its envelope
  kBadMac,       // MAC mismatch (AES modes)
};

struct OpenResult {
  OpenOutcome outcome = OpenOutcome::kOk;
  std::string message;  // borg's words: "MAC Authentication failed", "Invalid encryption envelope"
};

class ObjectOpener {
 public:
  // key may be null only for KeyMode::kNone.
  ObjectOpener(KeyMode mode, const KeyMaterial* key);
  ~ObjectOpener();
  ObjectOpener(const ObjectOpener&) = delete;
  ObjectOpener& operator=(const ObjectOpener&) = delete;

  // Checks the envelope of stored object `obj` and yields its compressed payload C in
  // `payload`: for the AES modes decrypted into `scratch` (payload then views scratch); for
  // the unencrypted modes a view into obj. The MAC is checked before decrypting.
  OpenResult Open(Bytes obj, ByteBuffer& scratch, Bytes& payload);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class IdHasher {
 public:
  IdHasher(KeyMode mode, const KeyMaterial* key);
  ~IdHasher();
  IdHasher(const IdHasher&) = delete;
  IdHasher& operator=(const IdHasher&) = delete;

  void Compute(Bytes plaintext, uint8_t out[32]);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

bool ConstantTimeEqual(Bytes a, Bytes b);

}  // namespace borgcheck::crypto
