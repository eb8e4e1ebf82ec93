// The archive pass (archive_pass.h), top to bottom:
//   Table            the reference table: one byte per stored object (state, mark)
//   Start            list, name (master), select
//   Walk             the walker on a pool: one archive alone first (it fills the memo)
//   Finish           states from the findings, walk, findings, orphans
#include "checker/engine/archive_pass.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "checker/base/stop_signal.h"
#include "checker/pool/work_stealing_pool.h"

namespace borgcheck::engine {
using archive::ArchiveFailure;
using archive::ArchiveResult;
using archive::BadReference;
using archive::Generation;
using archive::RefList;
using archive::RefState;
using archive::StreamProblem;
using archive::StreamProblemKind;
using report::AffectedUse;
using report::Finding;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;

namespace {

// The archives whose metadata objects WillWalk names (each one file open at most).
constexpr size_t kArchivesFetchedAhead = 4;

bool RepairPatchesChunks(Generation g) { return g != Generation::kBorg2Master; }

std::string Count(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

// One byte per stored object: bits 0-1 the RefState of the object, bit 7 "referenced".
class ArchivePass::Table final : public archive::ReferenceTable {
 public:
  explicit Table(const ArchiveSource& source) : source_(source), cells_(source.ObjectCount()) {}

  RefState Reference(const ChunkId& id) override {
    const std::optional<size_t> i = source_.Find(id);
    if (!i || *i >= cells_.size()) return RefState::kMissing;
    return RefState(cells_[*i].fetch_or(kMarked, std::memory_order_relaxed) & kStateMask);
  }
  RefState StateOf(const ChunkId& id) const {
    const std::optional<size_t> i = source_.Find(id);
    if (!i || *i >= cells_.size()) return RefState::kMissing;
    return RefState(cells_[*i].load(std::memory_order_relaxed) & kStateMask);
  }
  bool Marked(size_t i) const { return cells_[i].load(std::memory_order_relaxed) & kMarked; }
  bool MarkedId(const ChunkId& id) const {
    const std::optional<size_t> i = source_.Find(id);
    return i && *i < cells_.size() && Marked(*i);
  }
  // Main thread, between walks.
  void SetState(size_t i, RefState s) {
    const uint8_t c = cells_[i].load(std::memory_order_relaxed);
    cells_[i].store(uint8_t((c & ~kStateMask) | uint8_t(s)), std::memory_order_relaxed);
  }
  RefState StateAt(size_t i) const { return RefState(cells_[i].load(std::memory_order_relaxed) & kStateMask); }
  size_t size() const { return cells_.size(); }

 private:
  static constexpr uint8_t kStateMask = 0x03;
  static constexpr uint8_t kMarked = 0x80;
  const ArchiveSource& source_;
  std::vector<std::atomic<uint8_t>> cells_;
};

ArchivePass::ArchivePass(const CheckOptions& options, unsigned threads) : opts_(options), threads_(threads) {}
ArchivePass::~ArchivePass() = default;

void ArchivePass::Start(ObjectSource& source, report::FindingSink& sink, std::vector<std::string>& notes) {
  auto not_checked = [&](std::string why, std::string_view more = {}) {
    notes.push_back("archives not checked: " + why + std::string(more));
    not_checked_ = std::move(why);
  };
  if (!opts_.verify_data) {
    if (source.HasArchives()) not_checked("keyless run", " (--verify-data reads the key and checks them)");
    return;
  }
  if (opts_.repository_only) {
    if (source.HasArchives()) not_checked("--repository-only");
    return;
  }
  source_ = source.MakeArchiveSource();
  if (!source_) {
    if (source.HasArchives()) not_checked("the key's mode is not known");
    return;
  }
  Result<ArchiveList> list = source_->ListArchives();
  if (!list.ok()) {
    if (list.status().code() == StatusCode::kCorruptMetadata) {
      // The manifest verified (else its own finding says so) but is no manifest of this
      // generation: only this pass can say that nothing could be checked.
      const ChunkId zero{};
      sink.Add(MakeFinding(Severity::kError, Stage::kArchive, Location::None(), &zero,
                           "the manifest does not decode (" + list.status().message() +
                               "): no archive can be listed or checked"));
    }
    if (list.status().code() == StatusCode::kNotFound || list.status().code() == StatusCode::kIoError) {
      // The manifest's own finding (missing, or what failed) is what the user sees first.
      manifest_lost_ = true;
      notes.push_back("archives not checked: " + list.status().message());
      not_checked_ = list.status().code() == StatusCode::kNotFound ? "the manifest (the list of archives) is missing"
                                                                    : "the manifest (the list of archives) is damaged";
    } else {
      not_checked(list.status().message());
    }
    source_.reset();
    return;
  }
  list_ = std::move(list).value();
  active_ = true;
  if (source_->generation() == Generation::kBorg2Master) ReadMasterNames();

  archive::ArchiveSelection sel;
  sel.patterns = opts_.match_archives;
  sel.first = opts_.first;
  sel.last = opts_.last;
  sel.name = opts_.archive;
  archive::SelectedArchives chosen = archive::SelectArchives(list_.archives, sel, source_->generation());
  selected_ = std::move(chosen.chosen);
  if (!sel.name.empty() && selected_.empty()) {
    selection_status_ = Status(StatusCode::kInvalidArgument,
                               fmt::format("archive '{}' does not exist in the repository ({}): nothing was checked "
                                           "(borg list shows the archive names)",
                                           sel.name, Count(list_.archives.size(), "archive", "archives")));
    chosen.warnings.clear();
  }
  for (const std::string& w : chosen.warnings) {
    sink.Add(MakeFinding(Severity::kWarning, Stage::kArchive, Location::None(), nullptr, w));
  }
  all_archives_ = !sel.selects();
  restricts_ = sel.selects() || opts_.archives_only;
  if (restricts_) MakeTable();
}

void ArchivePass::MakeTable() {
  table_ = std::make_unique<Table>(*source_);
  manifest_index_ = source_->Find(ChunkId{});
}

// The manifest is the repository's list of archives: without it nothing of any archive can be
// found, by borg (list, extract, mount stop at it) or here. borg check --repair (1.x, 2.0.0b5,
// master) rebuilds it from the archive objects it finds ("Rebuilding missing manifest").
void ArchivePass::DescribeManifestFindings(std::vector<Finding>& findings) const {
  const ChunkId zero{};
  for (Finding& f : findings) {
    if (!VerdictOf(f) || *f.chunk_id != zero) continue;
    f.advice = f.stage == Stage::kIo
                   ? "the manifest (the list of archives) could not be read: no archive was checked; read it again "
                     "once the storage is fixed"
                   : "this is the manifest, the list of archives: no archive could be checked, and borg can list, "
                     "extract or mount no archive until it is rebuilt; borg check --repair rebuilds it from the "
                     "archive objects in the repository (they are intact unless a finding names them)";
  }
}

// Master lists archive ids only; names and times are in the archive objects.
void ArchivePass::ReadMasterNames() {
  ByteBuffer buf;
  for (archive::ManifestArchive& a : list_.archives) {
    if (!a.name.empty()) continue;
    archive::FetchProblem p;
    buf.Clear();
    if (source_->fetcher().Fetch(a.id, archive::ObjectKind::kArchive, buf, p) != archive::FetchStatus::kOk) continue;
    archive::ArchiveInfo info;
    std::string err;
    if (archive::DecodeArchive(buf.view(), Generation::kBorg2Master, info, err)) {
      a.name = info.name;
      a.time = info.time;
    }
  }
}

void ArchivePass::Walk() {
  ++walks_;
  results_.assign(selected_.size(), ArchiveResult());
  if (selected_.empty()) return;
  archive::WalkOptions o;
  o.generation = source_->generation();
  o.item_keys = archive::ItemKeysFor(o.generation, list_.manifest);
  o.max_refs_per_chunk = uint32_t(report::kMaxAffectedUses);
  archive::ArchiveWalker walker(source_->fetcher(), *table_, o);
  // The newest archive alone first: it fills the memo the others (nightly archives of nearly
  // the same data) mostly hit.
  const size_t first = selected_.size() - 1;
  results_[first] = walker.WalkArchive(uint32_t(first), list_.archives[selected_[first]]);
  if (selected_.size() > 1 && !PendingStopSignal()) {
    pool::WorkStealingPool pool(std::max(1u, threads_));
    for (size_t i = 0; i < first; ++i) {
      pool.Submit([this, &walker, i](size_t) {
        if (PendingStopSignal()) return;
        results_[i] = walker.WalkArchive(uint32_t(i), list_.archives[selected_[i]]);
      });
    }
    pool.Wait();
  }
  stats_ = walker.stats();
}

Status ArchivePass::WalkFirst(ObjectFilter& filter, Plan& plan) {
  if (!restricts_) return Status::Ok();
  if (!selection_status_.ok()) return selection_status_;
  std::vector<ChunkId> wanted;
  try {
    if (active_) {
      Walk();
      for (size_t i = 0; i < table_->size(); ++i) {
        if (table_->Marked(i)) wanted.push_back(source_->IdAt(i));
      }
    }
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, std::string("internal error in the archive walk: ") + e.what());
  }
  // Nothing to walk (no archive selected, or the archive list cannot be had): only the
  // manifest, which the filter always wants.
  filter.SetWantedIds(std::move(wanted));
  plan.objects_total = WantedObjects();
  return Status::Ok();
}

uint64_t ArchivePass::WantedObjects() const {
  if (!table_) return 1;  // the manifest
  uint64_t n = 0;
  for (size_t i = 0; i < table_->size(); ++i) n += table_->Marked(i) || i == manifest_index_;
  return n;
}

namespace {

// The uses of one chunk, gathered over all walked archives.
struct ChunkUses {
  RefState state = RefState::kMissing;
  std::vector<AffectedUse> uses;
  uint64_t total = 0;
  std::set<uint32_t> archives;
  bool any_content = false;   // chunks / hardlink uses
  bool any_healthy = false;   // chunks_healthy uses
  std::string meta_use;       // the first metadata use: "archive", "item_ptrs", "items"
  std::optional<archive::FetchProblem> fetch_problem;  // a metadata fetch that failed
};

AffectedUse UseOf(const ArchiveResult& r, std::string use) {
  AffectedUse u;
  u.archive = r.name;
  u.archive_id = r.id;
  u.use = std::move(use);
  return u;
}

std::string UseName(RefList l) {
  switch (l) {
    case RefList::kChunks: return "chunks";
    case RefList::kChunksHealthy: return "chunks_healthy";
    case RefList::kHardlinkSlave: return "hardlink";
  }
  return "chunks";
}

// How an archive is named in messages and locations: its name, or (borg 2 master, whose names
// are only in the archive objects) its id when the object could not be read.
std::string Label(const ArchiveResult& r) { return r.name.empty() ? report::ChunkIdHex(r.id) : r.name; }

std::string ChunkNo(const StreamProblem& p) { return fmt::format("{:06d} (of {})", p.chunk_index, p.chunk_count); }

}  // namespace

void ArchivePass::WillWalk() const {
  // (A selection walked first: Finish walks again only where the object pass found new damage.)
  if (!active_ || !source_ || selected_.empty() || walks_ > 0) return;
  // The walk starts with the last selected archive, then the others from the first (Walk).
  std::vector<ChunkId> ids{list_.archives[selected_.back()].id};
  for (size_t i = 0; i + 1 < selected_.size() && ids.size() < kArchivesFetchedAhead; ++i) {
    ids.push_back(list_.archives[selected_[i]].id);
  }
  source_->WillFetch(ids);
}

void ArchivePass::Finish(std::vector<Finding>& findings, const ObjectVerdicts& verdicts, report::RunSummary& sum) {
  if (restricts_) {
    sum.objects_total = WantedObjects();
    sum.objects_selected = true;
  }
  sum.archives_not_checked = not_checked_;
  if (manifest_lost_) DescribeManifestFindings(findings);
  if (!active_) return;
  const Generation gen = source_->generation();
  // What the object pass found beyond the plan (borgstore's unindexed blobs): a new table, and
  // a walk on it.
  source_->ObjectPassDone();
  if (!table_ || table_->size() != source_->ObjectCount()) {
    MakeTable();
    walks_ = 0;
  }

  // The states of the objects, from the engine's verdicts. An unreadable object is bad for the
  // archives too (their files cannot be restored from what was read); its finding says it was
  // not checked, and no repair advice is given for it (below).
  bool new_bad = false;
  for (const auto& [id, v] : verdicts.by_id) {
    const std::optional<size_t> i = source_->Find(id);
    if (!i || *i >= table_->size() || table_->StateAt(*i) == RefState::kMissing) continue;
    table_->SetState(*i, v.verdict == ObjectVerdict::kMissing ? RefState::kMissing : RefState::kBad);
    new_bad = new_bad || table_->Marked(*i) || !restricts_;
  }
  // Walk, or walk again: the first walk's memo named no paths for objects it took as intact.
  if (walks_ == 0 || new_bad) Walk();
  if (PendingStopSignal()) return;

  sum.archives_total = list_.archives.size();
  sum.archives_checked = selected_.size();

  // Per chunk: its uses, in archive order then stream order.
  std::map<ChunkId, ChunkUses> by_chunk;
  std::vector<Finding> added;
  auto use_of = [&](const ChunkId& id, RefState state) -> ChunkUses& {
    ChunkUses& c = by_chunk[id];
    if (c.uses.empty() && c.total == 0) c.state = state;
    return c;
  };
  auto add_use = [&](ChunkUses& c, AffectedUse u, uint32_t archive) {
    ++c.total;
    c.archives.insert(archive);
    if (c.uses.size() < report::kMaxAffectedUses) c.uses.push_back(std::move(u));
  };
  // A problem of one archive's metadata, located at the archive; valid until the next one.
  auto archive_finding = [&](const ArchiveResult& r, Severity sev, Stage stage, const ChunkId& id,
                             std::string msg) -> Finding& {
    added.push_back(MakeFinding(sev, stage, Location::Item("archive " + Label(r)), &id, std::move(msg)));
    Finding& f = added.back();
    f.affected = report::Affected{};
    f.affected->uses.push_back(UseOf(r, "archive"));
    f.affected->total = 1;
    return f;
  };
  for (const ArchiveResult& r : results_) {
    const uint32_t a = r.index;
    switch (r.failure) {
      case ArchiveFailure::kNone:
        break;
      case ArchiveFailure::kObjectMissing:
      case ArchiveFailure::kObjectDamaged: {
        ChunkUses& c = use_of(r.id, table_->StateOf(r.id));
        if (c.meta_use.empty()) c.meta_use = "archive";
        AffectedUse u = UseOf(r, "archive");
        u.items_read = 0;
        if (r.failure == ArchiveFailure::kObjectDamaged && table_->StateOf(r.id) == RefState::kPresent) {
          c.fetch_problem = archive::FetchProblem{r.stage, r.message};
        }
        add_use(c, std::move(u), a);
        break;
      }
      case ArchiveFailure::kObjectUndecodable: {
        const size_t at = r.message.find("does not decode: ");
        const std::string why = at == std::string::npos ? r.message : r.message.substr(at + 17);
        archive_finding(r, Severity::kError, Stage::kArchive, r.id,
                        "the archive object does not decode (" + why + "): nothing of the archive can be read");
        break;
      }
      case ArchiveFailure::kTamFailed: {
        // The severity is borg's: borg check reports it as an error and --repair deletes the
        // archive, because nothing tells a genuine archive from a forged one but its owner.
        Finding& f = archive_finding(r, Severity::kError, r.stage, r.id,
                                     r.message + "; its items and data were checked all the same (each chunk "
                                                 "carries its own MAC; any damage has its own finding)");
        f.affected.reset();  // the archive can be read: its location names it
        f.advice = "if the archive is genuine (its name, time and files are what you backed up), borg upgrade "
                   "--archives-tam REPO (borg 1.2.6+) gives it a valid TAM; do not run borg check --repair "
                   "before: it deletes archives without a valid TAM";
        break;
      }
    }
    for (const StreamProblem& p : r.problems) {
      switch (p.kind) {
        case StreamProblemKind::kChunkMissing:
        case StreamProblemKind::kChunkDamaged:
        case StreamProblemKind::kItemPtrsMissing:
        case StreamProblemKind::kItemPtrsDamaged: {
          const bool ptrs = p.kind == StreamProblemKind::kItemPtrsMissing || p.kind == StreamProblemKind::kItemPtrsDamaged;
          ChunkUses& c = use_of(p.chunk, table_->StateOf(p.chunk));
          if (c.meta_use.empty()) c.meta_use = ptrs ? "item_ptrs" : "items";
          AffectedUse u = UseOf(r, ptrs ? "item_ptrs" : "items");
          if (!ptrs) {
            u.begin = p.stream_offset;
            if (!p.path_before.empty()) u.path_before = p.path_before;
            if (!p.path_after.empty()) u.path_after = p.path_after;
          }
          u.items_read = p.items_before;
          const bool damaged = p.kind == StreamProblemKind::kChunkDamaged || p.kind == StreamProblemKind::kItemPtrsDamaged;
          if (damaged && table_->StateOf(p.chunk) == RefState::kPresent) {
            c.fetch_problem = archive::FetchProblem{p.stage, p.reason};
          }
          add_use(c, std::move(u), a);
          break;
        }
        case StreamProblemKind::kItemPtrsUndecodable: {
          Finding& f = archive_finding(r, Severity::kError, Stage::kArchive, p.chunk,
                                       fmt::format("item_ptrs chunk {} of {} does not decode ({}): the item "
                                                   "metadata chunks it lists are lost",
                                                   p.chunk_index + 1, p.chunk_count, p.reason));
          f.affected->uses.back().use = "item_ptrs";
          f.affected->uses.back().items_read = p.items_before;
          break;
        }
        case StreamProblemKind::kMalformed:
        case StreamProblemKind::kInvalidItem:
        case StreamProblemKind::kTruncated: {
          std::string msg =
              p.kind == StreamProblemKind::kMalformed
                  ? fmt::format("item metadata chunk {}: not msgpack at byte {} ({}), resynchronised", ChunkNo(p),
                                p.offset_in_chunk, p.reason)
              : p.kind == StreamProblemKind::kInvalidItem
                  ? fmt::format("item metadata chunk {}: a value that is not an item ends at byte {} ({}): skipped",
                                ChunkNo(p), p.offset_in_chunk, p.reason)
                  : std::string("the item metadata stream ends inside an item");
          msg += fmt::format(" (read up to item {}, stream byte {})", p.items_before, p.stream_offset);
          Finding& f = archive_finding(r, Severity::kError, Stage::kArchive, p.chunk, std::move(msg));
          f.affected->uses.back().use = "items";
          f.affected->uses.back().begin = p.stream_offset;
          f.affected->uses.back().items_read = p.items_before;
          break;
        }
        case StreamProblemKind::kSizeMismatch:
          added.push_back(MakeFinding(Severity::kWarning, Stage::kArchive, Location::Item("archive " + Label(r)),
                                      &p.chunk, p.path + ": size inconsistency detected: " + p.reason));
          break;
        case StreamProblemKind::kResyncSkipped:
          break;  // the consequence of the problem before it, which is reported
      }
    }
    if (r.problems_total > r.problems.size()) {
      sum.notes.push_back(fmt::format("archive {}: {} more item metadata problems not listed", Label(r),
                                      r.problems_total - r.problems.size()));
    }
    // Content uses: the records the walker kept (at least one per chunk and archive), then
    // the exact totals.
    for (const BadReference& b : r.bad_refs) {
      ChunkUses& c = use_of(b.chunk, b.state);
      AffectedUse u = UseOf(r, UseName(b.list));
      u.path = b.path;
      u.begin = b.begin;
      u.end = b.end;
      if (!b.via.empty()) u.via = b.via;
      (b.list == RefList::kChunksHealthy ? c.any_healthy : c.any_content) = true;
      c.archives.insert(a);
      if (c.uses.size() < report::kMaxAffectedUses) c.uses.push_back(std::move(u));
    }
    for (const archive::BadRefTotal& t : r.bad_totals) {
      ChunkUses& c = use_of(t.chunk, t.state);
      c.total += t.uses;
      c.archives.insert(a);
    }
  }

  // One finding per chunk: the run's own error finding of it (the verdict's), or a new one.
  for (auto& [id, c] : by_chunk) {
    const size_t n_archives = c.archives.size();
    std::string advice;
    const bool content = c.any_content || c.any_healthy;
    if (content && RepairPatchesChunks(gen)) {
      advice = c.state == RefState::kMissing
                   ? "borg check --repair replaces the missing chunk in these files by an all-zero chunk of the same "
                     "size and keeps the original reference (chunks_healthy); if a later borg create stores the same "
                     "data again, another borg check --repair puts it back and the files are whole again"
                   : "borg check --verify-data --repair deletes the damaged chunk and replaces it in these files by "
                     "an all-zero chunk of the same size, keeping the original reference (chunks_healthy); if a later "
                     "borg create stores the same data again, another borg check --repair puts it back";
    } else if (c.meta_use == "items") {
      advice = "borg check --repair keeps the archive without the items of this chunk (borg list and borg extract "
               "then skip them, and every other item of the archive restores); take the lost files from another "
               "archive that has them";
    } else if (c.meta_use == "archive") {
      advice = gen == Generation::kBorg2Master ? "borg check --repair deletes this archive (soft-deletes its archives/ entry)"
                                               : "borg check --repair removes this archive from the manifest";
    }
    if (c.any_healthy && !c.any_content) advice.clear();  // borg already replaced it by zeros
    Finding* target = nullptr;
    if (const ObjectVerdicts::Entry* v = verdicts.Find(id)) {
      target = &findings[v->finding];
    } else {
      std::string msg;
      Severity sev = Severity::kError;
      Stage stage = Stage::kReference;
      if (c.fetch_problem) {
        stage = c.fetch_problem->stage;
        msg = "cannot be read as archive metadata: " + c.fetch_problem->message;
      } else if (c.meta_use == "archive") {
        const AffectedUse* u = c.uses.empty() ? nullptr : &c.uses[0];
        msg = "Archive metadata block is missing: archive " +
              (!u ? std::string() : u->archive.empty() ? report::ChunkIdHex(u->archive_id) : u->archive) +
              " cannot be read";
      } else if (c.meta_use == "item_ptrs") {
        msg = "an item_ptrs chunk is not in the repository: the item metadata of " +
              Count(n_archives, "archive", "archives") + " is lost from there on";
      } else if (c.meta_use == "items") {
        msg = "an item metadata chunk is not in the repository: the items in it are lost from " +
              Count(n_archives, "archive", "archives");
      } else if (c.any_content) {
        msg = fmt::format("chunk is not in the repository: {} in {} cannot be restored (missing file chunk)",
                          Count(c.total, "use by a file", "uses by files"), Count(n_archives, "archive", "archives"));
      } else {
        sev = Severity::kWarning;
        msg = fmt::format("Previously missing file chunk is still missing: {} in {} already have an all-zero "
                          "replacement chunk (an earlier borg check --repair)",
                          Count(c.total, "use", "uses"), Count(n_archives, "archive", "archives"));
      }
      added.push_back(MakeFinding(sev, stage, Location::None(), &id, std::move(msg)));
      target = &added.back();
    }
    // borg does not look at obfuscation padding: its repair leaves such a chunk alone (and the
    // file restores from it), so borg's repair is no advice for it.
    if (target->message.rfind("obfuscation padding", 0) == 0) advice.clear();
    // A chunk that could not be read is not known to be damaged: repairing is no advice for it.
    if (target->stage == Stage::kIo) advice.clear();
    report::Affected aff;
    aff.uses = std::move(c.uses);
    aff.total = c.total;
    target->affected = std::move(aff);
    target->advice = advice;
  }
  // Bad chunks no walked archive uses say so too (an empty `affected`).
  for (const auto& [id, v] : verdicts.by_id) {
    if (!findings[v.finding].affected && id != ChunkId{}) findings[v.finding].affected = report::Affected{};
  }

  // Orphans: stored, referenced by no archive (borg 1.x and 2.0.0b5, every archive walked).
  if (gen != Generation::kBorg2Master) {
    if (all_archives_) {
      uint64_t orphans = 0;
      for (size_t i = 0; i < table_->size(); ++i) orphans += !table_->Marked(i) && i != manifest_index_;
      if (orphans) {
        // Orphans are left by interrupted backups; but where an archive's metadata could not be
        // read in full they may be that archive's data, and deleting them is no advice then.
        bool incomplete = false;
        for (const ArchiveResult& r : results_) {
          incomplete = incomplete || (r.failure != ArchiveFailure::kNone && r.failure != ArchiveFailure::kTamFailed);
          for (const StreamProblem& p : r.problems) incomplete = incomplete || p.kind != StreamProblemKind::kSizeMismatch;
        }
        added.push_back(MakeFinding(
            Severity::kWarning, Stage::kReference, Location::None(), nullptr,
            fmt::format("{} found: stored, but no archive references {} (borg check reports {} too){}",
                        orphans == 1 ? std::string("1 orphaned object") : fmt::format("{} orphaned objects", orphans),
                        orphans == 1 ? "it" : "them", orphans == 1 ? "it" : "them",
                        incomplete ? "; some archive metadata could not be read, and these objects may be the data "
                                     "it referenced"
                                   : "")));
        if (!incomplete) added.back().advice = "borg check --repair deletes them";
      }
    } else {
      sum.notes.push_back("orphaned objects not counted: not every archive was checked");
    }
  }
  for (Finding& f : added) findings.push_back(std::move(f));
  std::stable_sort(findings.begin(), findings.end(), report::FindingLess);
}

}  // namespace borgcheck::engine
