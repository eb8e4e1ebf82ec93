// A borg 1.x repository opened for checking, and the plan of what to read: which
// transaction is committed, which segments belong to it, and the list of live objects
// (spec borg1-format.md §1.2, §3).
//
// Planning, in order:
//   1. Identify the directory (config, README); refuse borg's held exclusive lock.
//   2. List segment files data/<D>/<S> numerically; find the newest one ending in COMMIT.
//   3. Find the newest non-empty index.T; check it against integrity.T.
//   4. Choose the live list: index.T when it is intact and not behind the log (a COMMIT with
//      stray bytes after it in segment T still counts: borg would silently drop the whole
//      transaction there); otherwise replay PUT/DELETE of the committed log.
//   5. Sort the live list by (segment, offset): the order segments are read in.
//
// Thread contract: built once by the planning thread; const afterwards, read by everyone.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/io/env.h"
#include "checker/report/finding.h"
#include "checker/repo/borg1/borg1_config.h"
#include "checker/repo/segment_log/segment_files.h"

namespace borgcheck::repo {

// One live object: 40 bytes, the only per-chunk memory the run keeps.
struct LiveObject {
  std::array<uint8_t, 32> id;
  uint32_t segment;
  uint32_t offset;
};

struct RepositoryPlan {
  std::string path;
  RepoConfig config;
  std::vector<SegmentFile> segments;      // committed segments <= transaction, numeric order
  std::vector<uint32_t> missing_segments; // segments the live list names that are not on disk
  uint32_t transaction = 0;
  // Segment `transaction` has stray bytes after its COMMIT: read it only up to here.
  std::optional<uint64_t> commit_end_of_last_segment;
  std::vector<LiveObject> live;           // sorted by (segment, offset)
  std::vector<uint32_t> live_by_id;       // indices into live, sorted by id (index mode only)
  bool live_from_index = false;           // true: index.T; false: log replay
  // Why a segment of missing_segments is not there when it is not simply absent: "is empty (0
  // bytes)", "is a FIFO, not a segment file".
  std::map<uint32_t, std::string> absent_reason;
  // Committed segments that exist but could not be read while planning (io findings).
  std::set<uint32_t> unreadable_segments;
  // Objects the records (hints.T, an index that fails its integrity check) show that the live
  // list cannot give: each named by an error finding (segment_log/segment_records.h).
  uint64_t lost_objects = 0;
  std::vector<report::Finding> findings;  // found while planning (index, stray bytes, ...)
  std::vector<std::string> notes;         // informational, not findings
  uint64_t total_bytes = 0;               // bytes of all segments to read

  // Index lookup by id (index mode): the live object, or null.
  const LiveObject* FindById(const std::array<uint8_t, 32>& id) const;
};

struct OpenOptions {
  bool bypass_lock = false;
  std::optional<std::string> config_text = std::nullopt;  // DetectedFormat::config_text: not read again
};

// Steps 1 only: is this a borg 1.x repository we can check? kNotFound (no such path),
// kNotARepository, kUnsupported, kLockHeld (borg_lock.h: CheckBorgLock; a stale lock is a
// warning in lock_findings instead), kCorruptMetadata (config unreadable).
Result<RepoConfig> IdentifyRepository(const io::Env& env, const std::string& path, const OpenOptions& opts);

// Steps 2-5, reading through `env`. `folder`: the repository folder as the caller listed it
// (ListRepoFolder: the index transaction it compares with at the end, ChangedSinceStart).
Result<RepositoryPlan> PlanRepository(const io::Env& env, const std::string& path, const RepoConfig& config,
                                      const RepoFolder& folder);

}  // namespace borgcheck::repo
