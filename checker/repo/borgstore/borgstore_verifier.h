// Verifying one RepoObj blob of repository version 4 (spec borg2-format.md §B.4):
//
//   1. structure: magic, version 1 | 2, 49 + meta_size + data_size == the bytes read, and the
//      header's chunk id == the id the object is checked as (v1 headers are unauthenticated, so
//      this is compared explicitly; for v2 the AAD binds it as well)
//   --- keyless tier stops here ---
//   2. meta envelope: AAD = header[0:41] || 'M' (v2) or nothing (v1); authenticate, decrypt
//   3. meta map: msgpack {type, ctype, clevel, csize, size?, psize?, olevel?}
//   4. data envelope: AAD = header[0:41] || 'D' (v2) or nothing (v1)
//   5. csize == len(data), psize <= csize, decompress data[:psize] by ctype, size (if present)
//   6. id_hash(plaintext) == chunk id (always: verify-data makes it mandatory); the manifest
//      (id 00*32) is exempt and must instead carry meta type "M".
//   7. obfuscation padding all zero (engine::PaddingVerdict: keyed tags and AEAD cover it).
//
// VerifyBatch, given the id's lane hash, hashes the ids of several blobs at once
// (crypto/hash_pipeline.h); the verdicts are Verify's. (The tagged envelopes' tags, 0x60/0x80,
// are still hashed one at a time by MasterObjectCrypto::Open.)
//
// Thread contract: a BorgstoreVerifier is owned by exactly one pool worker and reused for every
// blob that worker verifies (crypto contexts, hash lanes, decompressor and scratch buffers are
// made once and are that worker's alone). It copies what it needs of the key, so the key only
// has to live during construction; the lane hash is made once per run, const, shared read-only
// by every worker's verifier, and must outlive the verifier.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/crypto/borg2master_crypto.h"
#include "checker/crypto/hash_pipeline.h"
#include "checker/engine/object_verifier.h"
#include "checker/repo/borg2/borg2_repo_obj.h"
#include "checker/repo/borgstore/borgstore_layout.h"
#include "codecs/decompressor.h"

namespace borgcheck::repo {

class BorgstoreVerifier final : public engine::ObjectVerifier {
 public:
  // type == nullptr or verify_data == false: the keyless tier (structure only).
  // crypt_key / id_key: empty for the none-* types. id_lanes (crypto::MakeBorg2IdLaneHash of the
  // same id hash and key): VerifyBatch hashes ids in lanes; null: one blob after the other.
  BorgstoreVerifier(bool verify_data, const crypto::MasterKeyType* type, Bytes crypt_key, Bytes id_key,
                    const crypto::LaneHash* id_lanes = nullptr);

  // Check once after construction (see MasterObjectCrypto::status()).
  const Status& status() const { return status_; }

  std::optional<engine::Verdict> Verify(Bytes blob, const engine::ObjectRef& ref) override;
  // The same for a blob checked as chunk `id` (the manifest, which is in no pack).
  std::optional<engine::Verdict> VerifyAs(Bytes blob, const ChunkId& id);

  // On success: the decompressed object (verify-data) and its meta map.
  Bytes plaintext() const override { return plain_.view(); }
  const ObjMeta& meta() const { return meta_; }

  void VerifyBatch(std::span<const Bytes> stored, std::span<const engine::ObjectRef> refs,
                   std::span<engine::ObjectResult> out) override;

 private:
  template <class>
  friend class IdLaneBatch;  // VerifyBatch's lanes (repo/borg2/id_lane_batch.h)
  // What Decode found out about a blob that did not fail before the id.
  struct Decoded {
    bool plaintext = false;        // decrypted and decompressed (verify-data)
    bool check_id = false;         // not the manifest
    bool nonzero_padding = false;  // reported after the id
  };
  struct Item {
    std::optional<engine::Verdict> early;
    Decoded decoded;
    uint8_t id[32] = {};
    int slot = -1;
    uint64_t plaintext_bytes = 0;
  };
  // VerifyAs up to the id: structure, envelopes, meta, sizes, decompression into `plain`.
  std::optional<engine::Verdict> Decode(Bytes blob, const ChunkId& id, ByteBuffer& plain, ObjMeta& meta,
                                        Decoded& decoded);
  // The id (computed over the plaintext) and the padding.
  std::optional<engine::Verdict> Judge(const ChunkId& id, const Decoded& decoded, const uint8_t computed_id[32]) const;
  // Decode and Judge as IdLaneBatch calls them.
  std::optional<engine::Verdict> DecodeForLanes(Bytes blob, const engine::ObjectRef& ref, ByteBuffer& plain,
                                                Decoded& decoded) {
    return Decode(blob, ref.id, plain, meta_, decoded);
  }
  std::optional<engine::Verdict> JudgeForLanes(const engine::ObjectRef& ref, const Decoded& decoded,
                                               const uint8_t computed_id[32]) const {
    return Judge(ref.id, decoded, computed_id);
  }

  const bool verify_data_;
  Status status_;
  std::unique_ptr<crypto::MasterObjectCrypto> crypto_;
  codecs::Decompressor decompressor_;
  ByteBuffer meta_scratch_;
  ByteBuffer data_scratch_;
  ByteBuffer plain_;
  ObjMeta meta_;
  // Lanes (null without): the shared id hash, this worker's pipeline, buffers and items.
  const crypto::LaneHash* id_lanes_;
  std::unique_ptr<crypto::HashPipeline> pipeline_;
  crypto::LaneBuffers buffers_;
  std::vector<Item> items_;
};

}  // namespace borgcheck::repo
