// A chunk id (borg's 32-byte object key) and the hash functor that lets it key an unordered
// container.
//
// Thread contract: values and a stateless functor; safe for concurrent use.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace borgcheck::repo {

using ChunkId = std::array<uint8_t, 32>;

// Chunk ids are MACs or cryptographic hashes, so their bytes are uniform: the first
// sizeof(size_t) of them are as good a hash as any.
struct IdHash {
  size_t operator()(const ChunkId& id) const {
    size_t h;
    std::memcpy(&h, id.data(), sizeof h);
    return h;
  }
};

// The manifest's chunk id is all zeros (borg's Manifest.MANIFEST_ID) in every generation.
inline bool IsManifestId(const ChunkId& id) {
  for (uint8_t b : id) {
    if (b != 0) return false;
  }
  return true;
}

}  // namespace borgcheck::repo
