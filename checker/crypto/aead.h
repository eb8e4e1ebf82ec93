// borg 2 object envelopes: AES-256-OCB and ChaCha20-Poly1305 (through OpenSSL EVP), their
// session keys, and the unauthenticated "plain" envelope of the keyless modes
// (spec borg2-format.md §A.3.2-A.3.3, §B.3.3, Part C).
//
//   AEAD envelope = type | 0x00 | IV (u48 BE) | session_id (24) | tag (16) | ciphertext
//                   header = envelope[0:32]; nonce = 00*6 || IV (12 bytes, BE)
//   AAD           = aad_prefix || chunk_id (32) || header (32)
//                   aad_prefix: empty for borg 2.0.0b5 (repository version 2) and for object
//                   version 1 of repository version 4; "BORG_OBJ" 0x02 chunk_id slot (42 bytes)
//                   for object version 2 (borg 2 master). The RepoObj layer chooses it.
//   session key   = HKDF-SHA512(salt = session_id, ikm = crypt_key,
//                               info = "borg-session-key-" suite, L = 32)     (b5 .. b7)
//                 = SHA-256(crypt_key || session_id || "borg-session-key-" suite)  (b8 .. master)
//                   suite = "AES256_OCB" | "CHACHA20_POLY1305"; crypt_key is used whole (64 or
//                   160 bytes).
//   plain envelope = type | payload (modes none 0x02, authenticated 0x07, authenticated-blake2
//                   0x06 of repository version 2): no integrity at this layer at all.
//
// b5 and b8 repositories look identical on disk (same version, same type bytes) but derive
// session keys differently, and one repository can hold sessions of both (a b5 repository
// later written by b8). EnvelopeOpener therefore resolves the derivation per session id: the
// first envelope of a session that authenticates fixes the derivation for that session, and
// the derivations used are reported (ForEachSession).
//
// Thread contract: free functions are pure and safe for concurrent use. AeadCipher and
// EnvelopeOpener are NOT safe for concurrent use: each pool worker owns one (the OpenSSL
// cipher is fetched and the context made once, in the constructor; the session-key cache is
// per opener). An EnvelopeOpener copies the crypt_key into its own SecureBytes, so the caller's
// key material only has to live during construction. Spans passed to methods are only read
// during the call; `plaintext` results view either the envelope or the caller's scratch buffer
// and are valid until either changes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/secure_bytes.h"
#include "checker/base/status.h"

namespace borgcheck::crypto {

enum class AeadSuite : uint8_t { kAes256Ocb, kChaCha20Poly1305 };
// The suite name as it enters the session-key derivation: "AES256_OCB", "CHACHA20_POLY1305".
std::string_view AeadSuiteName(AeadSuite s);

enum class SessionKdf : uint8_t {
  kHkdfSha512,  // borg 2.0.0b1 .. b7
  kSha256,      // borg 2.0.0b8 .. master
};
// "HKDF-SHA512" / "SHA-256", for messages and summary notes.
std::string_view SessionKdfName(SessionKdf k);

inline constexpr size_t kSessionKeySize = 32;
inline constexpr size_t kSessionIdSize = 24;
inline constexpr size_t kAeadHeaderSize = 32;   // type, reserved, IV, session id
inline constexpr size_t kAeadTagOffset = 32;
inline constexpr size_t kAeadTagSize = 16;
inline constexpr size_t kAeadPayloadOffset = 48;
inline constexpr size_t kAeadNonceSize = 12;
inline constexpr size_t kChunkIdSize = 32;

// Derives the 32-byte session key. kInternal only if OpenSSL fails.
Status DeriveSessionKey(SessionKdf kdf, AeadSuite suite, Bytes crypt_key, Bytes session_id,
                        uint8_t out[kSessionKeySize]);

// The fields of an AEAD envelope, viewing the envelope bytes.
struct AeadEnvelope {
  uint8_t type = 0;
  uint8_t reserved = 0;
  uint64_t iv = 0;        // 48-bit message counter
  Bytes session_id;       // 24 bytes
  Bytes header;           // envelope[0:32], part of the AAD
  Bytes tag;              // 16 bytes
  Bytes ciphertext;       // the rest, same length as the plaintext
};
// false (and *why) when the envelope is shorter than its 48-byte header.
bool ParseAeadEnvelope(Bytes envelope, AeadEnvelope& out, std::string* why);
// The 12-byte nonce for a 48-bit IV: 6 zero bytes, then the IV big-endian.
void AeadNonce(uint64_t iv, uint8_t out[kAeadNonceSize]);

// One AEAD cipher with its OpenSSL context, made once and reused for every message.
class AeadCipher {
 public:
  explicit AeadCipher(AeadSuite suite);
  ~AeadCipher();
  AeadCipher(const AeadCipher&) = delete;
  AeadCipher& operator=(const AeadCipher&) = delete;

