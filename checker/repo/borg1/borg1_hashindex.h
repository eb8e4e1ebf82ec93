// index.T (borg's HashIndex, "BORG_IDX"; spec borg1-format.md §3.2). Its integrity.T companion
// is checked by segment_log/segment_files.h (CheckIndexIntegrity), which 2.0.0b5 shares.
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

// Reads an index that fails its integrity check or does not parse, defensively: every 40-byte
// bucket after the 18-byte header up to the end of the file (whatever the header says), except
// empty and deleted ones and impossible segment values. Its entries may be garbage: they are
// used only to name objects the log has lost (segment_log/segment_records.h), never as objects
// to verify.
std::vector<IndexEntry> SalvageHashIndex(Bytes file);


}  // namespace borgcheck::repo
