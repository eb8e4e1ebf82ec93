// Integrity findings: the second of borgcheck's two error channels (see checker/base/status.h
// for the first). A Finding is a value handed to the FindingSink while the run goes on; a bad
// object spoils only itself. Severity is a field, not a subclass.
//
// Thread contract: Finding is a plain value. FindingSink is safe for concurrent use (workers
// add findings from any thread; guarded by mu_). Sorted() is called once, after the workers
// have stopped.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace borgcheck::report {

using ChunkId = std::array<uint8_t, 32>;

// Where in the pipeline a problem was seen. The names are part of the JSON contract.
enum class Stage {
  kEntryCrc,        // "entry-crc": segment entry CRC32 mismatch
  kEnvelope,        // "envelope": TYPE byte / envelope structure
  kAuthentication,  // "authentication": object MAC, or the manifest TAM
  kDecompression,   // "decompression": codec failure, bad obfuscation padding
  kIdHash,          // "id-hash": plaintext does not hash to the chunk id
  kMissing,         // "missing": an object the index lists is not where it says
  kTruncated,       // "truncated": a committed segment ends early / entry header unreadable
  kIndex,           // "index": index.N disagrees with the log, or fails its integrity file
  kSegment,         // "segment": segment-level notes: uncommitted data, stray bytes, bad magic
};
inline constexpr int kStageCount = 9;
std::string_view StageName(Stage s);

enum class Severity { kWarning, kError };
std::string_view SeverityName(Severity s);

// Whether a failed object was read a second time and what that read said.
enum class Reread {
  kNotReread,  // not applicable (structural finding) or not attempted
  kAgreed,     // the second read failed the same way: the bytes on disk are bad
  kDiffered,   // the second read got different bytes that also fail: unstable storage
  kPassed,     // the second read verified: a transient read error (finding is a warning)
};
std::string_view RereadName(Reread r);

struct Finding {
  Severity severity = Severity::kError;
  Stage stage = Stage::kSegment;
  std::optional<ChunkId> chunk_id;  // absent for segment-level findings
  std::optional<uint32_t> segment;  // borg segment number
  std::optional<uint64_t> offset;   // entry offset within the segment file (borg 2 master:
                                    // offset within the file named by `location`)
  // Where, when the finding has no segment (borg 2 master's borgstore items): "pack <64 hex>",
  // "index/<64 hex>", "config/manifest", "keys/<64 hex>". Empty for every borg 1.x finding.
  std::string location;
  std::string message;
  Reread reread = Reread::kNotReread;
};

// "[segment N, offset M]" as borg writes locations; "[pack <hex>, offset M]" (or any other
// `location`) for findings without a segment; empty when the finding has neither.
std::string LocationSuffix(const Finding& f);
std::string ChunkIdHex(const ChunkId& id);

// Ordering for deterministic reports: by segment, location, offset, stage, chunk id, message;
// findings without a segment come after those with one.
bool FindingLess(const Finding& a, const Finding& b);

class FindingSink {
 public:
  void Add(Finding f);                   // safe for concurrent use
  std::vector<Finding> Sorted() const;   // safe for concurrent use (copies under the lock)
  size_t errors() const;
  size_t warnings() const;

 private:
  mutable std::mutex mu_;
  std::vector<Finding> findings_;  // guarded by mu_
};

}  // namespace borgcheck::report
