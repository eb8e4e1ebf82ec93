// Fuzz target: one chunk-index fragment of repository version 4 (borg 2 master), the borghash
// HashTableNT serialization in index/<sha256> (repo::ParseIndexFragment), both layouts (borghash
// 0.2.0, 16-byte header; the `mmap` branch, 28-byte header, NUL-padded JSON).
//
// Input: the fragment file.
// Invariant:
//   - a rejection is kCorruptMetadata with a message;
//   - an accepted fragment starts with "BORGHASH", version 1; the file is exactly its header,
//     its meta and 80 bytes per record, so it holds at least 80 * records + 16 bytes, and for
//     the 0.2.0 layout exactly 16 + meta_size (u32 LE at byte 12) + 80 * records;
//   - every record is the 80 bytes at its place at the end of the file: chunk id, then pack id
//     at +40, offset at +72 and size at +76 (u32 LE);
//   - a 0.2.0 fragment round-trips: TEST_SerializeIndexFragment of its records parses back to
//     the same records.
#include <cstdint>
#include <cstring>
#include <string>

#include "checker/repo/borgstore/borgstore_index.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Result<repo::IndexFragment> r = repo::ParseIndexFragment(Bytes(data, size));
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == StatusCode::kCorruptMetadata);
    FUZZ_CHECK(!r.status().message().empty());
    return 0;
  }
  const auto& recs = r->records;
  FUZZ_CHECK(size >= repo::kBorghashHeaderSize);
  FUZZ_CHECK(std::memcmp(data, repo::kBorghashMagic.data(), repo::kBorghashMagic.size()) == 0);
  FUZZ_CHECK(LoadLE32(data + 8) == repo::kBorghashVersion);
  FUZZ_CHECK(recs.size() <= (size - repo::kBorghashHeaderSize) / repo::kChunkIndexRecordSize);
  const size_t first = size - recs.size() * repo::kChunkIndexRecordSize;
  if (r->layout == repo::BorghashLayout::kV020) {
    FUZZ_CHECK(first == repo::kBorghashHeaderSize + uint64_t(LoadLE32(data + 12)));
  } else {
    FUZZ_CHECK(first >= repo::kBorghashMmapHeaderSize);
  }
  for (size_t i = 0; i < recs.size(); ++i) {
    const uint8_t* p = data + first + i * repo::kChunkIndexRecordSize;
    FUZZ_CHECK(std::memcmp(p, recs[i].chunk_id.data(), 32) == 0);
    FUZZ_CHECK(std::memcmp(p + 40, recs[i].entry.pack_id.data(), 32) == 0);
    FUZZ_CHECK(LoadLE32(p + 72) == recs[i].entry.offset && LoadLE32(p + 76) == recs[i].entry.size);
  }
  if (r->layout == repo::BorghashLayout::kV020) {
    const std::string again = repo::TEST_SerializeIndexFragment(recs, r->capacity);
    const Result<repo::IndexFragment> r2 = repo::ParseIndexFragment(AsBytes(again));
    FUZZ_CHECK(r2.ok() && r2->records.size() == recs.size());
    for (size_t i = 0; i < recs.size(); ++i) {
      FUZZ_CHECK(r2->records[i].chunk_id == recs[i].chunk_id && r2->records[i].entry == recs[i].entry);
    }
  }
  return 0;
}
