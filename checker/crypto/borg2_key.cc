// borg 2 key blobs, key types and id hashes (see borg2_key.h).
//
// Outline of DecryptBorg2KeyBlob:
//   1. base64 -> outer msgpack map; version, algorithm and every field's size are checked before
//      any of it drives a KDF (a damaged config must not make us allocate 4 TiB for argon2).
//   2. KEK = Argon2 (libargon2) or PBKDF2-HMAC-SHA256 (OpenSSL).
//   3. argon2: ChaCha20-Poly1305 with a zero nonce and no AAD, tag before the ciphertext;
//      sha256: AES-256-CTR then HMAC-SHA256 over the plaintext. Failure = wrong passphrase.
//   4. inner msgpack map -> Borg2KeyMaterial, every field's type and length checked.
// The KEK and the decrypted inner map live only in SecureBytes, wiped on every exit path.
#include "checker/crypto/borg2_key.h"

#include <argon2.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <climits>
#include <cstring>
#include <msgpack.hpp>

#include "checker/base/msgpack_util.h"
#include "checker/base/text_escape.h"
#include "checker/crypto/key_inner.h"
#include "checker/crypto/blake2b.h"
#include "checker/crypto/blake3.h"
#include "checker/crypto/key_blob.h"

namespace borgcheck::crypto {
namespace {

constexpr size_t kMaxBlobSize = 1 << 20;
constexpr size_t kMsgpackMaxDepth = 32;
constexpr uint64_t kMaxArgon2TimeCost = 1000;
constexpr uint64_t kMaxArgon2MemoryKib = uint64_t(4) << 20;  // 4 GiB
constexpr uint64_t kMaxArgon2Parallelism = 255;
constexpr uint64_t kMaxPbkdf2Iterations = 100'000'000;
constexpr size_t kArgon2TagSize = 16;
constexpr size_t kMinArgon2SaltSize = 8;
constexpr size_t kMaxArgon2SaltSize = 1024;
constexpr size_t kKekSize = 32;
// libargon2 needs 2 blocks (1 KiB each) per sync point per lane: 8 KiB per lane.
constexpr uint64_t kArgon2MinMemoryKibPerLane = 2 * ARGON2_SYNC_POINTS;

// Our bounds are a cost cap inside libargon2's own (validate_inputs in its core.c): a blob within
// them never makes argon2_hash fail for its parameters. The one rule that ties two parameters
// together, memory >= 8 KiB per lane, is checked separately.
static_assert(ARGON2_MIN_TIME <= 1 && kMaxArgon2TimeCost <= ARGON2_MAX_TIME);
static_assert(ARGON2_MIN_MEMORY <= kArgon2MinMemoryKibPerLane && kMaxArgon2MemoryKib <= ARGON2_MAX_MEMORY);
static_assert(ARGON2_MIN_LANES <= 1 && kMaxArgon2Parallelism <= ARGON2_MAX_LANES);
static_assert(ARGON2_MIN_THREADS <= 1 && kMaxArgon2Parallelism <= ARGON2_MAX_THREADS);
static_assert(ARGON2_MIN_SALT_LENGTH <= kMinArgon2SaltSize && kMaxArgon2SaltSize <= ARGON2_MAX_SALT_LENGTH);
static_assert(ARGON2_MIN_OUTLEN <= kKekSize && kKekSize <= ARGON2_MAX_OUTLEN);

Status Corrupt(std::string msg) { return Status(StatusCode::kCorruptMetadata, std::move(msg)); }
Status Unsupported(std::string msg) { return Status(StatusCode::kUnsupported, std::move(msg)); }

// Byte strings are referenced in place (Strings::kReference), never copied into msgpack's zone:
// in the inner map they are key material, and a zone copy would escape our wipe. borg 2 packs
// bytes as bin and text as str; legacy data may use str for bytes: AsRaw accepts both.
using msgpack_util::AsRaw;
using msgpack_util::Find;  // the last match wins, as in the Python dict
using msgpack_util::UnpackWhole;  // exactly one object spanning the input, as borg's unpackb

std::string_view AsText(Bytes b) {
  return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
}

bool AsUint(const msgpack::object* o, uint64_t& out) {
  if (o == nullptr || o->type != msgpack::type::POSITIVE_INTEGER) return false;
  out = o->via.u64;
  return true;
}

Result<Borg2KeyMaterial> ParseInner(Bytes plain, const std::string& label) {
  msgpack::object_handle oh;
  std::string err;
  if (!UnpackWhole(plain, kMsgpackMaxDepth, oh, err)) return Corrupt("decrypted key is not valid msgpack (" + err + ")");
  const msgpack::object& inner = oh.get();
  if (inner.type != msgpack::type::MAP) return Corrupt("decrypted key is not a msgpack map");
  uint64_t version = 0;
  if (!AsUint(Find(inner, "version"), version)) {
    return Corrupt("decrypted key: `version` is missing or not an integer");
  }
  if (version != 1 && version != 2) {
    return Unsupported("decrypted key: version " + std::to_string(version) +
                       " is not supported (borg writes 1 or 2)");
  }
  Borg2KeyMaterial km;
  km.key_version = int(version);
  km.label = label;
  SecureBytes repo_id;
  if (Status s = ReadKeyField(inner, "repository_id", 32, 32, repo_id); !s.ok()) return s;
  km.repository_id.assign(reinterpret_cast<const char*>(repo_id.data()), repo_id.size());
  if (version == 2) {
    if (Status s = ReadKeyField(inner, "crypt_key", 64, 160, km.crypt_key); !s.ok()) return s;
  } else {
    SecureBytes enc_key, enc_hmac_key;
    for (Status s : {ReadKeyField(inner, "enc_key", 32, 32, enc_key),
                     ReadKeyField(inner, "enc_hmac_key", 32, 128, enc_hmac_key)}) {
      if (!s.ok()) return s;
    }
    km.crypt_key = enc_key;
    km.crypt_key.Append(enc_hmac_key.view());
  }
  if (Status s = ReadKeyField(inner, "id_key", 32, 128, km.id_key); !s.ok()) return s;
  if (Status s = ReadKeyFlags(inner, km.tam_required); !s.ok()) return s;
  return km;
}

bool AesCtrZeroIv(Bytes key, Bytes in, uint8_t* out) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  const uint8_t iv[16] = {};
  int outl = 0;
  bool ok = ctx && in.size() <= size_t(INT_MAX) &&
            EVP_DecryptInit_ex(ctx, EVP_aes_256_ctr(), nullptr, key.data(), iv) == 1 &&
            EVP_DecryptUpdate(ctx, out, &outl, in.data(), int(in.size())) == 1 &&
            size_t(outl) == in.size();
  EVP_CIPHER_CTX_free(ctx);
  return ok;
}

Status OutOfRange(const char* name, const std::string& value, uint64_t min, uint64_t max,
                  const char* unit) {
  return Corrupt(std::string("key blob: ") + name + " " + value + unit + " is out of range (" +
                 std::to_string(min) + unit + ".." + std::to_string(max) + unit + ")");
}

// Reads one argon2 cost; the message names the field and the value it has.
Status ReadArgon2Cost(const msgpack::object& outer, const char* name, uint64_t min, uint64_t max,
                      const char* unit, uint64_t& out) {
  const msgpack::object* o = Find(outer, name);
  if (o == nullptr) return Corrupt(std::string("key blob: `") + name + "` is missing");
  if (o->type == msgpack::type::NEGATIVE_INTEGER) {
    return OutOfRange(name, std::to_string(o->via.i64), min, max, unit);
  }
  if (!AsUint(o, out)) return Corrupt(std::string("key blob: `") + name + "` is not an integer");
  if (out < min || out > max) return OutOfRange(name, std::to_string(out), min, max, unit);
  return Status::Ok();
}

// Everything libargon2 would refuse (and our cost cap), checked before argon2 runs, so that a
// damaged blob is kCorruptMetadata naming the parameter rather than an argon2 error code. Run on
// the parser's output and again in DecryptBorg2Key, which may be handed a hand-built blob.
Status ValidateArgon2Blob(const Borg2EncryptedKey& b) {
  const auto range = [](const char* name, uint64_t v, uint64_t min, uint64_t max, const char* unit) {
    return v >= min && v <= max ? Status::Ok() : OutOfRange(name, std::to_string(v), min, max, unit);
  };
  for (Status s : {range("argon2_time_cost", b.argon2_time_cost, 1, kMaxArgon2TimeCost, ""),
                   range("argon2_memory_cost", b.argon2_memory_cost_kib, kArgon2MinMemoryKibPerLane,
                         kMaxArgon2MemoryKib, " KiB"),
                   range("argon2_parallelism", b.argon2_parallelism, 1, kMaxArgon2Parallelism, "")}) {
    if (!s.ok()) return s;
  }
  const uint64_t min_memory = kArgon2MinMemoryKibPerLane * uint64_t(b.argon2_parallelism);
  if (b.argon2_memory_cost_kib < min_memory) {
    return Corrupt("key blob: argon2_memory_cost " + std::to_string(b.argon2_memory_cost_kib) +
                   " KiB is below libargon2's minimum of 8 KiB per lane (argon2_parallelism " +
                   std::to_string(b.argon2_parallelism) + " needs at least " +
                   std::to_string(min_memory) + " KiB)");
  }
  if (b.argon2_type != Argon2_d && b.argon2_type != Argon2_i && b.argon2_type != Argon2_id) {
    return Unsupported("key blob: unknown argon2_type " + std::to_string(b.argon2_type));
  }
  if (b.salt.size() < kMinArgon2SaltSize || b.salt.size() > kMaxArgon2SaltSize) {
    return Corrupt("key blob: argon2 salt has " + std::to_string(b.salt.size()) +
                   " bytes, out of range (8..1024)");
  }
  if (b.data.size() < kArgon2TagSize) {
    return Corrupt("key blob: `data` has " + std::to_string(b.data.size()) +
                   " bytes, shorter than its 16-byte tag");
  }
  return Status::Ok();
}

const Status kWrongPassphraseStatus(StatusCode::kWrongPassphrase,
                                    "key blob did not authenticate: wrong passphrase, or a "
                                    "damaged key blob (the two cannot be told apart)");

}  // namespace

