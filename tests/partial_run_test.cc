// Partial runs through the whole engine, in-process, for every generation (issue 9):
//   * --subset k/7 for k = 1..7 partitions the objects exactly (pairwise disjoint, union = every
//     object; the manifest in every slice), on a fixture of each generation and on a real borg
//     1.2.4 repository before and after `borg compact` (the same partition: by chunk id, not by
//     segment); each slice reads about 1/7 of the bytes (from the summary);
//   * a time budget (--max-duration, counted in units by the test clock): repeated runs verify every
//     unit once before any is verified again, least recently verified first; a damaged segment
//     found in one run is verified again and reported in the next;
//   * a stop (signal) mid-run: the findings so far and a partial summary, and only completed
//     units marked; a vanished unit: the units before it stay marked, it and later ones not;
//   * the state: corrupt, another repository's, a newer version, an unwritable folder;
//   * --min-interval and --max-age.
// Which objects a run verified is seen through a decorator of the generation's ObjectSource
// that records what each ReadUnit hands the engine (the engine and the generation are the real
// ones).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "checker/base/stop_signal.h"
#include "checker/engine/engine.h"
#include "checker/engine/object_filter.h"
#include "checker/schedule/partial_run.h"
#include "checker/schedule/unit_state.h"
#include "checker/io/fault_env.h"
#include "checker/repo/borg1/borg1_source.h"
#include "checker/repo/borg2b5/borg2b5_source.h"
#include "checker/repo/borgstore/borgstore_source.h"
#include "tests/test_support.h"

namespace borgcheck::testing {
namespace {
namespace fs = std::filesystem;
using engine::ChunkId;
using engine::ObjectFilter;

const ChunkId kManifest{};

// --- a recording decorator ------------------------------------------------------------------

// Shared by the engine's reader and workers (the decorators below) and the test's thread: ids
// and units under mu; blocks_out is atomic.
struct Recorded {
  std::mutex mu;
  std::set<ChunkId> ids;            // live and orphan objects handed over
  std::vector<size_t> units;        // ReadUnit calls, in call order
  std::optional<size_t> stop_at_unit;  // RequestStopFromSignal(15) when this unit's read begins
  // Before this unit's read begins (and before stop_at_unit's stop), wait until every block
  // handed over so far is released, i.e. every object before it is verified and its unit marked:
  // a test that stops a run there then knows exactly which units were done, however slowly the
  // workers ran (a fixed read delay only made that likely).
  std::optional<size_t> settle_at_unit;
  std::shared_ptr<std::atomic<int64_t>> blocks_out = std::make_shared<std::atomic<int64_t>>(0);
};

class RecordingSink final : public engine::UnitSink {
 public:
  RecordingSink(engine::UnitSink& inner, Recorded& rec) : inner_(inner), rec_(rec) {}
  bool Wants(const ChunkId& id) const override { return inner_.Wants(id); }
  bool WantsAll() const override { return inner_.WantsAll(); }
  std::shared_ptr<engine::Block> TakeBlock(uint64_t off, uint64_t n) override { return inner_.TakeBlock(off, n); }
  void Objects(std::shared_ptr<engine::Block> block, std::vector<engine::ObjectRef> refs) override {
    {
      std::lock_guard<std::mutex> lock(rec_.mu);
      for (const engine::ObjectRef& r : refs) {
        if (r.role != engine::ObjectRole::kSuperseded) rec_.ids.insert(r.id);
      }
    }
    // The engine gets the block behind a counted handle: when its last batch lets go, the real
    // block is released first (its unit's mark is then made), and only then is it counted back.
    rec_.blocks_out->fetch_add(1);
    engine::Block* raw = block.get();
    std::shared_ptr<engine::Block> counted(raw, [real = std::move(block), out = rec_.blocks_out](engine::Block*) mutable {
      real.reset();
      out->fetch_sub(1);
    });
    inner_.Objects(std::move(counted), std::move(refs));
  }
  void Finding(report::Finding f, bool object_done) override { inner_.Finding(std::move(f), object_done); }
  void Vanished() override { inner_.Vanished(); }
  bool Stopping() const override { return inner_.Stopping(); }

