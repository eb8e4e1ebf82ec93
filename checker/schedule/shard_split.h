// Shards (docs/distributed.md): which units shard K of N reads. A shard reads whole units
// (segment files, packs), so that it checks everything a full run checks inside them; every
// unit is in exactly one shard. The split is balanced by bytes and computed from the plan
// alone (each unit's bytes, in plan order), so every machine that plans the same committed
// state gets the same split without talking to the others.
//
// The rule (longest processing time first): units by bytes, largest first (ties: plan order),
// each to the shard with the fewest bytes so far (ties: the lowest shard number). No shard
// ends up more than the largest unit above the mean. Units of 0 bytes (a missing segment,
// whose shard reports its loss) are spread one by one the same way, by count.
//
// Thread contract: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checker/base/status.h"

namespace borgcheck::schedule {

// The shard (0-based) of each unit, for `n` >= 1 shards: element i is unit i's.
std::vector<uint32_t> SplitIntoShards(const std::vector<uint64_t>& unit_bytes, uint32_t n);

// The plan indices shard `k` (1-based, 1..n) reads, in plan order.
std::vector<size_t> UnitsOfShard(const std::vector<uint64_t>& unit_bytes, uint32_t k, uint32_t n);

// The most shards a run may be split into (a bound on the merge's bookkeeping; far more than
// any cluster runs at once on one repository).
inline constexpr uint32_t kMaxShards = 100000;

// "K/N" as given on the command line: 1 <= K <= N <= kMaxShards.
Status ParseShard(const std::string& text, uint32_t& k, uint32_t& n);

}  // namespace borgcheck::schedule
