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
#include <optional>
#include <string>

#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/crypto/hash_pipeline.h"
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

// Checks that `key` has the keys `mode` uses, with their lengths: enc_key 32 and enc_hmac_key
// 32 (HMAC) / 128 (BLAKE2b) for the AES modes, id_key 32 / 128 for every keyed mode. Mode none
// needs no key (key may be null). kInvalidArgument for a missing key, kCorruptMetadata for a
// key that does not fit the mode. A KeyMaterial from DecryptKeyBlob can still fail this when
// the repository's TYPE byte names another mode than the key was made for.
Status ValidateKeyMaterial(KeyMode mode, const KeyMaterial* key);

class ObjectOpener {
 public:
  // key may be null only for KeyMode::kNone. Construction does not fail by exception: check
  // status() once afterwards (it is ValidateKeyMaterial's verdict, or kInternal if OpenSSL
  // could not make a context). Open() on a failed opener returns kBadEnvelope, "internal error".
  ObjectOpener(KeyMode mode, const KeyMaterial* key);
  ~ObjectOpener();
  ObjectOpener(const ObjectOpener&) = delete;
  ObjectOpener& operator=(const ObjectOpener&) = delete;

  // Checks the envelope of stored object `obj` and yields its compressed payload C in
  // `payload`: for the AES modes decrypted into `scratch` (payload then views scratch); for
  // the unencrypted modes a view into obj. The MAC is checked before decrypting.
  // Requires external synchronisation (one opener per worker).
  OpenResult Open(Bytes obj, ByteBuffer& scratch, Bytes& payload);

  // Open without the MAC, for hash lanes (hash_pipeline.h), which hash the MAC of one object
  // beside the id of another: Open's envelope checks, then for the AES modes the payload
  // decrypted into `scratch` before the MAC is known (AES-CTR: decrypting unauthenticated bytes
  // reveals nothing and the decompressors take any input), with `mac_message` (IV || ciphertext)
  // and `stored_mac` naming what the caller must check with MacMatches before it trusts the
  // payload or reports anything after the MAC stage. Unencrypted modes: the payload views obj,
  // both spans are empty. Requires external synchronisation.
  OpenResult OpenDeferringMac(Bytes obj, ByteBuffer& scratch, Bytes& payload, Bytes& mac_message,
                              Bytes& stored_mac);

  const Status& status() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class IdHasher {
 public:
  // Same construction contract as ObjectOpener: check status() once; a failed hasher writes
  // 32 zero bytes, which no real id equals by chance.
  IdHasher(KeyMode mode, const KeyMaterial* key);
  ~IdHasher();
  IdHasher(const IdHasher&) = delete;
  IdHasher& operator=(const IdHasher&) = delete;

  // Requires external synchronisation (one hasher per worker).
  void Compute(Bytes plaintext, uint8_t out[32]);

  const Status& status() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Constant-time in the contents; different lengths compare unequal at once (lengths are public).
bool ConstantTimeEqual(Bytes a, Bytes b);

// Whether a MAC computed over OpenDeferringMac's mac_message equals its stored_mac (constant
// time; in the fuzz build, BORGCHECK_FUZZING_UNSAFE_SKIP_AUTH, always true, as in Open).
bool MacMatches(const uint8_t computed[32], Bytes stored_mac);

// The hash functions of a borg 1.x key as hash lanes compute them: made once per run from the
// loaded key and shared, const, by every worker's verifier. `mac`: the AES modes' MAC
// (HMAC-SHA256 under enc_hmac_key, or BLAKE2b-256(enc_hmac_key || m)); `id`: SHA-256 (none),
// HMAC-SHA256 under id_key, or BLAKE2b-256(id_key || m). ValidateKeyMaterial's verdict, or
// kInternal from OpenSSL.
struct Borg1LaneHashes {
  std::optional<LaneHash> mac;
  std::optional<LaneHash> id;
};
Result<Borg1LaneHashes> MakeBorg1LaneHashes(KeyMode mode, const KeyMaterial* key);
// A run's lanes as every borg 1.x source keeps them: made at the end of a successful LoadKey
// (the main thread, before any verifier exists), then const. None where MakeBorg1LaneHashes
// refuses: each object is then hashed alone, as without lanes (and a verifier given that key
// refuses it too).
std::optional<Borg1LaneHashes> Borg1LanesOrNone(KeyMode mode, const KeyMaterial* key);

}  // namespace borgcheck::crypto
