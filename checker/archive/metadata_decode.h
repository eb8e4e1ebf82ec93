// Decoders for the archive metadata above the item stream (docs/formats.md, "Archives"):
//
//   manifest (id 00...00)   1.x / b5: {version 1, archives: {name: {id, time}}, timestamp,
//                           config, item_keys, tam}; master: {version 2, archives: {},
//                           timestamp, config: {item_keys, ...}} (the archive list is the
//                           borgstore directory archives/, one empty item per archive id)
//   archive object          1.x: {version 1, name, items: [ids], cmdline, time, ..., tam};
//                           borg 2: {version 2, name, item_ptrs: [ids], command_line, time,
//                           ..., tam (b5 only)}
//   item_ptrs chunk         borg 2: a msgpack list of item-stream chunk ids
//
// Every decoder takes a whole plaintext (borg's unpackb: one value, no trailing bytes), is
// bounded by the input size (msgpack_util) and says why it failed in `error`.
//
// Thread contract: pure functions of their inputs; safe for concurrent use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/archive/archive_types.h"
#include "checker/archive/item_decode.h"
#include "checker/base/bytes.h"

namespace borgcheck::archive {

struct ManifestArchive {
  std::string name;  // bytes as stored (borg: surrogate-escaped UTF-8)
  ChunkId id{};
  std::string time;
};

struct ManifestInfo {
  int64_t version = 0;
  std::string timestamp;
  // In the manifest's map order; a name given twice keeps its first position and its last
  // value, as the Python dict borg builds. Always empty for borg 2 master.
  std::vector<ManifestArchive> archives;
  std::vector<std::string> item_keys;  // top-level `item_keys` and `config.item_keys`
  bool has_tam = false;
  bool tam_required = false;  // config.tam_required (1.x, b5)
};

bool DecodeManifest(Bytes plaintext, Generation g, ManifestInfo& out, std::string& error);

// ItemKeySet(g) plus the manifest's item keys (borg: ITEM_KEYS | manifest.item_keys).
ItemKeySet ItemKeysFor(Generation g, const ManifestInfo& manifest);

struct ArchiveInfo {
  int64_t version = 0;
  std::string name;
  std::string time;
  // 1.x: the item-stream chunk ids themselves (`items`). borg 2: `item_ptrs`, the ids of
  // chunks that each hold a list of item-stream chunk ids (DecodeItemPtrs).
  std::vector<ChunkId> items;
  std::vector<ChunkId> item_ptrs;
  bool has_tam = false;
  std::optional<uint64_t> nfiles;
  std::optional<uint64_t> size;
};

// Also checks the version borg's check requires (1 for 1.x, 2 for borg 2: "Unknown archive
// metadata version N") and the list key of the generation.
bool DecodeArchive(Bytes plaintext, Generation g, ArchiveInfo& out, std::string& error);

// Appends the ids of one item_ptrs chunk (a msgpack list of 32-byte ids) to `ids`.
bool DecodeItemPtrs(Bytes plaintext, std::vector<ChunkId>& ids, std::string& error);

// borgstore's archives/<64 hex>[.del] entry names (master); false for any other name. The
// entry's content is empty and carries nothing (the name is the archive object's id).
bool ParseArchiveEntryName(std::string_view name, ChunkId& id, bool& soft_deleted);

}  // namespace borgcheck::archive
