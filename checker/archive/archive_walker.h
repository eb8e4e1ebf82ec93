// The archive pass: archive object -> item metadata stream -> items -> chunk lists, for every
// archive the caller selects, at the cost of the distinct metadata rather than of
// archives x files (issue 12, "Cost"). It marks every referenced chunk in the caller's table
// and names, for each bad or missing chunk, the (archive, path, byte range) that use it.
//
// Design (the memo):
//   1. A step decodes one item-stream chunk given the carry the previous chunk left
//      (item_stream.h). Its outcome - the items it completes, the issues it finds and the
//      carry it leaves - is a pure function of (carry bytes, chunk plaintext, options).
//   2. The carry is named exactly, without hashing its bytes: either "empty" (the previous
//      chunk ended at an item boundary), "resync" (out of sync after an unreadable chunk or
//      malformed bytes), or the bytes of an incomplete item, which are always chunk c_j from
//      offset o followed by the whole chunks c_j+1 .. c_i-1 (an item that spans them). Chunk
//      ids are content addresses, so (o, c_j, ..., c_i-1) determines the carry bytes. The
//      descriptors are interned into small integers (CarryId) as chains - (o, c_j) is a root,
//      (parent, c) appends chunk c - so an item spanning k chunks costs k descriptors.
//   3. The memo maps (CarryId in, chunk id) -> StepMemo. A StepMemo keeps only what an archive
//      needs from the step: the item count, the chunk size, the number of references, the
//      CarryId it leaves, the issues, and - only for references to chunks the table says are
//      bad or missing - the path and byte range (capped per chunk id, with exact totals).
//      Paths of intact references are never kept; the memo holds one entry per distinct key,
//      i.e. about one per distinct item-stream chunk, not per file or per archive.
//   4. What a memo hit may skip, and why it is sound: the decode (by 1.), and the marks: a
//      mark is a set insertion into the caller's table, done when the key was first decoded,
//      and the same key references the same chunks. Nothing else is skipped: a chunk reached
//      with a different carry (an item straddling into it differs, or the stream was out of
//      sync) is a different key and is decoded again - e.g. archive B whose first chunk
//      differs from archive A's decodes B's second chunk itself even though its bytes equal
//      A's second chunk, because B's straddling item is another item.
//   5. Per archive, a cheap pass over its key sequence: look up each key, decode on a miss,
//      and attribute the StepMemo's bad references and issues to (archive, absolute item
//      number, stream offset). After a hit the carry bytes are not at hand; they are rebuilt
//      from the descriptor (re-fetching c_j .. c_i-1) only if the next key misses - at the
//      places where two archives' streams diverge.
//   6. Unreadable chunks: a missing item_ptrs chunk (borg 2) leaves a gap of unknown length;
//      a missing or damaged item-stream chunk is a step whose carry out is "resync", so the
//      next chunk is searched for an item start as borg's RobustUnpacker does. Both are
//      reported with how far the stream could be read (item N, byte M).
//   7. borg 1.x hard links: a slave item has no chunks, only `source` = the master's path.
//      When a master (hardlink_master) uses a bad chunk, that archive's stream is decoded once
//      more in full (no memo) to name its slaves too (RefList::kHardlinkSlave). This happens
//      only for archives with such damage.
// Memory: the memo (one small entry per distinct key plus bad-reference records), the carry
// descriptors, the item_ptrs cache (the ids of distinct item_ptrs chunks), and per walk one
// carry buffer (<= StreamOptions::max_item_bytes) and one fetch buffer.
//
// Thread contract: WalkArchive may run concurrently for any archives (the same one too), e.g.
// one per pool worker. The memo, the carry table, the item_ptrs cache and the counters have
// their own synchronisation (sharded mutexes, atomics); StepMemos are immutable once inserted.
// A walk never waits for another walk: two walks that reach the same key at once both decode
// it, the first insert wins and both use identical results, so the results never depend on
// the schedule. The walker calls ObjectFetcher::Fetch and ReferenceTable::Reference from
// every walking thread concurrently. A good schedule: walk one archive alone first (it fills
// the memo), then the rest in parallel. The walker must outlive its walks; its fetcher and
// table must outlive the walker.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "checker/archive/archive_types.h"
#include "checker/archive/item_stream.h"
#include "checker/archive/metadata_decode.h"
#include "checker/archive/object_fetcher.h"

