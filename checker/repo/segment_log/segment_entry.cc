#include "checker/repo/segment_log/segment_entry.h"

#include <isa-l/crc.h>

#include "checker/crypto/vector_state.h"

namespace borgcheck::repo {

HeaderParse ParseEntryHeader(Bytes buf, uint64_t bytes_left_in_file, EntryHeader& h,
                             std::string* why) {
  auto invalid = [&](std::string msg, HeaderProblem problem = HeaderProblem::kBadSize) {
    h.problem = problem;
    if (why) *why = std::move(msg);
    return HeaderParse::kInvalid;
  };
  h.problem = HeaderProblem::kNone;
  if (bytes_left_in_file < kHeaderSizeNoKey) {
    return invalid("invalid segment entry header: only " + std::to_string(bytes_left_in_file) +
                   " bytes left in the segment",
                   HeaderProblem::kTruncated);
  }
  if (buf.size() < kHeaderSizeNoKey) return HeaderParse::kNeedMore;
  h.crc = LoadLE32(buf.data());
  h.size = LoadLE32(buf.data() + 4);
  h.tag = buf[8];
  if (h.tag != kTagPut && h.tag != kTagDelete && h.tag != kTagCommit) {
    return invalid("invalid segment entry header, did not get acceptable tag " + std::to_string(h.tag),
                   HeaderProblem::kBadTag);
  }
  h.header_size = h.tag == kTagCommit ? kHeaderSizeNoKey : kHeaderSizeWithKey;
  if (h.size > kMaxObjectSize) {
    return invalid("invalid segment entry size " + std::to_string(h.size) + " - too big");
  }
  if (h.size < h.header_size) {
    return invalid("invalid segment entry size " + std::to_string(h.size) + " - too small");
  }
  if (h.tag == kTagDelete && h.size != kHeaderSizeWithKey) {
    return invalid("invalid DELETE entry size " + std::to_string(h.size));
  }
  if (h.tag == kTagCommit && h.size != kHeaderSizeNoKey) {
    return invalid("invalid COMMIT entry size " + std::to_string(h.size));
  }
  if (h.size > bytes_left_in_file) {
    return invalid("segment entry of " + std::to_string(h.size) + " bytes runs past the end of "
                   "the segment (" + std::to_string(bytes_left_in_file) + " bytes left): truncated",
                   HeaderProblem::kTruncated);
  }
  if (buf.size() < h.header_size) return HeaderParse::kNeedMore;
  h.key = h.header_size == kHeaderSizeWithKey ? buf.data() + kHeaderSizeNoKey : nullptr;
  return HeaderParse::kOk;
}

// ISA-L's crc32_gzip_refl is the zlib CRC-32 (same polynomial, reflection and init/xor
// convention; checked against zlib in segment_entry_test.cc) and several times faster than
// zlib 1.2.13's table-driven crc32 on the hot path. Its AVX-512 code returns with the upper
// vector halves dirty, which halves the speed of the SHA-NI code that follows (the MAC, the
// id): cleared here (crypto/vector_state.h).
uint32_t Crc32(Bytes data, uint32_t seed) {
  const uint32_t crc = crc32_gzip_refl(seed, data.data(), data.size());
  crypto::ClearUpperVectorState();
  return crc;
}

bool EntryCrcMatches(Bytes entry) {
  if (entry.size() < kHeaderSizeNoKey) return false;
  return Crc32(entry.subspan(4)) == LoadLE32(entry.data());
}

}  // namespace borgcheck::repo
