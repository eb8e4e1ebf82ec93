// The batch of a borg 2 verifier (2.0.0b5's Borg2b5Verifier, version 4's BorgstoreVerifier) for
// crypto::HashPipeline: both decode an object up to its id into a lane buffer (envelopes, meta,
// decompression; AEAD tags are one stream by construction) and hash only the id in lanes, then
// judge the id and the padding. What differs is only how a generation decodes and judges, so
// this is written once, for any verifier V with:
//   V::Item      { std::optional<engine::Verdict> early; V::Decoded decoded; uint8_t id[32];
//                  int slot; uint64_t plaintext_bytes; }, V::Decoded with bools `plaintext`
//                  (decrypted and decompressed) and `check_id` (not the manifest);
//   V::buffers_ (crypto::LaneBuffers), V::items_ (std::vector<V::Item>, at least the batch's
//   size), V::id_lanes_ (the shared crypto::LaneHash);
//   V::DecodeForLanes(Bytes stored, const engine::ObjectRef&, ByteBuffer& plain, V::Decoded&)
//   and V::JudgeForLanes(const engine::ObjectRef&, const V::Decoded&, const uint8_t id[32]),
//   which return the verdict of a failure or nullopt (V befriends IdLaneBatch<V>).
//
// Thread contract: made by its verifier inside VerifyBatch and used by that verifier's pipeline
// on the same worker only; it holds references to the verifier and to the batch's spans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "checker/base/bytes.h"
#include "checker/crypto/hash_pipeline.h"
#include "checker/engine/object_verifier.h"

namespace borgcheck::repo {

template <class V>
class IdLaneBatch final : public crypto::HashPipeline::Items {
 public:
  IdLaneBatch(V& v, std::span<const Bytes> stored, std::span<const engine::ObjectRef> refs,
              std::span<engine::ObjectResult> out)
      : v_(v), stored_(stored), refs_(refs), out_(out) {}

  int Decode(size_t i, crypto::HashPipeline::Job* jobs, bool must) override {
    const int slot = v_.buffers_.Acquire(stored_[i].size(), must);
    if (slot < 0) return -1;
    typename V::Item& it = v_.items_[i];
    it = typename V::Item();
    it.slot = slot;
    ByteBuffer& plain = v_.buffers_.buffer(slot);
    it.early = v_.DecodeForLanes(stored_[i], refs_[i], plain, it.decoded);
    if (it.early || !it.decoded.plaintext) return 0;
    v_.buffers_.Hold(slot, plain.size());
    it.plaintext_bytes = plain.size();
    if (!it.decoded.check_id) return 0;
    jobs[0] = {v_.id_lanes_, plain.view(), Bytes(), it.id};
    return 1;
  }

  void Done(size_t i) override {
    typename V::Item& it = v_.items_[i];
    engine::ObjectResult& r = out_[i];
    if (it.early) {
      r.verdict = std::move(it.early);
    } else if (it.decoded.plaintext) {
      r.verdict = v_.JudgeForLanes(refs_[i], it.decoded, it.id);
      if (!r.verdict) r.plaintext_bytes = it.plaintext_bytes;
    }
    v_.buffers_.Release(it.slot);
  }

 private:
  V& v_;
  std::span<const Bytes> stored_;
  std::span<const engine::ObjectRef> refs_;
  std::span<engine::ObjectResult> out_;
};

}  // namespace borgcheck::repo