 private:
  engine::UnitSink& inner_;
  Recorded& rec_;
};

class RecordingSource final : public engine::ObjectSource {
 public:
  RecordingSource(std::unique_ptr<engine::ObjectSource> inner, Recorded& rec) : inner_(std::move(inner)), rec_(rec) {}
  Result<engine::Plan> MakePlan() override { return inner_->MakePlan(); }
  Status LoadKey(engine::Plan& plan) override { return inner_->LoadKey(plan); }
  void FallBackToKeyless() override { inner_->FallBackToKeyless(); }
  std::string ModeName() const override { return inner_->ModeName(); }
  Result<std::unique_ptr<engine::ObjectVerifier>> MakeVerifier() const override { return inner_->MakeVerifier(); }
  void ReadUnit(size_t index, engine::UnitSink& sink) override {
    {
      std::lock_guard<std::mutex> lock(rec_.mu);
      rec_.units.push_back(index);
    }
    if (rec_.settle_at_unit && *rec_.settle_at_unit == index) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      while (rec_.blocks_out->load() != 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }  // (past the deadline the run goes on, and the test's marks say what was not done)
    }
    // A stop as if a signal came the moment this unit's read began (exactly there, whatever
    // the scheduler does: a polling thread could see the unit too late, after it was read).
    if (rec_.stop_at_unit && *rec_.stop_at_unit == index) RequestStopFromSignal(15);
    RecordingSink s(sink, rec_);
    inner_->ReadUnit(index, s);
  }
  bool ChangedSinceStart() const override { return inner_->ChangedSinceStart(); }
  void Finish(engine::FinishContext& ctx) override { inner_->Finish(ctx); }
  io::SecondRead ReadAgain(const engine::ReadUnit& unit, uint64_t offset, Bytes first,
                           ByteBuffer& scratch) const override {
    return inner_->ReadAgain(unit, offset, first, scratch);
  }
  Result<io::FileStat> StatUnit(const engine::ReadUnit& unit) const override { return inner_->StatUnit(unit); }
  unsigned Connections() const override { return inner_->Connections(); }

 private:
  std::unique_ptr<engine::ObjectSource> inner_;
  Recorded& rec_;
};

enum class Gen { kBorg1, kBorg2b5, kBorgstore };

struct Run {
  engine::CheckOutcome out;
  std::set<ChunkId> ids;
  std::vector<size_t> units;
};

Run CheckWith(Gen gen, const engine::CheckOptions& o, const io::Env& env = io::Env::Default(),
              std::optional<size_t> settle_at_unit = std::nullopt) {
  Recorded rec;
  rec.settle_at_unit = settle_at_unit;
  std::unique_ptr<engine::ObjectSource> inner = gen == Gen::kBorg1     ? repo::MakeBorg1Source(o, env)
                                                : gen == Gen::kBorg2b5 ? repo::MakeBorg2b5Source(o, env)
                                                                       : repo::MakeBorgstoreSource(o, env);
  RecordingSource src(std::move(inner), rec);
  Run r;
  r.out = schedule::RunScheduled(src, o, {});
  r.ids = std::move(rec.ids);
  r.units = std::move(rec.units);
  return r;
}

engine::CheckOptions Options(const std::string& repo, bool verify_data = true) {
  engine::CheckOptions o;
  o.repository = repo;
  o.verify_data = verify_data;
  o.threads = 2;
  o.repository_only = true;
  return o;
}

std::string ErrorsOf(const engine::CheckOutcome& o) {
  std::string s = o.status.message();
  for (const report::Finding& f : o.findings) s += "\n" + f.message;
  return s;
}

// The slices k/7 of one repository partition the objects of a full run.
void CheckPartition(Gen gen, const std::string& repo, std::vector<std::set<ChunkId>>* slices = nullptr,
                    std::vector<uint64_t>* bytes_read = nullptr) {
  engine::CheckOptions o = Options(repo);
  Run full = CheckWith(gen, o);
  INFO(repo << ": " << ErrorsOf(full.out));
  REQUIRE(full.out.status.ok());
  REQUIRE(full.out.summary.errors == 0);
  REQUIRE(full.out.summary.complete);
  REQUIRE(full.ids.size() > 10);
  std::set<ChunkId> seen;
  uint64_t verified_sum = 0, read_sum = 0;
  for (uint32_t k = 1; k <= 7; ++k) {
    o.subset_k = k;
    o.subset_t = 7;
    Run part = CheckWith(gen, o);
    INFO("slice " << k << ": " << ErrorsOf(part.out));
    REQUIRE(part.out.status.ok());
    CHECK(part.out.summary.errors == 0);
    CHECK_FALSE(part.out.summary.complete);
    CHECK(part.out.summary.subset == fmt::format("{}/7", k));
    const report::RunSummary& s = part.out.summary;
    CHECK(s.bytes_total == full.out.summary.bytes_total);
    CHECK(s.bytes_read + s.bytes_skipped == s.bytes_total);
    CHECK(s.bytes_read < s.bytes_total);
    CHECK(s.objects_verified == part.ids.size());
    for (const ChunkId& id : part.ids) {
      CHECK(full.ids.count(id) == 1);
      if (id == kManifest) continue;
      CHECK(ObjectFilter::SliceOf(id, 7) == k);
      CHECK(seen.insert(id).second);  // in no earlier slice
    }
    verified_sum += s.objects_verified;
    read_sum += s.bytes_read;
    if (slices) slices->push_back(part.ids);
    if (bytes_read) bytes_read->push_back(s.bytes_read);
  }
  const bool manifest_in_units = full.ids.count(kManifest) == 1;
  if (manifest_in_units) seen.insert(kManifest);
  CHECK(seen == full.ids);
  CHECK(verified_sum == full.ids.size() + (manifest_in_units ? 6 : 0));
  CHECK(read_sum <= full.out.summary.bytes_total + (manifest_in_units ? 6 * 4096 : 0));
}

TEST_CASE("slices 1/7..7/7 partition the objects of borg 1.x and 2.0.0b5 and borg 2 master repositories") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  const std::string shared = SharedDir() + "/fixtures";
  SECTION("borg 1.2.4 repokey") { CheckPartition(Gen::kBorg1, shared + "/borg1/v1.2.4/repos/repokey"); }
  SECTION("borg 1.2.4 none, keyless") {
    // The keyless tier reads the same slices (CRCs only).
    engine::CheckOptions o = Options(shared + "/borg1/v1.2.4/repos/none", false);
    Run full = CheckWith(Gen::kBorg1, o);
    std::set<ChunkId> seen;
    for (uint32_t k = 1; k <= 7; ++k) {
      o.subset_k = k;
      o.subset_t = 7;
      Run part = CheckWith(Gen::kBorg1, o);
      for (const ChunkId& id : part.ids) {
        if (id != kManifest) CHECK(seen.insert(id).second);
      }
    }
    seen.insert(kManifest);
    CHECK(seen == full.ids);
  }
  SECTION("borg 2.0.0b5 repokey-aes-ocb") { CheckPartition(Gen::kBorg2b5, shared + "/borg2b5/repokey-aes-ocb"); }
  SECTION("borg 2 master aes256-ocb_sha256_repokey") {
    CheckPartition(Gen::kBorgstore, shared + "/borg2master/repos/aes256-ocb_sha256_repokey");
  }
}

