// The state of partial runs (--max-duration, --max-age, --min-interval, slices), kept outside
// the repository: per read unit (segment file, pack; never per chunk, so it stays small) when
// it was last verified, at which level, and with what result. docs/nightly.md documents the
// format and the location; this file is the one place that reads and writes it.
//
// Location: <base>/<repository id>/<path>/state.json, one state per repository id AND path,
// with <base> from --state-dir, else $STATE_DIRECTORY (systemd's StateDirectory=; its first
// entry), else $XDG_STATE_HOME/borgcheck, else ~/.local/state/borgcheck (the CLI picks it), and
// <path> the repository's resolved path (CanonicalRepositoryPath) as StateFolderName spells it
// ("/srv/borg/main" -> "srv+borg+main"). Beside it: `lock` (flock'ed by the run that uses the
// state) and, after a corrupt file was found, `state.json.corrupt`.
//
// Why per path: copies of a repository (rsync -a, a USB disk, a restore) have the same id. A
// run may count only verification done on the units now on disk at its own path, so a copy
// never uses the marks of another (which once let a clean run of the original make
// --min-interval skip a damaged copy, and made two copies checked in turn undo each other's
// rotation). A copy restored onto the same path keeps the state, but its units' identities
// (ctime, usually inodes) differ, so every unit is unverified again (below), and --min-interval
// does not skip it (partial_run.h).
//
// Migration: a state of the earlier layout, <base>/<repository id>/state.json, belongs to the
// path in its "repository" field; the first run at that path moves it into its folder (under the
// old `lock`). A run at any other path leaves it alone and starts from an empty state; a file
// whose recorded path was relative (it names no folder for sure) is never moved, and may be
// removed by hand.
//
// Format (JSON, version kStateVersion):
//   {"borgcheck_state": 2, "repository_id": "<64 hex>", "repository": "<the resolved path>",
//    "updated_at": <unix s>,
//    "last_run": {"finished_at": <unix s>, "errors": N, "warnings": N, "complete": bool},
//    "last_success_at": <unix s>   (optional: the last run that finished without errors),
//    "full_verification": {"data"|"crc": {"completed_at": <unix s>, "since": <unix s>,
//                                         "clean": bool}},
//    "cycle": {"data"|"crc": {"started_at": <unix s>, "completed_at": <unix s> (0: open)}},
//    "after_reading_s": {"data"|"crc": S}   (optional: how long the last finished run at that level
//                       took after its reading: the finish and the archive pass; a time budget
//                       keeps that much back for them, partial_run.h),
//    "units": {"segment 12" | "pack <64 hex>" | "batch <64 hex>": {
//        "size": N, "mtime_ns": N, "inode": N, "ctime_ns": N,  the unit's identity (SameFile;
//                                  a served batch's: its object count, 0, its ids' digest, 0:
//                                  repo/segment_log/served_source.h ServedBatchIdentity)
//        "seen_at": <unix s>,                                  the first run that saw it so
//        "data"|"crc": {"at": <unix s>, "done_at": <unix s>,   a whole verification
//                       "result": "clean"|"warnings"|"errors", "how": "whole"|"slices"},
//        "slices": {"level": "data"|"crc", "t": T,              slices done towards one
//                   "done": {"<k>": {"at": <unix s>, "result": ...}}}}}}
// A unit is "verified" at a level when it has a mark of that level (or "data" for "crc"): every
// live object of it passed through the check at `at` (for "slices": the oldest slice; `done_at`
// is when the last slice was done). A slice run's "slices" stay after the mark is made: each
// later slice run renews the mark from them (a rolling window over the last t slices). A unit
// whose identity (size, mtime, inode, ctime) differs from the file's, or that is not in the
// file, is unverified: a compacted repository's new segments, a segment number reused after a
// rolled-back transaction, a copy restored onto the path. ("ctime_ns" is absent from records an
// earlier borgcheck made; such a record is compared without it until the unit is marked again.)
//
// A cycle (docs/nightly.md "Full verification") is one full verification in progress: it starts
// with the first marking run after the previous one completed, and its units are those seen by
// then (seen_at <= started_at). It completes when each of them that is still on disk has a mark
// made since the cycle started (for slices: all t slices done since); units that are gone
// (compacted, pruned away) drop out, units that appeared later wait for the next cycle.
// "full_verification" is the last completed cycle (`since`: its start). Version 1 files (no
// "cycle", no "seen_at") are read as such: their units count as seen before any cycle, and the
// next marking run starts one.
// Thread contract: StateFile and the functions on it are values and pure functions. A StateDir
// is used from one thread at a time (the engine's StateRecorder serialises its calls).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/base/status.h"

namespace borgcheck::schedule {

inline constexpr int kStateVersion = 2;
inline constexpr const char* kStateFileName = "state.json";

enum class CheckLevel : uint8_t { kCrc = 0, kData = 1 };  // keyless, --verify-data
enum class UnitResult : uint8_t { kClean = 0, kWarnings = 1, kErrors = 2 };

const char* CheckLevelName(CheckLevel l);
const char* UnitResultName(UnitResult r);

struct UnitIdentity {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  int64_t ctime_ns = 0;  // 0: not recorded (a mark made before borgcheck recorded it)
  bool operator==(const UnitIdentity&) const = default;
};

// Whether the file `now` is the one a record's identity describes: size, mtime, inode and ctime
// equal. A restore (cp -a, rsync -a, tar) keeps size and mtime and may even get the freed
// inodes of the files it replaces, but never the ctime. A record without a ctime (0, an earlier
// borgcheck's) is compared without it until the unit is marked again.
bool SameFile(const UnitIdentity& recorded, const UnitIdentity& now);

struct UnitMark {
  double at = 0;       // when its objects were verified (the oldest part)
  double done_at = 0;  // when the mark was completed
  UnitResult result = UnitResult::kClean;
  bool by_slices = false;  // "how": "slices" (no unit-wide checks ran) or "whole"
};

struct SliceMark {
  double at = 0;
  UnitResult result = UnitResult::kClean;
};

struct UnitRecord {
  UnitIdentity identity;
  double seen_at = 0;  // the first run that saw the unit with this identity (0: before any cycle)
  std::optional<UnitMark> data, crc;
  // Slices towards the next mark: one level and one t at a time (another resets them).
  CheckLevel slices_level = CheckLevel::kData;
  uint32_t slices_t = 0;  // 0: none
  std::map<uint32_t, SliceMark> slices;

