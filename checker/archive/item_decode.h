// One item of an archive's item metadata stream: a msgpack map describing one file system
// object (borg's Item, item.pyx), decoded into the fields a reference check needs.
//
// What is read (docs/formats.md, "Archives"):
//   path              str (1.x: raw)                      required, as borg's REQUIRED_ITEM_KEYS
//   mtime             int or ext / raw bigint              required (value not interpreted)
//   mode              int                                  the file type (S_IFMT bits)
//   chunks            [[id, size, csize], ...] (1.x)       the content, in file order; byte
//                     [[id, size], ...] (borg 2; 3-tuples  ranges are the cumulative sizes
//                     from transferred archives are kept)
//   chunks_healthy    same shape                           1.x/b5 `check --repair` kept the
//                                                          original list here after it put
//                                                          all-zero chunks into `chunks`
//   source            raw                                  1.x: the hard link master's path
//                                                          (regular files) or a symlink target
//   hardlink_master   bool                                 1.x: this item carries the chunks
//                                                          of a hard link group
//   hlid              bin                                  borg 2: hard link group id (every
//                                                          member carries the chunks)
//   target            str                                  borg 2: symlink target
//   size              int                                  sum of the chunk sizes
// Every other key must be one of the repository's item keys (borg's valid_item): an item
// with an unknown key, a missing required key or a wrongly typed field is invalid, and, as
// in borg, its chunks are not checked.
//
// Thread contract: DecodeItem is a pure function of its inputs; an ItemRecord is owned by
// one thread and reused from item to item (its vectors keep their capacity). The spans in an
// ItemRecord point into the item bytes given to DecodeItem.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "checker/archive/archive_types.h"
#include "checker/base/bytes.h"

namespace borgcheck::archive {

// The item keys an item may use: borg's ITEM_KEYS of the generation plus the manifest's
// `item_keys` (borg: ITEM_KEYS | manifest.item_keys).
class ItemKeySet {
 public:
  // The generation's built-in keys (1.x also accepts attic's stray `acl`, which borg drops).
  explicit ItemKeySet(Generation g);
  void Add(std::string_view key) { keys_.emplace(key); }
  bool Contains(std::string_view key) const { return keys_.find(key) != keys_.end(); }
  size_t size() const { return keys_.size(); }

 private:
  std::set<std::string, std::less<>> keys_;
};

enum class ItemType : uint8_t {
  kNoMode,  // no `mode` key
  kFile,
  kDirectory,
  kSymlink,
  kFifo,
  kCharDevice,
  kBlockDevice,
  kSocket,
  kOther,  // S_IFMT bits of no known type
};
std::string_view ItemTypeName(ItemType t);

// One entry of a chunk list, with its byte range in the file: [offset, offset + size).
struct ChunkRef {
  ChunkId id;
  uint64_t size = 0;
  uint64_t offset = 0;
};

struct ItemRecord {
  Bytes path;
  ItemType type = ItemType::kNoMode;
  uint64_t mode = 0;
  std::optional<Bytes> source;  // 1.x
  std::optional<Bytes> target;  // borg 2
  std::optional<Bytes> hlid;    // borg 2
  std::optional<bool> hardlink_master;  // 1.x
  std::optional<uint64_t> size;
  bool has_chunks = false;  // `chunks` present and not nil
  std::vector<ChunkRef> chunks;
  bool has_chunks_healthy = false;
  std::vector<ChunkRef> chunks_healthy;

  // 1.x: a hard link whose content is the chunk list of the item at `source` (borg 1.x's
  // hardlink slave: regular file, `source`, no chunks of its own).
  bool IsHardlinkSlave() const { return type == ItemType::kFile && source && !has_chunks; }
  // The sum of `chunks` sizes (borg's get_size(from_chunks=True)).
  uint64_t ChunksSize() const { return chunks.empty() ? 0 : chunks.back().offset + chunks.back().size; }
};

struct ItemDecodeOptions {
  Generation generation = Generation::kBorg1;
  const ItemKeySet* item_keys = nullptr;  // required
  uint32_t max_depth = 16;                // nesting allowed inside one item
};

// Decodes one complete msgpack value as an item. Returns false, with borg's reason where
// borg has one ("not a dictionary", "missing required keys: mtime", "invalid keys: x") or
// ours for a wrongly typed field ("chunks entry 3 is not [id, size, csize]"), when the value
// is not a valid item. `item` is overwritten either way.
bool DecodeItem(Bytes value, const ItemDecodeOptions& options, ItemRecord& item,
                std::string& reason);

}  // namespace borgcheck::archive
