#include "checker/crypto/borg2master_crypto.h"

#include <array>

namespace borgcheck::crypto {
namespace {

constexpr std::array<MasterKeyType, 8> kTypes = {{
    {0x10, "aes256-ocb (sha256)", MasterEnvelope::kAead, AeadSuite::kAes256Ocb, Borg2IdHash::kHmacSha256, true},
    {0x20, "chacha20-poly1305 (sha256)", MasterEnvelope::kAead, AeadSuite::kChaCha20Poly1305, Borg2IdHash::kHmacSha256, true},
    {0x30, "aes256-ocb (blake3)", MasterEnvelope::kAead, AeadSuite::kAes256Ocb, Borg2IdHash::kBlake3Keyed, true},
    {0x40, "chacha20-poly1305 (blake3)", MasterEnvelope::kAead, AeadSuite::kChaCha20Poly1305, Borg2IdHash::kBlake3Keyed, true},
    {0x60, "authenticated-sha256", MasterEnvelope::kTagged, AeadSuite::kAes256Ocb, Borg2IdHash::kHmacSha256, true},
    {0x70, "authenticated-blake3", MasterEnvelope::kTagged, AeadSuite::kAes256Ocb, Borg2IdHash::kBlake3Keyed, true},
    {0x80, "none-sha256", MasterEnvelope::kTagged, AeadSuite::kAes256Ocb, Borg2IdHash::kSha256, false},
    {0x90, "none-blake3", MasterEnvelope::kTagged, AeadSuite::kAes256Ocb, Borg2IdHash::kBlake3, false},
}};

}  // namespace

const MasterKeyType* MasterKeyTypeFromByte(uint8_t type) {
  for (const MasterKeyType& t : kTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

MasterObjectCrypto::MasterObjectCrypto(const MasterKeyType& type, Bytes crypt_key, Bytes id_key) : type_(type) {
  if (type_.needs_key && (crypt_key.empty() || id_key.size() != 32)) {
    status_ = Status(StatusCode::kInvalidArgument,
                     std::string(type_.name) + " needs a key with a crypt_key and a 32-byte id_key");
    return;
  }
  if (type_.envelope == MasterEnvelope::kAead) {
    EnvelopeClass cls;
    cls.kind = EnvelopeKind::kAead;
    cls.suite = type_.suite;
    cls.accepted_types = {type_.type};
    // Repository version 4 only knows the SHA-256 session-key derivation (b8 and later).
    aead_ = std::make_unique<EnvelopeOpener>(cls, crypt_key, SessionKdfPolicy{SessionKdf::kSha256, false});
    if (!aead_->status().ok()) status_ = aead_->status();
  } else {
    tagged_ = std::make_unique<TaggedEnvelope>(TaggedMac(type_.type), crypt_key);
    if (!tagged_->status().ok()) status_ = tagged_->status();
  }
  id_hasher_ = std::make_unique<Borg2IdHasher>(type_.id_hash, type_.needs_key ? id_key : Bytes());
  if (status_.ok() && !id_hasher_->status().ok()) status_ = id_hasher_->status();
}

MasterObjectCrypto::~MasterObjectCrypto() = default;

MasterOpenResult MasterObjectCrypto::Open(Bytes envelope, Bytes aad, const uint8_t chunk_id[32], ByteBuffer& scratch,
                                          Bytes& payload) {
  payload = Bytes();
  if (tagged_) {
    TaggedResult r = tagged_->Open(envelope, aad, chunk_id, payload);
    switch (r.outcome) {
      case TaggedOutcome::kOk: return {};
      case TaggedOutcome::kBadType: return {MasterOpenOutcome::kBadType, r.message};
      case TaggedOutcome::kTruncated: return {MasterOpenOutcome::kMalformed, r.message};
      case TaggedOutcome::kBadTag: return {MasterOpenOutcome::kAuthFailed, r.message};
    }
    return {MasterOpenOutcome::kAuthFailed, r.message};
  }
  // borg master checks the type byte before anything else, then the header length
  // (32..47 bytes: "envelope too short"), then decrypts.
  if (envelope.size() < kAeadPayloadOffset) {
    if (!envelope.empty() && envelope[0] != type_.type) return {MasterOpenOutcome::kBadType, "Invalid encryption envelope"};
    return {MasterOpenOutcome::kMalformed, "Could not decrypt [Authentication failed: envelope too short]"};
  }
  EnvelopeResult r = aead_->Open(envelope, aad, chunk_id, scratch, payload);
  switch (r.outcome) {
    case EnvelopeOutcome::kOk: return {};
    case EnvelopeOutcome::kBadType: return {MasterOpenOutcome::kBadType, r.message};
    case EnvelopeOutcome::kMalformed: return {MasterOpenOutcome::kMalformed, "Could not decrypt [" + r.message + "]"};
    case EnvelopeOutcome::kAuthFailed: return {MasterOpenOutcome::kAuthFailed, "Could not decrypt [" + r.message + "]"};
  }
  return {MasterOpenOutcome::kAuthFailed, r.message};
}

void MasterObjectCrypto::IdHash(Bytes plaintext, uint8_t out[32]) { id_hasher_->Compute(plaintext, out); }

}  // namespace borgcheck::crypto
