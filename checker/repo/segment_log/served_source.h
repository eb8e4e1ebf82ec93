// What the served sources of the segment-log generations share (borg 1.x: borg1_served_source.h;
// 2.0.0b5's version 2: borg2b5_served_source.h): a repository a server hands out object by id
// (`borg serve` / `borg2 serve` over ssh, io/object_service.h) read as an engine source. Neither
// part below knows a generation: the payload a get returns goes to the generation's verifier as
// ObjectRef::variant `payload_variant`, unread.
//   - PlanServed: every id the server's index lists (ListIds) and the ids of its current PUTs in
//     on-disk order (ScanIds). Units ("batches") are runs of that order, then of the listed ids
//     the scan did not return (the server's walk stops at a damaged entry header and skips the
//     rest of that segment: a finding, and those objects are still fetched and verified). A
//     server that cannot scan (borg 2.0.0b5 on a version-1 repository) is read in the list's
//     order, with a note. A batch ends where its ids say (CutServedBatches: content-defined, as a
//     chunker cuts a file), so a later run cuts the same batches around what changed (a new
//     backup, a compacted segment) and its state (schedule/unit_state.h) recognises the rest:
//     a batch's name is its first id, its identity its object count and a digest of its ids.
//     Neither says where the server keeps the objects (borg serve does not tell): objects that
//     borg compact moved unchanged keep their batch and its mark. A run with a state says so.
//   - ReadUnit: gets pipelined across units (kServedGetsAhead in flight; the service bounds the
//     bytes of unread replies), each payload handed over as one object; the server's
//     IntegrityError and ObjectNotFound become the object's findings. Units may come in any
//     order (a partial run's schedule): what was posted ahead for other units is forgotten.
//   - ReadAgain: the object fetched again (ObjectRef::file_offset is its index in the order).
//   - FinishServed: the gets still posted forgotten; the server's index rebuild said.
//   - FetchServed: the archive pass's read of one object through the service.
//
// Thread contract: see engine/object_source.h. The units are read on the main thread (the
// pipeline's state, posted_, next_post_ and read_end_, is that thread's); the id lists are const once
// PlanServed returns and are read by the workers (ReadAgain) and the archive pass; the service
// is borrowed (it outlives the source) and safe for concurrent use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "checker/archive/object_fetcher.h"
#include "checker/engine/object_source.h"
#include "checker/io/object_service.h"
#include "checker/report/finding.h"
#include "checker/repo/chunk_id.h"

namespace borgcheck::repo {

// A batch's mean size in objects, and the most it may hold (an id sequence that offers no cut).
inline constexpr size_t kServedUnitObjects = 4096;
inline constexpr size_t kServedUnitMaxFactor = 4;
// Gets in flight: enough to cover a 100 ms round trip at several hundred MB/s of small objects
// (bench/RESULTS.md, "Remote (borg serve)"); the service bounds the bytes of unread replies.
inline constexpr size_t kServedGetsAhead = 2000;
// Gets are posted in groups of this many (one wake of the RPC's I/O thread, one write).
inline constexpr size_t kServedPostGroup = 128;
// Payloads handed to the workers together: up to this many bytes or objects per block.
inline constexpr size_t kServedBatchBytes = 1u << 20;
inline constexpr size_t kServedBatchObjects = 64;

// Where a finding the server's words place goes: [segment N, offset M] when it said so.
report::Location ServerLocation(const io::GetReply& r);

// One object of a served repository fetched for the archive pass (any thread): the payload on
// kOk; the server's ObjectNotFound, IntegrityError, other errors and a lost connection as
// kDamaged with `problem`.
archive::FetchStatus FetchServed(io::ObjectService& service, const ChunkId& id, ByteBuffer& payload,
                                 archive::FetchProblem& problem);

// Where the batches of `order` start (ascending, the first 0; order.size() not included): a
// batch ends after an id whose first four bytes, read big-endian, are below 2^32 / mean, after
// mean * kServedUnitMaxFactor objects, and at `scanned` (the scan's part and the rest are cut
// apart). Ids are keyed hashes, so a cut falls on average every `mean` ids, and where it falls
// depends only on the ids near it: removing or adding ids changes the batches around them only
// (a batch cut by the size limit moves the cuts after it until the next id cut). mean >= 1.
std::vector<size_t> CutServedBatches(const std::vector<ChunkId>& order, size_t scanned, size_t mean);

// A served batch's identity as the state records it (io::FileStat's fields, as for a file):
// `size` its object count, `inode` the first 8 bytes of XXH3-64 over its ids in order, times 0.
io::FileStat ServedBatchIdentity(const ChunkId* ids, size_t count);

// The position of `id` in a sorted id list, if it is there.
std::optional<size_t> FindSorted(const std::vector<ChunkId>& sorted, const ChunkId& id);

class ServedSegmentSource : public engine::ObjectSource {
 public:
  // The batches' mean size is kServedUnitObjects, or the test hook's (check_options.h).
  ServedSegmentSource(io::ObjectService& service, const io::ServedRepository& repo, uint8_t payload_variant,
                      const engine::CheckOptions& options)
      : service_(service), repo_(repo), payload_variant_(payload_variant),
        batch_objects_(options.test_served_batch_objects ? options.test_served_batch_objects : kServedUnitObjects),
        uses_state_(!options.state_dir.empty()) {}

