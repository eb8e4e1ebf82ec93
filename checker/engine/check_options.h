// The validated options of one check run: all the rest of the code sees of the command line
// (the CLI parses raw flags, then builds this; see checker/cli/).
//
// Thread contract: a value; const once the run starts.
#pragma once

#include <string>
#include <vector>

namespace borgcheck::engine {

struct ShardSet;  // engine/shard.h

enum class ProgressMode { kAuto, kAlways, kNever };

struct CheckOptions {
  std::string repository;       // path (from the argument or BORG_REPO); of a remote
                                // repository: its absolute path on the server
  // A remote repository's URL (sftp://[user@]host[:port]//absolute/path, resolved): its name in
  // the report, the metrics and the state folder. Empty for a local path.
  std::string repository_url;
  const std::string& RepositoryName() const { return repository_url.empty() ? repository : repository_url; }
  bool verify_data = false;     // false: keyless repository-layer check
  unsigned threads = 1;         // >= 1
  bool json = false;            // JSON Lines on stdout
  ProgressMode progress = ProgressMode::kAuto;
  bool quiet = false;
  bool bypass_lock = false;

  // --lock-wait N: how long to wait for borg's exclusive lock to go away before giving up
  // with kLockHeld (0: do not wait). Until the run layer waits itself, main retries the run
  // once a second while it stops with kLockHeld (checker/cli/main.cc).
  unsigned lock_wait_seconds = 0;

  // Which passes (borg check's --repository-only / --archives-only).
  bool repository_only = false;
  bool archives_only = false;
  // Archive selection (borg's -a/--match-archives, --first N, --last N, and the ARCHIVE of
  // borg 1.x's REPO::ARCHIVE): empty / 0 when not given.
  std::vector<std::string> match_archives;
  unsigned first = 0;
  unsigned last = 0;
  std::string archive;
  // A run that checks chosen archives only (and the objects they reference): its success is not
  // a success of the repository's check (docs/nightly.md: the last-success metric).
  bool SelectsArchives() const {
    return !archive.empty() || !match_archives.empty() || first || last || archives_only;
  }

  // Partial runs (docs/nightly.md). A slice `--subset k/t` (0/0: none; `daily/week` and
  // `daily/month` are resolved to k/t by the CLI from the local date, subset_label says so).
  uint32_t subset_k = 0, subset_t = 0;
  std::string subset_label;          // "3/7" or "3/7 (daily/week, 2026-12-02, Wednesday)"
  // A sample `--sample`: a fraction of the objects (0: none), or a byte count turned into a
  // fraction of the repository's bytes by the engine; the seed (reported) repeats it.
  double sample_fraction = 0;
  uint64_t sample_bytes = 0;
  uint64_t sample_seed = 0;
  double max_duration_s = 0;  // --max-duration: stop reading new units after this (0: none)
  double max_age_s = 0;       // --max-age: units verified longer ago are due again (0: none)
  double min_interval_s = 0;  // --min-interval: skip the run after a full verification within it
  // The state folder's base (--state-dir, $STATE_DIRECTORY, $XDG_STATE_HOME/borgcheck); the
  // state of repository <id> at path P lives in <state_dir>/<id>/<P as unit_state.h spells it>/.
  // "": no state is read or written.
  std::string state_dir;
  // Sharded runs (engine/shard.h, docs/distributed.md). --shard K/N: this run reads shard k of
  // n (1-based) and hands on what the merge needs; 0/0: not a shard.
  uint32_t shard_k = 0, shard_n = 0;
  // The merge's final pass: the shards' results (they outlive the run); null otherwise.
  const ShardSet* finish_shards = nullptr;
  // Seconds between state checkpoints (0: the engine's default, schedule/unit_state.h).
  double checkpoint_interval_s = 0;
  // Unix time to count as "now" for the state (0: the clock). Tests only.
  double now_unix = 0;
  // The time budget's clock counts this many seconds per unit started instead of the time that
  // passed (0: the clock), so that a test's budget admits an exact number of units whatever the
  // machine's speed. Tests only (BORGCHECK_TEST_BUDGET_S_PER_UNIT).
  double test_budget_s_per_unit = 0;
  // Under that clock, what the run records as its time after the reading (the finish and the
  // archive pass, which the next budgeted run keeps back): this, not the time that passed.
  // Tests only (BORGCHECK_TEST_AFTER_READING_S; 0 when unset).
  double test_after_reading_s = 0;
  // The mean size in objects of an ssh:// repository's batches (repo/segment_log/served_source.h;
  // 0: kServedUnitObjects), so that a test's small repository has several. Tests only
  // (BORGCHECK_TEST_SERVED_BATCH_OBJECTS).
  size_t test_served_batch_objects = 0;
  // Benchmarking and tests only (BORGCHECK_LANES=0): false makes every verifier hash one object
  // at a time instead of several in hash lanes (crypto/hash_pipeline.h), so that bench/compare
  // can measure what the lanes gain. The findings are the same (tests/lanes_test.cc).
  bool hash_lanes = true;
};

}  // namespace borgcheck::engine
