// Object envelopes and id hashes (spec borg1-format.md §4.2-4.3).
//
// Everything costly is done once per worker, in the constructors: algorithms are fetched
// (EVP_*_fetch), HMAC contexts are keyed, the AES context gets its key, and for the BLAKE2b
// modes the 128-byte key prefix is absorbed into a saved BLAKE2b state. Per object only the
// MAC is re-initialised (EVP_MAC_init with a NULL key keeps the key in OpenSSL 3; a test
// checks this against fresh contexts), the saved BLAKE2b state is copied, and the AES IV set.
// BLAKE2b is borgcheck's own (blake2b.h: libb2's dispatched code is ~2x slower here).
#include "checker/crypto/object_crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "checker/crypto/blake2b.h"

namespace borgcheck::crypto {
namespace {

constexpr size_t kMacSize = 32;
constexpr size_t kIvSize = 8;
constexpr size_t kAesHeaderSize = 1 + kMacSize + kIvSize;  // TYPE | MAC | IV
constexpr size_t kBlake2KeySize = 128;

// HMAC over one message, keyed once.
class Hmac {
 public:
  Hmac() = default;
  Hmac(const Hmac&) = delete;
  Hmac& operator=(const Hmac&) = delete;
  ~Hmac() {
    EVP_MAC_CTX_free(ctx_);
    EVP_MAC_free(mac_);
  }

  bool Init(const char* digest, Bytes key) {
    mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    if (mac_ == nullptr) return false;
    ctx_ = EVP_MAC_CTX_new(mac_);
    if (ctx_ == nullptr) return false;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>(digest), 0),
        OSSL_PARAM_construct_end()};
    return EVP_MAC_init(ctx_, key.data(), key.size(), params) == 1;
  }

  // out must hold EVP_MAC_CTX_get_mac_size() bytes (32 for SHA-256).
  bool Compute(Bytes msg, uint8_t* out, size_t out_size) {
    size_t n = 0;
    return EVP_MAC_init(ctx_, nullptr, 0, nullptr) == 1 &&  // reuses the key set in Init
           EVP_MAC_update(ctx_, msg.data(), msg.size()) == 1 &&
           EVP_MAC_final(ctx_, out, &n, out_size) == 1 && n == out_size;
  }

 private:
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* ctx_ = nullptr;
};

// borg's BLAKE2b-256(key(128) || data): plain unkeyed BLAKE2b over the concatenation, not
// BLAKE2b's keyed mode. The key is absorbed once; each message continues a copy of that state.
class PrefixedBlake2b {
 public:
  PrefixedBlake2b() = default;
  PrefixedBlake2b(const PrefixedBlake2b&) = delete;
  PrefixedBlake2b& operator=(const PrefixedBlake2b&) = delete;

  bool Init(Bytes key) {
    if (!keyed_.Init(kMacSize)) return false;
    keyed_.Update(key);
    return true;
  }

  // Blake2b's Final and destructor wipe the copy, which may still buffer key bytes.
  bool Compute(Bytes msg, uint8_t out[kMacSize]) {
    Blake2b s = keyed_;
    s.Update(msg);
    s.Final(out);
    return true;
  }

 private:
  Blake2b keyed_;  // wiped by its destructor
};

// SHA-256 for mode none.
class Sha256 {
 public:
  Sha256() = default;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  ~Sha256() {
    EVP_MD_CTX_free(ctx_);
    EVP_MD_free(md_);
  }
  bool Init() {
    md_ = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
    ctx_ = EVP_MD_CTX_new();
    return md_ != nullptr && ctx_ != nullptr;
  }
  bool Compute(Bytes msg, uint8_t out[32]) {
    unsigned int n = 0;
    return EVP_DigestInit_ex2(ctx_, md_, nullptr) == 1 &&
           EVP_DigestUpdate(ctx_, msg.data(), msg.size()) == 1 &&
           EVP_DigestFinal_ex(ctx_, out, &n) == 1 && n == 32;
  }