// --- a real borg 1.2.4 repository, compacted ---------------------------------------------------

int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }

TEST_CASE("the partition is the same after borg compact and each slice reads about 1/7 of the bytes") {
  const fs::path root = fs::temp_directory_path() / fmt::format("borgcheck-compact-{}", ::getpid());
  fs::remove_all(root);
  fs::create_directories(root / "a");
  fs::create_directories(root / "b");
  // 1400 small files of random bytes: one chunk each (below borg's minimum chunk size), so the
  // slices' shares are shares of many similar objects.
  std::mt19937_64 rng(9);
  for (int i = 0; i < 1400; ++i) {
    std::string bytes(1024 + rng() % 3072, '\0');
    for (char& c : bytes) c = char(rng());
    std::ofstream(root / (i < 700 ? "a" : "b") / fmt::format("f{}", i), std::ios::binary) << bytes;
  }
  const std::string repo = (root / "repo").string();
  const std::string borg = fmt::format("cd {} && BORG_BASE_DIR={}/base BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes "
                                       "borg ",
                                       root.string(), root.string());
  REQUIRE(Sh(borg + "init -e none " + repo + " >/dev/null 2>&1") == 0);
  REQUIRE(Sh(borg + "create " + repo + "::one a >/dev/null 2>&1") == 0);
  REQUIRE(Sh(borg + "create " + repo + "::two b >/dev/null 2>&1") == 0);
  std::vector<std::set<ChunkId>> before, after;
  std::vector<uint64_t> bytes_after;
  CheckPartition(Gen::kBorg1, repo, &before);
  Run full_before = CheckWith(Gen::kBorg1, Options(repo));
  REQUIRE(Sh(borg + "delete " + repo + "::one >/dev/null 2>&1") == 0);
  REQUIRE(Sh(borg + "compact " + repo + " >/dev/null 2>&1") == 0);
  CheckPartition(Gen::kBorg1, repo, &after, &bytes_after);
  Run full_after = CheckWith(Gen::kBorg1, Options(repo));
  REQUIRE(full_after.out.status.ok());
  // compact rewrote segments: other units now.
  CHECK(full_after.units.size() > 0);
  CHECK(full_after.ids.size() < full_before.ids.size() - 600);
  for (size_t k = 0; k < 7; ++k) {
    std::set<ChunkId> expected;
    for (const ChunkId& id : before[k]) {
      if (full_after.ids.count(id)) expected.insert(id);
    }
    CHECK(after[k] == expected);
  }
  uint64_t sum = 0;
  for (uint64_t b : bytes_after) sum += b;
  for (uint64_t b : bytes_after) {
    CHECK(double(b) > 0.7 * double(sum) / 7);
    CHECK(double(b) < 1.3 * double(sum) / 7);
  }
  // And against the whole repository (headers, the manifest and the archives' metadata included).
  CHECK(double(sum) > 0.8 * double(full_after.out.summary.bytes_total));
  fs::remove_all(root);
}

