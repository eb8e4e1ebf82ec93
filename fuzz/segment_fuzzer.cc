// Fuzz target: the borg 1.x segment entry stream (repo::ParseEntryHeader, repo::EntryCrcMatches,
// and the CRC stage of repo::Borg1Verifier), walked over the whole input like a segment file.
//
// Input: a segment file. When it starts with the BORG_SEG magic the walk starts after it, as the
// reader does; otherwise at byte 0 (so that mutations of the magic do not end every run).
// Invariant, for each entry until the first invalid header:
//   - with the whole rest of the file in view the parser never asks for more (kNeedMore);
//   - an accepted header is self-consistent: header_size <= size <= bytes left <= ...,
//     size <= the largest object, the key present exactly for PUT/DELETE and pointing at
//     byte 9, DELETE 41 bytes and COMMIT 9 bytes long;
//   - a rejection says why;
//   - any prefix of the header bytes gives the same verdict or kNeedMore (the reader parses
//     headers that straddle its read windows), and the entry never parses with fewer bytes
//     left in the file than its size;
//   - EntryCrcMatches agrees with Crc32 over bytes 4.. compared with the stored crc, and the
//     verifier's CRC-only check agrees with both.
#include <cstdint>
#include <cstring>
#include <string>

#include "checker/crypto/key_mode.h"
#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/segment_log/segment_format.h"
#include "checker/repo/borg1/borg1_verifier.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using repo::HeaderParse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static repo::Borg1Verifier crc_only(false, crypto::KeyMode::kNone, nullptr);
  const Bytes file(data, size);
  size_t pos = 0;
  if (size >= repo::kSegmentMagicSize &&
      std::memcmp(data, repo::kSegmentMagic, repo::kSegmentMagicSize) == 0) {
    pos = repo::kSegmentMagicSize;
  }
  while (pos < size) {
    const uint64_t left = size - pos;
    repo::EntryHeader h;
    std::string why;
    const HeaderParse r = repo::ParseEntryHeader(file.subspan(pos), left, h, &why);
    FUZZ_CHECK(r != HeaderParse::kNeedMore);
    if (r == HeaderParse::kInvalid) {
      FUZZ_CHECK(!why.empty());
      repo::EntryHeader quiet;
      FUZZ_CHECK(repo::ParseEntryHeader(file.subspan(pos), left, quiet, nullptr) ==
                 HeaderParse::kInvalid);
      break;
    }
    FUZZ_CHECK(h.tag == repo::kTagPut || h.tag == repo::kTagDelete || h.tag == repo::kTagCommit);
    FUZZ_CHECK(h.header_size == (h.tag == repo::kTagCommit ? repo::kHeaderSizeNoKey
                                                           : repo::kHeaderSizeWithKey));
    FUZZ_CHECK(h.header_size <= h.size && h.size <= left && h.size <= repo::kMaxObjectSize);
    FUZZ_CHECK(h.tag != repo::kTagDelete || h.size == repo::kHeaderSizeWithKey);
    FUZZ_CHECK(h.tag != repo::kTagCommit || h.size == repo::kHeaderSizeNoKey);
    FUZZ_CHECK(h.key == (h.tag == repo::kTagCommit ? nullptr : data + pos + 9));
    FUZZ_CHECK(h.crc == LoadLE32(data + pos) && h.size == LoadLE32(data + pos + 4));

    // The reader's windows: a prefix of the header gives the same answer or asks for more.
    for (size_t cut : {size_t{0}, size_t{1}, size_t{8}, size_t{9}, size_t{40}, size_t{41}}) {
      if (cut > h.size) continue;
      repo::EntryHeader p;
      const HeaderParse pr = repo::ParseEntryHeader(file.subspan(pos, cut), left, p, nullptr);
      FUZZ_CHECK(pr == HeaderParse::kNeedMore || pr == HeaderParse::kOk);
      FUZZ_CHECK((pr == HeaderParse::kOk) == (cut >= h.header_size));
      if (pr == HeaderParse::kOk) FUZZ_CHECK(p.size == h.size && p.tag == h.tag && p.key == h.key);
    }
    // An entry never fits in fewer bytes than it claims.
    repo::EntryHeader shorter;
    std::string short_why;
    FUZZ_CHECK(repo::ParseEntryHeader(file.subspan(pos), h.size - 1, shorter, &short_why) ==
               HeaderParse::kInvalid);
    FUZZ_CHECK(!short_why.empty());

    const Bytes entry = file.subspan(pos, h.size);
    const bool crc_ok = repo::EntryCrcMatches(entry);
    FUZZ_CHECK(crc_ok == (repo::Crc32(entry.subspan(4)) == h.crc));
    if (h.tag == repo::kTagPut) {
      const auto failure = crc_only.VerifyAs(entry, h.key);
      FUZZ_CHECK(failure.has_value() != crc_ok);
      if (failure) FUZZ_CHECK(failure->stage == report::Stage::kEntryCrc);
    }
    pos += h.size;
  }
  return 0;
}
