// Decoding an archive's item metadata stream: the concatenation of its item-stream chunks'
// plaintexts is a sequence of msgpack maps, one per item (borg's ChunkBuffer packs the items
// and cuts the packed bytes with a content-defined chunker, so chunk boundaries fall anywhere,
// also inside an item, and one large item can span several chunks).
//
// The unit of work is one step: one chunk, decoded given the state the previous chunk left
// (StreamCarry). A step's outcome is a pure function of (carry, chunk bytes, options) - the
// property the archive walker's memo relies on (archive_walker.h).
//
//   1. Normal mode with a carry (an item that began in an earlier chunk): resume its scanner
//      over the chunk. If the item ends inside the chunk, decode it from carry + chunk prefix;
//      if not, the whole chunk joins the carry.
//   2. Then, from where the carried item ended: scan and decode one item after another. An
//      item that runs past the end of the chunk becomes the new carry (its bytes and its
//      scanner state, so that a multi-chunk item is scanned once).
//   3. Malformed msgpack (byte 0xc1, nesting too deep, an item larger than max_item_bytes):
//      report it and resynchronise, as borg's RobustUnpacker does: look for the next offset
//      where a map starts whose first key is a known item key and that decodes to a map with
//      `path` (or that runs to the end of the chunk: it is then carried). borg discards the
//      rest of the chunk after an unpack error and resyncs in the next one; we resync within
//      the chunk, which recovers more items and never fewer.
//   4. Resync mode (after a chunk that could not be read, or when no item start was found):
//      step 3's search from offset 0.
// A value that is syntactically fine but not a valid item (item_decode.h) is reported and
// skipped, as borg does; the stream stays in sync.
//
// Thread contract: DecodeStep is a pure function of its arguments (no globals, no shared
// state); a StreamCarry, an ItemStreamDecoder and an ItemSink are owned by one thread at a
// time. Many steps may run concurrently on different carries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checker/archive/item_decode.h"
#include "checker/archive/msgpack_reader.h"
#include "checker/base/bytes.h"

namespace borgcheck::archive {

struct StreamOptions {
  ItemDecodeOptions item;
  // An item (a msgpack value) larger than this is treated as malformed: it bounds the carry,
  // the only buffer that grows with the input. borg has no such limit; 64 MiB holds the chunk
  // list of a file of more than a million chunks.
  size_t max_item_bytes = size_t(64) << 20;
};

// The decoder state at a chunk boundary.
struct StreamCarry {
  enum class Mode : uint8_t {
    kNormal,  // in sync: `bytes` is empty (at an item boundary) or holds an incomplete item
    kResync,  // out of sync: the next chunk is searched for an item start
  };
  Mode mode = Mode::kNormal;
  ByteBuffer bytes;
  ValueScanner scanner{16};  // positioned at the end of `bytes` when they are not empty

  explicit StreamCarry(uint32_t max_depth = 16) : scanner(max_depth) {}
  void Clear(Mode m) {
    mode = m;
    bytes.Clear();
    scanner.Reset();
  }
  bool empty() const { return mode == Mode::kNormal && bytes.empty(); }
};

enum class IssueKind : uint8_t {
  kMalformed,     // not valid msgpack (0xc1, too deep, item too large)
  kInvalidItem,   // a valid msgpack value that is not a valid item dict
  kResyncSkipped, // bytes skipped while resynchronising (reported once per step)
};
std::string_view IssueKindName(IssueKind k);

// A problem inside one step. `offset` is in the chunk: where the malformed byte is, or where
// the invalid item ends (an item that began in an earlier chunk has `started_in_carry`).
struct StepIssue {
  IssueKind kind = IssueKind::kMalformed;
  uint32_t offset = 0;
  uint64_t length = 0;  // kResyncSkipped: bytes skipped in this chunk
  bool started_in_carry = false;
  std::string reason;
};

// Where a decoded item lies in the step: `end` is the chunk offset just after it; an item
// that began in an earlier chunk has `started_in_carry` (its start offset is then in an
// earlier chunk).
struct ItemPlace {
  uint32_t ordinal = 0;  // among the valid items of this step
  uint32_t begin = 0;    // 0 when started_in_carry
  uint32_t end = 0;
  bool started_in_carry = false;
};

class ItemSink {
 public:
  virtual ~ItemSink() = default;
  virtual void OnItem(const ItemRecord& item, const ItemPlace& place) = 0;
  virtual void OnIssue(const StepIssue& issue) = 0;
};

// What the step left for the next chunk, in terms of this chunk (so that the walker can name
// the carry exactly by chunk ids: archive_walker.h).
enum class CarryOut : uint8_t {
  kEmpty,          // the chunk ended at an item boundary
  kStartsInChunk,  // an incomplete item starts at `carry_offset` of this chunk
  kExtended,       // the carried item did not end: the whole chunk was appended to it
  kResync,         // out of sync after this chunk
};

struct StepOutcome {
  uint32_t items = 0;  // valid items completed in this step
  CarryOut carry_out = CarryOut::kEmpty;
  uint32_t carry_offset = 0;  // kStartsInChunk
};

// Decodes `chunk` (at most 4 GiB - 1) given `carry`, which it updates to the state after the
// chunk. `item_scratch` is reused for each item.
StepOutcome DecodeStep(StreamCarry& carry, Bytes chunk, const StreamOptions& options,
                       ItemRecord& item_scratch, ItemSink& sink);

// A whole stream, fed chunk by chunk: the straightforward decoder (tests, tools, the
// hard link pass of the walker). Owned by one thread.
class ItemStreamDecoder {
 public:
  explicit ItemStreamDecoder(const StreamOptions& options);

  // Decodes the next chunk; items and issues go to `sink`.
  StepOutcome Feed(Bytes chunk, ItemSink& sink);
  // The next chunk could not be read: the carried item is lost and the decoder resyncs in the
  // chunk after it (borg: unpacker.resync()). True if an item was cut off.
  bool Skip();
  // The end of the stream: true if it ended inside an item (the stream is truncated).
  bool EndsInsideItem() const { return !carry_.bytes.empty() && carry_.mode == StreamCarry::Mode::kNormal; }
  const StreamCarry& carry() const { return carry_; }

 private:
  StreamOptions options_;
  StreamCarry carry_;
  ItemRecord item_;
};

}  // namespace borgcheck::archive
