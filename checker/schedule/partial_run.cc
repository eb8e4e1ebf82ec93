#include "checker/schedule/partial_run.h"

#include "checker/engine/shard.h"
#include "checker/schedule/shard_split.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "checker/report/text_report.h"

namespace borgcheck::schedule {
namespace {

// The record of a unit if it still describes the file (same identity), else null.
const UnitRecord* CurrentRecord(const StateFile* state, const UnitView& u) {
  if (!state || !u.identity) return nullptr;
  auto it = state->units.find(u.key);
  if (it == state->units.end() || !SameFile(it->second.identity, *u.identity)) return nullptr;
  return &it->second;
}

bool Within(double at, double now, double max_age_s) { return max_age_s <= 0 || now - at <= max_age_s; }

// Whether a unit's record says something was found: its mark at this level, or a slice of it,
// has a result that is not clean.
bool HadFindings(const UnitRecord& r, CheckLevel level) {
  if (std::optional<UnitMark> m = r.MarkFor(level); m && m->result != UnitResult::kClean) return true;
  return std::any_of(r.slices.begin(), r.slices.end(),
                     [](const auto& kv) { return kv.second.result != UnitResult::kClean; });
}

// Whether the state's marks vouch for every unit on disk now, for --min-interval: each unit the
// state has a record of is the file that was verified (same identity) and its mark at this level
// is clean. A record whose identity differs is a unit that was not the one verified (a copy
// restored onto this path, a segment number reused); a unit without a record was written after
// the state's last save (a backup since: each run's save keeps a record of every unit it marked,
// and a completed full verification marked every unit then on disk), which --min-interval
// knowingly leaves to the next check. A unit that cannot be stat'ed vouches for nothing. A run
// stopped by a signal saves marks but no `last_run`, so --min-interval looks at the units too,
// not only at the last run.
bool MarksVouchForEveryUnit(const StateFile& state, const std::vector<UnitView>& units, CheckLevel level) {
  // A unit without a record vouches only as a unit written after the state's last save: its
  // mtime and ctime are later (a restored or copied older unit keeps its old mtime: cp -a,
  // rsync -a). And at least one unit must be one the state verified: a tree of units none of
  // which was ever verified here vouches for nothing.
  const auto written_since_save = [&](const UnitIdentity& id) {
    const double save_ns = state.updated_at * 1e9;
    return double(id.mtime_ns) > save_ns && double(id.ctime_ns) > save_ns;
  };
  bool any_verified = false;
  const bool all = std::all_of(units.begin(), units.end(), [&](const UnitView& u) {
    if (!u.on_disk) return false;
    if (!u.identity) return false;
    auto it = state.units.find(u.key);
    if (it == state.units.end()) return written_since_save(*u.identity);
    const UnitRecord* r = CurrentRecord(&state, u);
    if (!r || HadFindings(*r, level)) return false;
    std::optional<UnitMark> m = r->MarkFor(level);
    any_verified |= m && m->result == UnitResult::kClean;
    return m && m->result == UnitResult::kClean;
  });
  return all && any_verified;
}

// How far a cycle started at `started_at` got (unit_state.h): its units are those on disk that
// were seen by then (a unit that cannot be stat'ed counts as one not verified: it may be old);
// a unit is done when its mark at this level is from after the start. With `t` > 1 also the
// slices k done on every unit since the start (a whole mark counts for every slice).
struct CycleTally {
  uint64_t units = 0, units_done = 0;
  uint32_t slices_done = 0;
  double completed = 0;  // the newest done_at of the units' marks
  bool clean = true;
};

CycleTally TallyCycle(const StateFile& state, const std::vector<UnitView>& units, CheckLevel level, double started_at,
                      uint32_t t) {
  CycleTally c;
  std::vector<uint8_t> slice_done(t > 1 ? t : 0, 1);
  for (const UnitView& u : units) {
    if (!u.on_disk) continue;
    const UnitRecord* r = CurrentRecord(&state, u);
    if (u.identity && (!r || r->seen_at > started_at)) continue;  // new since the cycle began
    c.units++;
    std::optional<UnitMark> m = r ? r->MarkFor(level) : std::nullopt;
    const bool done = m && m->at >= started_at;
    if (done) {
      c.units_done++;
      c.completed = std::max(c.completed, m->done_at);
      c.clean &= m->result == UnitResult::kClean;
    }
    for (uint32_t k = 1; k <= slice_done.size() && !done; ++k) {
      bool has = false;
      if (r && r->slices_t == t && r->slices_level >= level) {
        auto it = r->slices.find(k);
        has = it != r->slices.end() && it->second.at >= started_at;
      }
      if (!has) slice_done[k - 1] = 0;
    }
  }
  for (uint8_t d : slice_done) c.slices_done += d;
  return c;
}

}  // namespace

SliceCounter SliceCounterOf(const ObjectSource& source) {
  return [&source](size_t unit, uint32_t t) {
    std::vector<uint64_t> counts(t, 0);
    const bool known = t > 0 && source.ForEachLiveId(unit, [&](const ChunkId& id) {
      counts[ObjectFilter::SliceOf(id, t) - 1]++;
    });
    return known ? counts : std::vector<uint64_t>();
  };
}

UnitResult ResultOf(uint64_t errors, uint64_t warnings) {
  return errors ? UnitResult::kErrors : warnings ? UnitResult::kWarnings : UnitResult::kClean;
}

Schedule MakeSchedule(const StateFile* state, const std::vector<UnitView>& units, const ScheduleOptions& o) {
  // (class, last verified, plan index): class 0 not on disk, 1 had findings, 2 never verified,
  // 3 verified.
  //
  // A slice run never leaves a unit out for --max-age: the rotation is its schedule. A week of
  // daily/week reads slice 1 again seven days after the last time, and with `--max-age 8d` that
  // slice (and the whole-unit mark dated from the oldest slice) would still be "fresh", so the
  // next Monday would read nothing and part of the repository would go two weeks unread. In a
  // slice run --max-age only sets the coverage window; the order (with a time budget) is by
  // when this slice of the unit was last verified.
  std::vector<std::tuple<int, double, size_t>> due;
  Schedule s;
  for (size_t i = 0; i < units.size(); ++i) {
    const UnitView& u = units[i];
    if (!u.on_disk) {
      due.emplace_back(0, 0.0, i);
      continue;
    }
    const UnitRecord* r = CurrentRecord(state, u);
    if (o.slice) {
      const bool findings = r && HadFindings(*r, o.level);
      std::optional<double> at;
      if (r && r->slices_t == o.slice->t && r->slices_level >= o.level) {
        auto k = r->slices.find(o.slice->k);
        if (k != r->slices.end()) at = k->second.at;
      }
      due.emplace_back(findings ? 1 : at ? 3 : 2, at.value_or(0.0), i);
      continue;
    }
    std::optional<UnitMark> m = r ? r->MarkFor(o.level) : std::nullopt;
    if (!m) {
      due.emplace_back(r && HadFindings(*r, o.level) ? 1 : 2, 0.0, i);
      continue;
    }
    if (m->result != UnitResult::kClean) {
      due.emplace_back(1, m->at, i);
      continue;
    }
    if (o.max_age_s > 0 && Within(m->at, o.now, o.max_age_s)) {
      s.not_due++;
      continue;
    }
    due.emplace_back(3, m->at, i);
  }
  if (!o.time_budget) {
    std::sort(due.begin(), due.end(), [](const auto& a, const auto& b) { return std::get<2>(a) < std::get<2>(b); });
    for (const auto& d : due) s.order.push_back(std::get<2>(d));
    return s;
  }
  // With a time budget, re-reads of units with known findings take every other place after the
  // units not on disk, the least recently re-read first: at most about half of the units a
  // run starts re-read known damage, the first one it starts is one of them (so the damage is
  // reported every run), and the rest of the rotation still advances. Re-reading them first,
  // all of them, let a few damaged units fill every night's budget: nothing else was ever
  // verified again, and new damage elsewhere went unseen.
  std::sort(due.begin(), due.end());
  auto rest = std::find_if(due.begin(), due.end(), [](const auto& d) { return std::get<0>(d) >= 2; });
  auto known = std::find_if(due.begin(), rest, [](const auto& d) { return std::get<0>(d) >= 1; });
  for (auto it = due.begin(); it != known; ++it) s.order.push_back(std::get<2>(*it));
  for (auto k = known, r = rest; k != rest || r != due.end();) {
    if (k != rest) s.order.push_back(std::get<2>(*k++));
    if (r != due.end()) s.order.push_back(std::get<2>(*r++));
  }
  return s;
}

namespace {
// What a unit weighs in the coverage: its bytes, or its live objects where its size is not known.
uint64_t Weight(const UnitView& u) { return u.bytes ? u.bytes : u.objects; }
}  // namespace

report::RunSummary::Coverage ComputeCoverage(const StateFile& state, const std::vector<UnitView>& units,
                                             CheckLevel level, double now, double max_age_s,
                                             const SliceCounter& slice_objects, uint32_t slices_t) {
  report::RunSummary::Coverage c;
  c.max_age_s = max_age_s;
  uint64_t total = 0;
  double verified = 0;
  double oldest = std::numeric_limits<double>::infinity();
  bool some_unmarked = false;
  for (size_t i = 0; i < units.size(); ++i) {
    const UnitView& u = units[i];
    if (!u.on_disk) continue;
    total += Weight(u);
    const UnitRecord* r = CurrentRecord(&state, u);
    std::optional<UnitMark> m = r ? r->MarkFor(level) : std::nullopt;
    if (m) oldest = std::min(oldest, m->at);
    some_unmarked |= !m;
    if (m && Within(m->at, now, max_age_s)) {
      c.units_verified++;
      verified += double(Weight(u));
      continue;
    }
    // Slices without a whole mark within the window: the share of the unit's live objects in
    // the slices done within it.
    const bool sliced = r && r->slices_t > 1 && r->slices_level >= level && !r->slices.empty();
    if (!m && !sliced) {
      c.units_never_verified++;
      continue;
    }
    if (!sliced) continue;
    std::vector<uint32_t> fresh;
    for (const auto& [k, sm] : r->slices) {
      if (Within(sm.at, now, max_age_s)) fresh.push_back(k);
    }
    if (fresh.empty()) continue;
    c.units_partly_verified++;
    const std::vector<uint64_t> counts = slice_objects ? slice_objects(i, r->slices_t) : std::vector<uint64_t>();
    if (counts.size() != r->slices_t) continue;  // unknown: counts as not verified
    uint64_t all = 0, done = 0;
    for (uint64_t n : counts) all += n;
    for (uint32_t k : fresh) done += counts[k - 1];
    // A unit without live objects has nothing but its framing: it counts by its slices.
    const double share = all ? double(done) / double(all) : double(fresh.size()) / r->slices_t;
    verified += share * double(Weight(u));
  }
  c.ratio = total ? std::min(1.0, verified / double(total)) : 1.0;
  c.oldest_verified_at = some_unmarked || oldest == std::numeric_limits<double>::infinity() ? 0 : oldest;
  double full = 0;
  if (const auto& f = state.Full(level)) full = f->completed_at;
  if (level == CheckLevel::kCrc && state.full_data) full = std::max(full, state.full_data->completed_at);
  c.full_verification_at = full;
  if (const std::optional<Cycle>& cycle = state.CycleOf(level)) {
    const CycleTally t = TallyCycle(state, units, level, cycle->started_at, slices_t);
    c.cycle_started_at = cycle->started_at;
    c.cycle_completed_at = cycle->completed_at;
    c.cycle_units = t.units;
    c.cycle_units_done = t.units_done;
    c.cycle_slices = slices_t > 1 ? slices_t : 0;
    c.cycle_slices_done = t.slices_done;
  }
  return c;
}

StateRecorder::StateRecorder(StateDir& dir, StateFile state, std::vector<UnitView> units, CheckLevel level,
                             bool marks, std::optional<ObjectFilter::Slice> slice, double checkpoint_s,
                             std::function<double()> now)
    : dir_(dir),
      units_(std::move(units)),
      level_(level),
      marks_(marks),
      slice_(slice),
      checkpoint_s_(checkpoint_s > 0 ? checkpoint_s : kDefaultCheckpointS),
      now_(std::move(now)),
      state_(std::move(state)) {
  last_save_ = now_();
  // Every unit on disk is known from here on: a unit first seen now is not part of a cycle that
  // began earlier (unit_state.h).
  for (const UnitView& u : units_) {
    if (!u.on_disk || !u.identity) continue;
    auto it = state_.units.find(u.key);
    if (it != state_.units.end() && SameFile(it->second.identity, *u.identity)) {
      it->second.identity = *u.identity;  // the same file; an earlier record gains its ctime
      continue;
    }
    // Another file under a known name (a copy restored onto the path, a segment number reused)
    // loses its marks but stays a member of the cycle that knew the name: a cycle cannot
    // complete by its units being replaced. Only a name never seen is new.
    const double seen = it != state_.units.end() ? it->second.seen_at : last_save_;
    UnitRecord& r = state_.units[u.key];
    r = UnitRecord();
    r.identity = *u.identity;
    r.seen_at = seen;
  }
  // A run that marks starts a cycle when none is open: its units are those seen by now.
  if (marks_) {
    for (CheckLevel level : {CheckLevel::kCrc, CheckLevel::kData}) {
      if (level == CheckLevel::kData && level_ != CheckLevel::kData) continue;
      std::optional<Cycle>& cycle = state_.CycleOf(level);
      if (!cycle || cycle->completed_at > 0) cycle = Cycle{last_save_, 0};
    }
  }
  dirty_ = true;
}

void StateRecorder::UnitVerified(size_t unit, UnitResult result) {
  if (!marks_ || unit >= units_.size() || !units_[unit].identity) return;
  const UnitView& u = units_[unit];
  std::lock_guard<std::mutex> lock(mu_);
  const double now = now_();
  UnitRecord& r = state_.units[u.key];
  if (!SameFile(r.identity, *u.identity)) r = UnitRecord();  // another file now: its marks are void
  r.identity = *u.identity;  // a record of an earlier borgcheck gets its ctime
  std::optional<UnitMark>& mark = level_ == CheckLevel::kData ? r.data : r.crc;
  if (!slice_) {
    mark = UnitMark{now, now, result, false};
    if (r.slices_level == level_) {
      r.slices.clear();
      r.slices_t = 0;
    }
  } else {
    if (r.slices_t != slice_->t || r.slices_level != level_) {
      r.slices.clear();
      r.slices_t = slice_->t;
      r.slices_level = level_;
    }
    r.slices[slice_->k] = SliceMark{now, result};
    // Once every slice was done, the unit is verified as of its oldest slice; the slices are
    // kept, so each later slice run renews the mark (a rolling window). Clearing them would
    // date the unit by last week's oldest slice until the next week completes: a week-long
    // rotation's coverage within 8 days would drop to nothing from the second Tuesday on.
    if (r.slices.size() == slice_->t) {
      UnitMark m{now, now, UnitResult::kClean, true};
      for (const auto& [k, s] : r.slices) {
        m.at = std::min(m.at, s.at);
        m.result = std::max(m.result, s.result);
      }
      mark = m;
    }
  }
  dirty_ = true;
  if (now - last_save_ >= checkpoint_s_) SaveLocked();
}

std::optional<double> PartialRun::LastSuccess() const {
  if (recorder_) return recorder_->Snapshot().last_success_at;
  if (have_state_) return state_.last_success_at;
  return std::nullopt;
}

void StateRecorder::RunFinished(uint64_t errors, uint64_t warnings, bool complete, bool succeeded,
                                double after_reading_s) {
  std::lock_guard<std::mutex> lock(mu_);
  state_.AfterReading(level_) = after_reading_s;
  state_.last_run_at = now_();
  state_.last_run_errors = errors;
  state_.last_run_warnings = warnings;
  state_.last_run_complete = complete;
  if (succeeded && errors == 0) state_.last_success_at = state_.last_run_at;
  dirty_ = true;
}

// A cycle completes when each of its units still on disk has a mark made since it started
// (TallyCycle): every object that existed when it began was verified since, wherever a slice
// run found it. Units compacted or pruned away drop out; units that appeared later do not hold
// it back. The full verification is then dated by its last mark, `since` its start.
void StateRecorder::UpdateFullLocked() {
  for (CheckLevel level : {CheckLevel::kCrc, CheckLevel::kData}) {
    if (level == CheckLevel::kData && level_ != CheckLevel::kData) continue;
    std::optional<Cycle>& cycle = state_.CycleOf(level);
    if (!cycle || cycle->completed_at > 0) continue;
    const CycleTally t = TallyCycle(state_, units_, level, cycle->started_at, 0);
    if (t.units_done < t.units) continue;
    cycle->completed_at = t.units ? std::max(t.completed, cycle->started_at) : now_();
    state_.Full(level) = FullVerification{cycle->completed_at, cycle->started_at, t.clean};
  }
}

void StateRecorder::SaveLocked() {
  UpdateFullLocked();
  StateFile out = state_;
  // Only the units of this plan: compacted-away segments and deleted packs leave the file.
  out.units.clear();
  for (const UnitView& u : units_) {
    auto it = state_.units.find(u.key);
    if (it != state_.units.end()) out.units.insert(*it);
  }
  out.updated_at = now_();
  last_save_ = out.updated_at;
  if (!dir_.writable()) {
    if (save_status_.ok()) {
      save_status_ = Status(StatusCode::kIoError, "the state folder is not writable: this run's verification was not "
                                                  "recorded in " + dir_.path());
    }
    return;
  }
  Status s = dir_.Save(out);
  if (!s.ok() && save_status_.ok()) save_status_ = s;
  if (s.ok()) dirty_ = false;
}

Status StateRecorder::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  SaveLocked();
  return save_status_;
}

