// Verifying one stored object: entry CRC -> envelope -> MAC + decrypt -> decompress ->
// id re-hash (the manifest, id 00*32, skips the id check: its id is not a hash).
//
// Thread contract: an ObjectVerifier is owned by exactly one pool worker and reused for
// every object that worker verifies (its cipher/MAC/hash contexts, decompressor and scratch
// buffers are made once). It borrows the KeyMaterial, which is const after load and outlives
// the run. Nothing in it is shared with other workers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/crypto/key_blob.h"
#include "checker/crypto/key_mode.h"
#include "checker/crypto/object_crypto.h"
#include "checker/report/finding.h"
#include "codecs/decompressor.h"

namespace borgcheck::run {

struct VerifyFailure {
  report::Stage stage;
  std::string message;
  report::Severity severity = report::Severity::kError;
};

class ObjectVerifier {
 public:
  // key may be null for a keyless (CRC-only) check or mode none; verify_data false means CRC only.
  ObjectVerifier(bool verify_data, crypto::KeyMode mode, const crypto::KeyMaterial* key);

  // Verifies a whole segment entry (header included) whose index key is `id`. Returns the
  // first failure, or nullopt. On success plaintext() holds the decompressed object (verify
  // mode) and plaintext_size() its size.
  std::optional<VerifyFailure> Verify(Bytes entry, const uint8_t id[32]);

  // Whether the crypto contexts were made (checked once after construction).
  Status status() const;

  Bytes plaintext() const { return plain_.view(); }
  // Set when the last object passed but had non-zero obfuscation padding (reported separately).
  bool last_nonzero_padding() const { return nonzero_padding_; }

 private:
  bool verify_data_;
  std::unique_ptr<crypto::ObjectOpener> opener_;
  std::unique_ptr<crypto::IdHasher> hasher_;
  codecs::Decompressor decompressor_;
  ByteBuffer scratch_;
  ByteBuffer plain_;
  bool nonzero_padding_ = false;
};

}  // namespace borgcheck::run
