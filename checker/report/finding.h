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
#include <utility>
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
  // The archive pass (engine/archive_pass.h), appended so that the order above is unchanged:
  kReference,       // "reference": an archive references an object the repository does not
                    // have; objects nothing references (orphans)
  kArchive,         // "archive": archive metadata that verified but does not decode or is
                    // inconsistent (archive object, item_ptrs, item metadata stream, items)
  // Could not check (docs/exit-codes.md: exit 2 unless there is damage as well):
  kIo,              // "io": a file that exists could not be read (EACCES, EIO, a short read);
                    // the message carries the errno text. Never "damaged", never "missing"
  kKey,             // "key": the key could not be loaded (no key, wrong passphrase, mode not
                    // known), reported when the keyless check found damage; or the key does
                    // not match the repository's config (its repository id)
  // Appended (the order above is unchanged):
  kLock,            // "lock": borg's lock, read and never taken: a stale lock of a process that
                    // is gone, a lock that is no directory or no JSON record (warnings: the
                    // repository was checked, but borg fails on it until it is removed)
};
inline constexpr int kStageCount = 14;
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

// Where a finding is: a segment (borg 1.x, 2.0.0b5) or a named item (a pack "pack <hex>", a
// store item "index/<hex>", "config/manifest", a key file path), and optionally an offset in it.
// The one way findings are located; Finding keeps the three parts (they are the JSON contract).
struct Location {
  std::optional<uint32_t> segment;
  std::string item;
  std::optional<uint64_t> offset;

  static Location Segment(uint32_t n, std::optional<uint64_t> offset = std::nullopt) {
    return Location{n, {}, offset};
  }
  static Location Item(std::string name, std::optional<uint64_t> offset = std::nullopt) {
    return Location{std::nullopt, std::move(name), offset};
  }
  static Location None() { return Location{}; }
  // The same unit at another offset. An offset in no unit means nothing: None stays None (the
  // objects a server hands out by id, io/object_service.h).
  Location At(std::optional<uint64_t> off) const {
    if (!segment && item.empty()) return *this;
    return Location{segment, item, off};
  }
};

// One use of a bad or missing chunk by an archive the archive pass walked: "archive A, path P,
// bytes [begin, end)" for file content, or the archive's own metadata (its archive object, an
// item_ptrs chunk, an item metadata chunk) with how far the archive could be read.
struct AffectedUse {
  std::string archive;  // the archive's name (bytes as stored)
  ChunkId archive_id{};
  // "chunks" (the file's content), "chunks_healthy" (the original list a borg 1.x/2.0.0b5
  // `check --repair` kept when it put all-zero chunks into `chunks`), "hardlink" (a borg 1.x
  // hard link whose content is its master's, `via`), "archive" (the archive object),
  // "item_ptrs" (a chunk of the archive's item_ptrs list), "items" (an item metadata chunk)
  std::string use;
  std::optional<std::string> path;     // file uses
  std::optional<uint64_t> begin;       // file uses: byte range in the file; "items": the
  std::optional<uint64_t> end;         // stream offset the chunk starts at (end unknown: null)
  std::optional<std::string> via;      // "hardlink": the master's path
  std::optional<uint64_t> items_read;  // metadata uses: items of the archive decoded before it
  // "items": the path of the last item decoded before the lost chunk and of the first decoded
  // after it (null: none was, e.g. the loss is at the start or the end of the archive).
  std::optional<std::string> path_before;
  std::optional<std::string> path_after;
  bool operator==(const AffectedUse&) const = default;
};

// Every use of one chunk by the walked archives: the first kMaxAffectedUses of them, in archive
// then stream order, and the exact total.
inline constexpr size_t kMaxAffectedUses = 1000;
struct Affected {
  std::vector<AffectedUse> uses;
  uint64_t total = 0;
  bool operator==(const Affected&) const = default;
};

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
  // Set by the archive pass for a bad or missing chunk (the uses of the walked archives; empty
  // when none of them uses it); absent when the archives were not walked.
  std::optional<Affected> affected;
  // What the user can do next, where that is true for borg (set by the archive pass); "" none.
  std::string advice;
  // Every field (tests: a finding read back from JSON, json_records.h, equals the one printed).
  bool operator==(const Finding&) const = default;
};

// The one finding builder: against chunk `id` when it is not null. Messages never repeat the
// chunk id or the location (the views add both).
Finding MakeFinding(Severity severity, Stage stage, const Location& where, const ChunkId* id,
                    std::string message);

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
