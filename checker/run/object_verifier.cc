#include "checker/run/object_verifier.h"

#include <algorithm>

#include "checker/repo/segment_entry.h"
#include "checker/repo/segment_format.h"

namespace borgcheck::run {
using report::Stage;

ObjectVerifier::ObjectVerifier(bool verify_data, crypto::KeyMode mode, const crypto::KeyMaterial* key)
    : verify_data_(verify_data) {
  if (verify_data_) {
    opener_ = std::make_unique<crypto::ObjectOpener>(mode, key);
    hasher_ = std::make_unique<crypto::IdHasher>(mode, key);
  }
}

Status ObjectVerifier::status() const {
  if (!verify_data_) return Status::Ok();
  if (!opener_->status().ok()) return opener_->status();
  return hasher_->status();
}

std::optional<VerifyFailure> ObjectVerifier::Verify(Bytes entry, const uint8_t id[32]) {
  nonzero_padding_ = false;
  plain_.Clear();
  if (!repo::EntryCrcMatches(entry)) {
    return VerifyFailure{Stage::kEntryCrc, "Segment entry checksum mismatch"};
  }
  if (!verify_data_) return std::nullopt;
  Bytes obj = entry.subspan(repo::kHeaderSizeWithKey);
  Bytes payload;
  crypto::OpenResult opened = opener_->Open(obj, scratch_, payload);
  if (opened.outcome == crypto::OpenOutcome::kBadEnvelope) {
    return VerifyFailure{Stage::kEnvelope, opened.message};
  }
  if (opened.outcome == crypto::OpenOutcome::kBadMac) {
    return VerifyFailure{Stage::kAuthentication, opened.message};
  }
  codecs::DecodeResult d = decompressor_.DecodeBorg1(payload, plain_);
  if (!d.ok) {
    return VerifyFailure{Stage::kDecompression, "Decompression error: " + d.error};
  }
  bool is_manifest = std::all_of(id, id + 32, [](uint8_t b) { return b == 0; });
  if (!is_manifest) {
    uint8_t computed[32];
    hasher_->Compute(plain_.view(), computed);
    if (!crypto::ConstantTimeEqual(Bytes(computed, 32), Bytes(id, 32))) {
      return VerifyFailure{Stage::kIdHash, "id verification failed"};
    }
  }
  if (d.nonzero_padding) {
    // borg writes zero padding; in the unencrypted modes nothing else covers it (spec §6.5).
    return VerifyFailure{Stage::kDecompression,
                         "obfuscation padding is not all zero bytes (the stored object was altered "
                         "after it was written; borg does not detect this)"};
  }
  return std::nullopt;
}

}  // namespace borgcheck::run