Result<Borg2EncryptedKey> ParseBorg2KeyBlob(std::string_view base64_text,
                                            const Borg2KeyBlobOptions& options) {
  std::string raw;
  if (!Base64Decode(base64_text, raw)) return Corrupt("key blob is not valid base64");
  if (raw.empty()) return Corrupt("key blob is empty");
  if (raw.size() > kMaxBlobSize) return Corrupt("key blob is implausibly large");
  msgpack::object_handle oh;
  std::string err;
  if (!UnpackWhole(AsBytes(raw), kMsgpackMaxDepth, oh, err)) return Corrupt("key blob is not valid msgpack (" + err + ")");
  const msgpack::object& outer = oh.get();
  if (outer.type != msgpack::type::MAP) return Corrupt("key blob is not a msgpack map");
  uint64_t version = 0;
  if (!AsUint(Find(outer, "version"), version)) {
    return Corrupt("key blob: `version` is missing or not an integer");
  }
  if (version != 1) {
    return Unsupported("key blob: unsupported key format (version " + std::to_string(version) + ")");
  }
  Bytes algorithm;
  if (!AsRaw(Find(outer, "algorithm"), algorithm)) {
    return Corrupt("key blob: `algorithm` is missing or not a string");
  }
  Borg2EncryptedKey blob;
  Bytes salt, data, label;
  if (!AsRaw(Find(outer, "salt"), salt)) return Corrupt("key blob: `salt` is missing");
  if (!AsRaw(Find(outer, "data"), data) || data.empty() || data.size() > kMaxBlobSize) {
    return Corrupt("key blob: `data` is missing or empty");
  }
  if (AsRaw(Find(outer, "label"), label)) blob.label.assign(AsText(label));
  if (AsText(algorithm) == "argon2 chacha20-poly1305") {
    blob.algorithm = Borg2KeyAlgorithm::kArgon2ChaCha20Poly1305;
    uint64_t t = 0, m = 0, p = 0;
    for (Status s : {ReadArgon2Cost(outer, "argon2_time_cost", 1, kMaxArgon2TimeCost, "", t),
                     ReadArgon2Cost(outer, "argon2_memory_cost", kArgon2MinMemoryKibPerLane,
                                    kMaxArgon2MemoryKib, " KiB", m),
                     ReadArgon2Cost(outer, "argon2_parallelism", 1, kMaxArgon2Parallelism, "", p)}) {
      if (!s.ok()) return s;
    }
    Bytes type;
    if (!AsRaw(Find(outer, "argon2_type"), type)) {
      return Corrupt("key blob: `argon2_type` is missing or not a string");
    }
    if (AsText(type) == "d") blob.argon2_type = Argon2_d;
    else if (AsText(type) == "i") blob.argon2_type = Argon2_i;
    else if (AsText(type) == "id") blob.argon2_type = Argon2_id;
    else return Unsupported("key blob: unknown argon2_type '" + MessageExcerpt(AsText(type), 40) + "'");
    blob.argon2_time_cost = uint32_t(t);
    blob.argon2_memory_cost_kib = uint32_t(m);
    blob.argon2_parallelism = uint32_t(p);
    blob.salt.assign(AsText(salt));
    blob.data.assign(AsText(data));
    if (Status s = ValidateArgon2Blob(blob); !s.ok()) return s;
    return blob;
  } else if (AsText(algorithm) == "sha256") {
    if (!options.accept_pbkdf2_sha256) {
      return Unsupported("key blob: unsupported key format (legacy 'sha256' / PBKDF2 keys are not "
                         "accepted here)");
    }
    blob.algorithm = Borg2KeyAlgorithm::kPbkdf2Sha256;
    uint64_t iterations = 0;
    if (!AsUint(Find(outer, "iterations"), iterations) || iterations < 1 ||
        iterations > kMaxPbkdf2Iterations) {
      return Corrupt("key blob: `iterations` is missing or out of range");
    }
    Bytes hash;
    if (!AsRaw(Find(outer, "hash"), hash) || hash.size() != 32) {
      return Corrupt("key blob: `hash` is missing or not 32 bytes");
    }
    if (salt.size() != 32) return Corrupt("key blob: `salt` is not 32 bytes");
    blob.iterations = uint32_t(iterations);
    blob.hash.assign(AsText(hash));
  } else {
    return Unsupported("key blob: unsupported key algorithm '" + MessageExcerpt(AsText(algorithm), 40) + "'");
  }
  blob.salt.assign(AsText(salt));
  blob.data.assign(AsText(data));
  return blob;
}

