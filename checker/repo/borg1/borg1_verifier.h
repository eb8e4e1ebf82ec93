// Verifying one stored object of a borg 1.x repository: entry CRC -> envelope -> MAC + decrypt
// -> decompress -> id re-hash (the manifest, id 00*32, skips the id check: its id is not a
// hash) -> obfuscation padding (engine::PaddingVerdict: the AES modes' MAC covers it; modes none
// and authenticated have nothing that does).
//
// VerifyBatch, given lane hashes, hashes several objects at once (crypto/hash_pipeline.h): per
// object the MAC over IV||ciphertext (the AES modes) and the id over the plaintext, the MAC of
// one object beside the id of another; the payload is decrypted before its MAC is known (AES-CTR)
// and the verdict keeps Verify's order (a failed MAC is reported before anything after it).
//
// Thread contract: a Borg1Verifier is owned by exactly one pool worker and reused for every
// object that worker verifies (its cipher/MAC/hash contexts, hash lanes, decompressor and
// plaintext buffers are made once and are that worker's alone). It borrows the KeyMaterial and
// the lane hashes, which are made once per run, const, shared read-only by every worker's
// verifier and outlive the run.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/crypto/key_blob.h"
#include "checker/crypto/hash_pipeline.h"
#include "checker/crypto/key_mode.h"
#include "checker/crypto/object_crypto.h"
#include "checker/engine/object_verifier.h"
#include "codecs/decompressor.h"

namespace borgcheck::repo {

// ObjectRef::variant of an object a server handed over (io/object_service.h, `borg serve`):
// the stored payload without the entry header, whose CRC and header the server checked.
inline constexpr uint8_t kBorg1ServedPayload = 1;

class Borg1Verifier final : public engine::ObjectVerifier {
 public:
  // key may be null for a keyless (CRC-only) check or mode none; verify_data false means CRC only.
  // lanes (MakeBorg1LaneHashes of the same key): VerifyBatch uses hash lanes; null: it verifies
  // one object after the other (CheckOptions::hash_lanes false).
  Borg1Verifier(bool verify_data, crypto::KeyMode mode, const crypto::KeyMaterial* key,
                const crypto::Borg1LaneHashes* lanes = nullptr);

  // Whether the crypto contexts were made (checked once after construction).
  Status status() const;

  // Verifies a whole segment entry (header included) stored as chunk ref.id, or its payload
  // alone when ref.variant is kBorg1ServedPayload (the CRC is then the server's to check). On
  // success plaintext() holds the decompressed object (verify-data).
  std::optional<engine::Verdict> Verify(Bytes entry, const engine::ObjectRef& ref) override;
  // The same for an entry checked as chunk `id` (32 bytes).
  std::optional<engine::Verdict> VerifyAs(Bytes entry, const uint8_t* id);

  Bytes plaintext() const override { return plain_.view(); }

  void VerifyBatch(std::span<const Bytes> stored, std::span<const engine::ObjectRef> refs,
                   std::span<engine::ObjectResult> out) override;

 private:
  class BatchItems;
  // One object of a batch between Decode and Done (hash_pipeline.h).
  struct Item {
    std::optional<engine::Verdict> early;  // failed before any hash (CRC, envelope)
    Bytes stored_mac;
    uint8_t mac[32] = {};
    uint8_t id[32] = {};
    bool check_mac = false;
    bool check_id = false;
    bool nonzero_padding = false;
    std::string decode_error;  // non-empty: decompression failed
    int slot = -1;
    uint64_t plaintext_bytes = 0;
  };

  const bool verify_data_;
  const crypto::KeyMode mode_;
  std::unique_ptr<crypto::ObjectOpener> opener_;
  std::unique_ptr<crypto::IdHasher> hasher_;
  codecs::Decompressor decompressor_;
  ByteBuffer scratch_;
  ByteBuffer plain_;
  // Lanes (null without): the shared hashes, this worker's pipeline, buffers and items.
  const crypto::Borg1LaneHashes* lanes_;
  std::unique_ptr<crypto::HashPipeline> pipeline_;
  crypto::LaneBuffers buffers_;
  std::vector<Item> items_;
};

// The manifest's TAM as borg 1.x judges it (plaintext: the manifest, verified and decompressed):
// nullopt when it passes or none is required (a key that does not require one), else the
// finding's message. Local and served runs share it.
std::optional<std::string> Borg1ManifestTamProblem(Bytes plaintext, crypto::KeyMode mode,
                                                   const crypto::KeyMaterial* key);

}  // namespace borgcheck::repo
