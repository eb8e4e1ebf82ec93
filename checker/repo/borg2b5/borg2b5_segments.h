// Repository version 2 (borg 2.0.0b1 .. b9; spec borg2-format.md §A.1): segment files with
// PUT2 entries, the log replay that yields the current objects, and the b5 index file
// (BORG2IDX) used to cross-check the replay and to name objects in damaged regions.
//
//   segment  = "BORG_SEG" entry*
//   entry    = crc32 LE | size LE (whole entry) | tag | body
//     PUT2 (3) = id 32 | xxh64 8 (canonical, big-endian) | payload     crc over [4, 49)
//                xxh64 (seed 0) over entry[4:9] || id || payload
//     DELETE (1) = id 32 (size 41)       COMMIT (2) = nothing (size 9)    crc over [4, size)
//     PUT (0, borg 1.x, readable only) = id 32 | payload                   crc over [4, size)
//   index.T  = 1024-byte header ("BORG2IDX", version 2, num_entries, num_buckets, num_empty,
//              key size 32, value size 16), then buckets of id 32 | segment LE | offset LE |
//              payload size LE | flags LE (segment 0xffffffff empty, 0xfffffffe deleted)
//
// Planning (PlanBorg2Repository), in order:
//   1. List data/<D>/<S>; the transaction is the newest segment ending in a COMMIT entry, or
//      index.T's T when that is newer (the index proves the commit; the missing COMMIT is
//      reported).
//   2. Walk the entry headers of every committed segment (one small read per entry; the CRC of
//      a PUT2 covers its whole header, so the walk trusts every size it follows). A damaged
//      header is reported and the walk resynchronises on the next offset holding a valid entry
//      (header CRC, and the xxh64 of a PUT2), like `borg check --repair` does — borg's check
//      instead drops the whole segment.
//   3. Replay the log: PUT/PUT2 sets an id's current entry, DELETE removes it.
//   4. Cross-check with index.T (when its integrity file verifies): ids the damaged regions
//      swallowed, ids the log lost (missing segments), and disagreements (warnings: borg
//      rebuilds the index from the log, so the data is intact).
// Payloads are not read here: the check run streams the segments and verifies every PUT/PUT2.
//
// Thread contract: pure functions over bytes are safe for concurrent use; planning runs once on
// the planning thread; a Borg2Plan is const afterwards and read by every worker.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/io/env.h"
#include "checker/report/finding.h"
#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/segment_log/segment_files.h"