Result<Borg2KeyMaterial> DecryptBorg2Key(const Borg2EncryptedKey& blob, std::string_view passphrase) {
  if (passphrase.size() > size_t(INT_MAX)) {
    return Status(StatusCode::kInvalidArgument, "passphrase is too long");
  }
  SecureBytes kek(kKekSize);
  if (blob.algorithm == Borg2KeyAlgorithm::kArgon2ChaCha20Poly1305) {
    if (Status s = ValidateArgon2Blob(blob); !s.ok()) return s;
    int rc = argon2_hash(blob.argon2_time_cost, blob.argon2_memory_cost_kib, blob.argon2_parallelism,
                         passphrase.data(), passphrase.size(), blob.salt.data(), blob.salt.size(),
                         kek.data(), kek.size(), nullptr, 0, argon2_type(blob.argon2_type),
                         ARGON2_VERSION_13);
    if (rc != ARGON2_OK) return TEST_Argon2FailureStatus(rc, blob);
    const Bytes data = AsBytes(blob.data);
    const Bytes tag = data.first(kArgon2TagSize);
    const Bytes ct = data.subspan(kArgon2TagSize);
    SecureBytes plain(ct.size());
    AeadCipher cipher(AeadSuite::kChaCha20Poly1305);
    if (!cipher.status().ok()) return cipher.status();
    const uint8_t nonce[kAeadNonceSize] = {};
    if (!cipher.Decrypt(kek.data(), nonce, {}, tag, ct, plain.data())) return kWrongPassphraseStatus;
    return ParseInner(plain.view(), blob.label);
  }
  if (PKCS5_PBKDF2_HMAC(passphrase.data(), int(passphrase.size()),
                        reinterpret_cast<const uint8_t*>(blob.salt.data()), int(blob.salt.size()),
                        int(blob.iterations), EVP_sha256(), int(kek.size()), kek.data()) != 1) {
    return Status(StatusCode::kInternal, "PBKDF2 failed in OpenSSL");
  }
  SecureBytes plain(blob.data.size());
  if (!AesCtrZeroIv(kek.view(), AsBytes(blob.data), plain.data())) {
    return Status(StatusCode::kInternal, "AES-256-CTR failed in OpenSSL");
  }
  uint8_t mac[32];
  size_t mac_len = 0;
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, kek.data(), kek.size(), plain.data(),
                plain.size(), mac, sizeof(mac), &mac_len) == nullptr ||
      mac_len != sizeof(mac)) {
    return Status(StatusCode::kInternal, "HMAC-SHA256 failed in OpenSSL");
  }
  const bool authentic = CRYPTO_memcmp(mac, blob.hash.data(), sizeof(mac)) == 0;
  OPENSSL_cleanse(mac, sizeof(mac));
  if (!authentic) return kWrongPassphraseStatus;
  return ParseInner(plain.view(), blob.label);
}

