// index.T (borg's HashIndex, "BORG_IDX") and its integrity.T companion
// (spec borg1-format.md §3.2, §3.5).
//
// Thread contract: pure functions reading files; called once while planning the run.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"

namespace borgcheck::repo {

struct IndexEntry {
  std::array<uint8_t, 32> id;
  uint32_t segment;
  uint32_t offset;
};

struct HashIndexContents {
  std::vector<IndexEntry> entries;  // bucket order
  uint32_t num_entries_header = 0;  // as stated in the header
  uint32_t num_buckets = 0;
};

// Parses an index file's bytes. kCorruptMetadata for a bad magic, key/value size, a length
// that does not match num_buckets, or a num_entries that does not match the used buckets.
Result<HashIndexContents> ParseHashIndex(Bytes file);

enum class IntegrityOutcome {
  kVerified,
  kNoIntegrityFile,  // integrity.T absent: nothing to check against
  kMismatch,         // a digest differs: borg would discard and rebuild the index
  kMalformed,        // integrity.T unreadable
};

// Checks `index_bytes` (the file named `index_name`, e.g. "index.29") against the msgpack
// integrity file bytes (XXH64 digests "HashHeader" and "final").
IntegrityOutcome CheckIndexIntegrity(Bytes index_bytes, const std::string& index_name,
                                     Bytes integrity_bytes, std::string* why);

}  // namespace borgcheck::repo