  // kInternal when OpenSSL could not fetch the cipher or make a context; Decrypt then fails.
  const Status& status() const { return status_; }
  AeadSuite suite() const { return suite_; }

  // Authenticates and decrypts: the AAD is the concatenation of `aad_parts` (each fed as
  // its own update, which OpenSSL treats as one AAD). Writes ciphertext.size() bytes to `out`
  // (which must hold them; may be nullptr for an empty ciphertext). false when the tag does
  // not verify (out then holds garbage the caller must ignore) or on an internal error.
  // Requires external synchronisation.
  bool Decrypt(const uint8_t key[kSessionKeySize], const uint8_t nonce[kAeadNonceSize],
               std::initializer_list<Bytes> aad_parts, Bytes tag, Bytes ciphertext,
               uint8_t* out);

 private:
  struct Impl;
  AeadSuite suite_;
  Status status_;
  std::unique_ptr<Impl> impl_;
};

enum class EnvelopeKind : uint8_t {
  kPlain,  // type | payload
  kAead,   // the AEAD envelope above
};

// What EnvelopeOpener needs to know about a repository's key class. Built by the caller
// from its type table (borg2_key.h has repository version 2's).
struct EnvelopeClass {
  EnvelopeKind kind = EnvelopeKind::kPlain;
  AeadSuite suite = AeadSuite::kAes256Ocb;     // kAead only
  std::vector<uint8_t> accepted_types;         // TYPES_ACCEPTABLE of the class
};

enum class EnvelopeOutcome {
  kOk,
  kBadType,     // the type byte is not one of the class's: "Invalid encryption envelope"
  kMalformed,   // too short for its header, or the reserved byte is not 0
  kAuthFailed,  // the tag did not verify under any allowed session-key derivation
};

struct EnvelopeResult {
  EnvelopeOutcome outcome = EnvelopeOutcome::kOk;
  std::string message;  // borg's words where it has some
};

// Which session-key derivations an opener may use. `primary` is tried first for a session
// it has not seen; `fallback_enabled` allows the other one (repository version 2, where b5
// and b8 sessions can both occur); repository version 4 only knows kSha256.
struct SessionKdfPolicy {
  SessionKdf primary = SessionKdf::kHkdfSha512;
  bool fallback_enabled = true;
};

class EnvelopeOpener {
 public:
  // crypt_key may be empty for a plain class (no key needed).
  EnvelopeOpener(EnvelopeClass cls, Bytes crypt_key, SessionKdfPolicy policy);
  ~EnvelopeOpener();
  EnvelopeOpener(const EnvelopeOpener&) = delete;
  EnvelopeOpener& operator=(const EnvelopeOpener&) = delete;

  // kInternal (OpenSSL) or kInvalidArgument (an AEAD class without a crypt_key).
  const Status& status() const { return status_; }

  // Opens one envelope of the object `chunk_id` (32 bytes; 00*32 for the manifest).
  // Plain: `plaintext` views envelope[1:]. AEAD: decrypted into `scratch`, `plaintext` views
  // it. Requires external synchronisation.
  EnvelopeResult Open(Bytes envelope, Bytes aad_prefix, const uint8_t chunk_id[kChunkIdSize],
                      ByteBuffer& scratch, Bytes& plaintext);

  // Every session this opener authenticated at least one envelope of, with the derivation
  // that worked. Order unspecified. Requires external synchronisation.
  void ForEachSession(const std::function<void(Bytes session_id, SessionKdf kdf)>& fn) const;

 private:
  struct Session {
    SessionKdf kdf;
    SecureBytes key;
  };
  // Session-key cache (a session's envelopes come in runs, so the last hit is checked first);
  // only sessions that authenticated an envelope are kept.
  const Session* FindSession(Bytes session_id);

  EnvelopeClass cls_;
  SessionKdfPolicy policy_;
  SecureBytes crypt_key_;
  Status status_;
  std::unique_ptr<AeadCipher> cipher_;
  std::map<std::array<uint8_t, kSessionIdSize>, Session> sessions_;
  const std::pair<const std::array<uint8_t, kSessionIdSize>, Session>* last_hit_ = nullptr;
};

}  // namespace borgcheck::crypto
