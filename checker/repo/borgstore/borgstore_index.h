// The chunk index of repository version 4: `index/<sha256>` fragments, each a borghash
// HashTableNT serialization (spec borg2-format.md §B.1.3), and its cross-check against the
// blobs a pack walk found (§B.1.5 item 2).
//
//   fragment = "BORGHASH" | version u32le = 1 | meta_size u32le | JSON meta | used * record
//   record   = chunk_id 32 | flags u32 | size u32 | pack_id 32 | obj_offset u32 | obj_size u32
//
// The JSON starts at byte 16 (borghash 0.2.0, what borg master writes). borghash's unmerged
// `mmap` branch keeps version 1 but uses a 28-byte header (magic, version, meta_size, capacity,
// used, kv_used) and NUL-pads the JSON so records start on a 64-byte boundary; it is told apart
// by byte 16 not being '{'. Either way the file must end right after `used` records. `flags`
// (0x01000000 in real fragments) and `size` (0) carry nothing and are ignored; records are in
// hash-table order, not sorted.
//
// The complete index is the union of all fragments. A fragment can vanish without a trace, so
// the run also walks every pack: blobs no fragment lists are orphans (a warning: a lost
// fragment, or gap objects of an interrupted backup), verified all the same.
//
// Thread contract: pure functions over bytes; ChunkIndex is built on the main thread before
// the workers start and is only read afterwards (Find and ForPack are safe for concurrent use
// then).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/io/env.h"
#include "checker/report/finding.h"
#include "checker/repo/borgstore/borgstore_layout.h"

namespace borgcheck::repo {

inline constexpr std::string_view kBorghashMagic = "BORGHASH";
inline constexpr uint32_t kBorghashVersion = 1;
inline constexpr size_t kBorghashHeaderSize = 16;      // 0.2.0 layout
inline constexpr size_t kBorghashMmapHeaderSize = 28;  // unmerged `mmap` branch layout
inline constexpr size_t kChunkIndexRecordSize = 80;    // key 32 + value 48

struct ChunkIndexEntry {
  ChunkId pack_id{};
  uint32_t offset = 0;  // of the blob header within the pack
  uint32_t size = 0;    // of the whole blob (49 + meta_size + data_size)
  bool operator==(const ChunkIndexEntry&) const = default;
};

struct IndexRecord {
  ChunkId chunk_id{};
  ChunkIndexEntry entry;
};

enum class BorghashLayout { kV020, kMmapBranch };

struct IndexFragment {
  BorghashLayout layout = BorghashLayout::kV020;
  uint64_t capacity = 0;
  std::vector<IndexRecord> records;  // in file order
};

// Parses one fragment. kCorruptMetadata with the reason when it is not a chunk-index
// borghash table (wrong magic/version, JSON not as expected, key/value sizes or field formats
// not those of ChunkIndexEntry, file size != header + meta + 80 * used).
Result<IndexFragment> ParseIndexFragment(Bytes content);

// Test helper and documentation of the format: the bytes borghash 0.2.0 writes for `records`
// (JSON exactly as Python's json.dumps writes it, flags 0x01000000, size 0; borg writes
// capacity = 2 * used, and 1000 for repo-create's empty fragment).
std::string TEST_SerializeIndexFragment(const std::vector<IndexRecord>& records, uint64_t capacity);

// The merged chunk index and the fragments it came from. Memory: 76 bytes per chunk plus 4 per
// chunk for the per-pack order (a repository with 10 million chunks needs about 800 MB).
struct IndexedChunk {
  ChunkId chunk_id{};
  ChunkIndexEntry entry;
  uint32_t fragment = 0;  // index into LoadedChunkIndex::fragment_names
};

struct LoadedChunkIndex {
  std::vector<std::string> fragment_names;  // every fragment read, sorted
  size_t fragments_bad = 0;                 // name mismatch or unparseable
  std::vector<IndexedChunk> chunks;         // sorted by chunk id, one entry per id
  // Per pack: positions in `chunks` of its entries, sorted by offset (then chunk id). Packs the
  // index names but that do not exist are in here too; the run reports them as missing.
  std::map<ChunkId, std::vector<uint32_t>> by_pack;
  std::vector<report::Finding> findings;    // fragment problems, conflicting entries

  size_t size() const { return chunks.size(); }
  // The entry of `id`, or nullptr. Binary search; safe for concurrent use.
  const IndexedChunk* Find(const ChunkId& id) const;
  // Copies of the entries of one pack, sorted by offset: the input of CrossCheckPack.
  std::vector<IndexedChunk> EntriesOfPack(const ChunkId& pack_id) const;
};

// Reads, checks (SHA-256 == name) and merges the fragments of `layout`, in name order. A
// fragment whose content does not match its name is reported (error, stage index) but its
// records are still used when it parses: every one of them is cross-checked against the packs
// anyway. An unparseable fragment is reported and contributes nothing. Fragments that list
// one chunk at different places: the later one (name order) wins, with a warning.
LoadedChunkIndex LoadChunkIndex(const io::Env& env, const BorgstoreLayout& layout);

// ---- Cross-check of one pack: its index entries against its walked blobs ----
struct PackCrossCheck {
  // Index entries that point exactly at a walked blob with the same chunk id and size.
  std::vector<std::pair<const IndexedChunk*, const WalkedBlob*>> matched;
  // Index entries that do not: verified by reading at the stated offset and size, as borg
  // does (`why` says how the entry disagrees with the walk; empty when the walk stopped
  // before reaching the entry, which the walk's own finding explains).
  struct Unmatched {
    const IndexedChunk* chunk;
    std::string why;
  };
  std::vector<Unmatched> unmatched;
  // Walked blobs no index entry of this pack points at (orphans). A blob an entry points at
  // wrongly (another chunk id or size) is not an orphan: it is verified as that entry's chunk.
  std::vector<const WalkedBlob*> orphans;
};

// `entries` sorted by offset (LoadedChunkIndex::EntriesOfPack), `walk` from WalkPack. Pure. The
// result points into both, which must outlive it.
PackCrossCheck CrossCheckPack(const std::vector<IndexedChunk>& entries, const PackWalk& walk);

}  // namespace borgcheck::repo
