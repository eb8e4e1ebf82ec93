// The interface a repository generation implements so that the engine (engine.h) can check it:
// an ObjectSource identifies and plans the repository, loads its key, reads its units (segment
// files, packs) and hands the engine the stored objects it finds in them; the engine owns
// everything else (budget, pool, batching, the second read, counters, progress, stop, the
// summary). Headers only: a generation includes this and object_verifier.h, never the engine's
// implementation or the pool (the dependency rule, checked by tests/design/dependency_rule_test).
//
// The phases, each on the engine's main thread unless said otherwise:
//   1. MakePlan: identify, refuse a held lock, plan what to read (units in read order) and
//      report what planning found.
//   2. LoadKey (verify-data only): the mode probe and the unlock, before any worker thread
//      exists (BORG_PASSCOMMAND forks).
//   3. MakeVerifier, once per worker, before the pool starts.
//   4. ReadUnit, once per unit: on the main thread in plan order when plan.in_order (segment
//      logs, whose readers keep state across units), else on pool workers (packs).
//   5. Finish, after the pool is done: cross-unit checks (index leftovers, missing packs, the
//      manifest and its TAM), notes.
//
// Thread contract: as above. Whatever the source keeps is const while units are read, except
// state an in_order source keeps across units (it runs on one thread); a source read on workers
// keeps per-unit results in slots of its own, one per unit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/engine/archive_source.h"
#include "checker/engine/check_options.h"
#include "checker/engine/object_verifier.h"
#include "checker/io/env.h"
#include "checker/report/finding.h"
#include "checker/report/summary.h"