// --- time budget and state ---------------------------------------------------------------------

struct StateFolder {
  StateFolder() {
    std::string tmpl = (fs::temp_directory_path() / "borgcheck-state-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()));
    path = tmpl;
  }
  ~StateFolder() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  std::string path;
};

// The one state file under a --state-dir (<id>/<path>/state.json).
std::string StateFileIn(const std::string& base) {
  std::vector<std::string> found;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(base)) {
    if (e.path().filename() == schedule::kStateFileName) found.push_back(e.path().string());
  }
  REQUIRE(found.size() == 1);
  return found[0];
}

schedule::StateFile ReadState(const std::string& path) {
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Result<schedule::StateFile> s = schedule::ParseState(text);
  REQUIRE(s.ok());
  return *s;
}

// The time budget's tests count units, not time (CheckOptions::test_budget_s_per_unit): a
// budget of N seconds at 1 s a unit starts exactly N units, whatever the machine's speed.
TEST_CASE("a time budget verifies every unit once before any is verified again and oldest first") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy repo(Borg1Fixtures() + "/v1.2.4/repos/repokey");
  StateFolder state;
  const io::Env& disk = io::Env::Default();
  engine::CheckOptions o = Options(repo.path());
  o.state_dir = state.path;
  o.max_duration_s = 4;
  o.test_budget_s_per_unit = 1;
  // What the schedule must read next, from the state: units never verified in plan order, then
  // the rest by their mark's time, oldest first (ties by plan order). The order of marks within
  // one run is when each unit's verification finished (on workers): not fixed, so the test
  // derives it from the state rather than from the order the units were read.
  auto expected_next = [](const std::string& state_file, size_t units_total) {
    std::vector<std::tuple<int, double, size_t>> due;
    std::vector<uint8_t> marked(units_total);
    if (!state_file.empty()) {
      const schedule::StateFile st = ReadState(state_file);
      for (const auto& [key, u] : st.units) {
        REQUIRE(key.rfind("segment ", 0) == 0);
        const size_t seg = std::stoul(key.substr(8));
        REQUIRE(seg < units_total);  // this fixture's segments are 0..29: plan index = segment
        if (!u.data) continue;
        marked[seg] = 1;
        due.emplace_back(1, u.data->at, seg);
      }
    }
    for (size_t i = 0; i < units_total; ++i) {
      if (!marked[i]) due.emplace_back(0, 0.0, i);
    }
    std::sort(due.begin(), due.end());
    std::vector<size_t> order;
    for (const auto& d : due) order.push_back(std::get<2>(d));
    return order;
  };
  std::vector<size_t> sequence;  // units read, run after run
  std::string state_file;
  const size_t units_total = 30;
  size_t runs = 0;
  while (runs < 40) {
    const std::vector<size_t> want = expected_next(state_file, units_total);
    Run r = CheckWith(Gen::kBorg1, o, disk);
    ++runs;
    INFO("run " << runs << ": " << ErrorsOf(r.out));
    REQUIRE(r.out.status.ok());
    REQUIRE(r.out.state_status.ok());
    REQUIRE(r.out.summary.units_total == units_total);
    state_file = r.out.summary.coverage.state_file;
    CHECK(r.out.summary.errors == 0);
    CHECK(r.out.summary.has_coverage);
    CHECK(r.out.summary.segments == r.units.size());
    REQUIRE(r.units.size() == 4);  // exactly the budget, in every run
    CHECK(r.units == std::vector<size_t>(want.begin(), want.begin() + 4));
    sequence.insert(sequence.end(), r.units.begin(), r.units.end());
    CHECK_FALSE(r.out.summary.complete);
    CHECK(r.out.summary.stopped == "time-budget");
    if (r.out.summary.coverage.units_never_verified == 0) break;
  }
  REQUIRE(runs == 8);  // 7 runs of 4 new units, then 2 new and the 2 oldest
  REQUIRE(sequence.size() == 32);
  // The first 30 reads are every unit once, in plan order (never verified: plan order).
  for (size_t i = 0; i < units_total; ++i) CHECK(sequence[i] == i);
  // Then the least recently verified, again and again.
  for (int more = 0; more < 3; ++more) {
    const std::vector<size_t> want = expected_next(state_file, units_total);
    Run next = CheckWith(Gen::kBorg1, o, disk);
    REQUIRE(next.out.status.ok());
    REQUIRE(next.units.size() == 4);
    CHECK(next.units == std::vector<size_t>(want.begin(), want.begin() + 4));
    // The least recently verified are the first run's units, the second's, ...
    for (size_t u : next.units) CHECK(u < 4 * size_t(more + 2));
  }
  const schedule::StateFile st = ReadState(state_file);
  CHECK(st.units.size() == units_total);
  REQUIRE(st.full_data.has_value());
  CHECK(st.full_data->clean);
}

