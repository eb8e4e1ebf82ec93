// The tagged envelope. Per envelope: the prefix (at most 2 + 2 + 74 bytes for object version 2)
// is built on the stack, then one MAC / hash pass runs over prefix and payload as two updates.
// HMAC contexts are keyed once (EVP_MAC_init with a NULL key reuses the key in OpenSSL 3), the
// SHA-256 digest is fetched once, BLAKE3 hashers are made once and Reset per envelope.
#include "checker/crypto/tagged_envelope.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstring>

#include "checker/base/secure_bytes.h"
#include "checker/crypto/blake3.h"

namespace borgcheck::crypto {
namespace {

constexpr std::string_view kDomainHmacSha256 = "borg-repoobj-mac-hmac-sha256";
constexpr std::string_view kDomainBlake3 = "borg-repoobj-mac-blake3";
constexpr size_t kMaxAadFull = 0xffff;  // the length field is a u16

}  // namespace

std::optional<TaggedMac> TaggedMacFromType(uint8_t type) {
  switch (type) {
    case 0x60: return TaggedMac::kHmacSha256;
    case 0x70: return TaggedMac::kKeyedBlake3;
    case 0x80: return TaggedMac::kSha256;
    case 0x90: return TaggedMac::kBlake3;
    default: return std::nullopt;
  }
}

Status DeriveTaggedKey(TaggedMac mac, Bytes crypt_key, uint8_t out[32]) {
  std::string_view domain;
  if (mac == TaggedMac::kHmacSha256) domain = kDomainHmacSha256;
  else if (mac == TaggedMac::kKeyedBlake3) domain = kDomainBlake3;
  else return Status(StatusCode::kInvalidArgument, "unkeyed tagged envelope has no tag key");
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned n = 0;
  bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(ctx, crypt_key.data(), crypt_key.size()) == 1 &&
            EVP_DigestUpdate(ctx, domain.data(), domain.size()) == 1 && EVP_DigestFinal_ex(ctx, out, &n) == 1 && n == 32;
  EVP_MD_CTX_free(ctx);
  return ok ? Status::Ok() : Status(StatusCode::kInternal, "OpenSSL SHA-256 failed");
}

struct TaggedEnvelope::Impl {
  TaggedMac mac;
  Status status;
  SecureBytes tag_key;
  // kHmacSha256
  EVP_MAC* hmac = nullptr;
  EVP_MAC_CTX* hmac_ctx = nullptr;
  // kSha256
  EVP_MD* sha = nullptr;
  EVP_MD_CTX* sha_ctx = nullptr;
  // kKeyedBlake3 / kBlake3
  std::optional<Blake3Hasher> blake3;

  ~Impl() {
    EVP_MAC_CTX_free(hmac_ctx);
    EVP_MAC_free(hmac);
    EVP_MD_CTX_free(sha_ctx);
    EVP_MD_free(sha);
  }

  // tag = MAC(prefix || payload); false on an internal failure.
  bool Tag(Bytes prefix, Bytes payload, uint8_t out[kTaggedTagSize]) {
    switch (mac) {
      case TaggedMac::kHmacSha256: {
        size_t n = 0;
        return EVP_MAC_init(hmac_ctx, nullptr, 0, nullptr) == 1 &&
               EVP_MAC_update(hmac_ctx, prefix.data(), prefix.size()) == 1 &&
               EVP_MAC_update(hmac_ctx, payload.data(), payload.size()) == 1 &&
               EVP_MAC_final(hmac_ctx, out, &n, kTaggedTagSize) == 1 && n == kTaggedTagSize;
      }
      case TaggedMac::kSha256: {
        unsigned n = 0;
        return EVP_DigestInit_ex(sha_ctx, sha, nullptr) == 1 &&
               EVP_DigestUpdate(sha_ctx, prefix.data(), prefix.size()) == 1 &&
               EVP_DigestUpdate(sha_ctx, payload.data(), payload.size()) == 1 &&
               EVP_DigestFinal_ex(sha_ctx, out, &n) == 1 && n == kTaggedTagSize;
      }
      case TaggedMac::kKeyedBlake3:
      case TaggedMac::kBlake3:
        blake3->Reset();
        blake3->Update(prefix);
        blake3->Update(payload);
        blake3->Finalize(out, kTaggedTagSize);
        return true;
    }
    return false;
  }