namespace borgcheck::engine {

// The read size the engine's buffers are made and recycled for: sources that stream a file
// read it in windows of this size (larger single objects get a buffer of their own).
inline constexpr uint64_t kReadWindowBytes = 4ull << 20;

// A file read as one stream: a segment file, a pack.
struct ReadUnit {
  report::Location location;  // where its findings are: segment N, or pack <hex>
  std::string path;           // its name in the source's store (io::Env): only the source reads
                              // by it (ReadUnit, ReadAgain, StatUnit), never the engine
  uint64_t bytes = 0;         // the bytes that belong to the check (progress)
  bool on_disk = true;        // false: the plan knows it should exist and it does not (its
                              // ReadUnit reports the loss); not counted in the summary's units
  std::string state_key = {};  // the name UnitKey gives the unit where the location names none
                               // (a served batch: "batch <first id>")
};

// The name of a unit in a shard record and the state file: "segment 12", "pack <64 hex>", or
// its state_key ("batch <64 hex>").
inline std::string UnitKey(const ReadUnit& u) {
  if (!u.state_key.empty()) return u.state_key;
  if (u.location.segment) return "segment " + std::to_string(*u.location.segment);
  return u.location.item;
}

struct Plan {
  std::vector<ReadUnit> units;  // in read order
  bool in_order = true;         // true: one reader, disk order; false: units read on workers
  uint64_t in_flight_per_thread = 8ull << 20;  // budget share per worker (see engine.h)
  std::vector<report::Finding> findings;       // found while planning
  // Facts for the summary (report/summary.h).
  std::string format;             // "borg1", "borg2-b5", "borgstore-v4"
  std::string repository_id;      // 64 lowercase hex digits (config `id`, master's config/id)
  std::string unit_noun = "segment";  // what a unit is called in the summary
  std::string live_list_source;   // how the object list was obtained
  std::optional<uint32_t> transaction;
  uint64_t objects_total = 0;     // objects expected (the source may refine it in Finish)
  std::vector<std::string> notes;
};

// Bytes a source read, shared by the ObjectRefs cut from them. The source fills `data` (sized by
// TakeBlock) and may lower `progress_bytes` (the bytes this block accounts for in the progress
// total: a reader that re-reads the tail of a window next time counts it only once). Written by
// the source before it is handed over; read-only afterwards, by the workers.
struct Block {
  ByteBuffer data;
  uint64_t file_offset = 0;     // of data[0] in the unit's file
  uint64_t progress_bytes = 0;  // defaults to data.size()
};

// The one rule for a unit's file that cannot be opened when its turn comes (io/env.h's
// classes), in every generation: gone since planning (kNotFound: compact ran) ends the run as
// changed (UnitSink::Vanished); no longer a regular file (kCorruptMetadata) is damage, its
// objects lost (Stage::kMissing); anything else (EACCES, EIO, a lost connection) is "could not
// check" (Stage::kIo), never damage. The wording of the findings is the generation's.
enum class UnitOpenFailure : uint8_t { kVanished, kLost, kUnreadable };
inline UnitOpenFailure ClassifyUnitOpenFailure(const Status& s) {
  if (s.code() == StatusCode::kNotFound) return UnitOpenFailure::kVanished;
  return s.code() == StatusCode::kCorruptMetadata ? UnitOpenFailure::kLost : UnitOpenFailure::kUnreadable;
}

// Where a source hands what it reads in one unit. Implemented by the engine; one per unit read,
// used by the thread reading that unit (Wants and Stopping are safe for concurrent use).
class UnitSink {
 public:
  virtual ~UnitSink() = default;
  // Whether the check wants the object with this id (a subset run does not): a source asks
  // before it reads an object's bytes, and skips those it is not asked for.
  virtual bool Wants(const ChunkId& id) const = 0;
  // Whether every object of the unit is wanted (the run's ObjectFilter, object_filter.h, has
  // no part set). Then a source streams the unit whole and runs its unit-wide checks (dead
  // entries' CRCs, a pack's hash against its name); otherwise it reads only the wanted
  // objects' bytes, in disk order, and skips the unit-wide checks.
  virtual bool WantsAll() const { return true; }
  // A block of n bytes for bytes of this unit from `file_offset`. They count in the budget of
  // bytes in flight until the last object handed with the block is verified: in an in_order
  // source this blocks while the budget is full (never polls); a unit read on a worker has its
  // whole size reserved before it starts, so it never blocks.
  virtual std::shared_ptr<Block> TakeBlock(uint64_t file_offset, uint64_t n) = 0;
  // Objects to verify, each within `block` (ObjectRef::pos .. pos + size).
  virtual void Objects(std::shared_ptr<Block> block, std::vector<ObjectRef> refs) = 0;
  // Damage found while reading (bad magic, lost sync, truncation), or stands-ins for objects
  // that cannot be verified: `object_done` counts one wanted object as done (it was lost).
  virtual void Finding(report::Finding f, bool object_done = false) = 0;
  // The unit's file is gone since planning (compact ran): the run ends with "repository
  // changed", no verdict.
  virtual void Vanished() = 0;
  virtual bool Stopping() const = 0;
};

// The manifest as read again for FinishContext::RecheckManifest.
struct ManifestAgain {
  report::Location where;  // where the object's and its TAM's findings are placed
  ChunkId id{};            // the id they name
  bool unit_read = false;  // this run read the manifest's unit: its object's failures are reported
  // Why it could not be read again (reported only where its unit was not read), or nullopt.
  std::optional<report::Finding> unreadable = std::nullopt;
  Bytes stored = {};   // its stored bytes as read again (when readable)
  ObjectRef ref = {};  // as the verifier wants them
};

// What Finish may touch. Verifiers: one per worker, as MakeVerifier made them (a source may
// downcast to its own type to collect what they saw, such as 2.0.0b5's session keys).
struct FinishContext {
  report::FindingSink& findings;
  report::RunSummary& summary;  // worker totals already added
  std::span<ObjectVerifier* const> verifiers;
  // Whether this run read every unit of the plan whole (no subset, none skipped or left for a
  // later run), in plan order. A cross-unit check that needs to have seen every unit (borg 1.x's
  // index-vs-log leftovers, version 4's orphans) runs only then: a partial run must not report
  // what it did not see as lost.
  bool complete = true;
  // unit_read[i]: plan.units[i] was read this run (all its wanted objects handed over). Finish
  // re-checks of an object whose unit was not read (the manifest's TAM) report its failure
  // themselves.
  std::span<const uint8_t> unit_read;
  bool UnitRead(size_t unit) const { return unit < unit_read.size() && unit_read[unit]; }
  // The manifest passed its object checks (counted as verified) but failed a check made after
  // (its TAM): it no longer counts as verified. The one rule of every generation.
  void ManifestFailedLater() {
    if (summary.objects_verified) summary.objects_verified--;
  }
  // The manifest's second look, one flow for the generations whose manifest is an object among
  // the others (borg 1.x and 2.0.0b5, local and served): the workers verified it where its unit
  // was read, but its plaintext is needed once more for the TAM, so the source reads it again
  // and this verifies it again with `verifier` (a verifier of its own, main thread; null when
  // none could be made: nothing more is checked) and asks `tam_problem` about the plaintext
  // (nullopt: passes or none is required; else the finding's message). The read's and the
  // object's failures are reported here only where its unit was not read (a partial run);
  // a TAM problem always, and the manifest then no longer counts as verified.
  void RecheckManifest(const ManifestAgain& m, ObjectVerifier* verifier,
                       const std::function<std::optional<std::string>(Bytes plaintext)>& tam_problem) {
    if (m.unreadable) {
      if (!m.unit_read) findings.Add(*m.unreadable);
      return;
    }
    if (!verifier) return;
    if (std::optional<Verdict> fail = verifier->Verify(m.stored, m.ref)) {
      if (!m.unit_read) findings.Add(report::MakeFinding(fail->severity, fail->stage, m.where, &m.id, fail->message));
      return;
    }
    std::optional<std::string> why = tam_problem(verifier->plaintext());
    if (!why) return;
    findings.Add(report::MakeFinding(report::Severity::kError, report::Stage::kAuthentication, m.where, &m.id, *why));
    ManifestFailedLater();
  }
};

class ObjectSource {
 public:
  virtual ~ObjectSource() = default;