TEST_CASE("a damaged segment found in one partial run is verified again and reported in the next") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy repo(Borg1Fixtures() + "/corrupt/mac-repokey");  // segment 2, offset 8: MAC
  StateFolder state;
  const io::Env& disk = io::Env::Default();
  engine::CheckOptions o = Options(repo.path());
  o.state_dir = state.path;
  o.max_duration_s = 2;  // two units a run (the test clock, above)
  o.test_budget_s_per_unit = 1;
  o.max_age_s = 30 * 86400;
  // The first runs read the never verified segments in plan order: the second reaches segment 2.
  Run first = CheckWith(Gen::kBorg1, o, disk);
  REQUIRE(first.out.status.ok());
  CHECK(first.units == std::vector<size_t>{0, 1});
  CHECK(first.out.summary.errors == 0);
  Run one = CheckWith(Gen::kBorg1, o, disk);
  REQUIRE(one.out.status.ok());
  REQUIRE(one.units == std::vector<size_t>{2, 3});
  REQUIRE(one.out.summary.errors == 1);
  CHECK(one.out.findings[0].segment == 2u);
  for (int run = 0; run < 3; ++run) {
    Run again = CheckWith(Gen::kBorg1, o, disk);
    REQUIRE(again.out.status.ok());
    REQUIRE(!again.units.empty());
    CHECK(again.units[0] == 2);  // units with findings first, every run
    CHECK(std::count(again.units.begin(), again.units.end(), size_t(0)) == 0);  // clean, within --max-age
    REQUIRE(again.out.summary.errors == 1);
    CHECK(again.out.findings[0].segment == 2u);
    CHECK(again.out.findings[0].stage == report::Stage::kAuthentication);
  }
  const schedule::StateFile st =
      ReadState(one.out.summary.coverage.state_file);
  REQUIRE(st.units.count("segment 2"));
  REQUIRE(st.units.at("segment 2").data.has_value());
  CHECK(st.units.at("segment 2").data->result == schedule::UnitResult::kErrors);
  CHECK(st.units.at("segment 0").data->result == schedule::UnitResult::kClean);
}

TEST_CASE("a time budget keeps back what the last run's finish and archive pass took") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy repo(Borg1Fixtures() + "/v1.2.4/repos/repokey");
  StateFolder state;
  const io::Env& disk = io::Env::Default();
  engine::CheckOptions o = Options(repo.path());
  o.state_dir = state.path;
  o.max_duration_s = 5;
  o.test_budget_s_per_unit = 1;
  o.test_after_reading_s = 2;  // what each run records as its finish and archive pass
  auto budget_note = [](const Run& r) {
    for (const std::string& n : r.out.summary.notes) {
      if (n.find("time budget") != std::string::npos) return n;
    }
    return std::string();
  };
  // Nothing measured yet: the whole budget reads, and the note says the rest comes on top.
  Run first = CheckWith(Gen::kBorg1, o, disk);
  REQUIRE(first.out.status.ok());
  CHECK(first.units.size() == 5);
  CHECK(budget_note(first).find("nothing has measured the finish and the archive pass yet") != std::string::npos);
  schedule::StateFile st = ReadState(first.out.summary.coverage.state_file);
  REQUIRE(st.after_reading_data_s.has_value());
  CHECK(*st.after_reading_data_s == 2);
  CHECK_FALSE(st.after_reading_crc_s.has_value());
  // 2 s kept back: 3 units.
  Run second = CheckWith(Gen::kBorg1, o, disk);
  REQUIRE(second.out.status.ok());
  CHECK(second.units.size() == 3);
  CHECK(budget_note(second).find("the reading stops 2.00s early, kept back for the finish and the archive pass") !=
        std::string::npos);
  // The last archive pass took more than the whole budget: one unit, and the advice.
  o.test_after_reading_s = 9;
  Run third = CheckWith(Gen::kBorg1, o, disk);  // records 9
  CHECK(third.units.size() == 3);
  Run fourth = CheckWith(Gen::kBorg1, o, disk);
  REQUIRE(fourth.out.status.ok());
  CHECK(fourth.units.size() == 1);
  CHECK(budget_note(fourth).find("more than the whole budget: this run reads one segment; raise --max-duration") !=
        std::string::npos);
  // The real clock records what passed after the reading.
  o.test_budget_s_per_unit = 0;
  o.test_after_reading_s = 0;
  o.max_duration_s = 3600;
  Run real = CheckWith(Gen::kBorg1, o, disk);
  REQUIRE(real.out.status.ok());
  st = ReadState(real.out.summary.coverage.state_file);
  REQUIRE(st.after_reading_data_s.has_value());
  CHECK(*st.after_reading_data_s < 9);
  CHECK(*st.after_reading_data_s >= 0);
}

