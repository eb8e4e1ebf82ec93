// borg 1.x segment and index format constants (prose: docs/formats.md and
// ../shared/spec/borg1-format.md §2-3). One header per format, no logic.
#pragma once

#include <cstddef>
#include <cstdint>

namespace borgcheck::repo {

inline constexpr char kSegmentMagic[8] = {'B', 'O', 'R', 'G', '_', 'S', 'E', 'G'};
inline constexpr size_t kSegmentMagicSize = 8;

// Entry: crc LE32 | size LE32 | tag u8 | [key 32] | [data]; size includes the header.
inline constexpr uint8_t kTagPut = 0;
inline constexpr uint8_t kTagDelete = 1;
inline constexpr uint8_t kTagCommit = 2;
inline constexpr size_t kHeaderSizeNoKey = 9;
inline constexpr size_t kHeaderSizeWithKey = 41;
inline constexpr size_t kKeySize = 32;

inline constexpr size_t kMaxDataSize = 20971479;                       // MAX_DATA_SIZE
inline constexpr size_t kMaxObjectSize = kMaxDataSize + kHeaderSizeWithKey;  // 20 MiB

// COMMIT is always these 9 bytes and always ends its segment.
inline constexpr uint8_t kCommitEntry[9] = {0x40, 0xf4, 0x3c, 0x25, 0x09, 0x00, 0x00, 0x00, 0x02};

// index.T (HashIndex "BORG_IDX"): 18-byte header then num_buckets * 40-byte buckets.
inline constexpr char kIndexMagic[8] = {'B', 'O', 'R', 'G', '_', 'I', 'D', 'X'};
inline constexpr size_t kIndexHeaderSize = 18;
inline constexpr uint32_t kIndexEmpty = 0xffffffff;
inline constexpr uint32_t kIndexDeleted = 0xfffffffe;
inline constexpr uint32_t kIndexMaxValue = 0xfffffbff;  // 2**32 - 1025

}  // namespace borgcheck::repo
