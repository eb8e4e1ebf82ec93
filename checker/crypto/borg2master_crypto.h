// The key types of repository version 4 (borg 2 master; spec borg2-format.md §B.3.1) and the
// per-worker object crypto of that version: opening meta and data envelopes (AEAD through
// aead.h, MAC / checksum through tagged_envelope.h) and recomputing chunk ids.
//
//   type  --encryption / --id-hash        envelope  id hash              cipher / tag
//   0x10  aes256-ocb + sha256             AEAD      HMAC-SHA256(id_key)  AES-256-OCB
//   0x20  chacha20-poly1305 + sha256      AEAD      HMAC-SHA256(id_key)  ChaCha20-Poly1305
//   0x30  aes256-ocb + blake3             AEAD      BLAKE3 keyed(id_key) AES-256-OCB
//   0x40  chacha20-poly1305 + blake3      AEAD      BLAKE3 keyed(id_key) ChaCha20-Poly1305
//   0x60  authenticated-sha256            tagged    HMAC-SHA256(id_key)  HMAC-SHA256(tag_key)
//   0x70  authenticated-blake3            tagged    BLAKE3 keyed(id_key) BLAKE3 keyed(tag_key)
//   0x80  none-sha256                     tagged    SHA-256              SHA-256
//   0x90  none-blake3                     tagged    BLAKE3               BLAKE3
//
// Each class accepts exactly its own byte. 0x30/0x40 mean BLAKE2b ids in repository versions
// 2 and 3: this table is for version 4 only. AEAD session keys are SHA-256(crypt_key ||
// session_id || "borg-session-key-" suite) (no HKDF in version 4).
//
// Thread contract: the table is constant. A MasterObjectCrypto is NOT safe for concurrent use:
// each pool worker owns one (cipher, MAC and hash contexts are made once in the constructor).
// It copies what it needs of the key, which therefore only has to live during construction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/crypto/aead.h"
#include "checker/crypto/borg2_key.h"
#include "checker/crypto/tagged_envelope.h"

namespace borgcheck::crypto {

enum class MasterEnvelope : uint8_t { kAead, kTagged };

struct MasterKeyType {
  uint8_t type = 0;
  std::string_view name;  // repo-create's -e (with --id-hash where it picks the type)
  MasterEnvelope envelope = MasterEnvelope::kTagged;
  AeadSuite suite = AeadSuite::kAes256Ocb;  // kAead only
  Borg2IdHash id_hash = Borg2IdHash::kSha256;
  bool needs_key = false;                   // 0x10-0x70: a borg key (keyfile or repokey)
};

// nullptr for a byte that is no key type of repository version 4 (0x00-0x07 legacy, 0x50
// dropped, anything else unknown).
const MasterKeyType* MasterKeyTypeFromByte(uint8_t type);

enum class MasterOpenOutcome {
  kOk,
  kBadType,    // "Invalid encryption envelope": not this repository's type byte
  kMalformed,  // too short for its header ("truncated envelope", "envelope too short")
  kAuthFailed, // the tag / MAC does not verify
};

struct MasterOpenResult {
  MasterOpenOutcome outcome = MasterOpenOutcome::kOk;
  std::string message;  // borg master's words without the "Chunk <hex>: " prefix, e.g.
                        // "Could not decrypt [Authentication / EVP_DecryptFinal_ex failed]",
                        // "envelope tag verification failed"
};

class MasterObjectCrypto {
 public:
  // crypt_key / id_key: the decrypted key's (empty for none-*). Check status() once:
  // kInvalidArgument when a keyed type gets no key or an id_key of the wrong size, kInternal
  // when OpenSSL could not make a context.
  MasterObjectCrypto(const MasterKeyType& type, Bytes crypt_key, Bytes id_key);
  ~MasterObjectCrypto();
  MasterObjectCrypto(const MasterObjectCrypto&) = delete;
  MasterObjectCrypto& operator=(const MasterObjectCrypto&) = delete;

  const Status& status() const { return status_; }
  const MasterKeyType& type() const { return type_; }

  // Opens one envelope of object `chunk_id` with the RepoObj layer's `aad` (42 bytes for object
  // version 2, empty for version 1). AEAD plaintexts land in `scratch`; tagged payloads view
  // the envelope. Requires external synchronisation.
  MasterOpenResult Open(Bytes envelope, Bytes aad, const uint8_t chunk_id[32], ByteBuffer& scratch,
                        Bytes& payload);

  // The chunk id of `plaintext`. Requires external synchronisation.
  void IdHash(Bytes plaintext, uint8_t out[32]);

 private:
  MasterKeyType type_;
  Status status_;
  std::unique_ptr<EnvelopeOpener> aead_;
  std::unique_ptr<TaggedEnvelope> tagged_;
  std::unique_ptr<Borg2IdHasher> id_hasher_;
};

}  // namespace borgcheck::crypto