TEST_CASE("a stop mid-run reports the findings so far and marks only units read whole") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy repo(Borg1Fixtures() + "/corrupt/mac-repokey");
  StateFolder state;
  io::FaultEnv slow;
  slow.DelayReads(std::chrono::milliseconds(20));
  engine::CheckOptions o = Options(repo.path());
  o.state_dir = state.path;
  Recorded rec;
  rec.settle_at_unit = 5;  // segments 0..4 verified, then
  rec.stop_at_unit = 5;    // stop once segment 5 is being read (segment 2, the damaged one, was verified before)
  RecordingSource src(repo::MakeBorg1Source(o, slow), rec);
  engine::CheckOutcome out = schedule::RunScheduled(src, o, {});
  TEST_ResetStopSignal();
  CHECK(out.stop_signal == 15);
  CHECK(out.status.code() == StatusCode::kInterrupted);
  REQUIRE(out.partial_report);
  CHECK_FALSE(out.summary.complete);
  CHECK(out.summary.stopped == "signal");
  REQUIRE(out.summary.errors == 1);  // the MAC failure in segment 2, found before the stop
  CHECK(out.findings[0].segment == 2u);
  CHECK(out.summary.objects_verified < out.summary.objects_total);
  const schedule::StateFile st = ReadState(out.summary.coverage.state_file);
  // Segments 0..4 were read whole; 5 was cut short by the stop; none after it was started. (Every
  // unit on disk has a record from the start of the run, its seen_at; only those read have a mark.)
  std::set<std::string> marked;
  for (const auto& [key, u] : st.units) {
    if (u.data) marked.insert(key);
  }
  CHECK(marked == std::set<std::string>{"segment 0", "segment 1", "segment 2", "segment 3", "segment 4"});
  CHECK(st.units.size() == 30);
  CHECK(st.units.at("segment 2").data->result == schedule::UnitResult::kErrors);
  CHECK_FALSE(st.last_run_at.has_value());  // a stopped run is not a finished run
}

TEST_CASE("a unit that vanishes mid-run is not marked but the units read before it are") {
  RepoCopy repo(Borg1Fixtures() + "/v1.2.4/repos/none");
  StateFolder state;
  io::FaultEnv env;
  env.VanishAfterOpens("/data/0/29", 1);  // opened while planning, gone when its turn comes
  engine::CheckOptions o = Options(repo.path(), false);
  o.state_dir = state.path;
  Run r = CheckWith(Gen::kBorg1, o, env, 29);  // segments 0..28 verified before 29's turn
  REQUIRE(r.out.status.code() == StatusCode::kRepositoryChanged);
  const schedule::StateFile st = ReadState(r.out.summary.coverage.state_file);
  std::set<std::string> marked;
  for (const auto& [key, u] : st.units) {
    if (u.crc) marked.insert(key);
  }
  // Segment 29 is not marked; the ones before it are.
  std::set<std::string> expected;
  for (uint32_t n = 0; n < 29; ++n) expected.insert("segment " + std::to_string(n));
  CHECK(marked == expected);
}