  void ReadUnit(size_t index, engine::UnitSink& sink) final;
  io::SecondRead ReadAgain(const engine::ReadUnit& unit, uint64_t offset, Bytes first,
                           ByteBuffer& scratch) const final;
  // A served batch is no file: its identity is ServedBatchIdentity of its ids.
  Result<io::FileStat> StatUnit(const engine::ReadUnit& unit) const final;
  bool ForEachLiveId(size_t unit, const std::function<void(const engine::ChunkId&)>& each) const final;
  unsigned Connections() const final { return 1; }
  Status Lost() const final { return service_.Lost(); }
  // Its units are runs of the server's scan: another process's scan is not cut the same way.
  bool CanShard() const final { return false; }

 protected:
  // MakePlan's shared part: the lists, the units, the repository id, the scan's findings and
  // notes. The generation adds its format and its note on what the server checks. Fails when
  // the server cannot list (or the connection is lost).
  Status PlanServed(engine::Plan& plan);
  // Fetches one object now (the main thread before the pool, or a worker's second read).
  io::GetReply GetNow(const ChunkId& id, ByteBuffer& payload) const {
    return service_.WaitGet(service_.PostGet(id), payload);
  }
  // Whether the server lists `id`, and the unit that reads it.
  bool Listed(const ChunkId& id) const { return FindSorted(sorted_ids_, id).has_value(); }
  std::optional<size_t> UnitOf(const ChunkId& id) const;
  // The manifest (id 00*32) fetched again for FinishContext::RecheckManifest, into `payload`
  // (the result points into it). Its findings are placed nowhere, as the server places
  // objects; a failed get is reported as the server said it.
  engine::ManifestAgain FetchManifestAgain(const engine::FinishContext& ctx, ByteBuffer& payload) const;
  // Forgets the gets still posted; the server's index rebuild as a warning.
  void FinishServed(engine::FinishContext& ctx);

  io::ObjectService& service_;
  const io::ServedRepository repo_;  // as the service opened it
  // const after PlanServed (read by the workers and the archive pass)
  std::vector<ChunkId> sorted_ids_;  // every id the server lists, sorted
  std::vector<ChunkId> order_;       // read order: the scan's, then the listed ids it missed
  std::vector<size_t> unit_starts_;  // unit u is order_[unit_starts_[u], unit_starts_[u + 1])
                                     // (its ReadUnit::path is std::to_string(u))
  size_t scanned_ = 0;               // order_[0, scanned_) came from the scan

 private:
  const uint8_t payload_variant_;
  const size_t batch_objects_;
  const bool uses_state_;  // a partial run's state is read (its marks follow ids: PlanServed's note)
  // The pipeline (main thread, ReadUnit): gets posted ahead of the reader, in order_.
  struct Posted {
    size_t index;
    uint64_t ticket;
  };
  std::deque<Posted> posted_;
  size_t next_post_ = 0;
  size_t read_end_ = 0;  // where the unit read last ends in order_ (a unit before it: posts restart)
};

}  // namespace borgcheck::repo
