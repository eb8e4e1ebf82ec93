// Verifying one RepoObj blob of repository version 4 (spec borg2-format.md §B.4), the master
// counterpart of object_verifier.h:
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
//
// Thread contract: a MasterObjectVerifier is owned by exactly one pool worker and reused for
// every blob that worker verifies (crypto contexts, decompressor and scratch buffers are made
// once). It copies what it needs of the key, so the key only has to live during construction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "checker/base/bytes.h"
#include "checker/crypto/borg2master_crypto.h"
#include "checker/repo/borgstore.h"
#include "checker/run/object_verifier.h"
#include "codecs/decompressor.h"

namespace borgcheck::run {

class MasterObjectVerifier {
 public:
  // type == nullptr or verify_data == false: the keyless tier (structure only).
  // crypt_key / id_key: empty for the none-* types.
  MasterObjectVerifier(bool verify_data, const crypto::MasterKeyType* type, Bytes crypt_key, Bytes id_key);

  // Check once after construction (see MasterObjectCrypto::status()).
  const Status& status() const;

  // Verifies one whole blob that is checked as chunk `id`. Returns the first failure (stage and
  // borg-like message) or nullopt. On success plaintext() holds the decompressed object
  // (verify-data) and meta() its meta map.
  std::optional<VerifyFailure> Verify(Bytes blob, const repo::ChunkId& id);

  Bytes plaintext() const { return plain_.view(); }
  const repo::ObjectMeta& meta() const { return meta_; }

 private:
  bool verify_data_;
  Status status_;
  std::unique_ptr<crypto::MasterObjectCrypto> crypto_;
  codecs::Decompressor decompressor_;
  ByteBuffer meta_scratch_;
  ByteBuffer data_scratch_;
  ByteBuffer plain_;
  repo::ObjectMeta meta_;
};

// The codec of a borg 2 `ctype`; nullopt for an unknown one.
std::optional<codecs::CodecId> CodecFromCtype(uint64_t ctype);

}  // namespace borgcheck::run
