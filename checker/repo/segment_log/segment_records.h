// What a segment-log repository (borg 1.x, 2.0.0b5) records about what should exist, besides
// the log itself, and the losses those records show (docs/formats.md, "Every record of what
// should exist"):
//   index.T      the live objects of transaction T (parsed by each generation; one that fails
//                its integrity check is read defensively here only to name lost objects)
//   hints.T      {segments: {segment: live object count}} for every segment of transaction T
//                (spec borg1-format.md §3.4; 2.0.0b5 writes the same map)
//   integrity.T  XXH64 digests of index.T and hints.T (§3.5)
//   transactions the append-only log, "transaction T, UTC time ..." per commit
// and the COMMIT of transaction T, which ends segment T.
//
// The live list always comes from an intact index or from the log; these records only detect
// losses and name what they can: ids (from a damaged index) where it knows them, else the
// segment and the count (from hints). They never add an object to verify.
//
// Both generations also plan the log the same way around their own entry format: what stands at
// each segment number (SegmentLog), the check of a transaction the records name that is newer
// than the log's newest COMMIT (CheckRecordedCommit), and the findings about what lies after the
// transaction checked (AppendFindingsAfterTransaction).
//
// Thread contract: pure functions, or reads through the given io::Env; called while planning.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/io/env.h"
#include "checker/report/finding.h"
#include "checker/repo/segment_log/segment_files.h"

namespace borgcheck::repo {

// ---- hints.T ----------------------------------------------------------------------------------

struct SegmentHints {
  uint64_t version = 0;
  std::map<uint32_t, uint64_t> live_counts;  // `segments`: segment -> live objects in it
};

// Parses hints.T (msgpack map; keys str or raw, as borg 1.x and 2.0.0b5 write them). Bounded
// by the input's size. kCorruptMetadata when it is no map with a `segments` map of integers.
Result<SegmentHints> ParseSegmentHints(Bytes file);

// hints.T of transaction `t`, checked against integrity.T's "hints" digest when integrity.T
// has one. `hints` is set only when the file is usable for finding losses: it parses and its
// digest verifies (or integrity.T records none). Problems become `findings`: a hints file that
// fails its digest or does not parse is a warning (borg rebuilds it), one that cannot be read
// is an io error (could not check what it records).
struct LoadedHints {
  std::string name;                  // "hints.29"
  std::optional<SegmentHints> hints;
  bool verified = false;             // its digest was checked and matched
  std::vector<report::Finding> findings;
};
LoadedHints LoadSegmentHints(const io::Env& env, const std::string& repo, uint32_t t);

// ---- the transactions the records name -------------------------------------------------------

struct RecordedTransactions {
  // The highest T of a non-empty regular file index.T / hints.T / integrity.T.
  std::optional<uint32_t> index, hints, integrity;
  // The last "transaction T, ..." line of the append-only `transactions` file.
  std::optional<uint32_t> transactions_log;
  // Entries named like index.T, hints.T or integrity.T that are not regular files: the name and
  // what they are ("directory", "FIFO", ...).
  std::vector<std::pair<std::string, std::string>> not_regular;

  // The newest transaction any of them names.
  std::optional<uint32_t> Newest() const;
  // Which records name transaction `t`: "index.29, hints.29 and integrity.29".
  std::string NamesOf(uint32_t t) const;
};
// `folder`: the repository folder as the plan listed it (its entries are used; nullopt entries:
// listed here). The `transactions` log is opened only where that listing names it.
RecordedTransactions FindRecordedTransactions(const io::Env& env, const std::string& repo, const RepoFolder& folder);

// ---- files that cannot be read, and what is where a file should be ---------------------------

// Segments after `after` (the log's newest COMMIT) whose last bytes could not be read: whether
// they hold a newer COMMIT is not known. Non-empty regular files only.
std::vector<std::pair<uint32_t, Status>> UnreadableAfter(const io::Env& env, const std::vector<SegmentFile>& segments,
                                                         std::optional<uint32_t> after);

// What stands at `path` instead of a regular file: "a directory", "a FIFO", ... (Stat's type
// name with an article), or "" when it is a regular file or gone.
std::string NotRegularFile(const io::Env& env, const std::string& path);

// The io finding of a file that exists and cannot be read (stage io, an error: could not check).
report::Finding UnreadableFinding(const report::Location& where, const report::ChunkId* id, std::string message);

// ---- the log on disk ---------------------------------------------------------------------------

// What an absent segment is, in messages ("committed segment file <path> is missing"): "is <a
// FIFO>, not a segment file" when `not_regular` (what stands there) is given, else "is empty (0
// bytes)" when an empty regular file stands there, else "is missing".
std::string AbsentSegmentText(bool empty_file, const std::string* not_regular);

// The segment files of a repository and the records beside them, listed once while planning.
// A plain value: copies and moves stay valid (the lookup holds positions, not pointers).
struct SegmentLog {
  std::string repo;
  uint32_t segments_per_dir = 0;
  std::vector<SegmentFile> segments;            // every regular segment file, numeric order
  std::map<uint32_t, std::string> not_regular;  // entries named like segments, not files: n -> "a FIFO"
  RecordedTransactions records;
  std::optional<uint32_t> newest_commit;        // the log's transaction: the newest segment ending in COMMIT
  std::map<uint32_t, size_t> by_number;         // segment number -> position in `segments`

