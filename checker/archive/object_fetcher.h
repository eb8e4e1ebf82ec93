// What the archive walker needs from the engine: plaintexts of metadata objects, and a
// per-chunk table that records references and says which chunks are bad.
//
// Thread contract: the walker calls both interfaces from every thread that runs a walk
// (pool workers), concurrently; implementations must be safe for concurrent use. Neither may
// call back into the walker.
#pragma once

#include <optional>
#include <string>

#include "checker/archive/archive_types.h"
#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/report/finding.h"

namespace borgcheck::archive {

struct ArchiveInfo;

enum class FetchStatus : uint8_t {
  kOk,
  kMissing,  // not in the repository (no index entry, no pack, no segment entry)
  kDamaged,  // stored, but it could not be read or verified: see FetchProblem
};

// Why an object could not be had: the stage and message of the engine's own finding for it
// (e.g. kAuthentication, "MAC Authentication failed").
struct FetchProblem {
  report::Stage stage = report::Stage::kMissing;
  std::string message;
};

class ObjectFetcher {
 public:
  virtual ~ObjectFetcher() = default;

  // Reads `id`, authenticates, decrypts and decompresses it and checks its id hash (and, in
  // borg 2 master, that its meta type is the one `kind` names); on kOk `plaintext` holds the
  // plaintext, otherwise `problem` says why not. `plaintext` is the caller's reused buffer.
  virtual FetchStatus Fetch(const ChunkId& id, ObjectKind kind, ByteBuffer& plaintext,
                            FetchProblem& problem) = 0;

  // Checks on a decoded archive object that need the key: the archive TAM, where the
  // repository requires it (borg 1.2.5+ and 1.4 with a keyed mode: "Archive TAM
  // authentication issue for archive <name>: ..."). borg refuses such an archive; the walker
  // reports the problem and walks it all the same (its chunks carry their own MACs). The
  // default checks nothing (borg 1.2.4, 2.x).
  virtual std::optional<FetchProblem> VerifyArchive(const ChunkId& /*id*/, Bytes /*plaintext*/,
                                                    const ArchiveInfo& /*info*/) {
    return std::nullopt;
  }
};

// The one rule for a file a fetcher could not open or read (io/env.h's classes): one that is
// not there or is not a regular file is damage (stage missing); one that exists and cannot be
// read (EACCES, EIO, a short read, a lost connection) is "could not check" (stage io), never
// damage. Fills `p` ("<what>: <reason>") and returns kDamaged.
inline FetchStatus CouldNotRead(FetchProblem& p, const Status& s, const std::string& what) {
  p.stage = s.code() == StatusCode::kIoError ? report::Stage::kIo : report::Stage::kMissing;
  p.message = what + ": " + s.message();
  return FetchStatus::kDamaged;
}

// The caller's per-chunk table: one mark per indexed chunk (not per reference). Reference()
// marks `id` as referenced by the walked archives (what the orphan count and a selected
// --verify-data read) and says whether it is present, bad or missing. Called once per
// reference in every item-stream chunk the walker decodes (not per archive that reuses it:
// marks are a set, see archive_walker.h), and once per archive object, item_ptrs chunk and
// item-stream chunk id of every walked archive.
class ReferenceTable {
 public:
  virtual ~ReferenceTable() = default;
  virtual RefState Reference(const ChunkId& id) = 0;
};

}  // namespace borgcheck::archive
