#include "checker/archive/archive_walker.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace borgcheck::archive {
namespace {

// Carry descriptors (archive_walker.h, design 2): 0 and 1 are fixed, the rest are interned.
using CarryId = uint32_t;
constexpr CarryId kCarryEmpty = 0;
constexpr CarryId kCarryResync = 1;
constexpr CarryId kFirstBytesCarry = 2;

// The bytes of an incomplete item, as a chain: a root names chunk `chunk` from `offset`; a
// link (parent != kCarryEmpty) is its parent's bytes followed by the whole chunk `chunk`. One
// fixed-size descriptor per step, so an item spanning k chunks costs k descriptors, not k^2
// chunk ids.
struct CarryDesc {
  CarryId parent = kCarryEmpty;
  uint32_t offset = 0;
  ChunkId chunk{};
};

std::string CarryKey(const CarryDesc& d) {
  std::string k(40, '\0');
  std::memcpy(k.data(), &d.parent, 4);
  std::memcpy(k.data() + 4, &d.offset, 4);
  std::memcpy(k.data() + 8, d.chunk.data(), 32);
  return k;
}

struct LocalBadRef {
  ChunkId chunk{};
  RefState state = RefState::kMissing;
  RefList list = RefList::kChunks;
  bool hardlink_master = false;
  std::string path;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct LocalProblem {
  StreamProblemKind kind = StreamProblemKind::kMalformed;
  uint32_t offset = 0;
  uint32_t items_before = 0;  // valid items of the step before it
  bool in_carry = false;
  uint64_t length = 0;
  report::Stage stage = report::Stage::kMissing;
  std::string reason;
  std::string path;
};

// What an archive needs from one step (archive_walker.h, design 3). Immutable once in the memo.
struct StepMemo {
  CarryId carry_out = kCarryEmpty;
  uint32_t chunk_size = 0;
  uint32_t items = 0;
  bool read = false;  // the chunk was read and decoded
  bool has_hardlink_slaves = false;
  uint64_t references = 0;
  std::vector<LocalBadRef> bad;
  std::vector<BadRefTotal> bad_totals;  // exact, sorted by chunk id
  std::vector<LocalProblem> problems;
  uint64_t problems_total = 0;
  std::string first_path;  // the paths of the first and last items decoded (items > 0)
  std::string last_path;
};

struct MemoKey {
  CarryId carry = kCarryEmpty;
  ChunkId id{};
  bool operator==(const MemoKey& o) const { return carry == o.carry && id == o.id; }
};
struct MemoKeyHash {
  size_t operator()(const MemoKey& k) const {
    return ChunkIdHash()(k.id) ^ (size_t(k.carry) * size_t(0x9E3779B97F4A7C15ull));
  }
};

std::string Hex(const ChunkId& id) { return ToHex(Bytes(id.data(), id.size())); }

std::string AsString(Bytes b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

// Collects one step's memo while it is decoded.
class MemoSink : public ItemSink {
 public:
  MemoSink(ReferenceTable& table, const WalkOptions& options, StepMemo& memo)
      : table_(table), options_(options), memo_(memo) {}

  void OnItem(const ItemRecord& item, const ItemPlace& place) override {
    if (items_ == 0) memo_.first_path = AsString(item.path);
    memo_.last_path = AsString(item.path);
    ++items_;
    memo_.references += item.chunks.size() + item.chunks_healthy.size();
    for (const ChunkRef& c : item.chunks) Check(c, RefList::kChunks, item);
    for (const ChunkRef& c : item.chunks_healthy) Check(c, RefList::kChunksHealthy, item);
    if (item.size && item.has_chunks && *item.size != item.ChunksSize()) {
      LocalProblem p;
      p.kind = StreamProblemKind::kSizeMismatch;
      p.offset = place.end;
      p.items_before = place.ordinal;
      p.in_carry = place.started_in_carry;
      p.reason = "size " + std::to_string(*item.size) + ", chunks size " +
                 std::to_string(item.ChunksSize());
      p.path = AsString(item.path);
      AddProblem(std::move(p));
    }
    if (item.IsHardlinkSlave()) memo_.has_hardlink_slaves = true;
  }

  void OnIssue(const StepIssue& issue) override {
    LocalProblem p;
    p.kind = issue.kind == IssueKind::kInvalidItem   ? StreamProblemKind::kInvalidItem
             : issue.kind == IssueKind::kResyncSkipped ? StreamProblemKind::kResyncSkipped
                                                       : StreamProblemKind::kMalformed;
    p.offset = issue.offset;
    p.items_before = items_;
    p.in_carry = issue.started_in_carry;
    p.length = issue.length;
    p.reason = issue.reason;
    AddProblem(std::move(p));
  }

  void AddProblem(LocalProblem p) {
    ++memo_.problems_total;
    if (memo_.problems.size() < options_.max_problems_per_archive) memo_.problems.push_back(std::move(p));
  }

  // Moves the per-id totals into the memo, sorted by id.
  void Finish() {
    memo_.bad_totals.reserve(totals_.size());
    for (auto& [id, t] : totals_) memo_.bad_totals.push_back(t);
  }

 private:
  void Check(const ChunkRef& c, RefList list, const ItemRecord& item) {
    const RefState s = table_.Reference(c.id);
    if (!IsBad(s)) return;
    BadRefTotal& t = totals_[c.id];
    t.chunk = c.id;
    t.state = s;
    ++t.uses;
    if (t.uses > options_.max_refs_per_chunk || memo_.bad.size() >= options_.max_refs_per_archive) return;
    LocalBadRef& b = memo_.bad.emplace_back();
    b.chunk = c.id;
    b.state = s;
    b.list = list;
    // borg 1.x: a regular file without the key may still be a master (item.get("hardlink_master",
    // True) in borg); slaves are matched by path, so this never names a file wrongly.
    b.hardlink_master = item.type == ItemType::kFile && item.hardlink_master.value_or(true);
    b.path = AsString(item.path);
    b.begin = c.offset;
    b.end = c.offset + c.size;
  }

  ReferenceTable& table_;
  const WalkOptions& options_;
  StepMemo& memo_;
  uint32_t items_ = 0;
  std::map<ChunkId, BadRefTotal> totals_;
};

// The per-archive accumulation of bad references with the caps of WalkOptions.
class ArchiveRefs {
 public:
  ArchiveRefs(const WalkOptions& options, ArchiveResult& r) : options_(options), r_(r) {}

  void Add(BadReference ref) {
    uint64_t& kept = kept_[ref.chunk];
    if (kept >= options_.max_refs_per_chunk || r_.bad_refs.size() >= options_.max_refs_per_archive) return;
    ++kept;
    r_.bad_refs.push_back(std::move(ref));
  }
  void Count(const ChunkId& id, RefState state, uint64_t uses) {
    BadRefTotal& t = totals_[id];
    t.chunk = id;
    t.state = state;
    t.uses += uses;
  }
  void Finish() {
    r_.bad_totals.clear();
    for (auto& [id, t] : totals_) r_.bad_totals.push_back(t);
  }

 private:
  const WalkOptions& options_;
  ArchiveResult& r_;
  std::map<ChunkId, uint64_t> kept_;
  std::map<ChunkId, BadRefTotal> totals_;
};

// One slot of an archive's item stream: a chunk id, or a gap left by a missing item_ptrs chunk.
struct StreamSlot {
  ChunkId id{};
  bool known = true;
};

struct PtrsEntry {
  FetchStatus status = FetchStatus::kOk;
  bool undecodable = false;
  report::Stage stage = report::Stage::kMissing;
  std::string message;
  std::vector<ChunkId> ids;
};

// Per-walk buffers.
struct Scratch {
  explicit Scratch(uint32_t depth) : live(depth) {}
  ByteBuffer buf;
  StreamCarry live;
  ItemRecord item;
};

}  // namespace

std::string_view RefListName(RefList l) {
  switch (l) {
    case RefList::kChunks: return "chunks";
    case RefList::kChunksHealthy: return "chunks_healthy";
    case RefList::kHardlinkSlave: return "hardlink";
  }
  return "chunks";
}

std::string_view StreamProblemKindName(StreamProblemKind k) {
  switch (k) {
    case StreamProblemKind::kChunkMissing: return "chunk-missing";
    case StreamProblemKind::kChunkDamaged: return "chunk-damaged";
    case StreamProblemKind::kItemPtrsMissing: return "item-ptrs-missing";
    case StreamProblemKind::kItemPtrsDamaged: return "item-ptrs-damaged";
    case StreamProblemKind::kItemPtrsUndecodable: return "item-ptrs-undecodable";
    case StreamProblemKind::kMalformed: return "malformed";
    case StreamProblemKind::kInvalidItem: return "invalid-item";
    case StreamProblemKind::kResyncSkipped: return "resync-skipped";
    case StreamProblemKind::kTruncated: return "truncated";
    case StreamProblemKind::kSizeMismatch: return "size-mismatch";
  }
  return "malformed";
}

std::string_view ArchiveFailureName(ArchiveFailure f) {
  switch (f) {
    case ArchiveFailure::kNone: return "none";
    case ArchiveFailure::kObjectMissing: return "object-missing";
    case ArchiveFailure::kObjectDamaged: return "object-damaged";
    case ArchiveFailure::kObjectUndecodable: return "object-undecodable";
    case ArchiveFailure::kTamFailed: return "tam-failed";
  }
  return "none";
}

struct ArchiveWalker::Impl {
  Impl(ObjectFetcher& f, ReferenceTable& t, WalkOptions o)
      : fetcher(f), table(t), options(std::move(o)), keys(options.item_keys ? *options.item_keys : ItemKeySet(options.generation)) {
    stream.item.generation = options.generation;
    stream.item.item_keys = &keys;
    stream.item.max_depth = options.max_depth;
    stream.max_item_bytes = options.max_item_bytes;
  }