  // The mark that counts for a run at `level` (a data mark counts for crc too; the newer wins).
  std::optional<UnitMark> MarkFor(CheckLevel level) const;
};

struct FullVerification {
  double completed_at = 0;  // when the last unit of the cycle was verified
  double since = 0;         // when the cycle started: every object verified since
  bool clean = false;       // every unit of the cycle was clean
};

// One full verification in progress (see above).
struct Cycle {
  double started_at = 0;
  double completed_at = 0;  // 0: still open
};

struct StateFile {
  std::string repository_id;
  std::string repository;
  double updated_at = 0;
  // The last run that finished (Finish ran): its findings, whether it checked everything.
  std::optional<double> last_run_at;
  uint64_t last_run_errors = 0, last_run_warnings = 0;
  // When a run last finished without errors (exit 0 or 1): --metrics-file carries it forward
  // as borgcheck_last_success_timestamp_seconds when the previous metrics file is gone.
  std::optional<double> last_success_at;
  bool last_run_complete = false;
  std::optional<FullVerification> full_data, full_crc;
  std::optional<Cycle> cycle_data, cycle_crc;
  // How long the last finished run at that level spent after its reading (the finish and the
  // archive pass): what a time budget keeps back for them.
  std::optional<double> after_reading_data_s, after_reading_crc_s;
  std::map<std::string, UnitRecord> units;

  std::optional<FullVerification>& Full(CheckLevel l) { return l == CheckLevel::kData ? full_data : full_crc; }
  const std::optional<FullVerification>& Full(CheckLevel l) const {
    return l == CheckLevel::kData ? full_data : full_crc;
  }
  std::optional<Cycle>& CycleOf(CheckLevel l) { return l == CheckLevel::kData ? cycle_data : cycle_crc; }
  const std::optional<Cycle>& CycleOf(CheckLevel l) const { return l == CheckLevel::kData ? cycle_data : cycle_crc; }
  std::optional<double>& AfterReading(CheckLevel l) {
    return l == CheckLevel::kData ? after_reading_data_s : after_reading_crc_s;
  }
  const std::optional<double>& AfterReading(CheckLevel l) const {
    return l == CheckLevel::kData ? after_reading_data_s : after_reading_crc_s;
  }
};

std::string FormatState(const StateFile& s);

// The repository's path as its state is kept: resolved (realpath: symlinks, "..", a relative
// path), else made absolute and normal when it cannot be resolved; no trailing '/'.
std::string CanonicalRepositoryPath(const std::string& repository);

// The state folder's name for a resolved path: '/' becomes '+', ASCII letters, digits, '_', '-'
// and '.' (not first) stay, every other byte is %XX; one that would be longer than 200 bytes is
// cut and ends in "~" and 16 hex digits of a hash of the whole path. Distinct paths get
// distinct names (but for a hash collision, which Open detects by the recorded path).
std::string StateFolderName(const std::string& canonical_path);

// Parses a state file. kUnsupported: written by a newer borgcheck (its version is in the
// message); kCorruptMetadata: not a state file of any version (the reason in the message).
Result<StateFile> ParseState(std::string_view text);

// The state folder of one repository, locked for the run.
class StateDir {
 public:
  // What Open found, besides the state.
  struct Opened {
    std::unique_ptr<StateDir> dir;
    StateFile state;              // empty (repository_id set) when there was none
    std::vector<std::string> warnings;  // corrupt file set aside, folder not writable
  };

  // Opens (creating it, mode 0700) <base>/<repository_id>/<StateFolderName(repository_path)>/,
  // takes its lock and reads the state (moving a state of the earlier layout there first when it
  // recorded this path). `repository_path`: CanonicalRepositoryPath of the repository.
  //   - another run holds the lock: kIoError ("another borgcheck run is using ...");
  //   - the state is of another repository, of another path (a copied folder), or of a newer
  //     version: kInvalidArgument, refused;
  //   - a corrupt state file: renamed to state.json.corrupt (kept for inspection), a warning,
  //     and the run starts from an empty state (everything unverified: the safe direction);
  //   - a folder that cannot be created or written: a warning; the state is read if it can be
  //     and nothing will be saved (writable() is false).
  static Result<Opened> Open(const std::string& base, const std::string& repository_id,
                             const std::string& repository_path);

  ~StateDir();
  StateDir(const StateDir&) = delete;
  StateDir& operator=(const StateDir&) = delete;

  // Replaces state.json atomically: a temporary file in the same folder, fsync, rename, fsync
  // of the folder. A reader (or a crash) sees the old file or the new one, never a mix.
  Status Save(const StateFile& s);

  bool writable() const { return writable_; }
  const std::string& path() const { return path_; }  // of state.json

 private:
  StateDir() = default;
  std::string dir_, path_;
  int lock_fd_ = -1;
  bool writable_ = true;
};

}  // namespace borgcheck::schedule
