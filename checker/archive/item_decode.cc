#include "checker/archive/item_decode.h"

#include <array>
#include <cstring>

#include "checker/archive/msgpack_reader.h"

namespace borgcheck::archive {
namespace {

// borg's constants.py ITEM_KEYS: 1.2.4 and 1.4 are identical; 2.0.0b5 adds target and hlid;
// master adds inode and digests.
constexpr std::array<std::string_view, 23> kBorg1ItemKeys = {
    "path", "source", "rdev", "chunks", "chunks_healthy", "hardlink_master", "mode", "user",
    "group", "uid", "gid", "mtime", "atime", "ctime", "birthtime", "size", "xattrs",
    "bsdflags", "acl_nfs4", "acl_access", "acl_default", "acl_extended", "part"};

std::string_view AsView(Bytes b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

// Parses a chunk list ([[id, size(, csize)], ...] or nil) into `out` with cumulative offsets.
// Entries have 3 elements in borg 1.x, 2 or 3 in borg 2 (fix_list_of_chunkentries).
bool ReadChunkList(Reader& r, Generation g, std::string_view key, bool& present,
                   std::vector<ChunkRef>& out, std::string& reason) {
  out.clear();
  if (r.ReadNil()) {
    present = false;  // 1.x allows None; there is nothing to check
    return true;
  }
  uint32_t n = 0;
  if (!r.ReadArrayHeader(n)) {
    reason = std::string(key) + " is not a list";
    return false;
  }
  present = true;
  uint64_t offset = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t arity = 0;
    Bytes id;
    uint64_t size = 0;
    uint64_t csize = 0;
    const bool arity_ok = r.ReadArrayHeader(arity) &&
                          (g == Generation::kBorg1 ? arity == 3 : (arity == 2 || arity == 3));
    if (!arity_ok || !r.ReadRaw(id) || id.size() != 32 || !r.ReadUint(size) ||
        (arity == 3 && !r.ReadUint(csize))) {
      reason = std::string(key) + " entry " + std::to_string(i) + " is not [id, size" +
               (g == Generation::kBorg1 ? ", csize]" : "]");
      return false;
    }
    if (size > UINT64_MAX - offset) {
      reason = std::string(key) + " sizes overflow at entry " + std::to_string(i);
      return false;
    }
    ChunkRef& ref = out.emplace_back();
    std::memcpy(ref.id.data(), id.data(), 32);
    ref.size = size;
    ref.offset = offset;
    offset += size;
  }
  return true;
}

ItemType TypeOfMode(uint64_t mode) {
  switch (mode & 0170000) {
    case 0100000: return ItemType::kFile;
    case 0040000: return ItemType::kDirectory;
    case 0120000: return ItemType::kSymlink;
    case 0010000: return ItemType::kFifo;
    case 0020000: return ItemType::kCharDevice;
    case 0060000: return ItemType::kBlockDevice;
    case 0140000: return ItemType::kSocket;
    default: return ItemType::kOther;
  }
}

}  // namespace

ItemKeySet::ItemKeySet(Generation g) {
  for (std::string_view k : kBorg1ItemKeys) keys_.emplace(k);
  if (g == Generation::kBorg1) {
    keys_.emplace("acl");  // attic <= 0.13 wrote a meaningless `acl` key; borg 1.x pops it
  } else {
    keys_.emplace("target");
    keys_.emplace("hlid");
    if (g == Generation::kBorg2Master) {
      keys_.emplace("inode");
      keys_.emplace("digests");
    }
  }
}

std::string_view ItemTypeName(ItemType t) {
  switch (t) {
    case ItemType::kNoMode: return "none";
    case ItemType::kFile: return "file";
    case ItemType::kDirectory: return "directory";
    case ItemType::kSymlink: return "symlink";
    case ItemType::kFifo: return "fifo";
    case ItemType::kCharDevice: return "chardev";
    case ItemType::kBlockDevice: return "blockdev";
    case ItemType::kSocket: return "socket";
    case ItemType::kOther: return "other";
  }
  return "other";
}

bool DecodeItem(Bytes value, const ItemDecodeOptions& options, ItemRecord& item,
                std::string& reason) {
  item.path = Bytes();
  item.type = ItemType::kNoMode;
  item.mode = 0;
  item.source.reset();
  item.target.reset();
  item.hlid.reset();
  item.hardlink_master.reset();
  item.size.reset();
  item.has_chunks = item.has_chunks_healthy = false;
  item.chunks.clear();
  item.chunks_healthy.clear();

  Reader r(value);
  uint32_t n = 0;
  if (!r.ReadMapHeader(n)) {
    reason = "not a dictionary";
    return false;
  }
  bool has_path = false;
  bool has_mtime = false;
  std::string invalid_keys;
  const Generation g = options.generation;
  for (uint32_t i = 0; i < n; ++i) {
    Bytes key_bytes;
    if (!r.ReadRaw(key_bytes)) {
      reason = "invalid keys: a key that is not a string";
      return false;
    }
    const std::string_view key = AsView(key_bytes);
    if (!options.item_keys->Contains(key)) {
      if (!invalid_keys.empty()) invalid_keys += ", ";
      invalid_keys += key;
      if (!r.Skip(options.max_depth)) {
        reason = "value of " + std::string(key) + " is malformed";
        return false;
      }
      continue;
    }
    // Duplicate keys: the last one wins, as in the Python dict borg unpacks into.
    if (key == "path") {
      Bytes path;
      if (!r.ReadRaw(path)) {
        reason = "path is not a string";
        return false;
      }
      item.path = path;
      has_path = true;
    } else if (key == "mtime") {
      has_mtime = true;
      if (!r.Skip(options.max_depth)) {
        reason = "mtime is malformed";
        return false;
      }
    } else if (key == "mode") {
      uint64_t mode = 0;
      if (!r.ReadUint(mode)) {
        reason = "mode is not a non-negative integer";
        return false;
      }
      item.mode = mode;
      item.type = TypeOfMode(mode);
    } else if (key == "chunks" || key == "chunks_healthy") {
      const bool healthy = key == "chunks_healthy";
      if (!ReadChunkList(r, g, key, healthy ? item.has_chunks_healthy : item.has_chunks,
                         healthy ? item.chunks_healthy : item.chunks, reason)) {
        return false;
      }
    } else if (key == "source" || key == "target" || key == "hlid") {
      Bytes v;
      if (r.ReadNil() && key != "hlid") {
        continue;  // borg 1 wrote None for some unknown values
      }
      if (!r.ReadRaw(v)) {
        reason = std::string(key) + " is not a string";
        return false;
      }
      (key == "source" ? item.source : key == "target" ? item.target : item.hlid) = v;
    } else if (key == "hardlink_master") {
      bool b = false;
      if (!r.ReadBool(b)) {
        reason = "hardlink_master is not a bool";
        return false;
      }
      item.hardlink_master = b;
    } else if (key == "size") {
      uint64_t size = 0;
      if (!r.ReadUint(size)) {
        reason = "size is not a non-negative integer";
        return false;
      }
      item.size = size;
    } else {
      if (!r.Skip(options.max_depth)) {
        reason = "value of " + std::string(key) + " is malformed";
        return false;
      }
    }
  }
  if (!r.at_end()) {
    reason = "bytes after the item";
    return false;
  }
  // borg's order: required keys first, then unknown keys.
  if (!has_path || !has_mtime) {
    reason = std::string("missing required keys: ") +
             (!has_mtime && !has_path ? "mtime, path" : !has_path ? "path" : "mtime");
    return false;
  }
  if (!invalid_keys.empty()) {
    reason = "invalid keys: " + invalid_keys;
    return false;
  }
  return true;
}

}  // namespace borgcheck::archive
