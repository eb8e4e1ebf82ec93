// Repository version 4 (borg 2 master): the borgstore layout, pack files and the RepoObj blob
// header (spec borg2-format.md §B.1, §B.4). Everything here is keyless: names, SHA-256 content
// addresses, blob headers, the msgpack meta map once something else has authenticated it.
//
//   config/{readme,version,id,manifest}   keys/<sha256>   archives/<id>[.del]   index/<sha256>
//   packs/<xx>/<sha256 of the pack>       cache/ (chunkindex-invalid, checked-packs)   locks/
//
//   pack  = blob || blob || ...           (no header, no trailer, no padding)
//   blob  = "BORG_OBJ" | version u8 (1 = b22, 2 = master) | chunk_id 32 | meta_size u32le |
//           data_size u32le | meta envelope | data envelope          (49-byte header)
//
// The repository is only read: every byte comes through io::Env, and nothing here writes.
//
// Thread contract: free functions are pure or read the file system only, and are safe for
// concurrent use. Values (BorgstoreLayout, PackWalk) are const once built; the run
// builds the layout on the main thread before any worker exists and the workers only read it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/io/env.h"
#include "checker/repo/chunk_id.h"
#include "checker/report/finding.h"

namespace borgcheck::repo {

// ---- Format constants (spec §B.1.1, §B.1.2) ----
inline constexpr std::string_view kObjMagic = "BORG_OBJ";
inline constexpr size_t kObjHeaderSize = 49;     // magic 8 | version 1 | id 32 | sizes 4+4
inline constexpr size_t kObjHeaderAadSize = 41;  // magic | version | id: the v2 AAD prefix
inline constexpr uint8_t kObjVersionB22 = 1;     // no header AAD
inline constexpr uint8_t kObjVersionMaster = 2;  // header AAD (what master writes)
inline constexpr std::string_view kStoreReadme =
    "This is a Borg Backup repository.\nSee https://borgbackup.readthedocs.io/\n";
// borg's put() limit on one whole blob (MAX_DATA_SIZE); larger headers are hostile input.
inline constexpr uint64_t kMaxBlobSize = 20971479;
// A lock younger than this is live (borgstore's stale time: 30 minutes).
inline constexpr int64_t kLockStaleSeconds = 30 * 60;

struct BlobHeader {
  uint8_t version = 0;
  ChunkId chunk_id{};
  uint32_t meta_size = 0;
  uint32_t data_size = 0;
  uint64_t blob_size() const { return kObjHeaderSize + uint64_t(meta_size) + data_size; }
};

// Reads a header from the first 49 bytes of `b` (which must hold them); checks nothing.
BlobHeader ReadBlobHeader(Bytes b);

// RepoObj.parse step 1 over one whole blob, as read at an index entry (offset, size):
// length >= 49, magic, version 1 or 2, 49 + meta_size + data_size == length. Returns nullopt
// or borg's words: "object too small: expected at least 49 header bytes, got N",
// "invalid object magic", "unsupported object version: N",
// "object size inconsistent: expected X bytes, got Y".
struct BlobProblem {
  enum Kind { kTooSmall, kBadMagic, kBadVersion, kSizeMismatch } kind;
  std::string message;
  // Too small, or fewer bytes than the header claims: the object was cut short.
  bool truncated() const { return kind == kTooSmall || kind == kSizeMismatch; }
};
std::optional<BlobProblem> CheckBlobStructure(Bytes blob, BlobHeader* header);

// The AAD the RepoObj layer hands to the envelope layer (spec §B.3.3): version 2 binds the
// header's first 41 bytes and a slot byte ('M' meta, 'D' data); version 1 binds nothing here.
// Writes into `out` (>= 42 bytes) and returns the length (42 or 0).
inline constexpr uint8_t kSlotMeta = 'M';
inline constexpr uint8_t kSlotData = 'D';
size_t BuildObjectAad(Bytes blob_header, uint8_t slot, uint8_t* out);

// ---- Pack walk (borg's PackReader.iter_headers, made stricter) ----
struct WalkedBlob {
  uint64_t offset = 0;  // of the header within the pack
  BlobHeader header;
};

enum class WalkEnd {
  kClean,          // the last blob ends exactly at EOF
  kTrailingBytes,  // fewer than 49 bytes after the last blob (borg stops silently; we report)
  kNoHeader,       // bytes at end_offset do not start with "BORG_OBJ": the rest is unwalkable
  kPastEof,        // the blob at end_offset claims more bytes than the pack has (truncation)
};

struct PackWalk {
  std::vector<WalkedBlob> blobs;  // in pack order; excludes the blob that broke the walk
  WalkEnd end = WalkEnd::kClean;
  uint64_t end_offset = 0;        // where the walk stopped
  std::optional<BlobHeader> broken_header;  // kPastEof: the header that overran
  std::string message;            // why it stopped, when not kClean
};

// Walks the headers of a whole pack held in memory. A blob of an unknown version is still
// walked (its sizes are where they always are) and left for CheckBlobStructure to report.
PackWalk WalkPack(Bytes pack);

// The msgpack meta map of an object (spec §B.4) is parsed and decoded by the code both borg 2
// generations share: repo/borg2/borg2_repo_obj.h (ParseObjMeta, DecodeObjData).

// The manifest plaintext: a msgpack map {version: 2, archives: {}, timestamp: str,
// config: {item_keys: [...], feature_flags?: ...}}. Returns "" when it looks like one, else why
// not. `mandatory_features` gets the feature names borg master would refuse (it supports none).
std::string CheckManifestPlaintext(Bytes plain, std::vector<std::string>* mandatory_features);

// ---- SHA-256 content addresses ----
void Sha256(Bytes data, uint8_t out[32]);
// Whether `name` is 64 lowercase hex characters; fills `id` with their value.
bool ParseHexName(std::string_view name, ChunkId* id);

// ---- The layout ----
struct StoreItem {
  std::string name;  // the key within its namespace: "<64 hex>" for packs, index, keys
  std::string path;  // file path
  uint64_t size = 0;
};

struct PackFile {
  ChunkId id{};      // the name's value: the SHA-256 the content must have
  std::string name;  // 64 lowercase hex
  std::string path;
  uint64_t size = 0;
};

struct BorgstoreLayout {
  std::string path;
  std::string id;      // config/id: 32 raw bytes
  std::string id_hex;  // 64 lowercase hex
  std::string manifest_path;
  bool manifest_present = false;
  std::vector<PackFile> packs;              // sorted by name
  // Entries named like packs (packs/<xx>/<64 hex>) that are not regular files: name -> "a
  // directory", "a FIFO", ... (not read; a finding says so, and so does a chunk index that names
  // them).
  std::map<std::string, std::string> not_regular_packs;
  std::vector<StoreItem> index_fragments;   // sorted by name (any name: checked later)
  std::vector<StoreItem> keys;              // keys/* items, sorted by name
  std::vector<ChunkId> archives;            // archives/<64 hex>: live archive ids, sorted
  size_t deleted_archives = 0;              // archives/<64 hex>.del (soft-deleted)
  bool chunkindex_invalid = false;          // cache/chunkindex-invalid exists
  uint64_t pack_bytes = 0;                  // sum of pack sizes
  std::vector<report::Finding> findings;    // layout problems: stray names, odd readme, ...
  std::vector<std::string> notes;           // informational lines
};

struct LayoutOptions {
  bool bypass_lock = false;
  int64_t now_unix = 0;  // for the lock age; 0 = the current time
};

// Reads the layout of a version-4 repository without reading packs. kNotARepository when
// config/id is missing or malformed, kUnsupported when config/version is not "4", kLockHeld
// when locks/ holds a live exclusive lock (unless bypass_lock), kIoError when a directory
// cannot be listed.
Result<BorgstoreLayout> ReadBorgstoreLayout(const io::Env& env, const std::string& path, const LayoutOptions& opts);

// "packs/ab/ab12..." for messages.
std::string PackItemName(const std::string& pack_hex);

}  // namespace borgcheck::repo
