// Fuzz target: a repository version 4 (borg 2 master) pack file, walked blob by blob by its
// BORG_OBJ headers (repo::WalkPack), each walked blob checked like a read at its index entry
// (repo::CheckBlobStructure, repo::BuildObjectAad), and the keyless meta map of the none-* /
// authenticated-* key types (repo::ParseObjMeta on the meta envelope after its 34-byte
// tagged header: those envelopes store the payload as-is).
//
// Input: a whole pack (blob || blob || ..., no header).
// Invariant:
//   - the walked blobs tile the pack from byte 0 without gaps: each starts where the previous
//     ended, starts with "BORG_OBJ", and ends inside the pack; end_offset is where the last one
//     ends (0 without blobs);
//   - the end reason fits the bytes at end_offset: kClean exactly at EOF; kTrailingBytes with
//     1..48 bytes left; kNoHeader with >= 49 bytes left not starting with the magic; kPastEof
//     with a header (returned in broken_header) whose blob runs past EOF; a message exactly
//     when the walk did not end clean;
//   - CheckBlobStructure on a walked blob passes exactly for versions 1 and 2 and then returns
//     the walked header; otherwise it gives borg's message;
//   - BuildObjectAad gives 42 bytes (header[0:41] || slot) for version 2 and 0 otherwise;
//   - ParseObjMeta returns a meta or says why.
#include <cstdint>
#include <cstring>
#include <string>

#include "checker/repo/borg2/borg2_repo_obj.h"
#include "checker/repo/borgstore/borgstore_layout.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using repo::WalkEnd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Bytes pack(data, size);
  const repo::PackWalk w = repo::WalkPack(pack);
  uint64_t pos = 0;
  for (const repo::WalkedBlob& b : w.blobs) {
    FUZZ_CHECK(b.offset == pos);
    FUZZ_CHECK(size - pos >= repo::kObjHeaderSize);
    FUZZ_CHECK(std::memcmp(data + pos, repo::kObjMagic.data(), repo::kObjMagic.size()) == 0);
    const uint64_t blob_size = b.header.blob_size();
    FUZZ_CHECK(blob_size <= size - pos);
    const Bytes blob = pack.subspan(pos, blob_size);

    repo::BlobHeader h;
    const auto bad = repo::CheckBlobStructure(blob, &h);
    const bool known = b.header.version == repo::kObjVersionB22 ||
                       b.header.version == repo::kObjVersionMaster;
    FUZZ_CHECK(bad.has_value() != known);
    if (bad) {
      FUZZ_CHECK(!bad->message.empty() && bad->kind == repo::BlobProblem::kBadVersion);
    } else {
      FUZZ_CHECK(h.version == b.header.version && h.chunk_id == b.header.chunk_id &&
                 h.meta_size == b.header.meta_size && h.data_size == b.header.data_size);
    }
    uint8_t aad[repo::kObjHeaderAadSize + 1];
    const size_t n = repo::BuildObjectAad(blob.first(repo::kObjHeaderSize), repo::kSlotMeta, aad);
    if (b.header.version == repo::kObjVersionMaster) {
      FUZZ_CHECK(n == repo::kObjHeaderAadSize + 1);
      FUZZ_CHECK(std::memcmp(aad, blob.data(), repo::kObjHeaderAadSize) == 0 &&
                 aad[repo::kObjHeaderAadSize] == repo::kSlotMeta);
    } else {
      FUZZ_CHECK(n == 0);
    }
    if (b.header.meta_size > 34) {
      std::string why;
      repo::ObjMeta meta;
      if (!repo::ParseObjMeta(blob.subspan(repo::kObjHeaderSize + 34, b.header.meta_size - 34), meta, &why)) {
        FUZZ_CHECK(!why.empty());
      }
    }
    pos += blob_size;
  }
  FUZZ_CHECK(w.end_offset == pos);
  const uint64_t left = size - pos;
  switch (w.end) {
    case WalkEnd::kClean:
      FUZZ_CHECK(left == 0);
      break;
    case WalkEnd::kTrailingBytes:
      FUZZ_CHECK(left > 0 && left < repo::kObjHeaderSize);
      break;
    case WalkEnd::kNoHeader:
      FUZZ_CHECK(left >= repo::kObjHeaderSize);
      FUZZ_CHECK(std::memcmp(data + pos, repo::kObjMagic.data(), repo::kObjMagic.size()) != 0);
      break;
    case WalkEnd::kPastEof:
      FUZZ_CHECK(left >= repo::kObjHeaderSize && w.broken_header.has_value());
      FUZZ_CHECK(w.broken_header->blob_size() > left);
      break;
  }
  FUZZ_CHECK(w.message.empty() == (w.end == WalkEnd::kClean));
  return 0;
}