Status TEST_Argon2FailureStatus(int argon2_rc, const Borg2EncryptedKey& blob) {
  const std::string params = " (argon2_time_cost " + std::to_string(blob.argon2_time_cost) +
                             ", argon2_memory_cost " + std::to_string(blob.argon2_memory_cost_kib) +
                             " KiB, argon2_parallelism " + std::to_string(blob.argon2_parallelism) +
                             ", salt " + std::to_string(blob.salt.size()) + " bytes)";
  // Out of memory or no thread: the machine could not run a KDF the blob may rightly ask for
  // (borg writes 64 MiB); that is no statement about the blob.
  if (argon2_rc == ARGON2_MEMORY_ALLOCATION_ERROR || argon2_rc == ARGON2_THREAD_FAIL) {
    return Status(StatusCode::kInternal, std::string("argon2 could not run: ") +
                                             argon2_error_message(argon2_rc) + params);
  }
  // Anything else is libargon2 refusing the blob's parameters: damage our checks did not name.
  return Corrupt(std::string("key blob: libargon2 refuses its parameters: ") +
                 argon2_error_message(argon2_rc) + params);
}

Result<Borg2KeyMaterial> DecryptBorg2KeyBlob(std::string_view base64_text,
                                             std::string_view passphrase,
                                             const Borg2KeyBlobOptions& options) {
  Result<Borg2EncryptedKey> blob = ParseBorg2KeyBlob(base64_text, options);
  if (!blob.ok()) return blob.status();
  return DecryptBorg2Key(*blob, passphrase);
}