  ArchiveResult Walk(uint32_t index, const ManifestArchive& archive);

  // --- memo (design 3) ---
  struct Shard {
    std::mutex mu;
    std::unordered_map<MemoKey, std::unique_ptr<const StepMemo>, MemoKeyHash> map;  // guarded by mu
  };
  Shard& ShardOf(const MemoKey& k) { return shards[k.id[31] % shards.size()]; }
  const StepMemo* Find(const MemoKey& k) {
    Shard& s = ShardOf(k);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(k);
    return it == s.map.end() ? nullptr : it->second.get();
  }
  // First insert wins; a racing walk computed the same value (design 1).
  const StepMemo* Insert(const MemoKey& k, std::unique_ptr<const StepMemo> m) {
    Shard& s = ShardOf(k);
    std::lock_guard<std::mutex> lock(s.mu);
    auto [it, inserted] = s.map.emplace(k, std::move(m));
    if (inserted) memo_entries.fetch_add(1, std::memory_order_relaxed);
    return it->second.get();
  }

  // --- carry descriptors (design 2) ---
  CarryId Intern(const CarryDesc& d) {
    std::string key = CarryKey(d);
    std::lock_guard<std::mutex> lock(carry_mu);
    auto [it, inserted] = carry_ids.emplace(std::move(key), CarryId(kFirstBytesCarry + carry_descs.size()));
    if (inserted) carry_descs.push_back(d);
    return it->second;
  }
  CarryDesc Describe(CarryId id) {
    std::lock_guard<std::mutex> lock(carry_mu);
    return carry_descs[id - kFirstBytesCarry];
  }

