// Fuzz target: the entry stream of a repository version 2 (borg 2.0.0b5) segment file
// (repo::ParseBorg2EntryHeader, repo::Borg2EntryCrcMatches, repo::Put2EntryHash,
// repo::Put2EntryHashMatches, repo::Borg2EntryPayload), walked over the whole input with the
// planner's resynchronisation: after a damaged header, a CRC or an xxh64 mismatch the walk
// moves on one byte at a time until an offset holds a valid entry again.
//
// Input: a segment file. When it starts with the BORG_SEG magic the walk starts after it, as the
// planner does; otherwise at byte 0 (so that mutations of the magic do not end every run).
// Invariant, at every offset the walk parses:
//   - with the whole rest of the file in view the parser never asks for more (kNeedMore);
//   - a rejection says why, and says the same with or without a `why` to fill;
//   - an accepted header is self-consistent: tag 0..3, header_size 9 (COMMIT), 41 (PUT,
//     DELETE) or 49 (PUT2), header_size <= size <= bytes left and <= kB2MaxObjectSize, DELETE 41
//     and COMMIT 9 bytes long, id at byte 9 exactly for PUT/PUT2/DELETE, entry hash at byte 41
//     exactly for PUT2; crc and size are the stored little-endian words;
//   - any prefix of the header gives the same verdict or kNeedMore (the reader parses headers
//     that straddle its read windows);
//   - Borg2EntryCrcMatches agrees with Crc32 over the bytes borg covers ([4, 49) for PUT2,
//     [4, size) otherwise); Put2EntryHashMatches agrees with Put2EntryHash and the stored
//     big-endian digest; the payload of a PUT/PUT2 is exactly the bytes after its header.
#include <cstdint>
#include <cstring>
#include <string>

#include "checker/repo/borg2b5/borg2b5_segments.h"
#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/segment_log/segment_format.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using repo::HeaderParse;

namespace {

// One offset: true when a whole valid entry (header, CRC, and xxh64 for a PUT2) starts there.
bool CheckAt(const uint8_t* data, size_t size, size_t pos, repo::Borg2EntryHeader& h) {
  const Bytes file(data, size);
  const uint64_t left = size - pos;
  std::string why;
  const HeaderParse r = repo::ParseBorg2EntryHeader(file.subspan(pos), left, h, &why);
  FUZZ_CHECK(r != HeaderParse::kNeedMore);
  if (r == HeaderParse::kInvalid) {
    FUZZ_CHECK(!why.empty());
    repo::Borg2EntryHeader quiet;
    FUZZ_CHECK(repo::ParseBorg2EntryHeader(file.subspan(pos), left, quiet, nullptr) ==
               HeaderParse::kInvalid);
    return false;
  }
  FUZZ_CHECK(h.tag <= repo::kB2TagPut2);
  const size_t want_header = h.tag == repo::kB2TagCommit  ? repo::kB2CommitSize
                             : h.tag == repo::kB2TagPut2 ? repo::kB2Put2HeaderSize
                                                         : repo::kB2PutHeaderSize;
  FUZZ_CHECK(h.header_size == want_header);
  FUZZ_CHECK(h.header_size <= h.size && h.size <= left && h.size <= repo::kB2MaxObjectSize);
  FUZZ_CHECK(h.tag != repo::kB2TagDelete || h.size == repo::kB2DeleteSize);
  FUZZ_CHECK(h.tag != repo::kB2TagCommit || h.size == repo::kB2CommitSize);
  FUZZ_CHECK(h.id == (h.tag == repo::kB2TagCommit ? nullptr : data + pos + 9));
  FUZZ_CHECK(h.entry_hash == (h.tag == repo::kB2TagPut2 ? data + pos + 41 : nullptr));
  FUZZ_CHECK(h.crc == LoadLE32(data + pos) && h.size == LoadLE32(data + pos + 4));

  for (size_t cut : {size_t{0}, size_t{1}, size_t{8}, size_t{9}, size_t{41}, size_t{48}, size_t{49}}) {
    if (cut > h.size) continue;
    repo::Borg2EntryHeader p;
    const HeaderParse pr = repo::ParseBorg2EntryHeader(file.subspan(pos, cut), left, p, nullptr);
    FUZZ_CHECK(pr == HeaderParse::kNeedMore || pr == HeaderParse::kOk);
    FUZZ_CHECK((pr == HeaderParse::kOk) == (cut >= h.header_size));
    if (pr == HeaderParse::kOk) FUZZ_CHECK(p.size == h.size && p.tag == h.tag && p.id == h.id);
  }

  const Bytes entry = file.subspan(pos, h.size);
  const size_t covered = h.tag == repo::kB2TagPut2 ? repo::kB2Put2HeaderSize : h.size;
  const bool crc_ok = repo::Borg2EntryCrcMatches(entry, h);
  FUZZ_CHECK(crc_ok == (repo::Crc32(entry.subspan(4, covered - 4)) == h.crc));
  if (h.tag == repo::kB2TagPut || h.tag == repo::kB2TagPut2) {
    const Bytes payload = repo::Borg2EntryPayload(entry, h.tag);
    FUZZ_CHECK(payload.data() == entry.data() + h.header_size);
    FUZZ_CHECK(payload.size() == h.size - h.header_size);
  }
  if (!crc_ok) return false;
  if (h.tag == repo::kB2TagPut2) {
    const bool hash_ok = repo::Put2EntryHashMatches(entry);
    FUZZ_CHECK(hash_ok == (repo::Put2EntryHash(entry) == LoadBE64(data + pos + 41)));
    return hash_ok;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t pos = 0;
  if (size >= repo::kSegmentMagicSize &&
      std::memcmp(data, repo::kSegmentMagic, repo::kSegmentMagicSize) == 0) {
    pos = repo::kSegmentMagicSize;
  }
  while (pos < size) {
    repo::Borg2EntryHeader h;
    if (CheckAt(data, size, pos, h)) {
      pos += h.size;
    } else {
      ++pos;  // resynchronise on the next offset holding a valid entry
    }
  }
  return 0;
}
