// What a repository generation hands the engine to verify, and the verifier that checks one
// stored object. Headers only: the generations implement these (checker/repo/<gen>/), the
// engine (engine.h) drives them. See docs/design.md for the pipeline.
//
// Thread contract: ObjectRef, Verdict and ObjectResult are values. An ObjectVerifier is owned by
// exactly one pool worker and reused for every object that worker verifies (it makes its cipher,
// MAC, hash and codec contexts, its hash lanes and its buffers once); nothing in it is shared
// between workers. What it borrows from its source (key material, lane keys, the plan) is const
// while the pool runs and outlives it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "checker/base/bytes.h"
#include "checker/report/finding.h"

namespace borgcheck::engine {

using ChunkId = report::ChunkId;

// How an object takes part in the check. The engine decides the wording and the counting from
// this, once for every generation.
enum class ObjectRole : uint8_t {
  kLive,        // a current object: counted in the totals, every check runs
  kSuperseded,  // an older copy the log still holds (2.0.0b5): checksums only, not counted; a
                // failure is a warning, no current object is affected
  kOrphan,      // an object no index lists (version 4): verified fully and counted; its
                // findings say so
};

// One stored object within a block of bytes a source read (see object_source.h). A value,
// written by the source before it is handed over and read by one worker.
struct ObjectRef {
  ChunkId id{};               // the id it is checked as
  uint64_t pos = 0;           // where its bytes start within the block
  uint64_t file_offset = 0;   // where they start in the unit's file (location, second read)
  uint32_t size = 0;          // its stored bytes (a whole entry or blob)
  ObjectRole role = ObjectRole::kLive;
  uint8_t variant = 0;        // source-defined (2.0.0b5: the planned entry tag)
};

// Why one object failed: the first failing stage, its severity and borg-like words. The
// message never repeats the chunk id or the location: the finding carries both.
struct Verdict {
  report::Stage stage = report::Stage::kEnvelope;
  std::string message;
  report::Severity severity = report::Severity::kError;
};

// The one padding policy of every generation: obfuscation padding is not all zero bytes. borg
// always pads with zeros and never checks them. Where a MAC covers the padding, whoever wrote it
// had the key (borg, or a tool of the key's owner), so the data is as borg stored it: a warning.
// Where nothing authenticates it (modes none and authenticated, unkeyed hashes), it was altered
// after it was written: an error. Reported after the id check, which is the stronger statement.
inline Verdict PaddingVerdict(bool padding_is_authenticated) {
  if (padding_is_authenticated) {
    return Verdict{report::Stage::kDecompression,
                   "obfuscation padding is not all zero bytes (authenticated, so written with the key; borg "
                   "writes zeros and does not check them)",
                   report::Severity::kWarning};
  }
  return Verdict{report::Stage::kDecompression,
                 "obfuscation padding is not all zero bytes (no key authenticates it: the stored object was "
                 "altered after it was written; borg does not check this)",
                 report::Severity::kError};
}

// What VerifyBatch found for one object.
struct ObjectResult {
  std::optional<Verdict> verdict;  // the first failure, as Verify returns it; nullopt: verified
  uint64_t plaintext_bytes = 0;    // on success: plaintext().size() as Verify would leave it
};

class ObjectVerifier {
 public:
  virtual ~ObjectVerifier() = default;

  // Verifies the stored bytes of `ref` (exactly ref.size bytes). Returns the first failure, or
  // nullopt; on success plaintext() holds the decrypted, decompressed object where the check
  // produced one (verify-data), until the next call.
  virtual std::optional<Verdict> Verify(Bytes stored, const ObjectRef& ref) = 0;
  virtual Bytes plaintext() const = 0;

  // Verifies refs[i] over stored[i] for every i (the spans have one length) into out[i]: the
  // verdict Verify would return for that object alone and the plaintext size. A verifier may
  // work on several objects at once (hash lanes: the MAC of one object hashed beside the id of
  // another); the verdicts are the same as one by one. plaintext() is unspecified afterwards.
  // The default verifies one object after the other.
  virtual void VerifyBatch(std::span<const Bytes> stored, std::span<const ObjectRef> refs,
                           std::span<ObjectResult> out) {
    for (size_t i = 0; i < refs.size(); ++i) {
      out[i].verdict = Verify(stored[i], refs[i]);
      out[i].plaintext_bytes = out[i].verdict ? 0 : plaintext().size();
    }
  }
};

}  // namespace borgcheck::engine