namespace borgcheck::repo {

// ---- format constants (prose: docs/formats.md, spec §A.1) --------------------------------------

inline constexpr uint8_t kB2TagPut = 0;  // borg 1.x PUT, readable, never written by borg 2
inline constexpr uint8_t kB2TagDelete = 1;
inline constexpr uint8_t kB2TagCommit = 2;
inline constexpr uint8_t kB2TagPut2 = 3;
inline constexpr size_t kB2CommitSize = 9;
inline constexpr size_t kB2DeleteSize = 41;
inline constexpr size_t kB2PutHeaderSize = 41;   // crc size tag id
inline constexpr size_t kB2Put2HeaderSize = 49;  // crc size tag id xxh64
inline constexpr size_t kB2EntryHashOffset = 41;
inline constexpr size_t kB2MaxObjectSize = 20971479 + 41 + 8;  // MAX_OBJECT_SIZE of b5

inline constexpr char kB2IndexMagic[8] = {'B', 'O', 'R', 'G', '2', 'I', 'D', 'X'};
inline constexpr size_t kB2IndexHeaderSize = 1024;
inline constexpr size_t kB2IndexBucketSize = 48;

// ---- entries (pure functions) -------------------------------------------------------------------

struct Borg2EntryHeader {
  uint32_t crc = 0;
  uint32_t size = 0;               // whole entry
  uint8_t tag = 0;
  size_t header_size = 0;          // 9 (COMMIT), 41 (DELETE, PUT), 49 (PUT2)
  const uint8_t* id = nullptr;     // PUT/PUT2/DELETE: 32 bytes inside the parsed buffer
  const uint8_t* entry_hash = nullptr;  // PUT2: 8 bytes inside the parsed buffer
  bool truncated = false;          // kInvalid because the segment ends before the header or entry
};

// Parses the header at the start of `buf` (size, tag, and that the entry fits in
// `bytes_left_in_file`); does not check the CRC. kNeedMore when `buf` is shorter than the
// header; kInvalid with *why for a tag > 3, a size out of range for the tag, or an entry running
// past the end of the file ("truncated").
HeaderParse ParseBorg2EntryHeader(Bytes buf, uint64_t bytes_left_in_file, Borg2EntryHeader& h,
                                  std::string* why);

// The CRC over the bytes borg covers: [4, header_size) for PUT2, [4, size) for the others. `buf`
// must hold that much (the whole entry for PUT/DELETE/COMMIT, the 49-byte header for PUT2).
bool Borg2EntryCrcMatches(Bytes buf, const Borg2EntryHeader& h);
// XXH64 of a whole PUT2 entry as borg computes it (seed 0 over entry[4:41] || entry[49:]).
uint64_t Put2EntryHash(Bytes entry);
// Compares Put2EntryHash with the stored big-endian digest; false for entries under 49 bytes.
bool Put2EntryHashMatches(Bytes entry);
// The payload (RepoObj bytes) of a whole PUT or PUT2 entry.
Bytes Borg2EntryPayload(Bytes entry, uint8_t tag);

// ---- config -------------------------------------------------------------------------------------

struct Borg2Config {
  uint32_t segments_per_dir = 1000;
  std::string id;          // 32 raw bytes
  std::string id_hex;      // 64 lowercase hex
  std::string key_base64;  // repokey / authenticated: the key blob, whitespace removed
  std::vector<report::Finding> lock_findings;  // IdentifyBorg2Repository: a stale lock
};

// [repository] with version = 2. kNotARepository (no section / version), kUnsupported (another
// version), kCorruptMetadata (malformed id or segments_per_dir).
Result<Borg2Config> ParseBorg2Config(std::string_view text);

// Identifies a repository version 2 directory and refuses borg's held lock (lock.exclusive),
// unless bypass_lock (borg_lock.h: CheckBorgLock; a stale lock is a warning in lock_findings).
// kNotFound, kNotARepository, kUnsupported, kLockHeld, kIoError, kCorruptMetadata.
// `config_text`: the config as format detection read it (not read again), or nullopt.
Result<Borg2Config> IdentifyBorg2Repository(const io::Env& env, const std::string& path, bool bypass_lock,
                                            const std::optional<std::string>& config_text = std::nullopt);

// ---- index.T ------------------------------------------------------------------------------------

struct Borg2IndexEntry {
  std::array<uint8_t, 32> id;
  uint32_t segment = 0;
  uint32_t offset = 0;
  uint32_t size = 0;  // payload size (entry size - 49 for PUT2)
};

// kCorruptMetadata for a bad magic/version/sizes, a length that does not match num_buckets, or
// a num_entries that does not match the used buckets. Entries in bucket order.
Result<std::vector<Borg2IndexEntry>> ParseBorg2Index(Bytes file);
// An index that fails its integrity check or does not parse, read defensively: every bucket
// after the header up to the end of the file, except empty, deleted and impossible ones. Used
// only to name lost objects (segment_log/segment_records.h), never as objects to verify.
std::vector<Borg2IndexEntry> SalvageBorg2Index(Bytes file);

// ---- the plan -----------------------------------------------------------------------------------

struct Borg2Entry {
  std::array<uint8_t, 32> id{};  // zeros for COMMIT
  uint32_t offset = 0;
  uint32_t size = 0;
  uint8_t tag = 0;
  bool live = false;  // the current PUT/PUT2 of its id after the replay
};

struct Borg2Segment {
  uint32_t number = 0;
  std::string path;
  uint64_t file_size = 0;
  uint64_t read_limit = 0;          // bytes that belong to the log (the final COMMIT's end)
  std::vector<Borg2Entry> entries;  // the valid entries the walk found, in file order
  bool unreadable = false;          // a read failed while planning: the walk did not see all of it
  std::string unreadable_why;       // then: the error's text ("...: Permission denied")
  uint32_t damage_unnamed = 0;      // damaged regions reported with no index entry naming them
};

struct Borg2Plan {
  std::string path;
  Borg2Config config;
  uint32_t transaction = 0;
  std::vector<Borg2Segment> segments;  // committed (<= transaction), non-empty, ascending
  uint64_t live_objects = 0;           // current objects found in the log
  uint64_t lost_objects = 0;           // objects index.T lists that the log cannot give (each
                                       // named by an error finding): damaged, truncated, missing
  uint64_t superseded_puts = 0;        // PUT/PUT2 entries that are not current
  uint64_t total_bytes = 0;            // sum of read_limit over `segments`
  bool index_checked = false;          // index.T was usable and compared with the log
  std::vector<report::Finding> findings;  // found while planning
  std::vector<std::string> notes;         // informational, not findings
};

// Steps 1-4 above. Fails only when there is nothing to check: no data/ directory (kNotARepository),
// no segment at all or no committed transaction (kCorruptMetadata), or an I/O error listing.
// `folder`: the repository folder as the caller listed it (ListRepoFolder: the index
// transaction it compares with at the end, ChangedSinceStart).
Result<Borg2Plan> PlanBorg2Repository(const io::Env& env, const std::string& path, const Borg2Config& config,
                                      const RepoFolder& folder);

}  // namespace borgcheck::repo
