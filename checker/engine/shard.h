// Sharded runs (docs/distributed.md): a run split by unit over N machines (--shard K/N,
// checker/schedule/shard_split.h), and the merge's final pass that turns the N shards' results
// into the one verdict an unsharded run gives.
//
// A shard reads its units whole and makes every check inside them (the same ReadUnit as any
// run), then stops short of the source's Finish and the archive pass: those span units. It
// hands on what they need: its findings of its units, its counters, and the source's evidence
// (ObjectSource::SaveEvidence: borg 1.x's dead entries and index inconsistencies, version 4's
// pack walks, 2.0.0b5's session keys). The merge (checker/cli/merge.h) reads the shards' JSON
// Lines back into a ShardSet and runs the engine once more on the repository with
// CheckOptions::finish_shards set: it plans (the same plan, or it refuses), loads the key,
// reads no unit, gives the source the evidence (LoadEvidence) and the engine the findings and
// counters, then runs Finish and the archive pass as an unsharded run does. No object is read
// twice: Finish reads what an unsharded run's Finish reads (the manifest, an index
// inconsistency's log entry), the archive pass what it reads (archive metadata).
//
// Thread contract: plain values, made and read on the main thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checker/base/status.h"
#include "checker/report/finding.h"

namespace borgcheck::engine {

// The version of the evidence and of the shard record: a merge refuses shards of another.
inline constexpr int kShardRecordVersion = 1;

// What one shard did, as its record says (JSON: ShardRecordJson, docs/json.md "shard").
struct ShardResult {
  uint32_t k = 0, n = 0;              // shard k of n, 1-based
  std::string repository;             // as the shard named it (an absolute path or a URL)
  std::string repository_id;          // 64 hex
  std::string format;                 // "borg1", "borg2-b5", "borgstore-v4"
  uint32_t transaction = 0;
  // The plan's fingerprint (PlanFingerprint): every shard and the merge must have planned the
  // same units and objects, or the evidence does not fit together (borgstore has no transaction
  // number: a new index fragment or pack changes this).
  std::string plan;
  bool verify_data = false;
  bool repository_only = false;
  std::vector<std::string> units;     // UnitKey of every unit it read whole, in plan order
  uint64_t objects_verified = 0, stored_bytes = 0, plaintext_bytes = 0, bytes_read = 0;
  std::vector<report::Finding> findings;  // what it found in its units (planning's are not here)
  nlohmann::json evidence = nlohmann::json::object();  // the source's (SaveEvidence)
  bool operator==(const ShardResult&) const = default;
};

struct Plan;  // object_source.h
// 16 hex digits (FNV-1a 64) over the format, repository id, transaction, objects_total, live
// list source and every unit (name, bytes, on disk) of `plan`.
std::string PlanFingerprint(const Plan& plan);

// The shards of one run, k = 1..n, each once (the merge checks that before it makes one).
struct ShardSet {
  std::vector<ShardResult> shards;
};

// The shard record of JSON Lines output, and back. ParseShardRecord validates every field
// (the files are the merge's untrusted input) and never throws.
nlohmann::json ShardRecordJson(const ShardResult& r);
Result<ShardResult> ParseShardRecord(const nlohmann::json& j);

}  // namespace borgcheck::engine
