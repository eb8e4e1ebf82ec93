// borg 2 keys: the encrypted key blob, the decrypted key material, repository version 2's
// key types, and the chunk-id hashes (spec borg2-format.md §A.2, §A.3, §B.2, §B.3.2).
//
//   blob   = base64 -> msgpack {version 1, algorithm, salt, data, argon2_* | iterations, hash,
//                               [label]}
//     "argon2 chacha20-poly1305" (every borg 2 key):
//            KEK = Argon2(type argon2_type, version 0x13, passphrase, salt, t, m KiB, p, 32 bytes)
//            inner = ChaCha20-Poly1305(KEK, nonce 00*12, no AAD), data = tag(16) || ciphertext
//     "sha256" (borg 1.x keys, readable by 2.0.0b5 but not by master):
//            KEK = PBKDF2-HMAC-SHA256(passphrase, salt, iterations, 32)
//            inner = AES-256-CTR(KEK, 00*16)(data); HMAC-SHA256(KEK, inner) == hash
//   inner  = msgpack {version 2, repository_id, crypt_key, id_key, chunk_seed, [tam_required]}
//            or the borg 1.x layout {version 1, enc_key, enc_hmac_key, ...}: crypt_key is then
//            enc_key || enc_hmac_key.
//   chunk id = SHA-256(P) | HMAC-SHA256(id_key, P) | BLAKE2b-256(id_key(128) || P) (unkeyed
//            BLAKE2b over the concatenation, not BLAKE2b's keyed mode) | BLAKE3 keyed(id_key, P)
//            | BLAKE3(P)
//
// Key types are a per-repository-version table: 0x30/0x40 mean BLAKE2b ids with AES-OCB /
// ChaCha20-Poly1305 in repository version 2 but BLAKE3 ids in version 4. This header has
// version 2's table (Borg2b5KeyTypeFromByte); a version-4 table belongs beside its reader.
//
// Thread contract: free functions are pure and safe for concurrent use. A Borg2KeyMaterial is
// built once, before the workers start, and only read afterwards; its secrets are wiped when it
// is destroyed. A Borg2IdHasher is NOT safe for concurrent use: each worker owns one (its
// contexts are keyed once in the constructor); it copies what it needs of the id key.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/secure_bytes.h"
#include "checker/base/status.h"
#include "checker/crypto/hash_pipeline.h"
#include "checker/crypto/aead.h"

namespace borgcheck::crypto {

// ---- the encrypted key blob -------------------------------------------------------------------

enum class Borg2KeyAlgorithm { kArgon2ChaCha20Poly1305, kPbkdf2Sha256 };

// The outer map, validated (every field present with a plausible size) but not decrypted, so a
// caller can try several passphrases or several keys without parsing again.
struct Borg2EncryptedKey {
  Borg2KeyAlgorithm algorithm = Borg2KeyAlgorithm::kArgon2ChaCha20Poly1305;
  std::string salt;           // 16 bytes (argon2) / 32 bytes (sha256)
  std::string data;           // argon2: tag(16) || ciphertext; sha256: ciphertext
  // argon2 only
  uint32_t argon2_time_cost = 0;
  uint32_t argon2_memory_cost_kib = 0;
  uint32_t argon2_parallelism = 0;
  int argon2_type = 2;        // 0 = d, 1 = i, 2 = id (libargon2's argon2_type values)
  // sha256 only
  uint32_t iterations = 0;
  std::string hash;           // 32 bytes
  std::string label;          // master's optional key label; empty if none
};

struct Borg2KeyBlobOptions {
  // borg 2.0.0b5 reads borg 1.x "sha256" key blobs; borg master refuses them.
  bool accept_pbkdf2_sha256 = true;
};

// kCorruptMetadata: not base64, not a msgpack map, a field missing or out of range, with a message
// naming the field and its value. An argon2 blob parses only if libargon2 would accept its
// parameters (its validate_inputs) and they are within our cost cap: 1 <= t <= 1000;
// 8 KiB <= m <= 4 GiB and m >= 8 KiB per lane (2 blocks per sync point, ARGON2_MIN_MEMORY per
// lane); 1 <= p <= 255 (p lanes and p threads); salt 8..1024 bytes; `data` at least its 16-byte tag.
// PBKDF2 iterations 1..100,000,000, salt and hash 32 bytes.
// kUnsupported: version != 1, an unknown algorithm or argon2 type, or "sha256" when not accepted.
Result<Borg2EncryptedKey> ParseBorg2KeyBlob(std::string_view base64_text,
                                            const Borg2KeyBlobOptions& options = {});

// ---- the decrypted key ------------------------------------------------------------------------

struct Borg2KeyMaterial {
  SecureBytes crypt_key;       // 64 bytes, or 160 for BLAKE2b-id keys (32 || 64 || 64 zero bytes)
  SecureBytes id_key;          // 32 bytes, or 128 for BLAKE2b-id keys (64 || 64 zero bytes)
  std::string repository_id;   // 32 raw bytes
  int key_version = 2;         // inner map version: 2, or 1 (borg 1.x layout)
  bool tam_required = false;   // absent in master keys
  std::string label;           // copied from the blob
};

// Decrypts a parsed blob with `passphrase` (UTF-8 bytes as given). kWrongPassphrase when the
// blob does not authenticate (a wrong passphrase or a damaged blob: both look alike);
// kCorruptMetadata when it authenticates but the inner map is malformed, or when the argon2
// parameters are out of the parser's bounds (checked again here, for blobs not made by
// ParseBorg2KeyBlob), or libargon2 refuses them anyway (libargon2's error text and the
// parameters); kInternal only when the machine cannot run the KDF (argon2 out of memory or
// threads, an OpenSSL failure): that says nothing about the blob.
Result<Borg2KeyMaterial> DecryptBorg2Key(const Borg2EncryptedKey& blob, std::string_view passphrase);

// The status DecryptBorg2Key returns when argon2_hash returns `argon2_rc` (!= ARGON2_OK) for
// `blob`; exposed so that tests can reach error codes the parser's bounds make unreachable.
Status TEST_Argon2FailureStatus(int argon2_rc, const Borg2EncryptedKey& blob);

// ParseBorg2KeyBlob + DecryptBorg2Key.
Result<Borg2KeyMaterial> DecryptBorg2KeyBlob(std::string_view base64_text,
                                             std::string_view passphrase,
                                             const Borg2KeyBlobOptions& options = {});

// ---- key types of repository version 2 (borg 2.0.0b1 .. b9) -----------------------------------

enum class Borg2IdHash : uint8_t {
  kSha256,       // none
  kHmacSha256,   // HMAC-SHA256(id_key(32), P)
  kBlake2b256,   // BLAKE2b-256(id_key(128) || P), unkeyed
  kBlake3Keyed,  // BLAKE3 keyed_hash(id_key(32), P)   (repository version 4)
  kBlake3,       // BLAKE3 hash(P)                     (repository version 4)
};
std::string_view Borg2IdHashName(Borg2IdHash h);

enum class Borg2KeyLocation : uint8_t { kNone, kRepository, kKeyFile };

struct Borg2KeyType {
  uint8_t type = 0;
  std::string_view name;             // borg2 rcreate's --encryption name
  EnvelopeKind envelope = EnvelopeKind::kPlain;
  AeadSuite suite = AeadSuite::kAes256Ocb;  // kAead only
  Borg2IdHash id_hash = Borg2IdHash::kSha256;
  Borg2KeyLocation location = Borg2KeyLocation::kNone;
  uint8_t accepted[2] = {0, 0};      // TYPES_ACCEPTABLE (keyfile and repokey share a class)
  uint8_t num_accepted = 1;

