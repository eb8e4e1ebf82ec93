// Values shared by the archive decoders and the archive walker: chunk ids, the repository
// generation whose archive format is read, and the kinds of metadata object the walker asks
// its ObjectFetcher for. The formats themselves are described in docs/formats.md, "Archives".
//
// Thread contract: plain values and stateless functors; safe for concurrent use.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace borgcheck::archive {

// borg's 32-byte object key. The same type as repo::ChunkId and report::ChunkId, so that ids
// pass between the layers without conversion (this library does not depend on repo/).
using ChunkId = std::array<uint8_t, 32>;

// Chunk ids are MACs or cryptographic hashes of their content (the manifest's 00...00
// aside), so their first bytes are as good a hash as any.
struct ChunkIdHash {
  size_t operator()(const ChunkId& id) const {
    size_t h;
    std::memcpy(&h, id.data(), sizeof h);
    return h;
  }
};

// Whose archive format: they differ in the msgpack types (borg 1.x packs every byte string
// as str, borg 2 uses bin for bytes), in where the archive list lives (the manifest, or
// borgstore's archives/ directory) and in how an archive names its item stream (`items`, or
// `item_ptrs` indirection).
enum class Generation {
  kBorg1,        // borg 1.0 - 1.4, repository version 1
  kBorg2b5,      // borg 2.0.0b5 (b1 - b9), repository version 2
  kBorg2Master,  // borg 2 master / b22+, repository version 4 (borgstore + packs)
};
std::string_view GenerationName(Generation g);

// What a fetched object is expected to be. borg 2 master checks this (the meta `type`:
// M, A, C, S); the fetcher may use it the same way, the older generations ignore it.
enum class ObjectKind {
  kManifest,    // id 00...00, master ro_type "M"
  kArchive,     // the archive metadata object, master "A"
  kItemPtrs,    // a chunk of the item-stream chunk-id list (borg 2 `item_ptrs`), master "C"
  kItemStream,  // a chunk of the item metadata stream, master "S"
};
std::string_view ObjectKindName(ObjectKind k);

// What the caller's chunk table says about a referenced chunk id.
enum class RefState : uint8_t {
  kPresent,  // stored and (as far as the caller knows) intact
  kBad,      // stored, but it failed verification
  kMissing,  // not stored at all
};

inline bool IsBad(RefState s) { return s != RefState::kPresent; }

}  // namespace borgcheck::archive
