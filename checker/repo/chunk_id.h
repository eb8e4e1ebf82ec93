// A chunk id (borg's 32-byte object key) and the hash functor that lets it key an unordered
// container.
//
// Thread contract: values and a stateless functor; safe for concurrent use.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "checker/base/bytes.h"

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

// The finding's message where a segment-log repository (borg 1.x, 2.0.0b5; local or served)
// has no manifest object.
inline constexpr const char* kNoManifestMessage =
    "the repository has no manifest (chunk 00…00): borg cannot list any archive";

// 64 lowercase hex digits (as every report and shard record writes an id) into `id`.
inline bool ParseHexId(std::string_view hex, ChunkId& id) {
  if (hex.size() != 64) return false;
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  std::string raw;
  if (!FromHex(hex, raw) || raw.size() != id.size()) return false;
  std::memcpy(id.data(), raw.data(), id.size());
  return true;
}

}  // namespace borgcheck::repo