  FetchStatus Fetch(const ChunkId& id, ObjectKind kind, ByteBuffer& buf, FetchProblem& p) {
    fetches.fetch_add(1, std::memory_order_relaxed);
    p = FetchProblem();
    buf.Clear();
    return fetcher.Fetch(id, kind, buf, p);
  }

  std::shared_ptr<const PtrsEntry> ItemPtrs(const ChunkId& id, RefState state, Scratch& s);
  const StepMemo* Compute(const MemoKey& key, RefState state, Scratch& s);
  bool RebuildCarry(CarryId carry, Scratch& s);
  void WalkStream(ArchiveResult& r, const std::vector<StreamSlot>& slots, Scratch& s);
  void HardlinkPass(const std::vector<StreamSlot>& slots,
                    const std::map<std::string, std::vector<BadReference>>& masters,
                    ArchiveRefs& refs, Scratch& s);
  void AddProblem(ArchiveResult& r, StreamProblem p) const {
    ++r.problems_total;
    if (r.problems.size() < options.max_problems_per_archive) r.problems.push_back(std::move(p));
  }

  // Const after construction.
  ObjectFetcher& fetcher;
  ReferenceTable& table;
  const WalkOptions options;
  const ItemKeySet keys;
  StreamOptions stream;

  std::array<Shard, 16> shards;