  bool needs_key() const { return location != Borg2KeyLocation::kNone; }
  // The class for EnvelopeOpener.
  EnvelopeClass envelope_class() const;
};

// Repository version 2's table (spec §A.3.1): 0x02 none, 0x06 authenticated-blake2,
// 0x07 authenticated, 0x10/0x11 keyfile/repokey-aes-ocb, 0x20/0x21 …-chacha20-poly1305,
// 0x30/0x31 …-blake2-aes-ocb, 0x40/0x41 …-blake2-chacha20-poly1305. nullptr for anything else
// (including borg 1.x's AES-CTR bytes 0x00/0x01/0x03/0x04/0x05, which b5 repositories never
// contain).
const Borg2KeyType* Borg2b5KeyTypeFromByte(uint8_t type);
// Every row of that table, in type-byte order.
const std::vector<Borg2KeyType>& Borg2b5KeyTypes();

// kCorruptMetadata when the key material's sizes do not fit `type` (crypt_key 64 / 160,
// id_key 32 / 128 for BLAKE2b ids); Ok for keyless types.
Status ValidateBorg2KeyMaterial(const Borg2KeyType& type, const Borg2KeyMaterial* key);

// ---- chunk-id hashes --------------------------------------------------------------------------

class Borg2IdHasher {
 public:
  // id_key: 32 bytes (HMAC, BLAKE3 keyed), >= 1 byte (BLAKE2b: the whole key is the prefix, 128
  // in practice), ignored for the unkeyed hashes. Check status() once after construction; a
  // failed hasher writes 32 zero bytes, which no real id equals by chance.
  Borg2IdHasher(Borg2IdHash kind, Bytes id_key);
  ~Borg2IdHasher();
  Borg2IdHasher(const Borg2IdHasher&) = delete;
  Borg2IdHasher& operator=(const Borg2IdHasher&) = delete;

  const Status& status() const;
  // Requires external synchronisation.
  void Compute(Bytes plaintext, uint8_t out[32]);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The id hash as hash lanes compute it (hash_pipeline.h), made once per run and shared by every
// worker's verifier: SHA-256, HMAC-SHA256 under id_key or BLAKE2b-256(id_key || m); nullopt for
// the BLAKE3 ids, which have no lanes (Borg2IdHasher computes them). Borg2IdHasher's key checks
// (kInvalidArgument), or kInternal from OpenSSL.
Result<std::optional<LaneHash>> MakeBorg2IdLaneHash(Borg2IdHash kind, Bytes id_key);
// A run's id lanes as every borg 2 source keeps them: made at the end of a successful LoadKey
// (the main thread, before any verifier exists), then const. None for the BLAKE3 ids and where
// MakeBorg2IdLaneHash refuses: each object is then hashed alone, as without lanes.
std::optional<LaneHash> Borg2IdLanesOrNone(Borg2IdHash kind, Bytes id_key);

}  // namespace borgcheck::crypto
