#include "checker/repo/segment_log/served_source.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <xxhash.h>

#include "checker/base/bytes.h"

namespace borgcheck::repo {
using engine::ObjectRef;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;

Location ServerLocation(const io::GetReply& r) {
  if (r.segment) return Location::Segment(*r.segment, r.offset);
  return Location::None();
}

std::optional<size_t> FindSorted(const std::vector<ChunkId>& sorted, const ChunkId& id) {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), id);
  if (it == sorted.end() || *it != id) return std::nullopt;
  return size_t(it - sorted.begin());
}

archive::FetchStatus FetchServed(io::ObjectService& service, const ChunkId& id, ByteBuffer& payload,
                                 archive::FetchProblem& problem) {
  const io::GetReply r = service.WaitGet(service.PostGet(id), payload);
  auto damaged = [&](Stage stage, std::string why) {
    problem.stage = stage;
    problem.message = std::move(why);
    return archive::FetchStatus::kDamaged;
  };
  switch (r.outcome) {
    case io::GetOutcome::kOk:
      return archive::FetchStatus::kOk;
    case io::GetOutcome::kNotFound:
      return damaged(Stage::kMissing, "the server's index lists it, but the server has no such object");
    case io::GetOutcome::kIntegrity:
      return damaged(Stage::kEntryCrc, r.message);
    case io::GetOutcome::kCouldNotRead:
      return damaged(Stage::kIo, "the server could not read it: " + r.message);
    case io::GetOutcome::kInterrupted:
      return damaged(Stage::kIo, "not read: " + r.message);
    case io::GetOutcome::kLost:
      break;
  }
  return damaged(Stage::kIo, service.Lost().message());
}

std::vector<size_t> CutServedBatches(const std::vector<ChunkId>& order, size_t scanned, size_t mean) {
  mean = std::max<size_t>(mean, 1);
  const size_t max_objects = mean * kServedUnitMaxFactor;
  // A cut after an id below 2^32 / mean (an id is uniform: probability 1 / mean).
  const uint64_t below = (uint64_t{1} << 32) / mean;
  std::vector<size_t> starts;
  size_t start = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == start) starts.push_back(start);
    const ChunkId& id = order[i];
    const uint64_t head = uint64_t(id[0]) << 24 | uint64_t(id[1]) << 16 | uint64_t(id[2]) << 8 | id[3];
    if (head < below || i + 1 - start >= max_objects || i + 1 == scanned) start = i + 1;
  }
  return starts;
}

io::FileStat ServedBatchIdentity(const ChunkId* ids, size_t count) {
  io::FileStat st;
  st.type = io::EntryType::kRegular;
  st.type_name = "served batch";
  st.size = count;
  // The ids lie back to back: one call over them, no state to allocate (a failed allocation
  // left every batch the identity 0 before, so that a changed batch could pass for unchanged).
  static_assert(sizeof(ChunkId) == 32 && alignof(ChunkId) == 1);
  st.inode = XXH3_64bits(ids, count * sizeof(ChunkId));
  return st;
}

Result<io::FileStat> ServedSegmentSource::StatUnit(const engine::ReadUnit& unit) const {
  size_t u = 0;
  const char* end = unit.path.data() + unit.path.size();
  const auto [at, ec] = std::from_chars(unit.path.data(), end, u);
  if (ec != std::errc() || at != end || u + 1 >= unit_starts_.size()) {
    return Status(StatusCode::kInternal, "no served batch " + unit.path);
  }
  return ServedBatchIdentity(order_.data() + unit_starts_[u], unit_starts_[u + 1] - unit_starts_[u]);
}