 private:
  EVP_MD* md_ = nullptr;
  EVP_MD_CTX* ctx_ = nullptr;
};

Status KeyLength(const SecureBytes& k, const char* name, size_t want, KeyMode mode) {
  if (k.size() == want) return Status::Ok();
  return Status(StatusCode::kCorruptMetadata, std::string("key does not fit mode ") +
                                                  std::string(KeyModeName(mode)) + ": " + name +
                                                  " has " + std::to_string(k.size()) +
                                                  " bytes, expected " + std::to_string(want));
}

bool IsAuthenticatedOnly(KeyMode m) {
  return m == KeyMode::kAuthenticated || m == KeyMode::kAuthenticatedBlake2;
}

}  // namespace

Status ValidateKeyMaterial(KeyMode mode, const KeyMaterial* key) {
  if (!NeedsKey(mode)) return Status::Ok();
  if (key == nullptr) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("mode ") + std::string(KeyModeName(mode)) + " needs a key");
  }
  const size_t keyed_len = UsesBlake2(mode) ? kBlake2KeySize : 32;
  if (IsEncrypted(mode)) {
    if (Status s = KeyLength(key->enc_key, "enc_key", 32, mode); !s.ok()) return s;
    if (Status s = KeyLength(key->enc_hmac_key, "enc_hmac_key", keyed_len, mode); !s.ok()) {
      return s;
    }
  }
  return KeyLength(key->id_key, "id_key", keyed_len, mode);
}

