// The archive pass of a verify-data run: manifest -> selected archives -> item metadata ->
// chunk lists, for every generation, through the generation's ArchiveSource
// (archive_source.h) and the memoizing checker/archive walker. RunEngine (engine.cc) calls it
// at four points:
//   1. Start (after LoadKey): make the archive source, list the archives (master: read each
//      archive object for its name and time), select them (archive/archive_select.h).
//   2. WalkFirst (before the object pass, only when the selection restricts the objects:
//      --archives-only, -a, --first, --last, REPO::ARCHIVE): walk with every stored object
//      taken as intact, marking what the selected archives reference (their metadata too);
//      the run's ObjectFilter (object_filter.h) then wants exactly those ids, so the object
//      pass verifies them and nothing else (the manifest aside, which it always verifies).
//   3. Finish (after the source's Finish, with all findings of the run): the reference table
//      gets each object's state from the engine's verdicts (object_verdict.h: damaged or
//      unreadable is bad, missing is missing); the archives are walked
//      (again, after step 2, only if an object they reference turned out bad); the results
//      become findings (below); orphans are counted.
//
// Findings (docs/json.md):
//   * every bad or missing chunk an archive uses gets one finding with `affected` (its uses:
//     archive, path, byte range; or the archive's own metadata and how far it could be read)
//     and, where borg's repair does something for it, `advice`. A chunk that already has an
//     error finding (it failed verification, its segment or pack is gone) gets them attached
//     to that finding; a chunk the repository does not have at all gets a new `reference`
//     finding. So there is exactly one finding per bad chunk id.
//   * metadata that verified but does not decode (archive object, item_ptrs, item stream,
//     items) or fails its archive TAM: one finding per problem and archive (stage `archive`,
//     `authentication` for the TAM), located "[archive <name>]".
//   * orphans (borg 1.x and 2.0.0b5, when every archive was walked): one warning with the count.
//
// Memory: one byte per stored object (state and mark), the walker's memo (about one entry per
// distinct item metadata chunk), and paths only for the uses of bad chunks (capped at
// report::kMaxAffectedUses per chunk, totals exact).
//
// Thread contract: Start, WalkFirst and Finish run on the engine's main thread, before the
// object pass's pool has work and after it is done (the walks use a pool of their own and
// return when it is done).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checker/archive/archive_select.h"
#include "checker/archive/archive_walker.h"
#include "checker/engine/archive_source.h"
#include "checker/engine/check_options.h"
#include "checker/engine/object_filter.h"
#include "checker/engine/object_source.h"
#include "checker/engine/object_verdict.h"
#include "checker/report/finding.h"
#include "checker/report/summary.h"

namespace borgcheck::engine {

class ArchivePass {
 public:
  ArchivePass(const CheckOptions& options, unsigned threads);
  ~ArchivePass();
  ArchivePass(const ArchivePass&) = delete;
  ArchivePass& operator=(const ArchivePass&) = delete;

  // 1. Whether and what to walk. Says once in `notes` why the archives are not checked
  // (keyless run, --repository-only, unsupported, no readable manifest).
  void Start(ObjectSource& source, report::FindingSink& sink, std::vector<std::string>& notes);

  // Whether the object pass verifies only what the selected archives reference.
  bool restricts_objects() const { return restricts_; }
  // Whether Finish walks archives (after Start: a verify-data run whose archives can be read).
  bool walks() const { return active_; }
  // 2. When restricts_objects(): walk, then want only the referenced ids in `filter` and set
  // `plan.objects_total` to their number. kInternal if the walk threw (out of memory);
  // kInvalidArgument (exit 2) when REPO::ARCHIVE names an archive the manifest does not list:
  // borg check only warns (exit 1), which a nightly job takes for success.
  Status WalkFirst(ObjectFilter& filter, Plan& plan);

  // A hint that the walk comes soon: the source may open the files of the first archives'
  // metadata objects (ArchiveSource::WillFetch). Main thread, after Start.
  void WillWalk() const;

  // 3. Findings sorted by report::FindingLess in and out, and the engine's verdict of each
  // object they name (ObjectVerdicts::Of(findings): indices into `findings`); the summary's
  // archive facts (and, when restricted, objects_total: the objects the archives reference).
  void Finish(std::vector<report::Finding>& findings, const ObjectVerdicts& verdicts, report::RunSummary& summary);

 private:
  class Table;
  void Walk();
  void ReadMasterNames();
  void DescribeManifestFindings(std::vector<report::Finding>& findings) const;
  void MakeTable();
  uint64_t WantedObjects() const;  // marked, plus the manifest where the table has it

  const CheckOptions& opts_;
  const unsigned threads_;
  bool active_ = false;
  bool restricts_ = false;
  bool all_archives_ = false;  // no selection: orphans may be counted
  Status selection_status_;    // not ok: the named archive does not exist (WalkFirst says so)
  std::string not_checked_;    // why the archives were not checked (RunSummary::archives_not_checked)
  bool manifest_lost_ = false; // the manifest is missing or did not verify: its finding says what that means
  std::unique_ptr<ArchiveSource> source_;
  ArchiveList list_;
  std::vector<size_t> selected_;  // indices into list_.archives, in check order
  std::unique_ptr<Table> table_;
  std::vector<archive::ArchiveResult> results_;  // per selected archive, after the last walk
  archive::WalkerStats stats_;
  int walks_ = 0;
  std::optional<size_t> manifest_index_;  // the manifest's index in the table, where stored
};

}  // namespace borgcheck::engine