  // The regular segment file numbered `n`, or null.
  const SegmentFile* Find(uint32_t n) const;
  // Whether no segment file with entries stands at `n`: none, or an empty one (borg truncates a
  // segment before it unlinks it).
  bool Absent(uint32_t n) const;
  // For an absent segment, what stands there (AbsentSegmentText).
  std::string Absence(uint32_t n) const;
  // data/<D>/<n> of this repository.
  std::string PathOf(uint32_t n) const;
};

// Lists data/ (ListSegmentFiles, with what stands where a segment file is not a regular file),
// the records (FindRecordedTransactions) and the newest segment that ends with `commit` (the
// generation's COMMIT entry). Fails as ListSegmentFiles does.
Result<SegmentLog> ListSegmentLog(const io::Env& env, const std::string& repo, uint32_t segments_per_dir,
                                  Bytes commit, const RepoFolder& folder);

// What a generation's walk finds in the segment that should end a transaction.
struct CommitProbe {
  std::optional<uint64_t> commit_end;  // where its COMMIT entry ends (stray bytes follow it)
  bool unreadable = false;             // a read failed before a COMMIT was found: could not check
  std::string why;                     // why it could not be read
};
using CommitProber = std::function<CommitProbe(const SegmentFile&)>;

// Segment `t` should end transaction `t`, which the records name (log.records.NamesOf(t))
// although the log's newest COMMIT is older. Appends one finding: the segment is absent (stage
// missing), cannot be read (io), holds no COMMIT (truncated), or has stray bytes after its COMMIT
// (a warning: it is then read up to the COMMIT). `probe` is called only for a non-empty regular
// file; its result is returned ({} when the segment is absent).
CommitProbe CheckRecordedCommit(const SegmentLog& log, uint32_t t, const CommitProber& probe,
                                std::vector<report::Finding>& findings);

// Once transaction `t` is chosen, appends the findings about what lies beyond it, in this order:
// a newer transaction the `transactions` log names; records (index.T, ...) that are not regular
// files; segments after `t` that cannot be read (whether they hold a newer COMMIT is not known);
// entries after `t` named like segments that are not files; and the count of the other segment
// files after `t` (uncommitted leftovers).
void AppendFindingsAfterTransaction(const io::Env& env, const SegmentLog& log, uint32_t t,
                                    std::vector<report::Finding>& findings);

// ---- the losses the records show ---------------------------------------------------------------

// An entry of an index that fails its integrity check, read defensively.
struct RecordedEntry {
  report::ChunkId id{};
  uint32_t segment = 0;
  uint32_t offset = 0;
};

struct RecordLossInput {
  uint32_t transaction = 0;
  // Every segment file of the log up to the transaction: number -> size (0: empty).
  std::map<uint32_t, uint64_t> on_disk;
  // Entries named like segments that are not regular files: number -> "a directory", ...
  std::map<uint32_t, std::string> not_regular;
  // Segments that exist but could not be read (their io finding is made elsewhere).
  std::set<uint32_t> unreadable;
  // Segments whose loss is reported already (an intact index names their objects).
  std::set<uint32_t> reported;
  // Live objects per segment in the live list; compared with hints only when `compare_counts`
  // (the live list is the log's replay: with an intact index, the index is the stronger record).
  std::map<uint32_t, uint64_t> live_per_segment;
  bool compare_counts = false;
  // Damage findings already made per segment that each stand for one lost object no index
  // names (2.0.0b5's damaged regions): the count's finding is made only for losses beyond them.
  std::map<uint32_t, uint64_t> damage_reported;
  std::function<std::string(uint32_t)> segment_path;  // data/<D>/<n>, in messages

  const LoadedHints* hints = nullptr;  // of the transaction, when usable
  // A damaged index of the transaction: its entries, and how it is named in messages
  // ("index.29, which fails its integrity check (<why>)"). Only entries whose id is not live in
  // the log (`live_in_log`) and that point at a segment that is gone, empty, not a file, or at an
  // offset beyond the segment's end are taken as lost; every other entry may be garbage.
  std::vector<RecordedEntry> damaged_index;
  std::string damaged_index_name;
  std::string damaged_index_why;
  std::function<bool(const report::ChunkId&)> live_in_log;
};

struct RecordLosses {
  std::vector<report::Finding> findings;
  uint64_t lost_objects = 0;     // objects the records show that the log cannot give (objects_total)
  uint64_t unchecked_objects = 0;  // objects hints places in unreadable segments (objects_total)
};
// The losses, then a warning for each of in.not_regular that no record accounts for (neither
// `reported` nor hints.T names a segment there).
RecordLosses FindRecordLosses(const RecordLossInput& in);

// The input's parts the log gives for transaction `t`: on_disk, not_regular and segment_path.
RecordLossInput MakeRecordLossInput(const SegmentLog& log, uint32_t t);

// Hands index.T of the transaction, which fails its integrity check, to FindRecordLosses: the
// entries a generation's salvage read from it (anything with id, segment and offset), why it
// failed, and which ids the log's replay gives.
template <typename Salvaged>
void UseDamagedIndex(RecordLossInput& in, const Salvaged& entries, std::string why,
                     std::function<bool(const report::ChunkId&)> live_in_log) {
  for (const auto& e : entries) in.damaged_index.push_back({e.id, e.segment, e.offset});
  in.damaged_index_name = "index." + std::to_string(in.transaction);
  in.damaged_index_why = std::move(why);
  in.live_in_log = std::move(live_in_log);
}

// Step 5 of both planners, for `in` (from MakeRecordLossInput, completed by the generation):
// loads hints.T when the records name the transaction (its findings first), leaves out the
// COMMIT segment when CheckRecordedCommit reported it and hints.T places no object there, then
// appends FindRecordLosses's findings. Returns lost_objects + unchecked_objects.
uint64_t CheckRecordsOfTransaction(const io::Env& env, const SegmentLog& log, RecordLossInput in,
                                   std::vector<report::Finding>& findings);

}  // namespace borgcheck::repo