namespace borgcheck::archive {

struct WalkOptions {
  Generation generation = Generation::kBorg1;
  // From ItemKeysFor(generation, manifest); the walker keeps its own copy.
  std::optional<ItemKeySet> item_keys;
  size_t max_item_bytes = size_t(64) << 20;
  uint32_t max_depth = 16;
  // Per archive: records kept per bad chunk id, and in all; totals are always exact.
  uint32_t max_refs_per_chunk = 1000;
  uint32_t max_refs_per_archive = 100000;
  uint32_t max_problems_per_archive = 1000;
};

// Which list of an item the bad reference is in.
enum class RefList : uint8_t {
  kChunks,         // the file's content
  kChunksHealthy,  // the original list kept by a borg 1.x/b5 `check --repair` (the file's
                   // `chunks` then holds all-zero replacements for what was missing)
  kHardlinkSlave,  // borg 1.x: a hard link whose content is its master's `chunks` (`via`)
};
std::string_view RefListName(RefList l);

// One use of a bad or missing chunk: "archive A, path P, bytes [begin, end)".
struct BadReference {
  ChunkId chunk{};
  RefState state = RefState::kMissing;
  uint32_t archive = 0;  // the caller's archive index
  std::string path;
  uint64_t begin = 0;
  uint64_t end = 0;
  RefList list = RefList::kChunks;
  std::string via;  // kHardlinkSlave: the master's path
};

struct BadRefTotal {
  ChunkId chunk{};
  RefState state = RefState::kMissing;
  uint64_t uses = 0;  // every use in this archive, also those beyond the record caps
};

enum class StreamProblemKind : uint8_t {
  kChunkMissing,         // an item-stream chunk is not in the repository
  kChunkDamaged,         // an item-stream chunk could not be read or verified
  kItemPtrsMissing,      // borg 2: an item_ptrs chunk is missing: a gap of unknown length
  kItemPtrsDamaged,
  kItemPtrsUndecodable,
  kMalformed,            // bytes that are not msgpack (the walk resyncs)
  kInvalidItem,          // a value that is not a valid item (skipped, its chunks unchecked)
  kResyncSkipped,        // bytes skipped while searching for the next item
  kTruncated,            // the stream ends inside an item
  kSizeMismatch,         // warning: an item's `size` differs from the sum of its chunks
};
std::string_view StreamProblemKindName(StreamProblemKind k);

// "item metadata chunk X (chunk 3 of 45) of archive A is missing: read up to item N, byte M".
struct StreamProblem {
  StreamProblemKind kind = StreamProblemKind::kMalformed;
  ChunkId chunk{};             // the item-stream chunk (item_ptrs kinds: the item_ptrs chunk)
  uint32_t chunk_index = 0;    // its position in the stream (item_ptrs kinds: in item_ptrs)
  uint32_t chunk_count = 0;    // chunks in the stream (item_ptrs kinds: item_ptrs chunks)
  uint64_t items_before = 0;   // valid items decoded before this point in the archive
  uint64_t stream_offset = 0;  // stream bytes read before it (of the chunks that were read)
  uint32_t offset_in_chunk = 0;
  bool started_in_earlier_chunk = false;  // the item concerned began in an earlier chunk
  uint64_t length = 0;         // kResyncSkipped: bytes skipped
  report::Stage stage = report::Stage::kMissing;  // k*Damaged: the fetcher's stage
  std::string reason;          // fetch message, msgpack/item reason, "size 5, chunks size 7"
  std::string path;            // kSizeMismatch: the item
  // kChunkMissing, kChunkDamaged: the last item decoded before the chunk ("" when none was)
  // and the first decoded after it ("" when none was): the lost items lie between them.
  std::string path_before;
  std::string path_after;
};

enum class ArchiveFailure : uint8_t {
  kNone,
  kObjectMissing,      // "Archive metadata block <id> is missing!"
  kObjectDamaged,      // "Archive metadata block <id> is corrupted: <message>"
  kObjectUndecodable,  // not an archive object of this generation (message says why)
  kTamFailed,          // ObjectFetcher::VerifyArchive's problem (borg 1.2.5+ / 1.4); the
                       // archive is walked all the same
};
std::string_view ArchiveFailureName(ArchiveFailure f);

struct ArchiveResult {
  uint32_t index = 0;
  ChunkId id{};
  std::string name;  // the archive object's name; the manifest's when the object is unusable
  ArchiveFailure failure = ArchiveFailure::kNone;
  report::Stage stage = report::Stage::kMissing;  // kObjectDamaged, kTamFailed
  std::string message;
  std::string time;  // the archive object's time
  uint32_t item_ptrs = 0;      // borg 2: item_ptrs chunks
  uint32_t stream_chunks = 0;  // item-stream chunks
  uint64_t items = 0;          // valid items decoded
  uint64_t stream_bytes = 0;   // plaintext bytes of the stream chunks that were read
  uint64_t references = 0;     // chunk references of the decoded items
  std::vector<StreamProblem> problems;  // in stream order; capped (problems_total is exact)
  uint64_t problems_total = 0;
  std::vector<BadReference> bad_refs;   // in stream order; capped per chunk and in all
  std::vector<BadRefTotal> bad_totals;  // exact, sorted by chunk id
  // How this walk went (depend on the schedule, never on what is found).
  uint32_t steps_decoded = 0;
  uint32_t memo_hits = 0;
};

struct WalkerStats {
  uint64_t steps_decoded = 0;
  uint64_t memo_hits = 0;
  uint64_t memo_entries = 0;
  uint64_t carry_descriptors = 0;
  uint64_t bytes_decoded = 0;   // plaintext bytes of item-stream chunks decoded
  uint64_t fetches = 0;         // Fetch calls (archive objects, item_ptrs, stream chunks)
  uint64_t carry_rebuilds = 0;  // carries rebuilt after a hit (re-fetching their chunks)
  uint64_t hardlink_passes = 0;
};

class ArchiveWalker {
 public:
  ArchiveWalker(ObjectFetcher& fetcher, ReferenceTable& table, WalkOptions options);
  ~ArchiveWalker();
  ArchiveWalker(const ArchiveWalker&) = delete;
  ArchiveWalker& operator=(const ArchiveWalker&) = delete;

  // Walks one archive: `index` is the caller's number for it (BadReference::archive),
  // `archive.name` may be empty (borg 2 master: the name is in the object). Safe for
  // concurrent use.
  ArchiveResult WalkArchive(uint32_t index, const ManifestArchive& archive);

  WalkerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Gathers the bad references of all archives per chunk id, in the order the results are
// added (add them in archive order for a deterministic report). Keeps up to `max_per_chunk`
// uses per chunk and the exact totals. Owned by one thread.
class AffectedIndex {
 public:
  struct Entry {
    RefState state = RefState::kMissing;
    std::vector<BadReference> uses;
    uint64_t total = 0;
  };

  explicit AffectedIndex(size_t max_per_chunk) : max_per_chunk_(max_per_chunk) {}
  void Add(const ArchiveResult& result);
  const std::map<ChunkId, Entry>& by_chunk() const { return by_chunk_; }

 private:
  size_t max_per_chunk_;
  std::map<ChunkId, Entry> by_chunk_;
};

}  // namespace borgcheck::archive