Status ServedSegmentSource::PlanServed(engine::Plan& plan) {
  if (Status s = service_.ListIds(sorted_ids_); !s.ok()) return s;
  std::sort(sorted_ids_.begin(), sorted_ids_.end());
  sorted_ids_.erase(std::unique(sorted_ids_.begin(), sorted_ids_.end()), sorted_ids_.end());
  std::vector<ChunkId> scanned;
  std::optional<std::string> no_scan;  // why the server could not scan, when it could not
  if (Status s = service_.ScanIds(scanned); !s.ok()) {
    if (!service_.Lost().ok()) return s;
    // The server's own error (borg 2.0.0b5's scan fails on a version-1 repository: its index
    // entries have no `segment`): the objects are read in the list's order instead.
    no_scan = s.message();
    scanned = sorted_ids_;
  }

  // The scan's order, then what the list has and the scan did not return (in id order). An id
  // the scan returns twice, or one the list does not have, is read once / not at all: the list
  // is the committed transaction's content.
  std::vector<uint8_t> seen(sorted_ids_.size(), 0);
  order_.reserve(sorted_ids_.size());
  for (const ChunkId& id : scanned) {
    const std::optional<size_t> k = FindSorted(sorted_ids_, id);
    if (!k || seen[*k]) continue;
    seen[*k] = 1;
    order_.push_back(id);
  }
  scanned_ = order_.size();
  for (size_t k = 0; k < sorted_ids_.size(); ++k) {
    if (!seen[k]) order_.push_back(sorted_ids_[k]);
  }

  plan.repository_id = ToHex(Bytes(repo_.id.data(), repo_.id.size()));
  plan.unit_noun = "batch";
  plan.live_list_source = "server";
  plan.objects_total = sorted_ids_.size();
  plan.in_order = true;
  if (uses_state_) {
    plan.notes.push_back(
        "the state's marks of an ssh:// repository follow its object ids, not the server's segment files (borg serve "
        "does not say where an object is): objects that borg compact moved unchanged keep the mark of their first "
        "verification, though this run's schedule did not read their new copy (--max-age reads a batch again once "
        "its mark is older; a run without --max-age and --min-interval skips no batch for its mark)");
  }
  if (no_scan) {
    plan.notes.push_back("the server could not list its objects in on-disk order (" + *no_scan +
                         "): they are fetched in index order, which costs the server more seeks");
  }
  unit_starts_ = CutServedBatches(order_, scanned_, batch_objects_);
  unit_starts_.push_back(order_.size());
  for (size_t u = 0; u + 1 < unit_starts_.size(); ++u) {
    // No byte count is known before the gets: progress counts what arrives. No location: the
    // server places what it finds. The state names the batch by its first id.
    engine::ReadUnit r{Location::None(), std::to_string(u), 0};
    r.state_key = "batch " + ToHex(Bytes(order_[unit_starts_[u]].data(), order_[unit_starts_[u]].size()));
    plan.units.push_back(std::move(r));
  }
  if (scanned_ < order_.size()) {
    plan.findings.push_back(MakeFinding(
        Severity::kError, Stage::kTruncated, Location::None(), nullptr,
        fmt::format("the server's walk of its segments (scan) stopped early: {} of the {} objects its index lists "
                    "were not in it (a damaged entry header ends the walk of a segment; borg check "
                    "--verify-data does not read these objects); each is fetched and verified on its own",
                    order_.size() - scanned_, order_.size())));
  }
  return Status::Ok();
}

std::optional<size_t> ServedSegmentSource::UnitOf(const ChunkId& id) const {
  size_t at = 0;
  while (at < order_.size() && order_[at] != id) ++at;
  if (at == order_.size()) return std::nullopt;
  // The last unit that starts at or before `at`.
  auto it = std::upper_bound(unit_starts_.begin(), unit_starts_.end(), at);
  return size_t(it - unit_starts_.begin()) - 1;
}

bool ServedSegmentSource::ForEachLiveId(size_t unit, const std::function<void(const engine::ChunkId&)>& each) const {
  if (unit + 1 >= unit_starts_.size()) return false;
  for (size_t i = unit_starts_[unit]; i < unit_starts_[unit + 1]; ++i) each(order_[i]);
  return true;
}

