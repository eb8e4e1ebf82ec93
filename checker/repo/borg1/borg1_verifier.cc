#include "checker/repo/borg1/borg1_verifier.h"

#include <algorithm>

#include "checker/crypto/tam.h"
#include "checker/repo/chunk_id.h"
#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/segment_log/segment_format.h"

namespace borgcheck::repo {
using engine::Verdict;
using report::Stage;

Borg1Verifier::Borg1Verifier(bool verify_data, crypto::KeyMode mode, const crypto::KeyMaterial* key,
                             const crypto::Borg1LaneHashes* lanes)
    : verify_data_(verify_data), mode_(mode), lanes_(verify_data ? lanes : nullptr) {
  if (verify_data_) {
    opener_ = std::make_unique<crypto::ObjectOpener>(mode, key);
    hasher_ = std::make_unique<crypto::IdHasher>(mode, key);
  }
  if (lanes_) pipeline_ = std::make_unique<crypto::HashPipeline>();
}

Status Borg1Verifier::status() const {
  if (!verify_data_) return Status::Ok();
  if (!opener_->status().ok()) return opener_->status();
  if (pipeline_ && !pipeline_->status().ok()) return pipeline_->status();
  return hasher_->status();
}

std::optional<Verdict> Borg1Verifier::VerifyAs(Bytes entry, const uint8_t* id) {
  engine::ObjectRef ref;
  std::copy(id, id + 32, ref.id.begin());
  ref.size = uint32_t(entry.size());
  return Verify(entry, ref);
}

std::optional<Verdict> Borg1Verifier::Verify(Bytes entry, const engine::ObjectRef& ref) {
  plain_.Clear();
  const bool served = ref.variant == kBorg1ServedPayload;
  if (!served && !EntryCrcMatches(entry)) return Verdict{Stage::kEntryCrc, "Segment entry checksum mismatch"};
  if (!verify_data_) return std::nullopt;
  Bytes obj = served ? entry : entry.subspan(kHeaderSizeWithKey);
  Bytes payload;
  crypto::OpenResult opened = opener_->Open(obj, scratch_, payload);
  if (opened.outcome == crypto::OpenOutcome::kBadEnvelope) return Verdict{Stage::kEnvelope, opened.message};
  if (opened.outcome == crypto::OpenOutcome::kBadMac) return Verdict{Stage::kAuthentication, opened.message};
  codecs::DecodeResult d = decompressor_.DecodeBorg1(payload, plain_);
  if (!d.ok) return Verdict{Stage::kDecompression, "Decompression error: " + d.error};
  if (!IsManifestId(ref.id)) {
    uint8_t computed[32];
    hasher_->Compute(plain_.view(), computed);
    if (!crypto::ConstantTimeEqual(Bytes(computed, 32), Bytes(ref.id.data(), 32))) {
      return Verdict{Stage::kIdHash, "id verification failed"};
    }
  }
  if (d.nonzero_padding) return engine::PaddingVerdict(crypto::IsEncrypted(mode_));
  return std::nullopt;
}

// The batch's objects for the pipeline: Decode checks the CRC and the envelope, decrypts and
// decompresses into a lane buffer and hands over the MAC and id messages; Done judges the object
// in Verify's order.
class Borg1Verifier::BatchItems final : public crypto::HashPipeline::Items {
 public:
  BatchItems(Borg1Verifier& v, std::span<const Bytes> stored, std::span<const engine::ObjectRef> refs,
             std::span<engine::ObjectResult> out)
      : v_(v), stored_(stored), refs_(refs), out_(out) {}

  int Decode(size_t i, crypto::HashPipeline::Job* jobs, bool must) override {
    Bytes entry = stored_[i];
    const int slot = v_.buffers_.Acquire(entry.size(), must);
    if (slot < 0) return -1;
    Item& it = v_.items_[i];
    it = Item();
    it.slot = slot;
    const bool served = refs_[i].variant == kBorg1ServedPayload;
    if (!served && !EntryCrcMatches(entry)) {
      it.early = Verdict{Stage::kEntryCrc, "Segment entry checksum mismatch"};
      return 0;
    }
    Bytes payload, mac_message;
    crypto::OpenResult opened = v_.opener_->OpenDeferringMac(served ? entry : entry.subspan(kHeaderSizeWithKey),
                                                             v_.scratch_, payload, mac_message, it.stored_mac);
    if (opened.outcome != crypto::OpenOutcome::kOk) {
      it.early = Verdict{Stage::kEnvelope, opened.message};
      return 0;
    }
    int k = 0;
    if (crypto::IsEncrypted(v_.mode_)) {
      it.check_mac = true;
      jobs[k++] = {&*v_.lanes_->mac, mac_message, Bytes(), it.mac};
    }
    ByteBuffer& plain = v_.buffers_.buffer(slot);
    codecs::DecodeResult d = v_.decompressor_.DecodeBorg1(payload, plain);
    if (!d.ok) {
      it.decode_error = "Decompression error: " + d.error;
      return k;
    }
    v_.buffers_.Hold(slot, plain.size());
    it.plaintext_bytes = plain.size();
    it.nonzero_padding = d.nonzero_padding;
    if (!IsManifestId(refs_[i].id)) {
      it.check_id = true;
      jobs[k++] = {&*v_.lanes_->id, plain.view(), Bytes(), it.id};
    }
    return k;
  }

  void Done(size_t i) override {
    Item& it = v_.items_[i];
    engine::ObjectResult& r = out_[i];
    if (it.early) {
      r.verdict = std::move(it.early);
    } else if (it.check_mac && !crypto::MacMatches(it.mac, it.stored_mac)) {
      r.verdict = Verdict{Stage::kAuthentication, "MAC Authentication failed"};
    } else if (!it.decode_error.empty()) {
      r.verdict = Verdict{Stage::kDecompression, std::move(it.decode_error)};
    } else if (it.check_id && !crypto::ConstantTimeEqual(Bytes(it.id, 32), Bytes(refs_[i].id.data(), 32))) {
      r.verdict = Verdict{Stage::kIdHash, "id verification failed"};
    } else if (it.nonzero_padding) {
      r.verdict = engine::PaddingVerdict(crypto::IsEncrypted(v_.mode_));
    } else {
      r.plaintext_bytes = it.plaintext_bytes;
    }
    v_.buffers_.Release(it.slot);
  }

 private:
  Borg1Verifier& v_;
  std::span<const Bytes> stored_;
  std::span<const engine::ObjectRef> refs_;
  std::span<engine::ObjectResult> out_;
};

void Borg1Verifier::VerifyBatch(std::span<const Bytes> stored, std::span<const engine::ObjectRef> refs,
                                std::span<engine::ObjectResult> out) {
  if (!lanes_) {
    ObjectVerifier::VerifyBatch(stored, refs, out);
    return;
  }
  items_.resize(std::max(items_.size(), refs.size()));
  BatchItems items(*this, stored, refs, out);
  pipeline_->Run(refs.size(), items);
}

std::optional<std::string> Borg1ManifestTamProblem(Bytes plaintext, crypto::KeyMode mode,
                                                   const crypto::KeyMaterial* key) {
  const crypto::TamResult tam = crypto::VerifyManifestTam(plaintext, mode, key);
  const bool bad = tam.outcome == crypto::TamOutcome::kMismatch || tam.outcome == crypto::TamOutcome::kMalformed ||
                   (tam.outcome == crypto::TamOutcome::kAbsent && key && key->tam_required);
  if (!bad) return std::nullopt;
  return "manifest TAM: " + (tam.message.empty() ? std::string("no TAM although the key requires one") : tam.message);
}

}  // namespace borgcheck::repo