  // 1. Identify, lock check, plan. A non-ok status ends the run (no such repository, held
  // lock, unsupported, nothing committed).
  virtual Result<Plan> MakePlan() = 0;
  // 2. Verify-data only. May add notes and findings to `plan`. Non-ok (no key, wrong
  // passphrase, mode unknown) does not end the run unless it is kInterrupted: the engine calls
  // FallBackToKeyless and checks the repository layer (engine/key_fallback.h).
  virtual Status LoadKey(Plan& plan) = 0;
  // After a failed LoadKey: from here on the source checks as a keyless run does (its verifiers
  // check CRCs and structure only, no manifest TAM, no archives, ModeName() ""). Main thread,
  // before MakeVerifier.
  virtual void FallBackToKeyless() = 0;
  // The key mode's name for the summary ("repokey", "keyfile-blake2-aes-ocb", ...), "" if none.
  virtual std::string ModeName() const = 0;
  // 3. Once per worker. kInternal when a crypto or codec context cannot be made.
  virtual Result<std::unique_ptr<ObjectVerifier>> MakeVerifier() const = 0;
  // 4. Reads one unit (plan.units[index]).
  virtual void ReadUnit(size_t index, UnitSink& sink) = 0;
  // A hint that `unit` is read soon (in_order plans: the engine names each unit but the first
  // once, two units before its turn): a remote store may open its file now, so that its round
  // trips overlap the reads before. Main thread. Changes no result.
  virtual void WillRead(const engine::ReadUnit& unit) const { (void)unit; }
  // The second read (engine.h): first.size() bytes at `offset` of `unit` read again, through
  // the store the unit was read from, into `scratch`, and compared with `first`. On workers,
  // concurrently (each caller passes its own scratch).
  virtual io::SecondRead ReadAgain(const engine::ReadUnit& unit, uint64_t offset, Bytes first,
                                   ByteBuffer& scratch) const = 0;
  // How many units may be read at once (units read on workers): 0 = as many as there are
  // workers (a local file system); a remote store answers its connections.
  virtual unsigned Connections() const { return 0; }
  // Ok while the store can be reached; a remote store that lost its connection answers why
  // (io::Env::Lost). Any thread.
  virtual Status Lost() const { return Status::Ok(); }
  // The unit's file as its store sees it now (size, times, inode: a partial run's identity of
  // the unit, schedule/). Main thread, before any unit is read.
  virtual Result<io::FileStat> StatUnit(const engine::ReadUnit& unit) const = 0;
  // Calls `each` with the id of every live object of plan.units[unit] (what a run that wants
  // every object verifies there); false when the source cannot tell. After MakePlan, on the
  // main thread while no unit is read (the coverage of slice runs counts a unit's objects per
  // slice with it: schedule/partial_run.h).
  virtual bool ForEachLiveId(size_t unit, const std::function<void(const ChunkId&)>& each) const {
    (void)unit;
    (void)each;
    return false;
  }
  // Whether the repository changed since MakePlan in a way only the source can see (a new
  // transaction). Main thread, after the pool is done.
  virtual bool ChangedSinceStart() const { return false; }
  // A hint that the units are read and Finish follows (after ChangedSinceStart): a remote
  // store may open now what Finish reads (the manifest's file, read again). Main thread.
  virtual void WillFinish() const {}
  // 5. Cross-unit checks and notes.
  virtual void Finish(FinishContext& ctx) = 0;