void ServedSegmentSource::ReadUnit(size_t index, engine::UnitSink& sink) {
  const size_t lo = unit_starts_[index], hi = unit_starts_[index + 1];
  // Gets are posted ahead in plan order. A partial run may skip units (what was posted before
  // this one is forgotten) or go back to an earlier one (its schedule: every post is forgotten
  // and posting starts again here). Either way each wanted object of this unit is posted below.
  if (lo < read_end_) {
    for (const Posted& q : posted_) service_.Forget(q.ticket);
    posted_.clear();
    next_post_ = lo;
  }
  read_end_ = hi;
  while (!posted_.empty() && posted_.front().index < lo) {
    service_.Forget(posted_.front().ticket);
    posted_.pop_front();
  }
  if (next_post_ < lo) next_post_ = lo;
  auto post_ahead = [&] {
    // Ahead across units: the next unit's first gets are on the link while this one ends. Only
    // wanted objects (the filter is by id, the same for every unit). Refilled in groups, so that
    // the requests leave in few writes.
    if (posted_.size() + kServedPostGroup > kServedGetsAhead) return;
    while (posted_.size() < kServedGetsAhead && next_post_ < order_.size()) {
      const size_t i = next_post_++;
      if (!sink.Wants(order_[i])) continue;
      posted_.push_back({i, service_.PostGet(order_[i])});
    }
  };
  // Consecutive payloads go to the workers together, up to kServedBatchBytes or
  // kServedBatchObjects (one block, one hand-over: the engine's per-block cost is paid once per
  // batch, not per object). Flushed before any finding, so that the order of what the engine
  // is told stays the order of the objects.
  ByteBuffer batch;
  std::vector<ObjectRef> refs;
  size_t batch_index = 0;
  auto flush = [&]() -> bool {
    if (refs.empty()) return true;
    std::shared_ptr<engine::Block> block = sink.TakeBlock(batch_index, batch.size());
    if (!block) return false;  // stopping
    if (batch.size()) std::memcpy(block->data.data(), batch.data(), batch.size());
    sink.Objects(std::move(block), std::move(refs));
    refs = {};
    batch.Clear();
    return true;
  };
  ByteBuffer payload;
  for (;;) {
    post_ahead();
    if (posted_.empty() || posted_.front().index >= hi || sink.Stopping()) {
      flush();
      return;
    }
    const Posted p = posted_.front();
    posted_.pop_front();
    const ChunkId& id = order_[p.index];
    const io::GetReply r = service_.WaitGet(p.ticket, payload);
    if (r.outcome != io::GetOutcome::kOk && !flush()) return;
    switch (r.outcome) {
      case io::GetOutcome::kOk: {
        if (refs.empty()) batch_index = p.index;
        ObjectRef ref;
        ref.id = id;
        ref.pos = batch.size();
        ref.file_offset = p.index;  // ReadAgain's key; the location stays the server's (none)
        ref.size = uint32_t(payload.size());
        ref.variant = payload_variant_;
        const size_t at = batch.size();
        batch.Resize(at + payload.size());
        if (!payload.empty()) std::memcpy(batch.data() + at, payload.data(), payload.size());
        refs.push_back(ref);
        if (batch.size() >= kServedBatchBytes || refs.size() >= kServedBatchObjects) {
          if (!flush()) return;
        }
        break;
      }
      case io::GetOutcome::kNotFound:
        sink.Finding(MakeFinding(Severity::kError, Stage::kMissing, Location::None(), &id,
                                 "the server's index lists this object, but the server has none (ObjectNotFound)"),
                     true);
        break;
      case io::GetOutcome::kIntegrity:
        sink.Finding(MakeFinding(Severity::kError, Stage::kEntryCrc, ServerLocation(r), &id,
                                 "the server found its entry damaged: " + r.message),
                     true);
        break;
      case io::GetOutcome::kCouldNotRead:
        sink.Finding(MakeFinding(Severity::kError, Stage::kIo, Location::None(), &id,
                                 "the server could not read it: " + r.message + "; not checked"),
                     true);
        break;
      case io::GetOutcome::kLost:
      case io::GetOutcome::kInterrupted:
        // The engine sees Lost() or the stop signal and ends the run (stopped: connection-lost
        // or signal).
        for (const Posted& q : posted_) service_.Forget(q.ticket);
        posted_.clear();
        return;
    }
  }
}

io::SecondRead ServedSegmentSource::ReadAgain(const engine::ReadUnit&, uint64_t offset, Bytes first,
                                              ByteBuffer& scratch) const {
  if (offset >= order_.size()) return io::SecondRead::kUnreadable;
  // A worker holds the first read's block (in the in-flight budget) while it waits here: its get
  // must not wait for ever behind the pipeline's replies, whose reader may be waiting for that
  // budget (GetUnlessBehind gives up instead; the finding then stays unconfirmed).
  if (service_.GetUnlessBehind(order_[offset], scratch).outcome != io::GetOutcome::kOk) {
    return io::SecondRead::kUnreadable;
  }
  const bool same = scratch.size() == first.size() && std::memcmp(scratch.data(), first.data(), first.size()) == 0;
  return same ? io::SecondRead::kSame : io::SecondRead::kDifferent;
}

engine::ManifestAgain ServedSegmentSource::FetchManifestAgain(const engine::FinishContext& ctx,
                                                              ByteBuffer& payload) const {
  const ChunkId zero{};
  const std::optional<size_t> unit = UnitOf(zero);
  engine::ManifestAgain again{Location::None(), zero, unit && ctx.UnitRead(*unit)};
  const io::GetReply r = GetNow(zero, payload);
  if (r.outcome != io::GetOutcome::kOk) {
    again.unreadable =
        MakeFinding(Severity::kError, r.outcome == io::GetOutcome::kIntegrity ? Stage::kEntryCrc : Stage::kIo,
                    ServerLocation(r), &zero, "the manifest cannot be fetched: " + r.message);
    return again;
  }
  again.stored = payload.view();
  again.ref.id = zero;
  again.ref.size = uint32_t(payload.size());
  again.ref.variant = payload_variant_;
  return again;
}

void ServedSegmentSource::FinishServed(engine::FinishContext& ctx) {
  for (const Posted& q : posted_) service_.Forget(q.ticket);
  posted_.clear();
  if (service_.ServerRebuiltIndex()) {
    ctx.findings.Add(MakeFinding(
        Severity::kWarning, Stage::kIndex, Location::None(), nullptr,
        "the server rebuilt its index from the log for this session (its index was missing or behind the "
        "segments, as after a crash): it wrote index, hints and integrity files into the repository, which a "
        "client of borg serve cannot prevent"));
  }
}

}  // namespace borgcheck::repo
