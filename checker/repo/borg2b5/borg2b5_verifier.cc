#include "checker/repo/borg2b5/borg2b5_verifier.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "checker/base/secure_bytes.h"
#include "checker/crypto/object_crypto.h"
#include "checker/crypto/tam.h"
#include "checker/repo/borg2/id_lane_batch.h"
#include "checker/repo/chunk_id.h"

namespace borgcheck::repo {
using report::Stage;
using engine::Verdict;

Borg2b5Verifier::Borg2b5Verifier(bool verify_data, const crypto::Borg2KeyType* type,
                                 const crypto::Borg2KeyMaterial* key, const crypto::LaneHash* id_lanes)
    : verify_data_(verify_data), type_(type), id_lanes_(verify_data ? id_lanes : nullptr) {
  if (!verify_data_) return;
  if (type_ == nullptr) {
    status_ = Status(StatusCode::kInternal, "verify-data without a key type");
    return;
  }
  crypto::SessionKdfPolicy policy{crypto::SessionKdf::kHkdfSha512, /*fallback_enabled=*/true};
  opener_ = std::make_unique<crypto::EnvelopeOpener>(type_->envelope_class(),
                                                     key ? key->crypt_key.view() : Bytes(), policy);
  hasher_ = std::make_unique<crypto::Borg2IdHasher>(type_->id_hash, key ? key->id_key.view() : Bytes());
  if (!opener_->status().ok()) status_ = opener_->status();
  else if (!hasher_->status().ok()) status_ = hasher_->status();
  if (id_lanes_ && status_.ok()) {
    pipeline_ = std::make_unique<crypto::HashPipeline>();
    if (!pipeline_->status().ok()) status_ = pipeline_->status();
  }
}

std::optional<engine::Verdict> Borg2b5Verifier::OpenEnvelope(Bytes envelope, const char* which,
                                                                 const uint8_t id[32], ByteBuffer& scratch,
                                                                 Bytes& out) {
  crypto::EnvelopeResult r = opener_->Open(envelope, {}, id, scratch, out);
  switch (r.outcome) {
    case crypto::EnvelopeOutcome::kOk:
      return std::nullopt;
    case crypto::EnvelopeOutcome::kBadType: {
      std::string accepted;
      for (uint8_t t : type_->envelope_class().accepted_types) {
        accepted += fmt::format("{}{:#04x}", accepted.empty() ? "" : ", ", t);
      }
      return engine::Verdict{Stage::kEnvelope,
                           fmt::format("Invalid encryption envelope: the {} envelope has type byte {:#04x}, "
                                       "the repository's mode {} accepts {}",
                                       which, envelope[0], type_->name, accepted)};
    }
    case crypto::EnvelopeOutcome::kMalformed:
      return engine::Verdict{Stage::kEnvelope, fmt::format("{} envelope: {}", which, r.message)};
    case crypto::EnvelopeOutcome::kAuthFailed:
      return engine::Verdict{Stage::kAuthentication, fmt::format("{} ({} envelope)", r.message, which)};
  }
  return engine::Verdict{Stage::kEnvelope, "internal error: unknown envelope outcome"};
}

std::optional<engine::Verdict> Borg2b5Verifier::Decode(Bytes entry, const engine::ObjectRef& ref, ByteBuffer& plain,
                                                       Decoded& decoded) {
  const bool decrypt = ref.role == engine::ObjectRole::kLive;
  decoded = Decoded();
  plain.Clear();
  // 1. Checksums (a served payload's were the server's). The bytes are read again by the run,
  // so the header is checked against the plan too: a mismatch means the file changed or reads
  // are unstable.
  const bool served = ref.variant == kBorg2b5ServedPayload;
  std::string why;
  Bytes payload = entry;
  if (!served) {
    Borg2EntryHeader h;
    if (ParseBorg2EntryHeader(entry, entry.size(), h, &why) != HeaderParse::kOk ||
        h.tag != ref.variant || h.size != ref.size || h.size != entry.size() ||
        (h.id && !std::equal(ref.id.begin(), ref.id.end(), h.id))) {
      return engine::Verdict{Stage::kEntryCrc, "the entry header read now differs from the one read while "
                                             "planning" + (why.empty() ? std::string() : ": " + why)};
    }
    if (!Borg2EntryCrcMatches(entry, h)) {
      return engine::Verdict{Stage::kEntryCrc, h.tag == kB2TagPut2 ? "Segment entry header checksum mismatch"
                                                                        : "Segment entry checksum mismatch"};
    }
    if (h.tag == kB2TagPut2 && !Put2EntryHashMatches(entry)) {
      return engine::Verdict{Stage::kEntryCrc, "Segment entry hash mismatch"};
    }
    payload = Borg2EntryPayload(entry, h.tag);
  }
  if (!verify_data_ || !decrypt) return std::nullopt;
  if (!status_.ok()) return engine::Verdict{Stage::kEnvelope, "internal error: " + status_.message()};

  // 2. Envelopes and meta.
  const uint8_t* id = ref.id.data();
  RepoObjEnvelopes parts;
  if (!SplitRepoObjV2(payload, parts, &why)) {
    return engine::Verdict{Stage::kEnvelope, why};
  }
  Bytes meta_plain, data;
  if (auto f = OpenEnvelope(parts.meta, "meta", id, meta_scratch_, meta_plain)) return f;
  if (!ParseObjMeta(meta_plain, meta_, &why)) return engine::Verdict{Stage::kEnvelope, why};
  if (auto f = OpenEnvelope(parts.data, "data", id, data_scratch_, data)) return f;

  // 3. Decompress.
  ObjDecodeResult d = DecodeObjData(meta_, data, decompressor_, plain);
  if (std::optional<engine::Verdict> f = DecodeVerdict(d)) return f;
  decoded.plaintext = true;
  decoded.check_id = !IsManifestId(ref.id);
  decoded.nonzero_padding = d.error == ObjDecodeError::kNonZeroPadding;
  return std::nullopt;
}

// 4. Id, then the padding.
std::optional<engine::Verdict> Borg2b5Verifier::Judge(const engine::ObjectRef& ref, const Decoded& decoded,
                                                      const uint8_t computed_id[32]) const {
  if (decoded.check_id && !crypto::ConstantTimeEqual(Bytes(computed_id, 32), Bytes(ref.id.data(), 32))) {
    return engine::Verdict{Stage::kIdHash, "id verification failed"};
  }
  if (decoded.nonzero_padding) {
    return engine::PaddingVerdict(type_->envelope == crypto::EnvelopeKind::kAead);  // none/authenticated: no MAC over data
  }
  return std::nullopt;
}

std::optional<engine::Verdict> Borg2b5Verifier::Verify(Bytes entry, const engine::ObjectRef& ref) {
  Decoded decoded;
  if (auto f = Decode(entry, ref, plain_, decoded)) return f;
  if (!decoded.plaintext) return std::nullopt;
  uint8_t computed[32] = {};
  if (decoded.check_id) hasher_->Compute(plain_.view(), computed);
  return Judge(ref, decoded, computed);
}

void Borg2b5Verifier::VerifyBatch(std::span<const Bytes> stored, std::span<const engine::ObjectRef> refs,
                                  std::span<engine::ObjectResult> out) {
  if (!pipeline_) {
    ObjectVerifier::VerifyBatch(stored, refs, out);
    return;
  }
  items_.resize(std::max(items_.size(), refs.size()));
  IdLaneBatch<Borg2b5Verifier> items(*this, stored, refs, out);
  pipeline_->Run(refs.size(), items);
}

void Borg2b5Verifier::ForEachSession(
    const std::function<void(Bytes session_id, crypto::SessionKdf kdf)>& fn) const {
  if (opener_) opener_->ForEachSession(fn);
}

std::optional<std::string> Borg2b5ManifestTamProblem(Bytes plain, const crypto::Borg2KeyType& type,
                                                     const crypto::Borg2KeyMaterial* key) {
  // tam.h's key derivation takes id_key || crypt_key, which is borg 2's IKM.
  std::optional<SecureBytes> ikm;
  if (type.needs_key() && key) {
    ikm = SecureBytes(key->id_key.view());
    ikm->Append(key->crypt_key.view());
  }
  crypto::TamResult tam = crypto::VerifyManifestTamWithIkm(plain, ikm ? std::optional<Bytes>(ikm->view()) : std::nullopt);
  switch (tam.outcome) {
    case crypto::TamOutcome::kVerified:
      return std::nullopt;
    case crypto::TamOutcome::kAbsent: {
      // b5..b7 write a manifest TAM; b8 replaced it (with meta `type`), manifest version 2.
      std::optional<uint64_t> version = ManifestVersion(plain);
      bool required = key ? key->tam_required : true;
      if (!required || !version || *version >= 2) return std::nullopt;
      return std::string("manifest TAM: the manifest has no TAM although the key requires one");
    }
    case crypto::TamOutcome::kMismatch:
    case crypto::TamOutcome::kMalformed:
      break;
  }
  return "manifest TAM: " + tam.message;
}

Borg2b5Sessions Borg2b5SessionsSeen(std::span<engine::ObjectVerifier* const> verifiers) {
  Borg2b5Sessions sessions;
  for (engine::ObjectVerifier* v : verifiers) {
    static_cast<Borg2b5Verifier*>(v)->ForEachSession(
        [&](Bytes sid, crypto::SessionKdf kdf) { sessions[ToHex(sid)] = kdf; });
  }
  return sessions;
}

std::optional<std::string> Borg2b5SessionNote(const Borg2b5Sessions& sessions, bool verify_data,
                                              const crypto::Borg2KeyType* type) {
  if (!sessions.empty()) {
    size_t hkdf = 0, sha = 0;
    for (const auto& [sid, kdf] : sessions) (kdf == crypto::SessionKdf::kHkdfSha512 ? hkdf : sha)++;
    std::string what;
    if (hkdf) what += fmt::format("{} with HKDF-SHA512 (borg 2.0.0b5..b7)", hkdf);
    if (sha) what += fmt::format("{}{} with SHA-256 (borg 2.0.0b8 and later)", what.empty() ? "" : ", ", sha);
    return fmt::format("session keys: {} AEAD session(s) authenticated: {}", sessions.size(), what);
  }
  if (verify_data && type && type->envelope == crypto::EnvelopeKind::kAead) {
    return std::string("session keys: no AEAD envelope authenticated under either derivation "
                       "(HKDF-SHA512 of b5..b7, SHA-256 of b8 and later)");
  }
  return std::nullopt;
}

}  // namespace borgcheck::repo