StateFile StateRecorder::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

}  // namespace borgcheck::schedule

namespace borgcheck::schedule {
namespace {

// What --max-duration covers, said in every run that has one (docs/nightly.md "The time budget").
// `reserve_s`: what the last run's finish and archive pass took (nullopt: nothing measured yet).
std::string BudgetNote(double max_duration_s, const std::string& unit_noun, std::optional<double> reserve_s) {
  const std::string noun = unit_noun.empty() ? "unit" : unit_noun;
  std::string note = fmt::format("the time budget ({}) counts the whole run: planning, the key, reading the {}, the "
                                 "finish and the archive pass; no {} starts once it is spent, those being read finish",
                                 report::FormatDuration(max_duration_s), report::UnitNouns(noun), noun);
  if (!reserve_s) {
    note += "; nothing has measured the finish and the archive pass yet, so this run's come on top of the budget "
            "(the next runs keep back what they take)";
  } else if (*reserve_s >= max_duration_s) {
    note += fmt::format("; the last run's finish and archive pass took {}, more than the whole budget: this run reads "
                        "one {}; raise --max-duration", report::FormatDuration(*reserve_s), noun);
  } else {
    note += fmt::format("; the reading stops {} early, kept back for the finish and the archive pass (what the last "
                        "run's took)", report::FormatDuration(*reserve_s));
  }
  return note + " (see the `phase` lines)";
}

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

PartialRun::PartialRun(const CheckOptions& options, const ObjectSource& source)
    : opts_(options), source_(source), slice_objects_(SliceCounterOf(source)), start_unix_(options.now_unix > 0 ? options.now_unix : WallNow()) {}

PartialRun::~PartialRun() = default;

engine::CheckOutcome RunScheduled(ObjectSource& source, const CheckOptions& options,
                                  const engine::ProgressCallback& progress) {
  PartialRun schedule(options, source);
  return engine::RunEngine(source, options, progress, schedule, schedule);
}

double PartialRun::Now() const {
  return start_unix_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

Result<bool> PartialRun::Prepare(const Plan& plan, ObjectFilter& filter, report::RunSummary& sum,
                                 std::vector<std::string>& warnings) {
  level_ = opts_.verify_data ? CheckLevel::kData : CheckLevel::kCrc;
  unit_count_ = plan.units.size();
  units_.reset(new UnitCounters[unit_count_]);
  const bool use_state = !opts_.state_dir.empty();
  for (const ReadUnit& u : plan.units) {
    UnitView v;
    v.key = engine::UnitKey(u);
    v.bytes = u.bytes;
    if (u.on_disk && !u.bytes && !u.state_key.empty()) {
      // A unit of no known size (a served batch) weighs in the coverage by its live objects.
      (void)source_.ForEachLiveId(views_.size(), [&](const ChunkId&) { v.objects++; });
    }
    v.on_disk = u.on_disk;
    if (u.on_disk) {
      total_bytes_ += u.bytes;
      units_on_disk_++;
      if (use_state) {
        if (Result<io::FileStat> st = source_.StatUnit(u); st.ok() && st->type == io::EntryType::kRegular) {
          v.identity = UnitIdentity{st->size, st->mtime_ns, st->inode, st->ctime_ns};
        }
      }
    }
    views_.push_back(std::move(v));
  }

  // Sharded runs (engine/shard.h): a fixed split of whole units, no state, no slice.
  if (opts_.finish_shards) {
    if (Status st = PrepareFinishShards(plan, sum); !st.ok()) return st;
    return true;
  }
  if (opts_.shard_n > 0) {
    if (Status st = PrepareShard(plan, sum); !st.ok()) return st;
    return true;
  }

  // The filter: a slice and a sample (a byte count is a share of this repository's bytes).
  if (opts_.subset_t > 1) {
    filter.SetSlice(opts_.subset_k, opts_.subset_t);
    sum.subset = std::to_string(opts_.subset_k) + "/" + std::to_string(opts_.subset_t);
    sum.subset_label = opts_.subset_label.empty() ? sum.subset : opts_.subset_label;
  }
  double fraction = opts_.sample_fraction;
  if (opts_.sample_bytes) fraction = total_bytes_ ? double(opts_.sample_bytes) / double(total_bytes_) : 1.0;
  if (fraction >= 1) fraction = 0;  // 100%, or a size at least the repository's: a full run
  if (fraction > 0) {
    filter.SetSample(fraction, opts_.sample_seed);
    sum.sample_fraction = fraction;
    sum.sample_seed = opts_.sample_seed;
  }
  sum.max_duration_s = opts_.max_duration_s;

  // The state.
  if (use_state) {
    if (plan.repository_id.empty()) {
      warnings.push_back("the repository id is unknown: this run reads no state and saves none");
    } else {
      // One state per repository id and path: a copy elsewhere has the same id (unit_state.h).
      // A remote repository is named by its URL (a path alone could be any server's).
      const std::string path = opts_.repository_url.empty() ? CanonicalRepositoryPath(opts_.repository)
                                                            : opts_.repository_url;
      Result<StateDir::Opened> opened = StateDir::Open(opts_.state_dir, plan.repository_id, path);
      if (!opened.ok()) return opened.status();
      for (std::string& w : opened->warnings) warnings.push_back(std::move(w));
      dir_ = std::move(opened->dir);
      state_ = std::move(opened->state);
      state_.repository = path;
      have_state_ = true;
    }
  }

  // --min-interval: a clean full verification within it, nothing found since (the last run, and
  // every unit's mark), nothing known to be wrong now (the plan's findings), and the marks are
  // of the units on disk now (MarksVouchForEveryUnit): nothing to do.
  if (opts_.min_interval_s > 0 && have_state_) {
    std::optional<FullVerification> full = state_.Full(level_);
    if (level_ == CheckLevel::kCrc && state_.full_data &&
        (!full || state_.full_data->completed_at > full->completed_at)) {
      full = state_.full_data;
    }
    const double now = Now();
    if (full && full->clean && now - full->completed_at < opts_.min_interval_s && state_.last_run_at &&
        state_.last_run_errors == 0 && state_.last_run_warnings == 0 && plan.findings.empty() &&
        MarksVouchForEveryUnit(state_, views_, level_)) {
      sum.skipped = true;
      sum.complete = false;
      sum.has_coverage = true;
      sum.coverage = ComputeCoverage(state_, views_, level_, now, opts_.max_age_s, slice_objects_, SlicesT());
      sum.coverage.state_file = dir_->path();
      sum.units_total = units_on_disk_;
      sum.bytes_total = total_bytes_;
      sum.bytes_skipped = total_bytes_;
      return false;
    }
  }

  ScheduleOptions so;
  so.level = level_;
  so.now = Now();
  so.max_age_s = opts_.max_age_s;
  if (opts_.subset_t > 1 && fraction <= 0) so.slice = ObjectFilter::Slice{opts_.subset_k, opts_.subset_t};
  so.time_budget = opts_.max_duration_s > 0;
  if (so.time_budget && have_state_) {
    const std::optional<double>& after = state_.AfterReading(level_);
    reserve_measured_ = after.has_value();
    reserve_s_ = after.value_or(0);
  }
  Schedule s = MakeSchedule(have_state_ ? &state_ : nullptr, views_, so);
  order_ = std::move(s.order);
  not_due_ = s.not_due;
  size_t last = 0;
  bool first = true;
  for (size_t u : order_) {
    scheduled_bytes_ += views_[u].bytes;
    if (!views_[u].on_disk) continue;
    if (!first && u < last) in_plan_order_ = false;
    last = u;
    first = false;
  }
  return true;
}

void PartialRun::StartReading(const ObjectFilter& filter) {
  wants_all_ = filter.WantsAll();
  if (!have_state_) return;
  // Whole units are marked when every object is wanted; slices when a slice is all that is
  // selected; a sample or an id selection proves nothing about a unit.
  const bool slice_only = !wants_all_ && filter.slice() && !filter.sample_fraction() && !filter.has_wanted_ids();
  std::optional<ObjectFilter::Slice> slice;
  if (slice_only) slice = filter.slice();
  recorder_ = std::make_unique<StateRecorder>(*dir_, std::move(state_), views_, level_, wants_all_ || slice_only,
                                              slice, opts_.checkpoint_interval_s, [this] { return Now(); });
}

void PartialRun::FallBackToKeyless() {
  level_ = CheckLevel::kCrc;  // no archive pass: the keyless finish is what to keep back
  if (opts_.max_duration_s > 0 && have_state_) {
    const std::optional<double>& after = state_.AfterReading(level_);
    reserve_measured_ = after.has_value();
    reserve_s_ = after.value_or(0);
  }
}

bool PartialRun::MayStart() {
  // The test clock (CheckOptions::test_budget_s_per_unit) decides in Admit alone, on the main
  // thread, so that which units are read does not depend on when a worker takes its task.
  if (opts_.test_budget_s_per_unit <= 0 && OutOfTime() && started_.load() > 0) return false;
  started_.fetch_add(1);
  return true;
}

bool PartialRun::OutOfTime() {
  if (opts_.max_duration_s <= 0) return false;
  if (out_of_time_.load(std::memory_order_relaxed)) return true;
  double spent;
  if (opts_.test_budget_s_per_unit > 0) {
    if (admitted_ == 0) return false;
    spent = double(admitted_) * opts_.test_budget_s_per_unit;
  } else {
    if (started_.load() == 0) return false;
    spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  if (spent + reserve_s_ < opts_.max_duration_s) return false;
  out_of_time_.store(true);
  return true;
}

void PartialRun::Released(size_t unit, bool whole, uint64_t credited, uint64_t unit_bytes) {
  UnitCounters& c = units_[unit];
  const bool read = c.read.load(std::memory_order_acquire) != 0;
  // A unit of no known size (the objects a server hands out, bytes 0 in the plan) counts what
  // was read of it.
  const uint64_t counted = unit_bytes == 0 ? credited : whole && read ? unit_bytes : std::min(credited, unit_bytes);
  bytes_read_.fetch_add(counted, std::memory_order_relaxed);
  if (unit_bytes == 0) unsized_read_.fetch_add(counted, std::memory_order_relaxed);
  if (!read || c.done.load() != c.submitted.load()) return;
  c.completed.store(1, std::memory_order_release);
  if (recorder_) recorder_->UnitVerified(unit, ResultOf(c.errors.load(), c.warnings.load()));
}

Status PartialRun::PrepareShard(const Plan& plan, report::RunSummary& sum) {
  std::vector<uint64_t> bytes;
  for (const ReadUnit& u : plan.units) bytes.push_back(u.bytes);
  order_ = UnitsOfShard(bytes, opts_.shard_k, opts_.shard_n);
  for (size_t u : order_) scheduled_bytes_ += views_[u].bytes;
  sum.shard = std::to_string(opts_.shard_k) + "/" + std::to_string(opts_.shard_n);
  return Status::Ok();
}

Status PartialRun::PrepareFinishShards(const Plan& plan, report::RunSummary& sum) {
  finishing_shards_ = true;
  std::map<std::string, size_t> by_key;
  for (size_t u = 0; u < plan.units.size(); ++u) by_key[views_[u].key] = u;
  std::vector<uint32_t> shard_of(plan.units.size(), 0);
  const auto changed = [](const std::string& what) {
    return Status(StatusCode::kRepositoryChanged,
                  what + ": the repository is not as the shards saw it (a backup, prune or compact ran since, or "
                         "the shards were of a copy). Run the shards again");
  };
  uint64_t read = 0;
  for (const engine::ShardResult& s : opts_.finish_shards->shards) {
    for (const std::string& key : s.units) {
      auto it = by_key.find(key);
      if (it == by_key.end()) return changed(fmt::format("shard {}/{} read {}, which is not in the repository now", s.k, s.n, key));
      if (shard_of[it->second]) {
        return Status(StatusCode::kInvalidArgument, fmt::format("shards {} and {} of {} both read {}: they were not "
                                                                "split from the same plan",
                                                                shard_of[it->second], s.k, s.n, key));
      }
      shard_of[it->second] = s.k;
      units_[it->second].read.store(1);
      units_[it->second].completed.store(1);
    }
    if (__builtin_add_overflow(read, s.bytes_read, &read)) {
      return Status(StatusCode::kInvalidArgument, fmt::format("shard {}/{}: its bytes read do not add up", s.k, s.n));
    }
  }
  for (size_t u = 0; u < plan.units.size(); ++u) {
    if (!shard_of[u]) return changed(fmt::format("no shard read {}", views_[u].key));
  }
  bytes_read_.store(read);
  sum.merged_shards = uint32_t(opts_.finish_shards->shards.size());
  return Status::Ok();
}

bool PartialRun::Complete() const {
  if (!wants_all_ || not_due_ || !in_plan_order_ || (!finishing_shards_ && order_.size() != unit_count_)) return false;
  for (size_t u = 0; u < unit_count_; ++u) {
    if (!units_[u].completed.load(std::memory_order_acquire)) return false;
  }
  return true;
}

std::vector<uint8_t> PartialRun::UnitsRead() const {
  std::vector<uint8_t> read(unit_count_);
  for (size_t u = 0; u < unit_count_; ++u) read[u] = units_[u].read.load(std::memory_order_acquire);
  return read;
}

Status PartialRun::Close(report::RunSummary& sum, bool finished, bool stopped_by_signal, double started_unix,
                         bool succeeded) {
  sum.complete = finished && Complete();
  sum.stopped = stopped_by_signal ? "signal" : out_of_time_.load() ? "time-budget" : "";
  if (opts_.max_duration_s > 0) {
    sum.notes.push_back(BudgetNote(opts_.max_duration_s, sum.unit_noun,
                                   reserve_measured_ ? std::optional<double>(reserve_s_) : std::nullopt));
  }
  sum.bytes_total = total_bytes_ + unsized_read_.load();
  sum.bytes_read = std::min(bytes_read_.load(), sum.bytes_total);
  sum.bytes_skipped = sum.bytes_total - sum.bytes_read;
  sum.units_total = units_on_disk_;
  sum.units_not_due = not_due_;
  sum.segments = 0;
  for (size_t u = 0; u < unit_count_; ++u) sum.segments += views_[u].on_disk && units_[u].read.load();
  if (!recorder_) {
    if (sum.complete) {
      sum.has_coverage = true;
      sum.coverage = report::RunSummary::Coverage();
      sum.coverage.ratio = 1.0;
      sum.coverage.units_verified = units_on_disk_;
      sum.coverage.full_verification_at = Now();
      sum.coverage.oldest_verified_at = started_unix;
    }
    return Status::Ok();
  }
  if (finished) {
    // The next budgeted run keeps this back (OutOfTime); under the test clock, the test's value.
    double after = opts_.test_after_reading_s;
    if (opts_.test_budget_s_per_unit <= 0) {
      after = reading_ended_ ? std::chrono::duration<double>(std::chrono::steady_clock::now() - *reading_ended_).count()
                             : 0;
    }
    recorder_->RunFinished(sum.errors, sum.warnings, sum.complete, succeeded, after);
  }
  Status saved = recorder_->Close();
  sum.has_coverage = true;
  sum.coverage = ComputeCoverage(recorder_->Snapshot(), views_, level_, Now(), opts_.max_age_s, slice_objects_,
                                 SlicesT());
  sum.coverage.state_file = recorder_->path();
  return saved;
}

}  // namespace borgcheck::schedule