  // Sharded runs (engine/shard.h). A shard does not call Finish: after its units are read it
  // calls SaveEvidence, which puts into `out` (a JSON object) what Finish needs of those units
  // (what ReadUnit gathered for it) and wipes the key as Finish does. The merge's final pass
  // reads no unit and calls LoadEvidence once per shard, in shard order, then Finish: Finish
  // must then find what it would have found had this source read every unit itself. A source
  // whose Finish needs nothing of its units keeps the defaults. A non-ok LoadEvidence (evidence
  // that does not parse, names no unit of this plan) refuses the merge. Main thread.
  virtual void SaveEvidence(nlohmann::json& out, std::span<ObjectVerifier* const> verifiers) {
    (void)out;
    (void)verifiers;
  }
  virtual Status LoadEvidence(const nlohmann::json& in) {
    (void)in;
    return Status::Ok();
  }
  // Whether this source can be sharded at all (the served sources cannot: their units are
  // runs of the server's scan, which no other process sees the same).
  virtual bool CanShard() const { return true; }

  // The archive pass (archive_source.h, archive_pass.h): called once after LoadKey in a
  // verify-data run, on the main thread. nullptr: the archives cannot be walked.
  virtual std::unique_ptr<ArchiveSource> MakeArchiveSource() { return nullptr; }
  // Whether this generation has archives the pass walks with the key (a keyless run then says
  // once that it did not check them).
  virtual bool HasArchives() const { return false; }
};

// A source whose units are files of an io::Env (every generation read from a file system,
// local or through a remote Env): the second read and the unit's status go through that Env,
// as the first read did. The Env outlives the source and is safe for concurrent use.
class EnvUnitSource : public ObjectSource {
 public:
  explicit EnvUnitSource(const io::Env& env) : env_(env) {}
  io::SecondRead ReadAgain(const engine::ReadUnit& unit, uint64_t offset, Bytes first,
                           ByteBuffer& scratch) const override {
    return io::ReadAgain(env_, unit.path, offset, first, scratch);
  }
  Result<io::FileStat> StatUnit(const engine::ReadUnit& unit) const override { return env_.Stat(unit.path); }
  void WillRead(const engine::ReadUnit& unit) const override {
    if (unit.on_disk) env_.OpenAhead(unit.path, io::ReadAhead::kWhole, 0);
  }
  unsigned Connections() const override { return env_.Connections(); }
  Status Lost() const override { return env_.Lost(); }

 protected:
  const io::Env& env_;
};

}  // namespace borgcheck::engine
