#include "checker/run/borg2b5_verifier.h"

#include <algorithm>

#include <fmt/format.h>

#include "checker/crypto/object_crypto.h"

namespace borgcheck::run {
using report::Stage;

Borg2b5ObjectVerifier::Borg2b5ObjectVerifier(bool verify_data, const crypto::Borg2KeyType* type,
                                             const crypto::Borg2KeyMaterial* key)
    : verify_data_(verify_data), type_(type) {
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
}

std::optional<VerifyFailure> Borg2b5ObjectVerifier::OpenEnvelope(Bytes envelope, const char* which,
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
      return VerifyFailure{Stage::kEnvelope,
                           fmt::format("Invalid encryption envelope: the {} envelope has type byte {:#04x}, "
                                       "the repository's mode {} accepts {}",
                                       which, envelope[0], type_->name, accepted)};
    }
    case crypto::EnvelopeOutcome::kMalformed:
      return VerifyFailure{Stage::kEnvelope, fmt::format("{} envelope: {}", which, r.message)};
    case crypto::EnvelopeOutcome::kAuthFailed:
      return VerifyFailure{Stage::kAuthentication, fmt::format("{} ({} envelope)", r.message, which)};
  }
  return VerifyFailure{Stage::kEnvelope, "internal error: unknown envelope outcome"};
}

std::optional<VerifyFailure> Borg2b5ObjectVerifier::Verify(Bytes entry, const repo::Borg2Entry& planned,
                                                           bool decrypt) {
  plain_.Clear();
  // 1. Checksums. The bytes are read again by the run, so the header is checked against the
  // plan too: a mismatch means the file changed or reads are unstable.
  repo::Borg2EntryHeader h;
  std::string why;
  if (repo::ParseBorg2EntryHeader(entry, entry.size(), h, &why) != repo::HeaderParse::kOk ||
      h.tag != planned.tag || h.size != planned.size || h.size != entry.size() ||
      (h.id && !std::equal(planned.id.begin(), planned.id.end(), h.id))) {
    return VerifyFailure{Stage::kEntryCrc, "the entry header read now differs from the one read while "
                                           "planning" + (why.empty() ? std::string() : ": " + why)};
  }
  if (!repo::Borg2EntryCrcMatches(entry, h)) {
    return VerifyFailure{Stage::kEntryCrc, h.tag == repo::kB2TagPut2 ? "Segment entry header checksum mismatch"
                                                                      : "Segment entry checksum mismatch"};
  }
  if (h.tag == repo::kB2TagPut2 && !repo::Put2EntryHashMatches(entry)) {
    return VerifyFailure{Stage::kEntryCrc, "Segment entry hash mismatch"};
  }
  if (!verify_data_ || !decrypt) return std::nullopt;
  if (!status_.ok()) return VerifyFailure{Stage::kEnvelope, "internal error: " + status_.message()};

  // 2. Envelopes and meta.
  const uint8_t* id = planned.id.data();
  repo::RepoObjEnvelopes parts;
  if (!repo::SplitRepoObjV2(repo::Borg2EntryPayload(entry, h.tag), parts, &why)) {
    return VerifyFailure{Stage::kEnvelope, why};
  }
  Bytes meta_plain, data;
  if (auto f = OpenEnvelope(parts.meta, "meta", id, meta_scratch_, meta_plain)) return f;
  if (!repo::ParseObjMeta(meta_plain, meta_, &why)) return VerifyFailure{Stage::kEnvelope, why};
  if (auto f = OpenEnvelope(parts.data, "data", id, data_scratch_, data)) return f;

  // 3. Decompress.
  repo::ObjDecodeResult d = repo::DecodeObjData(meta_, data, decompressor_, plain_);
  switch (d.error) {
    case repo::ObjDecodeError::kNone:
      break;
    case repo::ObjDecodeError::kCsizeMismatch:
    case repo::ObjDecodeError::kPsizeTooLarge:
      return VerifyFailure{Stage::kEnvelope, "object metadata does not fit the data: " + d.message};
    case repo::ObjDecodeError::kUnknownCodec:
    case repo::ObjDecodeError::kDecompression:
      return VerifyFailure{Stage::kDecompression, "Decompression error: " + d.message};
    case repo::ObjDecodeError::kNonZeroPadding:
      break;  // reported after the id check, which is the stronger statement
  }

  // 4. Id.
  bool is_manifest = std::all_of(planned.id.begin(), planned.id.end(), [](uint8_t b) { return b == 0; });
  if (!is_manifest) {
    uint8_t computed[32];
    hasher_->Compute(plain_.view(), computed);
    if (!crypto::ConstantTimeEqual(Bytes(computed, 32), Bytes(id, 32))) {
      return VerifyFailure{Stage::kIdHash, "id verification failed"};
    }
  }
  if (d.error == repo::ObjDecodeError::kNonZeroPadding) return VerifyFailure{Stage::kDecompression, d.message};
  return std::nullopt;
}

void Borg2b5ObjectVerifier::ForEachSession(
    const std::function<void(Bytes session_id, crypto::SessionKdf kdf)>& fn) const {
  if (opener_) opener_->ForEachSession(fn);
}

}  // namespace borgcheck::run