TEST_CASE("the state: corrupt or another repository's or a newer version or an unwritable folder or locked") {
  RepoCopy repo(Borg1Fixtures() + "/v1.2.4/repos/none");
  StateFolder state;
  engine::CheckOptions o = Options(repo.path(), false);
  o.state_dir = state.path;
  Run first = CheckWith(Gen::kBorg1, o);
  REQUIRE(first.out.status.ok());
  const std::string id = first.out.summary.repository_id;
  REQUIRE(id.size() == 64);
  const std::string file = first.out.summary.coverage.state_file;
  REQUIRE(file == state.path + "/" + id + "/" + schedule::StateFolderName(schedule::CanonicalRepositoryPath(repo.path())) +
                      "/" + schedule::kStateFileName);
  REQUIRE(fs::exists(file));
  CHECK(first.out.warnings.empty());

  SECTION("corrupt: set aside, the run starts from an empty state and saves a new one") {
    std::ofstream(file, std::ios::trunc) << "{\"borgcheck_state\": 1, \"repository_id\": tru";
    Run r = CheckWith(Gen::kBorg1, o);
    REQUIRE(r.out.status.ok());
    REQUIRE(r.out.warnings.size() == 1);
    CHECK_THAT(r.out.warnings[0], Catch::Contains("is corrupt (not valid JSON)") &&
                                      Catch::Contains("set aside as " + file + ".corrupt") &&
                                      Catch::Contains("every unit counts as unverified"));
    CHECK(fs::exists(file + ".corrupt"));
    CHECK(r.out.summary.complete);
    CHECK(r.out.state_status.ok());
    CHECK(ReadState(file).units.size() == r.out.summary.units_total);
  }
  SECTION("another repository's: refused") {
    schedule::StateFile other = ReadState(file);
    other.repository_id = std::string(64, 'a');
    std::ofstream(file, std::ios::trunc) << schedule::FormatState(other);
    Run r = CheckWith(Gen::kBorg1, o);
    REQUIRE(r.out.status.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.out.status.message(), Catch::Contains("belongs to repository " + std::string(64, 'a') + ", not to " + id) &&
                                           Catch::Contains("refused"));
    CHECK(r.units.empty());  // nothing was read
  }
  SECTION("a newer version: refused") {
    std::ofstream(file, std::ios::trunc) << "{\"borgcheck_state\": 3, \"repository_id\": \"" << id << "\"}";
    Run r = CheckWith(Gen::kBorg1, o);
    REQUIRE(r.out.status.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.out.status.message(), Catch::Contains("written by a newer borgcheck (state version 3; this "
                                                       "borgcheck reads version 2): refused"));
  }
  SECTION("a folder that cannot be created: the check runs, the state error is reported") {
    o.state_dir = "/proc/borgcheck-no-such-state";
    Run r = CheckWith(Gen::kBorg1, o);
    REQUIRE(r.out.status.ok());
    CHECK(r.out.summary.complete);
    REQUIRE(r.out.warnings.size() == 1);
    CHECK_THAT(r.out.warnings[0], Catch::Contains("cannot create the state folder /proc/borgcheck-no-such-state"));
    CHECK_FALSE(r.out.state_status.ok());
  }
  SECTION("another run holds the state: refused") {
    Result<schedule::StateDir::Opened> held =
        schedule::StateDir::Open(state.path, id, schedule::CanonicalRepositoryPath(repo.path()));
    REQUIRE(held.ok());
    Run r = CheckWith(Gen::kBorg1, o);
    REQUIRE(r.out.status.code() == StatusCode::kIoError);
    CHECK_THAT(r.out.status.message(), Catch::Contains("another borgcheck run is using the state"));
  }
}

TEST_CASE("max-age leaves out what was verified within it and min-interval skips a run") {
  RepoCopy repo(Borg1Fixtures() + "/v1.2.4/repos/none");
  StateFolder state;
  engine::CheckOptions o = Options(repo.path(), false);
  o.state_dir = state.path;
  o.now_unix = 1800000000;
  Run first = CheckWith(Gen::kBorg1, o);
  REQUIRE(first.out.status.ok());
  CHECK(first.out.summary.complete);
  CHECK(first.out.summary.coverage.full_verification_at >= 1800000000);

  o.max_age_s = 10 * 86400;
  o.now_unix = 1800000000 + 5 * 86400;
  Run within = CheckWith(Gen::kBorg1, o);
  REQUIRE(within.out.status.ok());
  CHECK(within.units.empty());
  CHECK(within.out.summary.units_not_due == 30);
  CHECK_FALSE(within.out.summary.complete);
  CHECK(within.out.summary.coverage.ratio == 1.0);

  o.now_unix = 1800000000 + 11 * 86400;
  Run older = CheckWith(Gen::kBorg1, o);
  CHECK(older.units.size() == 30);
  CHECK(older.out.summary.complete);

  o.max_age_s = 0;
  o.min_interval_s = 7 * 86400;
  o.now_unix = 1800000000 + 12 * 86400;
  Run skipped = CheckWith(Gen::kBorg1, o);
  REQUIRE(skipped.out.status.ok());
  CHECK(skipped.out.summary.skipped);
  CHECK(skipped.units.empty());
  o.now_unix = 1800000000 + 19 * 86400;
  Run due = CheckWith(Gen::kBorg1, o);
  CHECK_FALSE(due.out.summary.skipped);
  CHECK(due.units.size() == 30);
}