// ---- key types ----------------------------------------------------------------------------------

std::string_view Borg2IdHashName(Borg2IdHash h) {
  switch (h) {
    case Borg2IdHash::kSha256: return "sha256";
    case Borg2IdHash::kHmacSha256: return "hmac-sha256";
    case Borg2IdHash::kBlake2b256: return "blake2b-256";
    case Borg2IdHash::kBlake3Keyed: return "blake3-keyed";
    case Borg2IdHash::kBlake3: return "blake3";
  }
  return "?";
}

EnvelopeClass Borg2KeyType::envelope_class() const {
  EnvelopeClass c;
  c.kind = envelope;
  c.suite = suite;
  c.accepted_types.assign(accepted, accepted + num_accepted);
  return c;
}

const std::vector<Borg2KeyType>& Borg2b5KeyTypes() {
  using EK = EnvelopeKind;
  using S = AeadSuite;
  using H = Borg2IdHash;
  using L = Borg2KeyLocation;
  static const std::vector<Borg2KeyType> kTypes = {
      {0x02, "none", EK::kPlain, S::kAes256Ocb, H::kSha256, L::kNone, {0x02, 0}, 1},
      {0x06, "authenticated-blake2", EK::kPlain, S::kAes256Ocb, H::kBlake2b256, L::kRepository, {0x06, 0}, 1},
      {0x07, "authenticated", EK::kPlain, S::kAes256Ocb, H::kHmacSha256, L::kRepository, {0x07, 0}, 1},
      {0x10, "keyfile-aes-ocb", EK::kAead, S::kAes256Ocb, H::kHmacSha256, L::kKeyFile, {0x10, 0x11}, 2},
      {0x11, "repokey-aes-ocb", EK::kAead, S::kAes256Ocb, H::kHmacSha256, L::kRepository, {0x10, 0x11}, 2},
      {0x20, "keyfile-chacha20-poly1305", EK::kAead, S::kChaCha20Poly1305, H::kHmacSha256, L::kKeyFile, {0x20, 0x21}, 2},
      {0x21, "repokey-chacha20-poly1305", EK::kAead, S::kChaCha20Poly1305, H::kHmacSha256, L::kRepository, {0x20, 0x21}, 2},
      {0x30, "keyfile-blake2-aes-ocb", EK::kAead, S::kAes256Ocb, H::kBlake2b256, L::kKeyFile, {0x30, 0x31}, 2},
      {0x31, "repokey-blake2-aes-ocb", EK::kAead, S::kAes256Ocb, H::kBlake2b256, L::kRepository, {0x30, 0x31}, 2},
      {0x40, "keyfile-blake2-chacha20-poly1305", EK::kAead, S::kChaCha20Poly1305, H::kBlake2b256, L::kKeyFile, {0x40, 0x41}, 2},
      {0x41, "repokey-blake2-chacha20-poly1305", EK::kAead, S::kChaCha20Poly1305, H::kBlake2b256, L::kRepository, {0x40, 0x41}, 2},
  };
  return kTypes;
}