  std::mutex carry_mu;
  std::unordered_map<std::string, CarryId> carry_ids;  // guarded by carry_mu
  std::vector<CarryDesc> carry_descs;                  // guarded by carry_mu

  std::mutex ptrs_mu;
  std::unordered_map<ChunkId, std::shared_ptr<const PtrsEntry>, ChunkIdHash> ptrs;  // guarded by ptrs_mu

  std::atomic<uint64_t> steps_decoded{0}, memo_hits{0}, memo_entries{0}, bytes_decoded{0},
      fetches{0}, carry_rebuilds{0}, hardlink_passes{0};
};

std::shared_ptr<const PtrsEntry> ArchiveWalker::Impl::ItemPtrs(const ChunkId& id, RefState state,
                                                                Scratch& s) {
  {
    std::lock_guard<std::mutex> lock(ptrs_mu);
    if (auto it = ptrs.find(id); it != ptrs.end()) return it->second;
  }
  auto e = std::make_shared<PtrsEntry>();
  FetchProblem p;
  e->status = state == RefState::kMissing ? FetchStatus::kMissing : Fetch(id, ObjectKind::kItemPtrs, s.buf, p);
  if (e->status == FetchStatus::kOk) {
    std::string err;
    if (!DecodeItemPtrs(s.buf.view(), e->ids, err)) {
      e->undecodable = true;
      e->ids.clear();
      e->message = err;
    }
  } else {
    e->stage = p.stage;
    e->message = p.message;
  }
  std::lock_guard<std::mutex> lock(ptrs_mu);
  return ptrs.emplace(id, std::move(e)).first->second;
}

bool ArchiveWalker::Impl::RebuildCarry(CarryId carry, Scratch& s) {
  carry_rebuilds.fetch_add(1, std::memory_order_relaxed);
  // The chain from the newest link back to its root, then the bytes in stream order.
  std::vector<CarryDesc> chain;
  for (CarryId c = carry; c >= kFirstBytesCarry;) {
    chain.push_back(Describe(c));
    c = chain.back().parent;
  }
  s.live.Clear(StreamCarry::Mode::kNormal);
  for (size_t i = chain.size(); i-- > 0;) {
    const CarryDesc& d = chain[i];
    FetchProblem p;
    if (Fetch(d.chunk, ObjectKind::kItemStream, s.buf, p) != FetchStatus::kOk) return false;
    const size_t skip = d.parent == kCarryEmpty ? d.offset : 0;
    if (skip > s.buf.size() || s.live.bytes.size() + (s.buf.size() - skip) > stream.max_item_bytes) return false;
    const size_t old = s.live.bytes.size();
    s.live.bytes.Resize(old + s.buf.size() - skip);
    if (s.buf.size() > skip) std::memcpy(s.live.bytes.data() + old, s.buf.data() + skip, s.buf.size() - skip);
  }
  size_t used = 0;
  s.live.scanner.Reset();
  // The bytes ended inside an item when they were decoded; anything else means the chunks
  // read now differ from those read then.
  return s.live.scanner.Scan(s.live.bytes.view(), used) == ScanStatus::kIncomplete;
}

const StepMemo* ArchiveWalker::Impl::Compute(const MemoKey& key, RefState state, Scratch& s) {
  auto memo = std::make_unique<StepMemo>();
  FetchProblem p;
  const FetchStatus fs =
      state == RefState::kMissing ? FetchStatus::kMissing : Fetch(key.id, ObjectKind::kItemStream, s.buf, p);
  // A chunk over 4 GiB never comes from borg (objects are < 20 MiB); refusing it keeps step
  // offsets in 32 bits.
  if (fs != FetchStatus::kOk || s.buf.size() > UINT32_MAX) {
    LocalProblem lp;
    lp.kind = fs == FetchStatus::kMissing ? StreamProblemKind::kChunkMissing : StreamProblemKind::kChunkDamaged;
    lp.stage = fs == FetchStatus::kOk ? report::Stage::kEnvelope : p.stage;
    lp.reason = fs == FetchStatus::kOk ? "item metadata chunk larger than 4 GiB" : p.message;
    lp.in_carry = !s.live.empty() && s.live.mode == StreamCarry::Mode::kNormal;
    memo->problems.push_back(std::move(lp));
    memo->problems_total = 1;
    memo->carry_out = kCarryResync;
    s.live.Clear(StreamCarry::Mode::kResync);
    return Insert(key, std::move(memo));
  }
  MemoSink sink(table, options, *memo);
  const StepOutcome out = DecodeStep(s.live, s.buf.view(), stream, s.item, sink);
  sink.Finish();
  memo->items = out.items;
  memo->chunk_size = uint32_t(s.buf.size());
  memo->read = true;
  switch (out.carry_out) {
    case CarryOut::kEmpty:
      memo->carry_out = kCarryEmpty;
      break;
    case CarryOut::kResync:
      memo->carry_out = kCarryResync;
      break;
    case CarryOut::kStartsInChunk: {
      CarryDesc d;
      d.offset = out.carry_offset;
      d.chunk = key.id;
      memo->carry_out = Intern(d);
      break;
    }
    case CarryOut::kExtended: {
      // Only a carried item can be extended, so key.carry names bytes; anything else would be
      // a bug, and the stream resyncs rather than index a descriptor that does not exist.
      if (key.carry < kFirstBytesCarry) {
        memo->carry_out = kCarryResync;
        s.live.Clear(StreamCarry::Mode::kResync);
        break;
      }
      CarryDesc d;
      d.parent = key.carry;
      d.chunk = key.id;
      memo->carry_out = Intern(d);
      break;
    }
  }
  steps_decoded.fetch_add(1, std::memory_order_relaxed);
  bytes_decoded.fetch_add(s.buf.size(), std::memory_order_relaxed);
  return Insert(key, std::move(memo));
}

void ArchiveWalker::Impl::WalkStream(ArchiveResult& r, const std::vector<StreamSlot>& slots,
                                     Scratch& s) {
  ArchiveRefs refs(options, r);
  std::map<std::string, std::vector<BadReference>> masters;  // 1.x: bad master path -> its uses
  bool any_slaves = false;
  CarryId carry = kCarryEmpty;
  bool live_valid = true;  // s.live holds the bytes `carry` names
  s.live.Clear(StreamCarry::Mode::kNormal);
  uint32_t index = 0;
  uint32_t last_index = 0;
  ChunkId last_id{};
  auto add_problem = [&](StreamProblem p) { AddProblem(r, std::move(p)); };
  // Where lost item metadata sits in the archive: the last item decoded before a chunk that
  // could not be read, and (for the problems in `awaiting_after`) the first decoded after it.
  std::string last_path;
  std::vector<size_t> awaiting_after;
  for (const StreamSlot& slot : slots) {
    if (!slot.known) {  // design 6: a gap of unknown length
      carry = kCarryResync;
      s.live.Clear(StreamCarry::Mode::kResync);
      live_valid = true;
      continue;
    }
    const uint32_t chunk_index = index++;
    const RefState state = table.Reference(slot.id);
    MemoKey key{carry, slot.id};
    const StepMemo* m = Find(key);
    if (m == nullptr && !live_valid) {
      if (!RebuildCarry(carry, s)) {
        // The chunks of the carry could be read before but not now: the carried item is lost.
        StreamProblem p;
        p.kind = StreamProblemKind::kChunkDamaged;
        p.chunk = last_id;
        p.chunk_index = last_index;
        p.chunk_count = r.stream_chunks;
        p.items_before = r.items;
        p.stream_offset = r.stream_bytes;
        p.stage = report::Stage::kMissing;
        p.reason = "an item-stream chunk could not be read a second time";
        p.started_in_earlier_chunk = true;
        add_problem(std::move(p));
        carry = kCarryResync;
        s.live.Clear(StreamCarry::Mode::kResync);
        key.carry = carry;
        m = Find(key);
      }
      live_valid = true;
    }
    if (m != nullptr) {
      ++r.memo_hits;
      memo_hits.fetch_add(1, std::memory_order_relaxed);
      live_valid = m->carry_out == kCarryEmpty || m->carry_out == kCarryResync;
      if (live_valid) {
        s.live.Clear(m->carry_out == kCarryEmpty ? StreamCarry::Mode::kNormal : StreamCarry::Mode::kResync);
      }
    } else {
      m = Compute(key, state, s);
      ++r.steps_decoded;
      live_valid = true;  // s.live is the state after this chunk (also if a racing walk won)
    }
    // Design 5: attribute the step to this archive.
    for (const LocalProblem& lp : m->problems) {
      StreamProblem p;
      p.kind = lp.kind;
      p.chunk = slot.id;
      p.chunk_index = chunk_index;
      p.chunk_count = r.stream_chunks;
      p.items_before = r.items + lp.items_before;
      p.stream_offset = r.stream_bytes + lp.offset;
      p.offset_in_chunk = lp.offset;
      p.started_in_earlier_chunk = lp.in_carry;
      p.length = lp.length;
      p.stage = lp.stage;
      p.reason = lp.reason;
      p.path = lp.path;
      const bool lost = p.kind == StreamProblemKind::kChunkMissing || p.kind == StreamProblemKind::kChunkDamaged;
      if (lost) p.path_before = last_path;
      const size_t at = r.problems.size();
      add_problem(std::move(p));
      if (lost && r.problems.size() > at) awaiting_after.push_back(at);
    }
    if (m->items > 0) {
      for (size_t i : awaiting_after) r.problems[i].path_after = m->first_path;
      awaiting_after.clear();
      last_path = m->last_path;
    }
    if (m->problems_total > m->problems.size()) r.problems_total += m->problems_total - m->problems.size();
    for (const LocalBadRef& b : m->bad) {
      BadReference ref;
      ref.chunk = b.chunk;
      ref.state = b.state;
      ref.archive = r.index;
      ref.path = b.path;
      ref.begin = b.begin;
      ref.end = b.end;
      ref.list = b.list;
      if (options.generation == Generation::kBorg1 && b.hardlink_master && b.list == RefList::kChunks) {
        masters[b.path].push_back(ref);
      }
      refs.Add(std::move(ref));
    }
    for (const BadRefTotal& t : m->bad_totals) refs.Count(t.chunk, t.state, t.uses);
    r.items += m->items;
    if (m->read) r.stream_bytes += m->chunk_size;
    r.references += m->references;
    any_slaves = any_slaves || m->has_hardlink_slaves;
    carry = m->carry_out;
    last_index = chunk_index;
    last_id = slot.id;
  }
  if (carry >= kFirstBytesCarry) {
    StreamProblem p;
    p.kind = StreamProblemKind::kTruncated;
    p.chunk = last_id;
    p.chunk_index = last_index;
    p.chunk_count = r.stream_chunks;
    p.items_before = r.items;
    p.stream_offset = r.stream_bytes;
    p.started_in_earlier_chunk = true;
    p.reason = "the item stream ends inside an item";
    add_problem(std::move(p));
  }
  if (any_slaves && !masters.empty()) HardlinkPass(slots, masters, refs, s);
  refs.Finish();
}

// Design 7: names the borg 1.x hard link slaves of masters that use bad chunks.
void ArchiveWalker::Impl::HardlinkPass(const std::vector<StreamSlot>& slots,
                                       const std::map<std::string, std::vector<BadReference>>& masters,
                                       ArchiveRefs& refs, Scratch& s) {
  hardlink_passes.fetch_add(1, std::memory_order_relaxed);
  class SlaveSink : public ItemSink {
   public:
    SlaveSink(const std::map<std::string, std::vector<BadReference>>& masters, ArchiveRefs& refs)
        : masters_(masters), refs_(refs) {}
    void OnItem(const ItemRecord& item, const ItemPlace&) override {
      if (!item.IsHardlinkSlave()) return;
      auto it = masters_.find(AsString(*item.source));
      if (it == masters_.end()) return;
      for (const BadReference& m : it->second) {
        BadReference ref = m;
        ref.path = AsString(item.path);
        ref.list = RefList::kHardlinkSlave;
        ref.via = m.path;
        refs_.Count(ref.chunk, ref.state, 1);
        refs_.Add(std::move(ref));
      }
    }
    void OnIssue(const StepIssue&) override {}  // reported by the main pass

   private:
    const std::map<std::string, std::vector<BadReference>>& masters_;
    ArchiveRefs& refs_;
  } sink(masters, refs);
  ItemStreamDecoder decoder(stream);
  for (const StreamSlot& slot : slots) {
    FetchProblem p;
    if (!slot.known || Fetch(slot.id, ObjectKind::kItemStream, s.buf, p) != FetchStatus::kOk) {
      decoder.Skip();
      continue;
    }
    decoder.Feed(s.buf.view(), sink);
  }
}

ArchiveResult ArchiveWalker::Impl::Walk(uint32_t index, const ManifestArchive& archive) {
  ArchiveResult r;
  r.index = index;
  r.id = archive.id;
  r.name = archive.name;
  Scratch s(options.max_depth);
  const RefState state = table.Reference(archive.id);
  FetchProblem p;
  const FetchStatus fs =
      state == RefState::kMissing ? FetchStatus::kMissing : Fetch(archive.id, ObjectKind::kArchive, s.buf, p);
  if (fs == FetchStatus::kMissing) {
    r.failure = ArchiveFailure::kObjectMissing;
    r.stage = report::Stage::kMissing;
    r.message = "Archive metadata block " + Hex(archive.id) + " is missing!";
    return r;
  }
  if (fs == FetchStatus::kDamaged) {
    r.failure = ArchiveFailure::kObjectDamaged;
    r.stage = p.stage;
    // A block that could not be read (stage io) is not known to be corrupted.
    r.message = "Archive metadata block " + Hex(archive.id) +
                (p.stage == report::Stage::kIo ? " could not be read: " : " is corrupted: ") + p.message;
    return r;
  }
  ArchiveInfo info;
  std::string err;
  if (!DecodeArchive(s.buf.view(), options.generation, info, err)) {
    r.failure = ArchiveFailure::kObjectUndecodable;
    r.stage = report::Stage::kEnvelope;
    r.message = "Archive metadata block " + Hex(archive.id) + " does not decode: " + err;
    return r;
  }
  // An archive whose TAM borg 1.2.5+ refuses is still walked: its items and data chunks carry
  // their own MACs, so whether its files could be restored is known all the same (and it is
  // often genuine: borg 1.2.4's rename, recreate and check --repair wrote such TAMs).
  if (std::optional<FetchProblem> tam = fetcher.VerifyArchive(archive.id, s.buf.view(), info)) {
    r.failure = ArchiveFailure::kTamFailed;
    r.stage = tam->stage;
    r.message = tam->message;
  }
  if (r.name.empty()) r.name = info.name;
  r.time = info.time;

  std::vector<StreamSlot> slots;
  if (options.generation == Generation::kBorg1) {
    slots.reserve(info.items.size());
    for (const ChunkId& id : info.items) slots.push_back({id, true});
  } else {
    r.item_ptrs = uint32_t(info.item_ptrs.size());
    for (uint32_t i = 0; i < info.item_ptrs.size(); ++i) {
      const ChunkId& ptr = info.item_ptrs[i];
      std::shared_ptr<const PtrsEntry> e = ItemPtrs(ptr, table.Reference(ptr), s);
      if (e->status == FetchStatus::kOk && !e->undecodable) {
        for (const ChunkId& id : e->ids) slots.push_back({id, true});
        continue;
      }
      StreamProblem sp;
      sp.kind = e->status == FetchStatus::kMissing ? StreamProblemKind::kItemPtrsMissing
                : e->undecodable                   ? StreamProblemKind::kItemPtrsUndecodable
                                                   : StreamProblemKind::kItemPtrsDamaged;
      sp.chunk = ptr;
      sp.chunk_index = i;
      sp.chunk_count = r.item_ptrs;
      sp.stage = e->undecodable ? report::Stage::kEnvelope : e->stage;
      sp.reason = e->message;
      AddProblem(r, std::move(sp));
      if (slots.empty() || slots.back().known) slots.push_back({ChunkId{}, false});
    }
  }
  for (const StreamSlot& slot : slots) r.stream_chunks += slot.known ? 1 : 0;
  WalkStream(r, slots, s);
  return r;
}

ArchiveWalker::ArchiveWalker(ObjectFetcher& fetcher, ReferenceTable& table, WalkOptions options)
    : impl_(std::make_unique<Impl>(fetcher, table, std::move(options))) {}

ArchiveWalker::~ArchiveWalker() = default;

ArchiveResult ArchiveWalker::WalkArchive(uint32_t index, const ManifestArchive& archive) {
  return impl_->Walk(index, archive);
}

WalkerStats ArchiveWalker::stats() const {
  WalkerStats st;
  st.steps_decoded = impl_->steps_decoded.load();
  st.memo_hits = impl_->memo_hits.load();
  st.memo_entries = impl_->memo_entries.load();
  st.bytes_decoded = impl_->bytes_decoded.load();
  st.fetches = impl_->fetches.load();
  st.carry_rebuilds = impl_->carry_rebuilds.load();
  st.hardlink_passes = impl_->hardlink_passes.load();
  {
    std::lock_guard<std::mutex> lock(impl_->carry_mu);
    st.carry_descriptors = impl_->carry_descs.size();
  }
  return st;
}

void AffectedIndex::Add(const ArchiveResult& result) {
  for (const BadReference& ref : result.bad_refs) {
    Entry& e = by_chunk_[ref.chunk];
    e.state = ref.state;
    if (e.uses.size() < max_per_chunk_) e.uses.push_back(ref);
  }
  for (const BadRefTotal& t : result.bad_totals) {
    Entry& e = by_chunk_[t.chunk];
    e.state = t.state;
    e.total += t.uses;
  }
}

}  // namespace borgcheck::archive
