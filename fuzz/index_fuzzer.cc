// Fuzz target: index.T and its integrity.T companion (repo::ParseHashIndex,
// repo::CheckIndexIntegrity).
//
// Input: LE32 transaction T | LE16 length L | L bytes of integrity.T (msgpack) | index.T bytes.
// Inputs shorter than the 6-byte prefix are taken as an index file alone, T = 0, no integrity
// file. The index file is named "index.T", as the integrity digests require.
// Invariant:
//   - ParseHashIndex never crashes or allocates by the header's counts: a failure is
//     kCorruptMetadata with a message; a success has file size 18 + 40 * num_buckets, exactly
//     num_entries used buckets, each with a segment number below the reserved values, and the
//     entries are those buckets in order;
//   - CheckIndexIntegrity is deterministic and never answers kNoIntegrityFile (the caller's
//     case); every verdict but kVerified says why; and an index that verified no longer
//     verifies once one of its bytes is changed.
#include <cstdint>
#include <cstring>
#include <string>

#include "checker/repo/segment_log/segment_files.h"
#include "checker/repo/borg1/borg1_hashindex.h"
#include "checker/repo/segment_log/segment_format.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using repo::IntegrityOutcome;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint32_t transaction = 0;
  Bytes integrity;
  Bytes index(data, size);
  if (size >= 6) {
    transaction = LoadLE32(data);
    size_t len = size_t(data[4]) | size_t(data[5]) << 8;
    if (len > size - 6) len = size - 6;
    integrity = Bytes(data + 6, len);
    index = Bytes(data + 6 + len, size - 6 - len);
  }

  Result<repo::HashIndexContents> parsed = repo::ParseHashIndex(index);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == StatusCode::kCorruptMetadata);
    FUZZ_CHECK(!parsed.status().message().empty());
  } else {
    const repo::HashIndexContents& c = *parsed;
    FUZZ_CHECK(index.size() == repo::kIndexHeaderSize + uint64_t(c.num_buckets) * 40);
    FUZZ_CHECK(c.entries.size() == c.num_entries_header);
    FUZZ_CHECK(c.entries.size() <= c.num_buckets);
    size_t next = 0;
    for (uint32_t b = 0; b < c.num_buckets; ++b) {
      const uint8_t* bucket = index.data() + repo::kIndexHeaderSize + size_t(b) * 40;
      const uint32_t seg = LoadLE32(bucket + 32);
      if (seg == repo::kIndexEmpty || seg == repo::kIndexDeleted) continue;
      FUZZ_CHECK(next < c.entries.size());
      const repo::IndexEntry& e = c.entries[next++];
      FUZZ_CHECK(e.segment == seg && seg <= repo::kIndexMaxValue);
      FUZZ_CHECK(e.offset == LoadLE32(bucket + 36));
      FUZZ_CHECK(std::memcmp(e.id.data(), bucket, 32) == 0);
    }
    FUZZ_CHECK(next == c.entries.size());
  }

  if (integrity.empty()) return 0;
  const std::string name = "index." + std::to_string(transaction);
  std::string why, why_again;
  const IntegrityOutcome o = repo::CheckIndexIntegrity(index, name, repo::kIndexHeaderSize, integrity, &why);
  FUZZ_CHECK(o != IntegrityOutcome::kNoIntegrityFile);
  FUZZ_CHECK(repo::CheckIndexIntegrity(index, name, repo::kIndexHeaderSize, integrity, &why_again) == o);
  FUZZ_CHECK(why == why_again);
  FUZZ_CHECK(repo::CheckIndexIntegrity(index, name, repo::kIndexHeaderSize, integrity, nullptr) == o);
  if (o != IntegrityOutcome::kVerified) {
    FUZZ_CHECK(!why.empty());
  } else if (!index.empty()) {
    std::string changed(reinterpret_cast<const char*>(index.data()), index.size());
    changed[changed.size() / 2] ^= 0x01;
    FUZZ_CHECK(repo::CheckIndexIntegrity(AsBytes(changed), name, repo::kIndexHeaderSize, integrity, nullptr) ==
               IntegrityOutcome::kMismatch);
  }
  return 0;
}
