// borg 2 master's MAC / checksum envelope, "tagged envelope" (spec borg2-format.md §B.3.4), of
// key types 0x60 authenticated-sha256, 0x70 authenticated-blake3, 0x80 none-sha256 and
// 0x90 none-blake3:
//
//   envelope = type | 0x00 | tag (32) | payload            (payload stored as-is, not encrypted)
//   aad_full = aad || chunk_id      (aad from the RepoObj layer: 42 bytes for object version 2,
//                                    empty for version 1)
//   prefix   = type | reserved | u16be(len(aad_full)) | aad_full
//   tag      = 0x60: HMAC-SHA256(tag_key, prefix || payload)
//              0x70: BLAKE3 keyed_hash(tag_key, prefix || payload)
//              0x80: SHA-256(prefix || payload)        0x90: BLAKE3(prefix || payload)
//   tag_key  = SHA-256(crypt_key || "borg-repoobj-mac-hmac-sha256")   (0x60)
//            = SHA-256(crypt_key || "borg-repoobj-mac-blake3")        (0x70)
//
// The tag is deterministic (no nonce), so it is compared in constant time and a Seal of the same
// input gives the same bytes (the golden vectors of §B.3.6 are such seals).
//
// Thread contract: a TaggedEnvelope is NOT safe for concurrent use: each pool worker owns one
// (its HMAC / hash contexts are made and keyed once, in the constructor). It copies what it
// needs of the crypt key (the derived tag key, in SecureBytes), so the caller's key only has to
// live during construction. Spans passed in are only read during the call; `payload` results
// view the envelope.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"

namespace borgcheck::crypto {

enum class TaggedMac : uint8_t {
  kHmacSha256 = 0x60,   // authenticated-sha256
  kKeyedBlake3 = 0x70,  // authenticated-blake3
  kSha256 = 0x80,       // none-sha256
  kBlake3 = 0x90,       // none-blake3
};

inline constexpr size_t kTaggedTagSize = 32;
inline constexpr size_t kTaggedHeaderSize = 2 + kTaggedTagSize;  // type, reserved, tag

std::optional<TaggedMac> TaggedMacFromType(uint8_t type);
inline bool TaggedMacIsKeyed(TaggedMac m) { return m == TaggedMac::kHmacSha256 || m == TaggedMac::kKeyedBlake3; }

// tag_key = SHA-256(crypt_key || domain) for the keyed MACs. kInvalidArgument for the unkeyed ones.
Status DeriveTaggedKey(TaggedMac mac, Bytes crypt_key, uint8_t out[32]);

enum class TaggedOutcome {
  kOk,
  kBadType,    // the envelope's type byte is not this repository's: "Invalid encryption envelope"
  kTruncated,  // shorter than its 34-byte header: "truncated envelope"
  kBadTag,     // "envelope tag verification failed" (also a non-zero reserved byte)
};

struct TaggedResult {
  TaggedOutcome outcome = TaggedOutcome::kOk;
  std::string message;  // borg's words (without the "Chunk <hex>: " prefix)
};

class TaggedEnvelope {
 public:
  // crypt_key: the key's crypt_key (64 bytes in practice) for the keyed MACs; ignored (may be
  // empty) for the unkeyed ones. Check status() once after construction: kInvalidArgument for a
  // keyed MAC without a crypt_key, kInternal when OpenSSL could not make a context. A failed
  // TaggedEnvelope rejects every envelope (kBadTag).
  TaggedEnvelope(TaggedMac mac, Bytes crypt_key);
  ~TaggedEnvelope();
  TaggedEnvelope(const TaggedEnvelope&) = delete;
  TaggedEnvelope& operator=(const TaggedEnvelope&) = delete;

  const Status& status() const;
  TaggedMac mac() const;

  // Checks one envelope of object `chunk_id` (32 bytes; zeros for the manifest) under the
  // RepoObj layer's `aad`; on kOk `payload` views envelope[34:]. Requires external
  // synchronisation.
  TaggedResult Open(Bytes envelope, Bytes aad, const uint8_t chunk_id[32], Bytes& payload);

  // Builds the envelope of `payload` (tests and documentation: borg's encrypt()).
  // Requires external synchronisation.
  std::vector<uint8_t> Seal(Bytes payload, Bytes aad, const uint8_t chunk_id[32]);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace borgcheck::crypto