const Borg2KeyType* Borg2b5KeyTypeFromByte(uint8_t type) {
  for (const Borg2KeyType& t : Borg2b5KeyTypes()) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

Status ValidateBorg2KeyMaterial(const Borg2KeyType& type, const Borg2KeyMaterial* key) {
  if (!type.needs_key()) return Status::Ok();
  if (key == nullptr) return Status(StatusCode::kInvalidArgument, "no key material for a keyed mode");
  const bool blake2 = type.id_hash == Borg2IdHash::kBlake2b256;
  const size_t want_id = blake2 ? 128 : 32;
  if (key->id_key.size() != want_id) {
    return Status(StatusCode::kCorruptMetadata,
                  "key does not fit mode " + std::string(type.name) + ": id_key has " +
                      std::to_string(key->id_key.size()) + " bytes, expected " + std::to_string(want_id));
  }
  if (type.envelope == EnvelopeKind::kAead && key->crypt_key.size() != 64 && key->crypt_key.size() != 160) {
    return Status(StatusCode::kCorruptMetadata,
                  "key does not fit mode " + std::string(type.name) + ": crypt_key has " +
                      std::to_string(key->crypt_key.size()) + " bytes, expected 64 or 160");
  }
  return Status::Ok();
}

// ---- id hashes ----------------------------------------------------------------------------------

struct Borg2IdHasher::Impl {
  Borg2IdHash kind;
  Status status;
  // HMAC-SHA256, keyed once; EVP_MAC_init with a NULL key reuses it.
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* mac_ctx = nullptr;
  // SHA-256
  EVP_MD* md = nullptr;
  EVP_MD_CTX* md_ctx = nullptr;
  // BLAKE2b-256 with the id key absorbed: each message continues a copy of this state.
  Blake2b blake2_keyed;  // wiped by its destructor
  // BLAKE3
  std::optional<Blake3Hasher> blake3;

  ~Impl() {
    EVP_MAC_CTX_free(mac_ctx);
    EVP_MAC_free(mac);
    EVP_MD_CTX_free(md_ctx);
    EVP_MD_free(md);
  }
};

Borg2IdHasher::Borg2IdHasher(Borg2IdHash kind, Bytes id_key) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.kind = kind;
  auto fail = [&](std::string msg) { m.status = Status(StatusCode::kInternal, std::move(msg)); };
  switch (kind) {
    case Borg2IdHash::kSha256:
      m.md = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
      m.md_ctx = EVP_MD_CTX_new();
      if (!m.md || !m.md_ctx) fail("OpenSSL has no SHA-256");
      break;
    case Borg2IdHash::kHmacSha256: {
      if (id_key.size() != 32) {
        m.status = Status(StatusCode::kInvalidArgument, "HMAC-SHA256 id key must be 32 bytes");
        break;
      }
      m.mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
      m.mac_ctx = m.mac ? EVP_MAC_CTX_new(m.mac) : nullptr;
      OSSL_PARAM params[] = {
          OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>("SHA256"), 0),
          OSSL_PARAM_construct_end()};
      if (!m.mac_ctx || EVP_MAC_init(m.mac_ctx, id_key.data(), id_key.size(), params) != 1) {
        fail("OpenSSL HMAC-SHA256 setup failed");
      }
      break;
    }
    case Borg2IdHash::kBlake2b256:
      if (id_key.empty()) {
        m.status = Status(StatusCode::kInvalidArgument, "BLAKE2b id key is empty");
        break;
      }
      if (!m.blake2_keyed.Init(32)) {
        fail("BLAKE2b setup failed");
        break;
      }
      m.blake2_keyed.Update(id_key);
      break;
    case Borg2IdHash::kBlake3Keyed:
      if (id_key.size() != kBlake3KeyLen) {
        m.status = Status(StatusCode::kInvalidArgument, "BLAKE3 id key must be 32 bytes");
        break;
      }
      m.blake3 = Blake3Hasher::Keyed(id_key.data());
      break;
    case Borg2IdHash::kBlake3:
      m.blake3 = Blake3Hasher::Plain();
      break;
  }
}