  // Writes type | reserved | u16be(len) | aad | chunk_id into `buf`; returns its length, or 0
  // when the AAD is too long for the length field.
  static size_t Prefix(uint8_t type, uint8_t reserved, Bytes aad, const uint8_t chunk_id[32], std::vector<uint8_t>& buf) {
    size_t full = aad.size() + 32;
    if (full > kMaxAadFull) return 0;
    buf.resize(4 + full);
    buf[0] = type;
    buf[1] = reserved;
    buf[2] = uint8_t(full >> 8);
    buf[3] = uint8_t(full);
    if (!aad.empty()) std::memcpy(buf.data() + 4, aad.data(), aad.size());
    std::memcpy(buf.data() + 4 + aad.size(), chunk_id, 32);
    return buf.size();
  }

  std::vector<uint8_t> prefix;  // scratch, reused
};

TaggedEnvelope::TaggedEnvelope(TaggedMac mac, Bytes crypt_key) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.mac = mac;
  m.prefix.reserve(128);
  if (TaggedMacIsKeyed(mac)) {
    if (crypt_key.empty()) {
      m.status = Status(StatusCode::kInvalidArgument, "authenticated mode without a key");
      return;
    }
    m.tag_key = SecureBytes(32);
    if (Status s = DeriveTaggedKey(mac, crypt_key, m.tag_key.data()); !s.ok()) {
      m.status = s;
      return;
    }
  }
  switch (mac) {
    case TaggedMac::kHmacSha256: {
      m.hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
      m.hmac_ctx = m.hmac ? EVP_MAC_CTX_new(m.hmac) : nullptr;
      char digest[] = "SHA2-256";
      OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                             OSSL_PARAM_construct_end()};
      if (!m.hmac_ctx || EVP_MAC_init(m.hmac_ctx, m.tag_key.data(), m.tag_key.size(), params) != 1) {
        m.status = Status(StatusCode::kInternal, "OpenSSL HMAC-SHA256 is not available");
      }
      break;
    }
    case TaggedMac::kSha256:
      m.sha = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
      m.sha_ctx = EVP_MD_CTX_new();
      if (!m.sha || !m.sha_ctx) m.status = Status(StatusCode::kInternal, "OpenSSL SHA-256 is not available");
      break;
    case TaggedMac::kKeyedBlake3:
      m.blake3 = Blake3Hasher::Keyed(m.tag_key.data());
      break;
    case TaggedMac::kBlake3:
      m.blake3 = Blake3Hasher::Plain();
      break;
  }
}

TaggedEnvelope::~TaggedEnvelope() = default;

const Status& TaggedEnvelope::status() const { return impl_->status; }
TaggedMac TaggedEnvelope::mac() const { return impl_->mac; }

TaggedResult TaggedEnvelope::Open(Bytes envelope, Bytes aad, const uint8_t chunk_id[32], Bytes& payload) {
  Impl& m = *impl_;
  if (envelope.size() < kTaggedHeaderSize) return {TaggedOutcome::kTruncated, "truncated envelope"};
  if (envelope[0] != uint8_t(m.mac)) return {TaggedOutcome::kBadType, "Invalid encryption envelope"};
  if (!m.status.ok()) return {TaggedOutcome::kBadTag, "envelope tag verification failed (internal error: " + m.status.message() + ")"};
  size_t n = Impl::Prefix(envelope[0], envelope[1], aad, chunk_id, m.prefix);
  if (n == 0) return {TaggedOutcome::kBadTag, "envelope tag verification failed (AAD too long)"};
  uint8_t tag[kTaggedTagSize];
  Bytes body = envelope.subspan(kTaggedHeaderSize);
  if (!m.Tag(Bytes(m.prefix.data(), n), body, tag)) {
    return {TaggedOutcome::kBadTag, "envelope tag verification failed (internal error)"};
  }
  bool equal = CRYPTO_memcmp(tag, envelope.data() + 2, kTaggedTagSize) == 0;
  if (!equal || envelope[1] != 0) return {TaggedOutcome::kBadTag, "envelope tag verification failed"};
  payload = body;
  return {};
}

std::vector<uint8_t> TaggedEnvelope::Seal(Bytes payload, Bytes aad, const uint8_t chunk_id[32]) {
  Impl& m = *impl_;
  std::vector<uint8_t> out(kTaggedHeaderSize + payload.size());
  out[0] = uint8_t(m.mac);
  out[1] = 0;
  size_t n = Impl::Prefix(out[0], 0, aad, chunk_id, m.prefix);
  if (n == 0 || !m.status.ok() || !m.Tag(Bytes(m.prefix.data(), n), payload, out.data() + 2)) {
    std::memset(out.data() + 2, 0, kTaggedTagSize);
  }
  if (!payload.empty()) std::memcpy(out.data() + kTaggedHeaderSize, payload.data(), payload.size());
  return out;
}

}  // namespace borgcheck::crypto