TEST_CASE("min-interval never skips while something is known to be wrong") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy repo(Borg1Fixtures() + "/corrupt/mac-repokey");
  StateFolder state;
  engine::CheckOptions o = Options(repo.path());
  o.state_dir = state.path;
  o.min_interval_s = 7 * 86400;
  Run first = CheckWith(Gen::kBorg1, o);
  REQUIRE(first.out.summary.errors == 1);
  Run second = CheckWith(Gen::kBorg1, o);
  CHECK_FALSE(second.out.summary.skipped);
  CHECK(second.out.summary.errors == 1);
}

TEST_CASE("min-interval never skips while a unit's mark is not clean (a signal-stopped run saves marks, no last run)") {
  // Regression: --min-interval looked only at the last full verification and the last finished
  // run. A run stopped by a signal saves the marks of the units it finished (some with errors)
  // but no `last_run`, so the next run inside the interval skipped although damage was known.
  RepoCopy repo(Borg1Fixtures() + "/v1.2.4/repos/none");
  StateFolder state;
  engine::CheckOptions o = Options(repo.path(), false);
  o.state_dir = state.path;
  o.now_unix = 1800000000;
  Run first = CheckWith(Gen::kBorg1, o);
  REQUIRE(first.out.status.ok());
  REQUIRE(first.out.summary.complete);
  const std::string file = first.out.summary.coverage.state_file;
  schedule::StateFile st = ReadState(file);
  REQUIRE_FALSE(st.units.empty());
  schedule::UnitRecord& u = st.units.begin()->second;
  REQUIRE(u.crc.has_value());
  u.crc->result = schedule::UnitResult::kErrors;  // what the stopped run marked
  std::ofstream(file, std::ios::trunc) << schedule::FormatState(st);

  o.min_interval_s = 7 * 86400;
  o.now_unix = 1800000000 + 86400;
  Run next = CheckWith(Gen::kBorg1, o);
  REQUIRE(next.out.status.ok());
  CHECK_FALSE(next.out.summary.skipped);
  CHECK(next.units.size() == 30);

  // Once that unit is clean again (the run just now verified it), the interval skips.
  o.now_unix = 1800000000 + 2 * 86400;
  Run after = CheckWith(Gen::kBorg1, o);
  CHECK(after.out.summary.skipped);
  CHECK(after.units.empty());
}

TEST_CASE("slices with a state mark a unit verified once every slice of it is done, and each later slice renews it") {
  RepoCopy repo(Borg1Fixtures() + "/v1.2.4/repos/none");
  StateFolder state;
  engine::CheckOptions o = Options(repo.path(), false);
  o.state_dir = state.path;
  o.subset_t = 3;
  const double day = 86400, t0 = 1800000000;
  for (uint32_t k = 1; k <= 3; ++k) {
    o.subset_k = k;
    o.now_unix = t0 + k * day;
    Run r = CheckWith(Gen::kBorg1, o);
    REQUIRE(r.out.status.ok());
    CHECK_FALSE(r.out.summary.complete);
    CHECK(r.out.summary.coverage.units_verified == (k < 3 ? 0u : 30u));
    CHECK((r.out.summary.coverage.full_verification_at > 0) == (k == 3));
  }
  const schedule::StateFile st = ReadState(StateFileIn(state.path));
  for (const auto& [key, u] : st.units) {
    REQUIRE(u.crc.has_value());
    CHECK(u.crc->by_slices);
    CHECK(u.crc->at == Approx(t0 + day).margin(60));  // as of its oldest slice
    CHECK(u.slices.size() == 3);                      // kept for the rolling window
  }
  // The next rotation's slice 1, three days later: every unit is now verified as of slice 2
  // (the oldest slice since), so coverage within 3 days stays whole instead of dropping.
  o.subset_k = 1;
  o.now_unix = t0 + 4 * day;
  o.max_age_s = 3 * day;
  Run again = CheckWith(Gen::kBorg1, o);
  REQUIRE(again.out.status.ok());
  CHECK(again.units.size() == 30);  // a slice run leaves nothing out for --max-age
  CHECK(again.out.summary.coverage.units_verified == 30u);
  CHECK(again.out.summary.coverage.ratio == 1.0);
  const schedule::StateFile after = ReadState(again.out.summary.coverage.state_file);
  for (const auto& [key, u] : after.units) {
    REQUIRE(u.crc.has_value());
    CHECK(u.crc->at == Approx(t0 + 2 * day).margin(60));
    CHECK(u.crc->done_at == Approx(t0 + 4 * day).margin(60));
  }
}

}  // namespace
}  // namespace borgcheck::testing