bool ConstantTimeEqual(Bytes a, Bytes b) {
  if (a.size() != b.size()) return false;
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// ---------------------------------------------------------------------------------------------
// ObjectOpener

struct ObjectOpener::Impl {
  KeyMode mode;
  Status status;
  // Set only for the AES modes; one of hmac / blake2 per mode.
  EVP_CIPHER* cipher = nullptr;
  EVP_CIPHER_CTX* cipher_ctx = nullptr;
  Hmac hmac;
  PrefixedBlake2b blake2;

  explicit Impl(KeyMode m) : mode(m) {}
  ~Impl() {
    EVP_CIPHER_CTX_free(cipher_ctx);  // also wipes the expanded AES key
    EVP_CIPHER_free(cipher);
  }

  Status Init(const KeyMaterial* key) {
    if (Status s = ValidateKeyMaterial(mode, key); !s.ok()) return s;
    if (!IsEncrypted(mode)) return Status::Ok();
    const bool ok_mac = UsesBlake2(mode) ? blake2.Init(key->enc_hmac_key.view())
                                         : hmac.Init("SHA256", key->enc_hmac_key.view());
    cipher = EVP_CIPHER_fetch(nullptr, "AES-256-CTR", nullptr);
    cipher_ctx = EVP_CIPHER_CTX_new();
    if (!ok_mac || cipher == nullptr || cipher_ctx == nullptr ||
        EVP_DecryptInit_ex(cipher_ctx, cipher, nullptr, key->enc_key.data(), nullptr) != 1) {
      return Status(StatusCode::kInternal, "OpenSSL/libb2 could not set up the object cipher");
    }
    return Status::Ok();
  }

  // An AES-mode object's parts: the MAC, what it covers (IV || ciphertext), the IV, the ciphertext.
  struct Envelope {
    Bytes stored_mac, mac_message, iv, ct;
  };
  // What both openers check before any MAC (review w3 D7: the two copies could drift): the
  // opener's status, the TYPE byte (the MAC does not cover it) and the envelope's length. For a
  // mode without encryption `payload` is the object after its TYPE byte and nothing more is to
  // be done; for an AES mode `e` holds the parts.
  OpenResult SplitEnvelope(Bytes obj, Bytes& payload, Envelope& e) const {
    if (!status.ok()) return {OpenOutcome::kBadEnvelope, "internal error: " + status.message()};
    if (obj.empty()) return {OpenOutcome::kBadEnvelope, "Object too short: 0 bytes, no TYPE byte"};
    if (!AcceptsTypeByte(mode, obj[0])) {
      return {OpenOutcome::kBadEnvelope, IsAuthenticatedOnly(mode) ? "Invalid envelope" : "Invalid encryption envelope"};
    }
    if (!IsEncrypted(mode)) {
      payload = obj.subspan(1);
      return {};
    }
    if (obj.size() < kAesHeaderSize) {
      return {OpenOutcome::kBadEnvelope, "Object too short: " + std::to_string(obj.size()) +
                                             " bytes, the encryption envelope needs at least 41"};
    }
    e.stored_mac = obj.subspan(1, kMacSize);
    e.mac_message = obj.subspan(1 + kMacSize);
    e.iv = obj.subspan(1 + kMacSize, kIvSize);
    e.ct = obj.subspan(kAesHeaderSize);
    return {};
  }

  // Decrypts the envelope's ciphertext into `scratch`: `payload` is the plaintext.
  OpenResult DecryptInto(const Envelope& e, ByteBuffer& scratch, Bytes& payload) {
    scratch.Resize(e.ct.size());
    if (!e.ct.empty() && !Decrypt(e.iv, e.ct, scratch.data())) {
      return {OpenOutcome::kBadEnvelope, "internal error: AES-256-CTR decryption failed"};
    }
    payload = Bytes(scratch.data(), e.ct.size());
    return {};
  }

  bool Mac(Bytes msg, uint8_t out[kMacSize]) {
    return UsesBlake2(mode) ? blake2.Compute(msg, out) : hmac.Compute(msg, out, kMacSize);
  }

  bool Decrypt(Bytes iv, Bytes ct, uint8_t* out) {
    // Counter block = 00*8 || IV (the IV is the low half of a big-endian 128-bit counter).
    // Setting only the IV keeps the key schedule made in Init.
    uint8_t counter[16] = {};
    std::memcpy(counter + 8, iv.data(), kIvSize);
    if (EVP_DecryptInit_ex(cipher_ctx, nullptr, nullptr, nullptr, counter) != 1) return false;
    // EVP takes int lengths; CTR keeps the keystream position across calls.
    constexpr size_t kStep = size_t{1} << 30;
    for (size_t done = 0; done < ct.size();) {
      const size_t n = std::min(kStep, ct.size() - done);
      int outl = 0;
      if (EVP_DecryptUpdate(cipher_ctx, out + done, &outl, ct.data() + done, static_cast<int>(n)) !=
              1 ||
          static_cast<size_t>(outl) != n) {
        return false;
      }
      done += n;
    }
    return true;
  }
};

ObjectOpener::ObjectOpener(KeyMode mode, const KeyMaterial* key)
    : impl_(std::make_unique<Impl>(mode)) {
  impl_->status = impl_->Init(key);
}

ObjectOpener::~ObjectOpener() = default;

const Status& ObjectOpener::status() const { return impl_->status; }

OpenResult ObjectOpener::Open(Bytes obj, ByteBuffer& scratch, Bytes& payload) {
  Impl& im = *impl_;
  payload = Bytes();
  Impl::Envelope e;
  OpenResult r = im.SplitEnvelope(obj, payload, e);
  if (r.outcome != OpenOutcome::kOk || !IsEncrypted(im.mode)) return r;
  // Encrypt-then-MAC: authenticate IV || ciphertext before decrypting anything.
  uint8_t mac[kMacSize];
  if (!im.Mac(e.mac_message, mac)) return {OpenOutcome::kBadEnvelope, "internal error: MAC computation failed"};
  if (!MacMatches(mac, e.stored_mac)) return {OpenOutcome::kBadMac, "MAC Authentication failed"};
  return im.DecryptInto(e, scratch, payload);
}

OpenResult ObjectOpener::OpenDeferringMac(Bytes obj, ByteBuffer& scratch, Bytes& payload, Bytes& mac_message,
                                          Bytes& stored_mac) {
  Impl& im = *impl_;
  payload = mac_message = stored_mac = Bytes();
  Impl::Envelope e;
  OpenResult r = im.SplitEnvelope(obj, payload, e);
  if (r.outcome != OpenOutcome::kOk || !IsEncrypted(im.mode)) return r;
  stored_mac = e.stored_mac;
  mac_message = e.mac_message;
  return im.DecryptInto(e, scratch, payload);
}

bool MacMatches(const uint8_t computed[32], Bytes stored_mac) {
  bool authentic = stored_mac.size() == kMacSize && CRYPTO_memcmp(computed, stored_mac.data(), kMacSize) == 0;
#ifdef BORGCHECK_FUZZING_UNSAFE_SKIP_AUTH
  // FUZZING ONLY (the build refuses this option in Release): the MAC is still computed, so
  // the fuzzer exercises that code, but its verdict is ignored so that mutated inputs reach
  // the decompressors. This is the only place the object MAC check is bypassed (Open and the
  // lanes' OpenDeferringMac callers both come here).
  authentic = true;
#endif
  return authentic;
}

Result<Borg1LaneHashes> MakeBorg1LaneHashes(KeyMode mode, const KeyMaterial* key) {
  if (Status s = ValidateKeyMaterial(mode, key); !s.ok()) return s;
  Borg1LaneHashes h;
  auto keyed = [&](const SecureBytes& k) -> Result<LaneHash> {
    if (UsesBlake2(mode)) return LaneHash::Blake2b256(k.view());
    return LaneHash::HmacSha256(k.view());
  };
  if (IsEncrypted(mode)) {
    Result<LaneHash> mac = keyed(key->enc_hmac_key);
    if (!mac.ok()) return mac.status();
    h.mac = std::move(mac).value();
  }
  if (!NeedsKey(mode)) {
    h.id = LaneHash::Sha256();
  } else {
    Result<LaneHash> id = keyed(key->id_key);
    if (!id.ok()) return id.status();
    h.id = std::move(id).value();
  }
  return h;
}

std::optional<Borg1LaneHashes> Borg1LanesOrNone(KeyMode mode, const KeyMaterial* key) {
  Result<Borg1LaneHashes> h = MakeBorg1LaneHashes(mode, key);
  if (!h.ok()) return std::nullopt;
  return std::move(h).value();
}

// ---------------------------------------------------------------------------------------------
// IdHasher

struct IdHasher::Impl {
  KeyMode mode;
  Status status;
  Sha256 sha256;           // mode none
  Hmac hmac;               // HMAC-SHA256 modes
  PrefixedBlake2b blake2;  // BLAKE2b modes

  explicit Impl(KeyMode m) : mode(m) {}

  Status Init(const KeyMaterial* key) {
    if (Status s = ValidateKeyMaterial(mode, key); !s.ok()) return s;
    bool ok = !NeedsKey(mode)    ? sha256.Init()
              : UsesBlake2(mode) ? blake2.Init(key->id_key.view())
                                 : hmac.Init("SHA256", key->id_key.view());
    if (!ok) return Status(StatusCode::kInternal, "OpenSSL/libb2 could not set up the id hash");
    return Status::Ok();
  }
};

IdHasher::IdHasher(KeyMode mode, const KeyMaterial* key) : impl_(std::make_unique<Impl>(mode)) {
  impl_->status = impl_->Init(key);
}

IdHasher::~IdHasher() = default;

const Status& IdHasher::status() const { return impl_->status; }

void IdHasher::Compute(Bytes plaintext, uint8_t out[32]) {
  Impl& im = *impl_;
  bool ok = false;
  if (im.status.ok()) {
    ok = !NeedsKey(im.mode)    ? im.sha256.Compute(plaintext, out)
         : UsesBlake2(im.mode) ? im.blake2.Compute(plaintext, out)
                               : im.hmac.Compute(plaintext, out, 32);
  }
  if (!ok) std::memset(out, 0, 32);
}

}  // namespace borgcheck::crypto
