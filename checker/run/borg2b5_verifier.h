// Verifying one stored entry of a repository version 2 (borg 2.0.0b5) repository:
//   entry header CRC -> xxh64 of a PUT2 (or the whole-entry CRC of a legacy PUT)   [always]
//   -> split meta/data -> open the meta envelope -> msgpack meta -> open the data envelope
//   -> csize/psize -> decompress by ctype (size when meta has it) -> id hash     [verify-data]
// The manifest (id 00*32) skips the id check: its id is not a hash. Superseded entries are
// only checksummed (borg does not read them at all).
//
// Thread contract: a Borg2b5ObjectVerifier is owned by exactly one pool worker and reused for
// every entry it verifies (envelope opener with its session-key cache, id hasher, decompressor
// and buffers are made once). It borrows the key type and key material, which are const after
// load and outlive the run; nothing in it is shared with other workers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "checker/base/bytes.h"
#include "checker/crypto/aead.h"
#include "checker/crypto/borg2_key.h"
#include "checker/repo/borg2_segments.h"
#include "checker/repo/repo_obj.h"
#include "checker/run/object_verifier.h"
#include "codecs/decompressor.h"

namespace borgcheck::run {

class Borg2b5ObjectVerifier {
 public:
  // verify_data false: checksums only (type and key may be null). Otherwise `type` is the
  // repository's key class and `key` its material (null for mode none).
  Borg2b5ObjectVerifier(bool verify_data, const crypto::Borg2KeyType* type,
                        const crypto::Borg2KeyMaterial* key);

  // kInternal when a context could not be made (checked once, before the run starts).
  const Status& status() const { return status_; }

  // Verifies a whole entry as planned (`planned` gives its tag, size and id). `decrypt`: run
  // the verify-data stages (live entries in a verify-data run). Returns the first failure, or
  // nullopt; on success plaintext() holds the decompressed object (when decrypted).
  std::optional<VerifyFailure> Verify(Bytes entry, const repo::Borg2Entry& planned, bool decrypt);

  Bytes plaintext() const { return plain_.view(); }

  // Sessions whose envelopes authenticated, with the session-key derivation that worked.
  void ForEachSession(const std::function<void(Bytes session_id, crypto::SessionKdf kdf)>& fn) const;

 private:
  std::optional<VerifyFailure> OpenEnvelope(Bytes envelope, const char* which, const uint8_t id[32],
                                            ByteBuffer& scratch, Bytes& out);

  bool verify_data_;
  const crypto::Borg2KeyType* type_;
  Status status_;
  std::unique_ptr<crypto::EnvelopeOpener> opener_;
  std::unique_ptr<crypto::Borg2IdHasher> hasher_;
  codecs::Decompressor decompressor_;
  repo::ObjMeta meta_;
  ByteBuffer meta_scratch_;
  ByteBuffer data_scratch_;
  ByteBuffer plain_;
};

}  // namespace borgcheck::run
