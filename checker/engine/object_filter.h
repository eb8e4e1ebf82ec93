// Which objects a run verifies: the predicate behind UnitSink::Wants (object_source.h). The
// engine owns one ObjectFilter per run; every source asks it, through its sink, before it reads
// an object's bytes. Parts, combined with AND (an object is wanted when every part set wants it):
//   - a slice `--subset k/t`: a deterministic partition by chunk id, not by unit, so it is the
//     same before and after `borg compact`. x = the id's first 8 bytes as a big-endian integer;
//     slice k of t holds the ids with floor(x * t / 2^64) == k - 1. Slices 1..t of one t are
//     pairwise disjoint and their union is every id, for every t (so `daily/month` can use the
//     month's own number of days). Chunk ids are MAC or hash outputs: uniform, so a slice holds
//     about 1/t of the objects and bytes;
//   - a sample `--sample`: each id is wanted with probability `fraction`, decided by a hash of
//     (seed, id), so one seed repeats one sample exactly. A sample guarantees no coverage;
//   - an external set of wanted ids (the archive pass: only the chunks the selected archives
//     reference), handed over whole before the run starts.
// The manifest (id 00*32) is always wanted: every generation verifies it, and its TAM check in
// Finish needs it verified.
//
// Thread contract: configure on one thread before the pool starts (the Set* calls); afterwards
// the filter is const and Wants / WantsAll are safe for concurrent use from every worker. It
// holds no mutable state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checker/report/finding.h"

namespace borgcheck::engine {

class ObjectFilter {
 public:
  using ChunkId = report::ChunkId;

  struct Slice {
    uint32_t k = 1;  // 1..t
    uint32_t t = 1;  // >= 1
  };

  // A new filter wants every object.
  ObjectFilter() = default;

  // --subset k/t (1 <= k <= t). Requires t >= 1 and k in 1..t (the CLI validates).
  void SetSlice(uint32_t k, uint32_t t);
  // --sample: fraction in (0, 1]; 1 wants every object.
  void SetSample(double fraction, uint64_t seed);
  // Only these ids (in any order, duplicates allowed): sorted here once.
  void SetWantedIds(std::vector<ChunkId> ids);

  // Whether the object with this id is to be verified.
  bool Wants(const ChunkId& id) const;
  // True when no part is set: every object is wanted, so a source may stream whole units and
  // run its unit-wide checks (dead entries, a pack's hash against its name).
  bool WantsAll() const { return !slice_ && !sample_ && !ids_; }

  // The slice of an id for `t` slices: 1..t (what SetSlice(k, t) selects with k = SliceOf).
  static uint32_t SliceOf(const ChunkId& id, uint32_t t);

  const std::optional<Slice>& slice() const { return slice_; }
  std::optional<double> sample_fraction() const {
    return sample_ ? std::optional<double>(sample_->fraction) : std::nullopt;
  }
  std::optional<uint64_t> sample_seed() const { return sample_ ? std::optional<uint64_t>(sample_->seed) : std::nullopt; }
  bool has_wanted_ids() const { return ids_.has_value(); }

  // "slice 3/7", "sample 5% (seed 123)", "2,345 ids" joined with " and "; "" when WantsAll.
  std::string Describe() const;

 private:
  struct Sample {
    double fraction = 1;
    uint64_t seed = 0;
    uint64_t threshold = 0;  // wanted when the hash is below (fraction < 1)
  };
  std::optional<Slice> slice_;
  std::optional<Sample> sample_;
  std::optional<std::vector<ChunkId>> ids_;  // sorted, unique
};

}  // namespace borgcheck::engine