Borg2IdHasher::~Borg2IdHasher() = default;

const Status& Borg2IdHasher::status() const { return impl_->status; }

void Borg2IdHasher::Compute(Bytes plaintext, uint8_t out[32]) {
  Impl& m = *impl_;
  bool ok = m.status.ok();
  if (ok) {
    switch (m.kind) {
      case Borg2IdHash::kSha256: {
        unsigned int n = 0;
        ok = EVP_DigestInit_ex2(m.md_ctx, m.md, nullptr) == 1 &&
             EVP_DigestUpdate(m.md_ctx, plaintext.data(), plaintext.size()) == 1 &&
             EVP_DigestFinal_ex(m.md_ctx, out, &n) == 1 && n == 32;
        break;
      }
      case Borg2IdHash::kHmacSha256: {
        size_t n = 0;
        ok = EVP_MAC_init(m.mac_ctx, nullptr, 0, nullptr) == 1 &&
             EVP_MAC_update(m.mac_ctx, plaintext.data(), plaintext.size()) == 1 &&
             EVP_MAC_final(m.mac_ctx, out, &n, 32) == 1 && n == 32;
        break;
      }
      case Borg2IdHash::kBlake2b256: {
        Blake2b s = m.blake2_keyed;  // Final and the destructor wipe the copy's key bytes
        s.Update(plaintext);
        s.Final(out);
        break;
      }
      case Borg2IdHash::kBlake3Keyed:
      case Borg2IdHash::kBlake3:
        m.blake3->Reset();
        m.blake3->Update(plaintext);
        m.blake3->Finalize(out, 32);
        break;
    }
  }
  if (!ok) std::memset(out, 0, 32);
}

Result<std::optional<LaneHash>> MakeBorg2IdLaneHash(Borg2IdHash kind, Bytes id_key) {
  switch (kind) {
    case Borg2IdHash::kSha256:
      return std::optional<LaneHash>(LaneHash::Sha256());
    case Borg2IdHash::kHmacSha256: {
      if (id_key.size() != 32) return Status(StatusCode::kInvalidArgument, "HMAC-SHA256 id key must be 32 bytes");
      Result<LaneHash> h = LaneHash::HmacSha256(id_key);
      if (!h.ok()) return h.status();
      return std::optional<LaneHash>(std::move(h).value());
    }
    case Borg2IdHash::kBlake2b256:
      if (id_key.empty()) return Status(StatusCode::kInvalidArgument, "BLAKE2b id key is empty");
      return std::optional<LaneHash>(LaneHash::Blake2b256(id_key));
    case Borg2IdHash::kBlake3Keyed:
    case Borg2IdHash::kBlake3:
      break;
  }
  return std::optional<LaneHash>();
}

std::optional<LaneHash> Borg2IdLanesOrNone(Borg2IdHash kind, Bytes id_key) {
  Result<std::optional<LaneHash>> h = MakeBorg2IdLaneHash(kind, id_key);
  if (!h.ok()) return std::nullopt;
  return std::move(h).value();
}

}  // namespace borgcheck::crypto
