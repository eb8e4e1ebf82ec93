// Verifying one stored entry of a repository version 2 (borg 2.0.0b5) repository:
//   entry header CRC -> xxh64 of a PUT2 (or the whole-entry CRC of a legacy PUT)   [always]
//   -> split meta/data -> open the meta envelope -> msgpack meta -> open the data envelope
//   -> csize/psize -> decompress by ctype (size when meta has it) -> id hash     [verify-data]
// The manifest (id 00*32) skips the id check: its id is not a hash. Superseded entries are
// only checksummed (borg does not read them at all).
//
// VerifyBatch, given the id's lane hash, hashes the ids of several entries at once
// (crypto/hash_pipeline.h); the verdicts are Verify's.
//
// Thread contract: a Borg2b5Verifier is owned by exactly one pool worker and reused for
// every entry it verifies (envelope opener with its session-key cache, id hasher, hash lanes,
// decompressor and buffers are made once and are that worker's alone). It borrows the key type,
// the key material and the lane hash, which are made once per run, const, shared read-only by
// every worker's verifier and outlive the run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/crypto/aead.h"
#include "checker/crypto/borg2_key.h"
#include "checker/crypto/hash_pipeline.h"
#include "checker/repo/borg2b5/borg2b5_segments.h"
#include "checker/repo/borg2/borg2_repo_obj.h"
#include "checker/engine/object_verifier.h"
#include "codecs/decompressor.h"

namespace borgcheck::repo {

// ObjectRef::variant of an object a server handed over (io/object_service.h, `borg2 serve`'s
// get): the stored payload (RepoObj bytes) without the PUT2 entry header, whose CRC and xxh64
// digest the server checked (a legacy PUT's CRC too). Apart from the entry tags (0..3).
inline constexpr uint8_t kBorg2b5ServedPayload = 0x80;

class Borg2b5Verifier final : public engine::ObjectVerifier {
 public:
  // verify_data false: checksums only (type and key may be null). Otherwise `type` is the
  // repository's key class and `key` its material (null for mode none). id_lanes
  // (crypto::MakeBorg2IdLaneHash of the same key): VerifyBatch hashes ids in lanes; null: one
  // entry after the other (CheckOptions::hash_lanes false, or a BLAKE3 id).
  Borg2b5Verifier(bool verify_data, const crypto::Borg2KeyType* type, const crypto::Borg2KeyMaterial* key,
                  const crypto::LaneHash* id_lanes = nullptr);

  // kInternal when a context could not be made (checked once, before the run starts).
  const Status& status() const { return status_; }

  // Verifies a whole entry as planned (ref: its id and size; ref.variant its tag), or a served
  // payload alone (ref.variant kBorg2b5ServedPayload: no checksums here, they were the
  // server's). Live entries of a verify-data run get the verify-data stages; superseded ones
  // only their checksums. On success plaintext() holds the decompressed object (when decrypted).
  std::optional<engine::Verdict> Verify(Bytes entry, const engine::ObjectRef& ref) override;

  Bytes plaintext() const override { return plain_.view(); }

  void VerifyBatch(std::span<const Bytes> stored, std::span<const engine::ObjectRef> refs,
                   std::span<engine::ObjectResult> out) override;

  // Sessions whose envelopes authenticated, with the session-key derivation that worked.
  void ForEachSession(const std::function<void(Bytes session_id, crypto::SessionKdf kdf)>& fn) const;

 private:
  template <class>
  friend class IdLaneBatch;  // VerifyBatch's lanes (repo/borg2/id_lane_batch.h)
  // What Decode found out about an entry that did not fail before the id.
  struct Decoded {
    bool plaintext = false;        // decrypted and decompressed (a live entry, verify-data)
    bool check_id = false;         // not the manifest
    bool nonzero_padding = false;  // reported after the id
  };
  // One entry of a batch between Decode and Done.
  struct Item {
    std::optional<engine::Verdict> early;
    Decoded decoded;
    uint8_t id[32] = {};
    int slot = -1;
    uint64_t plaintext_bytes = 0;
  };
  // Verify up to the id: checksums, envelopes, meta, decompression into `plain`.
  std::optional<engine::Verdict> Decode(Bytes entry, const engine::ObjectRef& ref, ByteBuffer& plain,
                                        Decoded& decoded);
  // The id (computed over the plaintext) and the padding.
  std::optional<engine::Verdict> Judge(const engine::ObjectRef& ref, const Decoded& decoded,
                                       const uint8_t computed_id[32]) const;
  // Decode and Judge as IdLaneBatch calls them.
  std::optional<engine::Verdict> DecodeForLanes(Bytes entry, const engine::ObjectRef& ref, ByteBuffer& plain,
                                                Decoded& decoded) {
    return Decode(entry, ref, plain, decoded);
  }
  std::optional<engine::Verdict> JudgeForLanes(const engine::ObjectRef& ref, const Decoded& decoded,
                                               const uint8_t computed_id[32]) const {
    return Judge(ref, decoded, computed_id);
  }
  std::optional<engine::Verdict> OpenEnvelope(Bytes envelope, const char* which, const uint8_t id[32],
                                            ByteBuffer& scratch, Bytes& out);

  bool verify_data_;
  const crypto::Borg2KeyType* type_;
  Status status_;
  std::unique_ptr<crypto::EnvelopeOpener> opener_;
  std::unique_ptr<crypto::Borg2IdHasher> hasher_;
  codecs::Decompressor decompressor_;
  ObjMeta meta_;
  ByteBuffer meta_scratch_;
  ByteBuffer data_scratch_;
  ByteBuffer plain_;
  // Lanes (null without): the shared id hash, this worker's pipeline, buffers and items.
  const crypto::LaneHash* id_lanes_;
  std::unique_ptr<crypto::HashPipeline> pipeline_;
  crypto::LaneBuffers buffers_;
  std::vector<Item> items_;
};

// The manifest's TAM as 2.0.0b5 judges it (plaintext: the manifest, verified and decompressed):
// nullopt when it passes (or none is required: no key that requires one, manifest version 2 of
// b8 and later), else the finding's message.
std::optional<std::string> Borg2b5ManifestTamProblem(Bytes plaintext, const crypto::Borg2KeyType& type,
                                                     const crypto::Borg2KeyMaterial* key);

// The summary's note on which session-key derivation the AEAD sessions used (b5..b7 HKDF, b8..
// SHA-256), from every worker's Borg2b5Verifier (Finish).
// The AEAD sessions the verifiers authenticated: session id (hex) -> its key derivation.
using Borg2b5Sessions = std::map<std::string, crypto::SessionKdf>;
Borg2b5Sessions Borg2b5SessionsSeen(std::span<engine::ObjectVerifier* const> verifiers);
// The note that says which derivation the sessions used (`sessions`: what the verifiers saw,
// and a merge's shards' too), or none.
std::optional<std::string> Borg2b5SessionNote(const Borg2b5Sessions& sessions, bool verify_data,
                                              const crypto::Borg2KeyType* type);

}  // namespace borgcheck::repo
