// Parsing borg 1.x segment entries (spec borg1-format.md §2). Pure functions over bytes, so
// the fuzzers and the reader share one parser.
//
// Thread contract: pure functions; safe for concurrent use.
#pragma once

#include <cstdint>
#include <string>

#include "checker/base/bytes.h"
#include "checker/repo/segment_log/segment_format.h"

namespace borgcheck::repo {

// Why a header is invalid (HeaderParse::kInvalid), for the stage a reader reports.
enum class HeaderProblem : uint8_t {
  kNone,
  kTruncated,  // the segment ends before the header or the entry does
  kBadTag,     // not PUT, DELETE or COMMIT
  kBadSize,    // a size impossible for its tag
};

struct EntryHeader {
  uint32_t crc = 0;
  uint32_t size = 0;  // whole entry, header included
  uint8_t tag = 0;
  const uint8_t* key = nullptr;  // 32 bytes for PUT/DELETE (points into the parsed buffer)
  size_t header_size = 0;        // 9 or 41
  HeaderProblem problem = HeaderProblem::kNone;  // set with kInvalid
};

enum class HeaderParse {
  kOk,
  kNeedMore,  // fewer bytes available than the header (or the entry) needs
  kInvalid,   // impossible header: bad tag, size too small or too large, beyond the file end
};

// Parses the header at the start of `buf`. `bytes_left_in_file` counts from the header start;
// an entry that claims more than that is kInvalid ("truncated"). On kInvalid, *why says what.
HeaderParse ParseEntryHeader(Bytes buf, uint64_t bytes_left_in_file, EntryHeader& h,
                             std::string* why);

// CRC32 (zlib/IEEE) over entry bytes 4..size-1, compared with the stored crc.
bool EntryCrcMatches(Bytes entry);
uint32_t Crc32(Bytes data, uint32_t seed = 0);

}  // namespace borgcheck::repo
