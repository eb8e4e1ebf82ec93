// engine::RunEngine driven directly by a fake generation: a FakeSource whose units are real
// temporary files (read through the io::Env the run is given, so io::FaultEnv can flip a byte on
// the Nth read or make a file vanish) and a FakeVerifier under which an object passes when its
// bytes hash (FNV-1a) to its id. Each case asserts exact findings (stage, severity, location,
// chunk id, message, reread) and summary counters for: the three second-read outcomes and the
// unreadable second read, object roles, in-order and worker-read units, the budget of bytes in
// flight (never exceeded by an in-order reader, never waited on by a worker), a stop request,
// "repository changed", progress, a verifier that cannot be made, exceptions in a task, and
// identical results at 1, 2, 8 and 64 threads.
//
// Labels "unit;concurrency": ci/tsan runs this binary under ThreadSanitizer. A run that does not
// return within kDeadline is reported as a deadlock and ends the process (RunWithin), so a hang
// fails the test instead of the CI job's timeout.
//
// The stop cases set the process-wide stop request (base/stop_signal.h) and clear it with
// TEST_ResetStopSignal() through a guard, so every case can run in one process (as the binary
// does when started by hand) or in its own (as CTest runs each discovered case).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "checker/base/stop_signal.h"
#include "checker/engine/engine.h"
#include "checker/io/env.h"
#include "checker/io/fault_env.h"
#include "checker/schedule/partial_run.h"

namespace borgcheck::engine {
namespace {

namespace fs = std::filesystem;
using report::Finding;
using report::Location;
using report::Reread;
using report::Severity;
using report::Stage;

constexpr auto kDeadline = std::chrono::seconds(300);
const unsigned kThreadCounts[] = {1, 2, 8, 64};

const std::string kHashMismatch = "bytes do not hash to the id";
const std::string kPassedSuffix = "; the second read verified (a transient read error?)";
const std::string kSupersededSuffix = " (in a superseded entry: no current object is affected)";
const std::string kOrphanSuffix = " (an object in no index fragment)";
constexpr size_t kFileHeader = 8;  // "FAKEUNIT" at the start of every unit file

uint64_t Fnv1a(Bytes b) {
  uint64_t h = 14695981039346656037ull;
  for (uint8_t c : b) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t IdHash(const ChunkId& id) {
  uint64_t h = 0;
  for (int i = 7; i >= 0; --i) h = (h << 8) | id[size_t(i)];
  return h;
}

// ---- the fake repository ------------------------------------------------------------------------

struct FakeObject {
  ChunkId id{};  // [0, 8): FNV-1a of the intact bytes (little endian); [8, 12): its number
  uint64_t offset = 0;  // in its unit's file
  uint32_t size = 0;
  ObjectRole role = ObjectRole::kLive;
  bool warning = false;  // the verifier's verdict for it is a warning (first byte 'W')
};

struct ObjectSpec {
  uint32_t size = 1000;
  ObjectRole role = ObjectRole::kLive;
  bool warning = false;
};

struct FakeUnit {
  std::string path;
  uint64_t size = 0;
  std::vector<FakeObject> objects;
};

// Unit files in a fresh temporary folder, removed on destruction.
class FakeRepo {
 public:
  explicit FakeRepo(const std::vector<std::vector<ObjectSpec>>& units) {
    std::string tmpl = (fs::temp_directory_path() / "borgcheck-engine-test-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir_ = tmpl;
    uint32_t number = 0;
    for (size_t u = 0; u < units.size(); ++u) {
      FakeUnit unit;
      unit.path = dir_ + "/unit" + std::to_string(u);
      std::ofstream f(unit.path, std::ios::binary);
      f.write("FAKEUNIT", kFileHeader);
      uint64_t offset = kFileHeader;
      for (const ObjectSpec& spec : units[u]) {
        std::vector<uint8_t> bytes(spec.size);
        for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(number * 131 + i * 7 + (i >> 8));
        if (!bytes.empty()) bytes[0] = spec.warning ? 'W' : 'O';
        FakeObject o;
        uint64_t h = Fnv1a(Bytes(bytes.data(), bytes.size()));
        for (int i = 0; i < 8; ++i) o.id[size_t(i)] = uint8_t(h >> (8 * i));
        for (int i = 0; i < 4; ++i) o.id[size_t(8 + i)] = uint8_t(number >> (8 * i));
        for (size_t i = 12; i < o.id.size(); ++i) o.id[i] = 0xee;
        o.offset = offset;
        o.size = spec.size;
        o.role = spec.role;
        o.warning = spec.warning;
        f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        offset += spec.size;
        unit.objects.push_back(o);
        ++number;
      }
      unit.size = offset;
      units_.push_back(std::move(unit));
    }
  }
  ~FakeRepo() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  FakeRepo(const FakeRepo&) = delete;
  FakeRepo& operator=(const FakeRepo&) = delete;

  const std::vector<FakeUnit>& units() const { return units_; }
  const FakeUnit& unit(size_t u) const { return units_.at(u); }
  const FakeObject& object(size_t u, size_t i) const { return units_.at(u).objects.at(i); }
  // The file offset of byte `byte` of object i of unit u.
  uint64_t At(size_t u, size_t i, uint64_t byte = 10) const { return object(u, i).offset + byte; }

  // Damage on disk: the byte is flipped in the file (every read sees it).
  void Damage(size_t u, size_t i, uint64_t byte = 10) {
    std::fstream f(unit(u).path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(At(u, i, byte)));
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x20);
    f.seekp(std::streamoff(At(u, i, byte)));
    f.write(&c, 1);
  }

  uint64_t TotalBytes() const {
    uint64_t n = 0;
    for (const FakeUnit& u : units_) n += u.size;
    return n;
  }
  // Objects that count (live and orphans), and their stored bytes.
  uint64_t Counted() const {
    uint64_t n = 0;
    for (const FakeUnit& u : units_) {
      for (const FakeObject& o : u.objects) n += o.role != ObjectRole::kSuperseded;
    }
    return n;
  }
  uint64_t CountedBytes() const {
    uint64_t n = 0;
    for (const FakeUnit& u : units_) {
      for (const FakeObject& o : u.objects) n += o.role != ObjectRole::kSuperseded ? o.size : 0;
    }
    return n;
  }

 private:
  std::string dir_;
  std::vector<FakeUnit> units_;
};

// Units of `count` objects of `size` bytes each.
std::vector<std::vector<ObjectSpec>> Uniform(size_t units, size_t count, uint32_t size = 1000) {
  return std::vector<std::vector<ObjectSpec>>(units, std::vector<ObjectSpec>(count, ObjectSpec{size}));
}

// ---- the fake generation ------------------------------------------------------------------------

enum class Blocks { kPerUnit, kPerObject };

struct SourceConfig {
  bool in_order = true;
  uint64_t in_flight_per_thread = 1ull << 20;
  Blocks blocks = Blocks::kPerUnit;
  // Hooks, called on the thread that runs the phase.
  std::function<void(size_t unit, UnitSink& sink)> before_unit;
  std::function<Status()> load_key;
  int fail_verifier_at = -1;          // the MakeVerifier call (0-based) that fails
  std::optional<ChunkId> throw_on;    // the verifier throws std::runtime_error on this object
  std::optional<ChunkId> throw_int_on;  // ... and `throw 42` on this one
  std::optional<size_t> throw_in_unit;  // ReadUnit throws on this unit
  std::optional<size_t> lost_object;  // unit 0's object with this index is reported lost
  bool changed = false;               // ChangedSinceStart
  bool finish_finding = false;        // Finish adds one finding
  bool manifest_failed_later = false;
  std::chrono::microseconds verify_delay{0};
  std::vector<Finding> plan_findings;
};

// Shared by the source and its verifiers; safe for concurrent use.
struct Counters {
  std::atomic<uint64_t> verified_bytes{0};  // bytes of objects whose Verify returned
  std::atomic<uint64_t> verify_calls{0};
};

class FakeVerifier final : public ObjectVerifier {
 public:
  FakeVerifier(const SourceConfig& cfg, Counters& counters) : cfg_(cfg), counters_(counters) {}

  std::optional<Verdict> Verify(Bytes stored, const ObjectRef& ref) override {
    counters_.verify_calls.fetch_add(1);
    if (cfg_.throw_on && ref.id == *cfg_.throw_on) throw std::runtime_error("fake verifier: boom");
    if (cfg_.throw_int_on && ref.id == *cfg_.throw_int_on) throw 42;
    if (cfg_.verify_delay.count() > 0) std::this_thread::sleep_for(cfg_.verify_delay);
    std::optional<Verdict> out;
    if (stored.size() != ref.size || Fnv1a(stored) != IdHash(ref.id)) {
      out = Verdict{Stage::kIdHash, kHashMismatch, Severity::kError};
    } else if (!stored.empty() && stored[0] == 'W') {
      out = Verdict{Stage::kDecompression, "a fake warning", Severity::kWarning};
    } else {
      // The "plaintext": the stored bytes twice, so plaintext_bytes differs from stored_bytes.
      plaintext_.Resize(2 * stored.size());
      std::copy(stored.begin(), stored.end(), plaintext_.data());
      std::copy(stored.begin(), stored.end(), plaintext_.data() + stored.size());
    }
    counters_.verified_bytes.fetch_add(stored.size());
    return out;
  }
  Bytes plaintext() const override { return plaintext_.view(); }

 private:
  const SourceConfig& cfg_;
  Counters& counters_;
  ByteBuffer plaintext_;
};

class FakeSource final : public EnvUnitSource {
 public:
  FakeSource(const FakeRepo& repo, const SourceConfig& cfg, const io::Env& env)
      : EnvUnitSource(env), repo_(repo), cfg_(cfg), reads_(repo.units().size()), read_threads_(repo.units().size()) {}

  Result<Plan> MakePlan() override {
    Plan plan;
    plan.in_order = cfg_.in_order;
    plan.in_flight_per_thread = cfg_.in_flight_per_thread;
    plan.format = "fake";
    plan.unit_noun = "blob file";
    plan.live_list_source = "fake-list";
    plan.transaction = 7;
    plan.notes = {"a planning note"};
    plan.findings = cfg_.plan_findings;
    for (size_t u = 0; u < repo_.units().size(); ++u) {
      Location where = cfg_.in_order ? Location::Segment(uint32_t(u)) : Location::Item("fake/u" + std::to_string(u));
      plan.units.push_back({where, repo_.unit(u).path, repo_.unit(u).size});
    }
    plan.objects_total = repo_.Counted();
    return plan;
  }

  Status LoadKey(Plan& plan) override {
    key_loaded_ = true;
    plan.notes.push_back("key: fake");
    return cfg_.load_key ? cfg_.load_key() : Status::Ok();
  }
  std::string ModeName() const override { return key_loaded_ && !fell_back_ ? "fake-mode" : ""; }
  void FallBackToKeyless() override { fell_back_ = true; }
  bool fell_back() const { return fell_back_; }

  Result<std::unique_ptr<ObjectVerifier>> MakeVerifier() const override {
    if (int(verifiers_made_++) == cfg_.fail_verifier_at) {
      return Status(StatusCode::kInternal, "cannot make a fake verifier");
    }
    return std::unique_ptr<ObjectVerifier>(new FakeVerifier(cfg_, counters_));
  }

  void ReadUnit(size_t index, UnitSink& sink) override {
    reads_[index].fetch_add(1);
    read_threads_[index] = std::this_thread::get_id();
    if (cfg_.before_unit) cfg_.before_unit(index, sink);
    if (cfg_.throw_in_unit == index) throw std::runtime_error("fake source: unit " + std::to_string(index) + " exploded");
    if (sink.Stopping()) return;
    const FakeUnit& unit = repo_.unit(index);
    const Location where = cfg_.in_order ? Location::Segment(uint32_t(index)) : Location::Item("fake/u" + std::to_string(index));
    Result<std::unique_ptr<io::File>> f = env_.Open(unit.path);
    if (!f.ok()) {
      if (f.status().code() == StatusCode::kNotFound) {
        sink.Vanished();
        return;
      }
      sink.Finding(report::MakeFinding(Severity::kError, Stage::kMissing, where, nullptr, f.status().message()));
      return;
    }
    const io::File& file = **f;
    auto wanted = [&](size_t i) {
      return !(index == 0 && cfg_.lost_object == i) && sink.Wants(unit.objects[i].id);
    };
    auto ref_of = [&](const FakeObject& o, uint64_t pos) {
      ObjectRef r;
      r.id = o.id;
      r.pos = pos;
      r.file_offset = o.offset;
      r.size = o.size;
      r.role = o.role;
      return r;
    };
    if (index == 0 && cfg_.lost_object) {
      const FakeObject& o = unit.objects.at(*cfg_.lost_object);
      sink.Finding(report::MakeFinding(Severity::kError, Stage::kMissing, where.At(o.offset), &o.id, "fake: lost"),
                   /*object_done=*/true);
    }
    if (cfg_.blocks == Blocks::kPerUnit) {
      std::shared_ptr<Block> block = TakeBlock(sink, 0, unit.size);
      if (!file.ReadAt(0, unit.size, block->data.data()).ok()) return;
      std::vector<ObjectRef> refs;
      for (size_t i = 0; i < unit.objects.size(); ++i) {
        if (wanted(i)) refs.push_back(ref_of(unit.objects[i], unit.objects[i].offset));
      }
      sink.Objects(std::move(block), std::move(refs));
      return;
    }
    for (size_t i = 0; i < unit.objects.size() && !sink.Stopping(); ++i) {
      if (!wanted(i)) continue;
      const FakeObject& o = unit.objects[i];
      std::shared_ptr<Block> block = TakeBlock(sink, o.offset, o.size);
      if (!file.ReadAt(o.offset, o.size, block->data.data()).ok()) return;
      sink.Objects(std::move(block), {ref_of(o, 0)});
    }
  }

  bool ChangedSinceStart() const override { return cfg_.changed; }

  void Finish(FinishContext& ctx) override {
    finish_calls_++;
    finish_verifiers_ = ctx.verifiers.size();
    for (ObjectVerifier* v : ctx.verifiers) finish_all_fake_ &= dynamic_cast<FakeVerifier*>(v) != nullptr;
    if (cfg_.finish_finding) {
      ctx.findings.Add(report::MakeFinding(Severity::kWarning, Stage::kIndex, Location::Item("fake-index"), nullptr,
                                           "a finding of Finish"));
    }
    if (cfg_.manifest_failed_later) ctx.ManifestFailedLater();
    ctx.summary.notes.push_back("a note of Finish");
  }

  // What the run did (read after RunEngine returned).
  int reads(size_t u) const { return reads_[u].load(); }
  std::thread::id read_thread(size_t u) const { return read_threads_[u]; }
  unsigned verifiers_made() const { return verifiers_made_; }
  int finish_calls() const { return finish_calls_; }
  size_t finish_verifiers() const { return finish_verifiers_; }
  bool finish_all_fake() const { return finish_all_fake_; }
  uint64_t budget_violations() const { return budget_violations_.load(); }
  uint64_t max_ahead() const { return max_ahead_.load(); }
  uint64_t budget_limit() const { return budget_limit_; }
  void set_budget_limit(uint64_t limit) { budget_limit_ = limit; }
  Counters& counters() const { return counters_; }

 private:
  // Takes a block and checks the budget: bytes taken and not yet verified can never be more
  // than the budget (or than this one block, which is let through alone when it is larger). A
  // block is released only after every object in it was verified, so taken - verified is at
  // most taken - released, what the budget bounds.
  std::shared_ptr<Block> TakeBlock(UnitSink& sink, uint64_t offset, uint64_t n) {
    std::shared_ptr<Block> b = sink.TakeBlock(offset, n);
    const uint64_t taken = taken_.fetch_add(n) + n;
    const uint64_t verified = counters_.verified_bytes.load();
    const uint64_t ahead = taken > verified ? taken - verified : 0;
    uint64_t seen = max_ahead_.load();
    while (ahead > seen && !max_ahead_.compare_exchange_weak(seen, ahead)) {
    }
    if (budget_limit_ && cfg_.in_order && ahead > std::max(budget_limit_, n)) budget_violations_.fetch_add(1);
    return b;
  }

  const FakeRepo& repo_;
  const SourceConfig& cfg_;
  bool key_loaded_ = false;
  bool fell_back_ = false;
  mutable unsigned verifiers_made_ = 0;  // main thread only
  mutable Counters counters_;
  std::vector<std::atomic<int>> reads_;         // element u: the thread reading unit u
  std::vector<std::thread::id> read_threads_;   // element u: the thread reading unit u
  std::atomic<uint64_t> taken_{0};
  std::atomic<uint64_t> max_ahead_{0};
  std::atomic<uint64_t> budget_violations_{0};
  uint64_t budget_limit_ = 0;
  int finish_calls_ = 0;
  size_t finish_verifiers_ = 0;
  bool finish_all_fake_ = true;
};

// ---- running ------------------------------------------------------------------------------------

// Runs `fn` on a thread of its own and waits at most kDeadline for it: a run that does not
// return has deadlocked, and the process ends with a message (its threads cannot be unwound).
template <typename Fn>
auto RunWithin(Fn fn) -> decltype(fn()) {
  using R = decltype(fn());
  auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
  std::future<R> result = task->get_future();
  std::thread t([task] { (*task)(); });
  if (result.wait_for(kDeadline) != std::future_status::ready) {
    std::fprintf(stderr, "FAIL: RunEngine did not return within %lld s: a deadlock\n",
                 static_cast<long long>(kDeadline.count()));
    std::fflush(stderr);
    std::_Exit(3);
  }
  t.join();
  return result.get();
}

struct Run {
  CheckOutcome out;
  std::thread::id caller;  // the thread that called RunEngine
};

Run RunFake(FakeSource& source, unsigned threads, const ProgressCallback& progress = nullptr, bool verify_data = true) {
  CheckOptions opts;
  opts.repository = "/fake/repository";
  opts.verify_data = verify_data;
  opts.threads = threads;
  return RunWithin([&] {
    Run r;
    r.caller = std::this_thread::get_id();
    r.out = schedule::RunScheduled(source, opts, progress);
    return r;
  });
}

std::string Hex(const ChunkId& id) { return report::ChunkIdHex(id); }

std::string Describe(const Finding& f) {
  return std::string(report::SeverityName(f.severity)) + " " + std::string(report::StageName(f.stage)) + " " +
         report::LocationSuffix(f) + " " + (f.chunk_id ? Hex(*f.chunk_id) : std::string("-")) + " " + f.message +
         " reread=" + std::string(report::RereadName(f.reread));
}

std::vector<std::string> DescribeAll(const CheckOutcome& o) {
  std::vector<std::string> v;
  for (const Finding& f : o.findings) v.push_back(Describe(f));
  return v;
}

// Every summary field but elapsed time and the thread count.
std::vector<std::string> SummaryFields(const report::RunSummary& s) {
  std::vector<std::string> v = {"format " + s.format,
                                "mode " + s.mode,
                                "unit_noun " + s.unit_noun,
                                "live_list_source " + s.live_list_source,
                                "transaction " + std::to_string(s.transaction),
                                "segments " + std::to_string(s.segments),
                                "objects_total " + std::to_string(s.objects_total),
                                "objects_verified " + std::to_string(s.objects_verified),
                                "stored_bytes " + std::to_string(s.stored_bytes),
                                "plaintext_bytes " + std::to_string(s.plaintext_bytes),
                                "bytes_read " + std::to_string(s.bytes_read),
                                "errors " + std::to_string(s.errors),
                                "warnings " + std::to_string(s.warnings)};
  for (const std::string& n : s.notes) v.push_back("note " + n);
  return v;
}

std::vector<uint64_t> StageCounts(const report::RunSummary& s) {
  return std::vector<uint64_t>(s.findings_by_stage.begin(), s.findings_by_stage.end());
}

// Checks one object finding field by field.
void CheckObjectFinding(const Finding& f, Severity severity, Stage stage, const Location& unit_location,
                        const FakeObject& o, const std::string& message, Reread reread) {
  INFO(Describe(f));
  CHECK(f.severity == severity);
  CHECK(f.stage == stage);
  CHECK(f.segment == unit_location.segment);
  CHECK(f.location == unit_location.item);
  CHECK(f.offset == std::optional<uint64_t>(o.offset));
  REQUIRE(f.chunk_id);
  CHECK(*f.chunk_id == o.id);
  CHECK(f.message == message);
  CHECK(f.reread == reread);
}

Location UnitLocation(bool in_order, size_t u) {
  return in_order ? Location::Segment(uint32_t(u)) : Location::Item("fake/u" + std::to_string(u));
}

// Clears the process-wide stop request when the case ends, however it ends.
struct StopGuard {
  StopGuard() { TEST_ResetStopSignal(); }
  ~StopGuard() { TEST_ResetStopSignal(); }
};

// ---- cases --------------------------------------------------------------------------------------

TEST_CASE("engine: a clean run verifies every object, in-order units on the caller, others on workers",
          "[engine]") {
  FakeRepo repo(Uniform(4, 5));
  for (bool in_order : {true, false}) {
    for (unsigned threads : kThreadCounts) {
      INFO((in_order ? "in order" : "on workers") << ", threads " << threads);
      SourceConfig cfg;
      cfg.in_order = in_order;
      FakeSource source(repo, cfg, io::Env::Default());
      Run r = RunFake(source, threads);
      REQUIRE(r.out.status.ok());
      CHECK(r.out.stop_signal == 0);
      CHECK(r.out.findings.empty());
      const report::RunSummary& s = r.out.summary;
      CHECK(s.repository == "/fake/repository");
      CHECK(s.verify_data);
      CHECK(s.threads == threads);
      CHECK(SummaryFields(s) == std::vector<std::string>{
                                    "format fake", "mode fake-mode", "unit_noun blob file", "live_list_source fake-list",
                                    "transaction 7", "segments 4", "objects_total 20", "objects_verified 20",
                                    "stored_bytes 20000", "plaintext_bytes 40000",
                                    "bytes_read " + std::to_string(repo.TotalBytes()), "errors 0", "warnings 0",
                                    "note a planning note", "note key: fake", "note a note of Finish"});
      CHECK(StageCounts(s) == std::vector<uint64_t>(report::kStageCount, 0));
      CHECK(source.counters().verify_calls.load() == 20);
      CHECK(source.verifiers_made() == threads);  // one per worker
      CHECK(source.finish_calls() == 1);
      CHECK(source.finish_verifiers() == threads);
      CHECK(source.finish_all_fake());
      for (size_t u = 0; u < 4; ++u) {
        CHECK(source.reads(u) == 1);
        if (in_order) {
          CHECK(source.read_thread(u) == r.caller);
        } else {
          CHECK(source.read_thread(u) != r.caller);
        }
      }
    }
  }
}

TEST_CASE("engine: keyless runs load no key and name no mode", "[engine]") {
  FakeRepo repo(Uniform(2, 3));
  SourceConfig cfg;
  FakeSource source(repo, cfg, io::Env::Default());
  Run r = RunFake(source, 2, nullptr, /*verify_data=*/false);
  REQUIRE(r.out.status.ok());
  CHECK(r.out.summary.mode.empty());
  CHECK_FALSE(r.out.summary.verify_data);
  CHECK(r.out.summary.notes == std::vector<std::string>{"a planning note", "a note of Finish"});
  CHECK(r.out.summary.objects_verified == 6);
}

TEST_CASE("engine: the second read, agreed / differed / passed / not-reread, in order and on workers",
          "[engine]") {
  for (bool in_order : {true, false}) {
    INFO((in_order ? "in order" : "on workers"));
    const Location unit1 = UnitLocation(in_order, 1);
    {  // bytes damaged on disk: error, agreed
      FakeRepo repo(Uniform(3, 5));
      repo.Damage(1, 3);
      io::FaultEnv env;
      SourceConfig cfg;
      cfg.in_order = in_order;
      FakeSource source(repo, cfg, env);
      Run r = RunFake(source, 2);
      REQUIRE(r.out.status.ok());
      REQUIRE(r.out.findings.size() == 1);
      CheckObjectFinding(r.out.findings[0], Severity::kError, Stage::kIdHash, unit1,
                         repo.object(1, 3), kHashMismatch, Reread::kAgreed);
      CHECK(env.Reads(repo.unit(1).path) == 2);  // the unit, then the object again
      CHECK(env.Reads(repo.unit(0).path) == 1);
      CHECK(r.out.summary.objects_verified == 14);
      CHECK(r.out.summary.stored_bytes == 14000);
      CHECK(r.out.summary.errors == 1);
      CHECK(r.out.summary.warnings == 0);
      CHECK(r.out.summary.findings_by_stage[size_t(Stage::kIdHash)] == 1);
    }
    {  // a byte flipped on the first read only: a warning, passed, and the object counts as verified
      FakeRepo repo(Uniform(3, 5));
      io::FaultEnv env;
      env.FlipOnRead(repo.unit(1).path, repo.At(1, 3), 1);
      SourceConfig cfg;
      cfg.in_order = in_order;
      FakeSource source(repo, cfg, env);
      Run r = RunFake(source, 2);
      REQUIRE(r.out.status.ok());
      REQUIRE(r.out.findings.size() == 1);
      CheckObjectFinding(r.out.findings[0], Severity::kWarning, Stage::kIdHash, unit1, repo.object(1, 3),
                         kHashMismatch + kPassedSuffix, Reread::kPassed);
      CHECK(env.Reads(repo.unit(1).path) == 2);
      CHECK(r.out.summary.objects_verified == 15);
      CHECK(r.out.summary.stored_bytes == 15000);
      CHECK(r.out.summary.plaintext_bytes == 30000);
      CHECK(r.out.summary.errors == 0);
      CHECK(r.out.summary.warnings == 1);
    }
    {  // other bad bytes on the second read: error, differed
      FakeRepo repo(Uniform(3, 5));
      io::FaultEnv env;
      env.FlipOnRead(repo.unit(1).path, repo.At(1, 3), 1, 0x01);
      env.FlipOnRead(repo.unit(1).path, repo.At(1, 3), 2, 0x02);
      SourceConfig cfg;
      cfg.in_order = in_order;
      FakeSource source(repo, cfg, env);
      Run r = RunFake(source, 2);
      REQUIRE(r.out.status.ok());
      REQUIRE(r.out.findings.size() == 1);
      CheckObjectFinding(r.out.findings[0], Severity::kError, Stage::kIdHash, unit1, repo.object(1, 3), kHashMismatch,
                         Reread::kDiffered);
      CHECK(env.Reads(repo.unit(1).path) == 2);
      CHECK(r.out.summary.objects_verified == 14);
    }
    {  // flipped on every read: error, agreed
      FakeRepo repo(Uniform(3, 5));
      io::FaultEnv env;
      env.FlipOnRead(repo.unit(1).path, repo.At(1, 3), 0);
      SourceConfig cfg;
      cfg.in_order = in_order;
      FakeSource source(repo, cfg, env);
      Run r = RunFake(source, 2);
      REQUIRE(r.out.status.ok());
      REQUIRE(r.out.findings.size() == 1);
      CheckObjectFinding(r.out.findings[0], Severity::kError, Stage::kIdHash, unit1, repo.object(1, 3), kHashMismatch,
                         Reread::kAgreed);
    }
    {  // the file cannot be opened again: error, not-reread, and the run still finishes
      FakeRepo repo(Uniform(3, 5));
      repo.Damage(1, 3);
      io::FaultEnv env;
      env.VanishAfterOpens(repo.unit(1).path, 1);  // the source's open is the last that works
      SourceConfig cfg;
      cfg.in_order = in_order;
      FakeSource source(repo, cfg, env);
      Run r = RunFake(source, 2);
      REQUIRE(r.out.status.ok());
      REQUIRE(r.out.findings.size() == 1);
      CheckObjectFinding(r.out.findings[0], Severity::kError, Stage::kIdHash, unit1, repo.object(1, 3), kHashMismatch,
                         Reread::kNotReread);
      CHECK(env.Reads(repo.unit(1).path) == 1);
      CHECK(r.out.summary.objects_verified == 14);
    }
  }
}

TEST_CASE("engine: object roles: superseded entries are warnings and not counted, orphans count", "[engine]") {
  // unit 0: live, superseded (damaged), superseded (clean), orphan (damaged), orphan (clean),
  // a live object whose verdict is a warning, live (flipped on the first read), superseded
  // (flipped on the first read)
  std::vector<std::vector<ObjectSpec>> units = {{{1000}, {1000, ObjectRole::kSuperseded}, {1000, ObjectRole::kSuperseded},
                                                 {1000, ObjectRole::kOrphan}, {1000, ObjectRole::kOrphan},
                                                 {1000, ObjectRole::kLive, true}, {1000},
                                                 {1000, ObjectRole::kSuperseded}}};
  for (bool in_order : {true, false}) {
    INFO((in_order ? "in order" : "on workers"));
    FakeRepo repo(units);
    repo.Damage(0, 1);
    repo.Damage(0, 3);
    io::FaultEnv env;
    env.FlipOnRead(repo.unit(0).path, repo.At(0, 6), 1);
    env.FlipOnRead(repo.unit(0).path, repo.At(0, 7), 1);
    SourceConfig cfg;
    cfg.in_order = in_order;
    FakeSource source(repo, cfg, env);
    Run r = RunFake(source, 3);
    REQUIRE(r.out.status.ok());
    const Location u0 = UnitLocation(in_order, 0);
    REQUIRE(r.out.findings.size() == 5);  // sorted by offset
    CheckObjectFinding(r.out.findings[0], Severity::kWarning, Stage::kIdHash, u0, repo.object(0, 1),
                       kHashMismatch + kSupersededSuffix, Reread::kAgreed);
    CheckObjectFinding(r.out.findings[1], Severity::kError, Stage::kIdHash, u0, repo.object(0, 3),
                       kHashMismatch + kOrphanSuffix, Reread::kAgreed);
    CheckObjectFinding(r.out.findings[2], Severity::kWarning, Stage::kDecompression, u0, repo.object(0, 5),
                       "a fake warning", Reread::kAgreed);
    CheckObjectFinding(r.out.findings[3], Severity::kWarning, Stage::kIdHash, u0, repo.object(0, 6),
                       kHashMismatch + kPassedSuffix, Reread::kPassed);
    CheckObjectFinding(r.out.findings[4], Severity::kWarning, Stage::kIdHash, u0, repo.object(0, 7),
                       kHashMismatch + kSupersededSuffix + kPassedSuffix, Reread::kPassed);
    const report::RunSummary& s = r.out.summary;
    CHECK(s.objects_total == 5);  // the plan's: live and orphans
    // verified: live 0, orphan 4, live 6 (passed on the second read); not the damaged orphan, not
    // the object with a warning verdict, never a superseded entry
    CHECK(s.objects_verified == 3);
    CHECK(s.stored_bytes == 3000);
    CHECK(s.plaintext_bytes == 6000);
    CHECK(s.errors == 1);
    CHECK(s.warnings == 4);
    CHECK(source.counters().verify_calls.load() == 8 + 2);  // every object; the two whose second read differed again
  }
}

TEST_CASE("engine: findings of planning, reading and Finish come out sorted, one wording", "[engine]") {
  FakeRepo repo(Uniform(3, 4));
  repo.Damage(2, 1);
  repo.Damage(0, 3);
  SourceConfig cfg;
  cfg.plan_findings.push_back(report::MakeFinding(Severity::kWarning, Stage::kSegment, Location::Segment(1), nullptr,
                                                  "a planning finding"));
  cfg.finish_finding = true;
  cfg.lost_object = 1;
  FakeSource source(repo, cfg, io::Env::Default());
  Run r = RunFake(source, 2);
  REQUIRE(r.out.status.ok());
  const std::string hex01 = Hex(repo.object(0, 1).id), hex03 = Hex(repo.object(0, 3).id),
                    hex21 = Hex(repo.object(2, 1).id);
  CHECK(DescribeAll(r.out) ==
        std::vector<std::string>{
            "error missing [segment 0, offset " + std::to_string(repo.object(0, 1).offset) + "] " + hex01 +
                " fake: lost reread=not-reread",
            "error id-hash [segment 0, offset " + std::to_string(repo.object(0, 3).offset) + "] " + hex03 + " " +
                kHashMismatch + " reread=agreed",
            "warning segment [segment 1] - a planning finding reread=not-reread",
            "error id-hash [segment 2, offset " + std::to_string(repo.object(2, 1).offset) + "] " + hex21 + " " +
                kHashMismatch + " reread=agreed",
            "warning index [fake-index] - a finding of Finish reread=not-reread"});
  CHECK(r.out.summary.errors == 3);
  CHECK(r.out.summary.warnings == 2);
  CHECK(r.out.summary.findings_by_stage[size_t(Stage::kMissing)] == 1);
  CHECK(r.out.summary.findings_by_stage[size_t(Stage::kIdHash)] == 2);
  CHECK(r.out.summary.findings_by_stage[size_t(Stage::kSegment)] == 1);
  CHECK(r.out.summary.findings_by_stage[size_t(Stage::kIndex)] == 1);
  CHECK(r.out.summary.objects_total == 12);
  CHECK(r.out.summary.objects_verified == 9);  // not the lost one, not the two damaged ones
}

TEST_CASE("engine: a manifest that fails a later check no longer counts as verified", "[engine]") {
  FakeRepo repo(Uniform(1, 3));
  SourceConfig cfg;
  cfg.manifest_failed_later = true;
  FakeSource source(repo, cfg, io::Env::Default());
  Run r = RunFake(source, 1);
  REQUIRE(r.out.status.ok());
  CHECK(r.out.summary.objects_verified == 2);
  CHECK(r.out.summary.objects_total == 3);
}

TEST_CASE("engine: an in-order reader never has more than the budget in flight, and a block larger than "
          "the budget still goes through",
          "[engine][budget]") {
  // 16 MiB budget (kMinInFlight: 1 thread x 1 MiB is less); 8 blocks of 3 MiB and one of 18 MiB.
  std::vector<ObjectSpec> objects(8, ObjectSpec{3u << 20});
  objects.insert(objects.begin() + 4, ObjectSpec{18u << 20});
  FakeRepo repo({objects});
  for (unsigned threads : {1u, 2u}) {
    INFO("threads " << threads);
    SourceConfig cfg;
    cfg.blocks = Blocks::kPerObject;
    cfg.verify_delay = std::chrono::milliseconds(5);  // the reader would run ahead of the workers
    FakeSource source(repo, cfg, io::Env::Default());
    source.set_budget_limit(kMinInFlight);
    Run r = RunFake(source, threads);
    REQUIRE(r.out.status.ok());
    CHECK(r.out.findings.empty());
    CHECK(r.out.summary.objects_verified == 9);
    CHECK(source.budget_violations() == 0);
    // The large block waits until nothing else is in flight (all of it verified), then it alone
    // is ahead: exactly its size, the most there ever was.
    CHECK(source.max_ahead() == (18u << 20));
  }
}

TEST_CASE("engine: units read on workers never wait for the budget (a unit larger than the budget)",
          "[engine][budget]") {
  // Unit 0 is larger than the 16 MiB budget: it is reserved whole with nothing else in flight.
  // If its reader took its blocks from the budget too, it would wait for its own reservation.
  std::vector<std::vector<ObjectSpec>> units = {{ObjectSpec{17u << 20}}, {ObjectSpec{1u << 20}, ObjectSpec{1u << 20}},
                                                {ObjectSpec{1u << 20}}, {ObjectSpec{5u << 20}, ObjectSpec{9u << 20}}};
  FakeRepo repo(units);
  for (unsigned threads : {1u, 2u, 8u}) {
    for (Blocks blocks : {Blocks::kPerObject, Blocks::kPerUnit}) {
      INFO("threads " << threads);
      SourceConfig cfg;
      cfg.in_order = false;
      cfg.blocks = blocks;
      FakeSource source(repo, cfg, io::Env::Default());
      Run r = RunFake(source, threads);
      REQUIRE(r.out.status.ok());
      CHECK(r.out.findings.empty());
      CHECK(r.out.summary.objects_verified == 6);
      for (size_t u = 0; u < units.size(); ++u) CHECK(source.read_thread(u) != r.caller);
    }
  }
}

TEST_CASE("engine: no more units are read at once than the store has connections", "[engine][io]") {
  // Eight units read on workers; the reads of each overlap (a 20 ms wait at their start), so
  // with more connections than one they would be seen side by side.
  FakeRepo repo(Uniform(8, 3));
  for (unsigned connections : {1u, 2u}) {
    INFO("connections " << connections);
    SourceConfig cfg;
    cfg.in_order = false;
    std::atomic<int> active{0}, most{0};
    cfg.before_unit = [&](size_t, UnitSink&) {
      const int now = active.fetch_add(1) + 1;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      active.fetch_sub(1);
    };
    io::FaultEnv env;
    env.SetConnections(connections);
    FakeSource source(repo, cfg, env);
    CHECK(source.Connections() == connections);
    Run r = RunFake(source, 4);
    REQUIRE(r.out.status.ok());
    CHECK(r.out.summary.objects_verified == 24);
    CHECK(most.load() >= 1);
    CHECK(most.load() <= int(connections));
  }
}

TEST_CASE("engine: an in-order reader names each later unit once, two ahead (Env::OpenAhead), workers none",
          "[engine][io]") {
  FakeRepo repo(Uniform(5, 2));
  for (bool in_order : {true, false}) {
    INFO((in_order ? "in order" : "on workers"));
    SourceConfig cfg;
    cfg.in_order = in_order;
    io::FaultEnv env;
    FakeSource source(repo, cfg, env);
    Run r = RunFake(source, 2);
    REQUIRE(r.out.status.ok());
    CHECK(r.out.summary.objects_verified == 10);
    std::vector<std::string> expected;
    if (in_order) {
      for (size_t u = 1; u < 5; ++u) expected.push_back(repo.unit(u).path);
    }
    CHECK(env.OpenAheads() == expected);
  }
}

TEST_CASE("engine: a stop request ends the run without a verdict (kInterrupted)", "[engine][stop]") {
  StopGuard guard;
  SECTION("in order: the units after the request are not read, Finish is not called") {
    FakeRepo repo(Uniform(5, 3));
    SourceConfig cfg;
    bool stopping_seen = false;
    cfg.before_unit = [&](size_t u, UnitSink& sink) {
      if (u == 2) {
        RequestStopFromSignal(SIGTERM);
        stopping_seen = sink.Stopping();
      }
    };
    FakeSource source(repo, cfg, io::Env::Default());
    Run r = RunFake(source, 2);
    CHECK(r.out.status.code() == StatusCode::kInterrupted);
    CHECK(r.out.status.message() == "stopped by signal 15 before the check finished");
    CHECK(r.out.stop_signal == SIGTERM);
    CHECK(stopping_seen);  // the source is told at once
    CHECK(r.out.findings.empty());
    CHECK(source.reads(0) == 1);
    CHECK(source.reads(1) == 1);
    CHECK(source.reads(2) == 1);
    CHECK(source.reads(3) == 0);
    CHECK(source.reads(4) == 0);
    CHECK(source.finish_calls() == 0);
  }
  SECTION("on workers") {
    FakeRepo repo(Uniform(20, 3));
    SourceConfig cfg;
    cfg.in_order = false;
    cfg.before_unit = [](size_t u, UnitSink&) {
      if (u == 1) RequestStopFromSignal(SIGINT);
    };
    FakeSource source(repo, cfg, io::Env::Default());
    Run r = RunFake(source, 4);
    CHECK(r.out.status.code() == StatusCode::kInterrupted);
    CHECK(r.out.stop_signal == SIGINT);
    CHECK(source.finish_calls() == 0);
  }
  SECTION("while the key is unlocked: the source's own kInterrupted names the signal") {
    FakeRepo repo(Uniform(2, 3));
    SourceConfig cfg;
    cfg.load_key = [] {
      RequestStopFromSignal(SIGINT);
      return Status(StatusCode::kInterrupted, "stopped by a signal while unlocking the key");
    };
    FakeSource source(repo, cfg, io::Env::Default());
    Run r = RunFake(source, 2);
    CHECK(r.out.status.code() == StatusCode::kInterrupted);
    CHECK(r.out.status.message() == "stopped by signal 2 before the check finished");
    CHECK(r.out.stop_signal == SIGINT);
    CHECK(source.reads(0) == 0);
    CHECK(source.verifiers_made() == 0);
  }
}

TEST_CASE("engine: a unit that vanished, or a new transaction: repository changed, no verdict", "[engine]") {
  const std::string changed =
      "repository changed during check (a blob file vanished or a new transaction was committed): no verdict. "
      "Run again when borg is not writing to it";
  SECTION("in order: a unit file is gone when it is read") {
    FakeRepo repo(Uniform(5, 3));
    repo.Damage(0, 1);
    io::FaultEnv env;
    env.VanishAfterOpens(repo.unit(2).path, 0);
    SourceConfig cfg;
    FakeSource source(repo, cfg, env);
    Run r = RunFake(source, 2);
    CHECK(r.out.status.code() == StatusCode::kRepositoryChanged);
    CHECK(r.out.status.message() == changed);
    // No verdict. What the workers had found before the change is kept (the partial report);
    // whether unit 0's damage was verified before they saw the change and stopped is timing.
    REQUIRE(r.out.findings.size() <= 1);
    for (const Finding& f : r.out.findings) {
      CheckObjectFinding(f, Severity::kError, Stage::kIdHash, Location::Segment(0), repo.object(0, 1), kHashMismatch,
                         Reread::kAgreed);
    }
    CHECK(source.reads(2) == 1);
    CHECK(source.reads(3) == 0);
    CHECK(source.finish_calls() == 0);
  }
  SECTION("on workers") {
    FakeRepo repo(Uniform(6, 3));
    io::FaultEnv env;
    env.VanishAfterOpens(repo.unit(4).path, 0);
    SourceConfig cfg;
    cfg.in_order = false;
    FakeSource source(repo, cfg, env);
    Run r = RunFake(source, 3);
    CHECK(r.out.status.code() == StatusCode::kRepositoryChanged);
    CHECK(r.out.status.message() == changed);
    CHECK(source.finish_calls() == 0);
  }
  SECTION("the source saw a new transaction") {
    FakeRepo repo(Uniform(2, 3));
    SourceConfig cfg;
    cfg.changed = true;
    FakeSource source(repo, cfg, io::Env::Default());
    Run r = RunFake(source, 2);
    CHECK(r.out.status.code() == StatusCode::kRepositoryChanged);
    CHECK(source.reads(0) == 1);
    CHECK(source.reads(1) == 1);
    CHECK(source.finish_calls() == 0);
  }
}

// Progress records, collected from the progress thread.
struct ProgressLog {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<report::Progress, bool>> records;  // guarded by mu
  ProgressCallback Callback() {
    return [this](const report::Progress& p, bool final) {
      {
        std::lock_guard<std::mutex> lock(mu);
        records.emplace_back(p, final);
      }
      cv.notify_all();
    };
  }
};

TEST_CASE("engine: progress: bytes and objects only grow, never past the totals, and the final record carries "
          "the totals",
          "[engine][progress]") {
  for (bool in_order : {true, false}) {
    INFO((in_order ? "in order" : "on workers"));
    FakeRepo repo(Uniform(6, 50, 200));
    repo.Damage(3, 7);
    SourceConfig cfg;
    cfg.in_order = in_order;
    cfg.lost_object = 4;  // reported lost: still one object done
    cfg.verify_delay = std::chrono::microseconds(1500);  // about 0.45 s at 1 thread: intermediate records
    FakeSource source(repo, cfg, io::Env::Default());
    ProgressLog log;
    Run r = RunFake(source, 1, log.Callback());
    REQUIRE(r.out.status.ok());
    std::lock_guard<std::mutex> lock(log.mu);
    REQUIRE(log.records.size() >= 2);
    uint64_t bytes = 0, objects = 0;
    for (size_t i = 0; i < log.records.size(); ++i) {
      const report::Progress& p = log.records[i].first;
      INFO("record " << i << ": " << p.bytes_done << "/" << p.bytes_total << " bytes, " << p.objects_done << "/"
                     << p.objects_total << " objects");
      CHECK(log.records[i].second == (i + 1 == log.records.size()));  // only the last is final
      CHECK(p.bytes_total == repo.TotalBytes());
      CHECK(p.objects_total == 300);
      CHECK(p.bytes_done <= p.bytes_total);
      CHECK(p.objects_done <= p.objects_total);
      CHECK(p.bytes_done >= bytes);
      CHECK(p.objects_done >= objects);
      bytes = p.bytes_done;
      objects = p.objects_done;
    }
    const report::Progress& last = log.records.back().first;
    CHECK(last.bytes_done == repo.TotalBytes());
    CHECK(last.objects_done == 300);
    CHECK(r.out.summary.bytes_read == repo.TotalBytes());
    CHECK(r.out.summary.objects_verified == 298);
  }
}

TEST_CASE("engine: progress credits a unit with at most its own size", "[engine][progress]") {
  // Unit 0's plan size is 100 bytes but its one block accounts for the whole file (4008 bytes):
  // progress must count 100 for it. Unit 1's reader waits until progress shows unit 0 done.
  FakeRepo repo(Uniform(2, 4));
  ProgressLog log;
  std::optional<report::Progress> seen;
  SourceConfig cfg;
  cfg.before_unit = [&](size_t u, UnitSink&) {
    if (u != 1) return;
    std::unique_lock<std::mutex> lock(log.mu);
    log.cv.wait_for(lock, std::chrono::seconds(60), [&] {
      return !log.records.empty() && log.records.back().first.bytes_done >= 100;
    });
    if (!log.records.empty()) seen = log.records.back().first;
  };
  // A source whose plan under-states unit 0.
  class Understated final : public ObjectSource {
   public:
    explicit Understated(FakeSource& inner) : inner_(inner) {}
    Result<Plan> MakePlan() override {
      Result<Plan> p = inner_.MakePlan();
      if (p.ok()) p->units[0].bytes = 100;
      return p;
    }
    Status LoadKey(Plan& plan) override { return inner_.LoadKey(plan); }
    void FallBackToKeyless() override { inner_.FallBackToKeyless(); }
    std::string ModeName() const override { return inner_.ModeName(); }
    Result<std::unique_ptr<ObjectVerifier>> MakeVerifier() const override { return inner_.MakeVerifier(); }
    void ReadUnit(size_t index, UnitSink& sink) override { inner_.ReadUnit(index, sink); }
    io::SecondRead ReadAgain(const engine::ReadUnit& unit, uint64_t offset, Bytes first, ByteBuffer& scratch) const override {
      return inner_.ReadAgain(unit, offset, first, scratch);
    }
    Result<io::FileStat> StatUnit(const engine::ReadUnit& unit) const override { return inner_.StatUnit(unit); }
    void Finish(FinishContext& ctx) override { inner_.Finish(ctx); }

   private:
    FakeSource& inner_;
  };
  FakeSource inner(repo, cfg, io::Env::Default());
  Understated source(inner);
  CheckOptions opts;
  opts.repository = "/fake/repository";
  opts.verify_data = true;
  opts.threads = 2;
  ProgressCallback cb = log.Callback();
  CheckOutcome out = RunWithin([&] { return schedule::RunScheduled(source, opts, cb); });
  REQUIRE(out.status.ok());
  REQUIRE(seen);
  CHECK(seen->bytes_done == 100);
  CHECK(seen->bytes_total == 100 + repo.unit(1).size);
  CHECK(out.summary.bytes_read == 100 + repo.unit(1).size);
  std::lock_guard<std::mutex> lock(log.mu);
  CHECK(log.records.back().first.bytes_done == 100 + repo.unit(1).size);
}

TEST_CASE("engine: a verifier that cannot be made stops the run before anything is read (kInternal)",
          "[engine]") {
  for (int fail_at : {0, 1, 7}) {
    INFO("MakeVerifier call " << fail_at << " fails");
    FakeRepo repo(Uniform(2, 3));
    SourceConfig cfg;
    cfg.fail_verifier_at = fail_at;
    FakeSource source(repo, cfg, io::Env::Default());
    Run r = RunFake(source, 8);
    CHECK(r.out.status.code() == StatusCode::kInternal);
    CHECK(r.out.status.message() == "cannot make a fake verifier");
    CHECK(source.verifiers_made() == unsigned(fail_at + 1));
    CHECK(source.reads(0) == 0);
    CHECK(source.finish_calls() == 0);
  }
}

TEST_CASE("engine: an exception in a task or a reader ends the run with kInternal, without a hang",
          "[engine]") {
  for (bool in_order : {true, false}) {
    for (unsigned threads : kThreadCounts) {
      INFO((in_order ? "in order" : "on workers") << ", threads " << threads);
      FakeRepo repo(Uniform(6, 8));
      {  // the verifier throws
        SourceConfig cfg;
        cfg.in_order = in_order;
        cfg.throw_on = repo.object(2, 5).id;
        FakeSource source(repo, cfg, io::Env::Default());
        Run r = RunFake(source, threads);
        CHECK(r.out.status.code() == StatusCode::kInternal);
        CHECK(r.out.status.message() == "internal error: fake verifier: boom");
        CHECK(r.out.findings.empty());
        CHECK(source.finish_calls() == 0);
      }
      {  // the unit reader throws
        SourceConfig cfg;
        cfg.in_order = in_order;
        cfg.throw_in_unit = 3;
        FakeSource source(repo, cfg, io::Env::Default());
        Run r = RunFake(source, threads);
        CHECK(r.out.status.code() == StatusCode::kInternal);
        CHECK(r.out.status.message() == "internal error: fake source: unit 3 exploded");
        CHECK(source.finish_calls() == 0);
      }
      {  // the verifier throws something that is not a std::exception
        SourceConfig cfg;
        cfg.in_order = in_order;
        cfg.throw_int_on = repo.object(4, 0).id;
        FakeSource source(repo, cfg, io::Env::Default());
        Run r = RunFake(source, threads);
        CHECK(r.out.status.code() == StatusCode::kInternal);
        CHECK(r.out.status.message() == "internal error: an exception that is not a std::exception");
        CHECK(source.finish_calls() == 0);
      }
    }
  }
}

TEST_CASE("engine: identical sorted findings and summaries at 1, 2, 8 and 64 threads", "[engine][threads]") {
  // Three units of many small objects (several batches each), one of a few large ones; damage
  // on disk, first-read flips, a differing second read, superseded entries and orphans.
  std::vector<std::vector<ObjectSpec>> units;
  for (int u = 0; u < 3; ++u) {
    std::vector<ObjectSpec> objs;
    for (int i = 0; i < 600; ++i) {
      ObjectSpec s{uint32_t(100 + (i * 37) % 900)};
      if (i % 97 == 5) s.role = ObjectRole::kSuperseded;
      if (i % 131 == 7) s.role = ObjectRole::kOrphan;
      if (i % 211 == 11) s.warning = true;
      objs.push_back(s);
    }
    units.push_back(objs);
  }
  units.push_back({ObjectSpec{300000}, ObjectSpec{700000}, ObjectSpec{5000}});
  FakeRepo repo(units);
  for (size_t i : {3u, 5u, 7u, 300u, 599u}) repo.Damage(1, i);
  repo.Damage(3, 1);
  auto faults = [&](io::FaultEnv& env) {
    env.FlipOnRead(repo.unit(0).path, repo.At(0, 42), 1);
    env.FlipOnRead(repo.unit(2).path, repo.At(2, 5), 1);  // a superseded entry
    env.FlipOnRead(repo.unit(2).path, repo.At(2, 400), 1, 0x01);
    env.FlipOnRead(repo.unit(2).path, repo.At(2, 400), 2, 0x02);
    env.FlipOnRead(repo.unit(3).path, repo.At(3, 0, 299999), 1);
  };
  for (bool in_order : {true, false}) {
    for (Blocks blocks : {Blocks::kPerUnit, Blocks::kPerObject}) {
      INFO((in_order ? "in order" : "on workers") << (blocks == Blocks::kPerUnit ? ", one block per unit" : ", one block per object"));
      std::vector<std::string> first_findings, first_summary;
      for (unsigned threads : kThreadCounts) {
        INFO("threads " << threads);
        io::FaultEnv env;
        faults(env);
        SourceConfig cfg;
        cfg.in_order = in_order;
        cfg.blocks = blocks;
        cfg.finish_finding = true;
        FakeSource source(repo, cfg, env);
        Run r = RunFake(source, threads);
        REQUIRE(r.out.status.ok());
        std::vector<std::string> findings = DescribeAll(r.out);
        std::vector<std::string> summary = SummaryFields(r.out.summary);
        for (uint64_t n : StageCounts(r.out.summary)) summary.push_back(std::to_string(n));
        CHECK(std::is_sorted(r.out.findings.begin(), r.out.findings.end(), report::FindingLess));
        if (threads == 1) {
          first_findings = findings;
          first_summary = summary;
          // 6 damaged + 4 flips (one differing) + the warning verdicts (3 units x 3) + Finish's
          CHECK(r.out.findings.size() == 6 + 4 + 9 + 1);
          CHECK(r.out.summary.errors == 5 /*damaged counted objects*/ + 1 /*differed*/);
          continue;
        }
        CHECK(findings == first_findings);
        CHECK(summary == first_summary);
      }
    }
  }
}

// Issue 13: lost data must not hide behind "cannot run" (key_fallback.h).
TEST_CASE("engine: a key that cannot be loaded: the repository layer is still checked, keyless", "[engine]") {
  const Status wrong(StatusCode::kWrongPassphrase, "passphrase supplied in BORG_PASSPHRASE is incorrect");
  const std::string note =
      "the key could not be loaded: only the repository layer was checked (keyless: CRCs, the index and the log); "
      "archives not checked";
  SECTION("damage found: the key's problem is one more finding and the run's outcome is its findings") {
    FakeRepo repo(Uniform(2, 3));
    SourceConfig cfg;
    cfg.lost_object = 1;
    cfg.load_key = [&] { return wrong; };
    FakeSource source(repo, cfg, io::Env::Default());
    Run r = RunFake(source, 2);
    REQUIRE(r.out.status.ok());
    CHECK(source.fell_back());
    CHECK_FALSE(r.out.summary.verify_data);
    CHECK(r.out.summary.mode.empty());
    CHECK(DescribeAll(r.out) ==
          std::vector<std::string>{
              "error missing [segment 0, offset " + std::to_string(repo.object(0, 1).offset) + "] " +
                  Hex(repo.object(0, 1).id) + " fake: lost reread=not-reread",
              "error key  - passphrase supplied in BORG_PASSPHRASE is incorrect (the objects were checked keyless, "
              "so the damage above was found; without it this run would have ended with the key's own exit code) "
              "reread=not-reread"});
    CHECK(r.out.summary.errors == 2);
    CHECK(r.out.summary.findings_by_stage[size_t(Stage::kKey)] == 1);
    CHECK(std::count(r.out.summary.notes.begin(), r.out.summary.notes.end(), note) == 1);
    CHECK(r.out.summary.objects_verified == 5);
  }
  SECTION("nothing found: the key's own status, after every unit was read") {
    FakeRepo repo(Uniform(2, 3));
    SourceConfig cfg;
    cfg.load_key = [&] { return wrong; };
    FakeSource source(repo, cfg, io::Env::Default());
    Run r = RunFake(source, 2);
    CHECK(r.out.status.code() == StatusCode::kWrongPassphrase);
    CHECK(r.out.status.message() == wrong.message());
    CHECK(source.fell_back());
    CHECK(source.reads(0) == 1);
    CHECK(source.reads(1) == 1);
    CHECK(r.out.findings.empty());
  }
  SECTION("only io findings (could not check): still the key's own status") {
    FakeRepo repo(Uniform(2, 3));
    SourceConfig cfg;
    cfg.plan_findings.push_back(report::MakeFinding(Severity::kError, Stage::kIo, Location::Segment(1), nullptr,
                                                    "cannot read segment file: Permission denied"));
    cfg.load_key = [&] { return wrong; };
    FakeSource source(repo, cfg, io::Env::Default());
    Run r = RunFake(source, 2);
    CHECK(r.out.status.code() == StatusCode::kWrongPassphrase);
  }
}

TEST_CASE("a unit's file that cannot be opened: vanished, lost or not checked, by one rule", "[engine]") {
  CHECK(ClassifyUnitOpenFailure(Status(StatusCode::kNotFound, "gone")) == UnitOpenFailure::kVanished);
  CHECK(ClassifyUnitOpenFailure(Status(StatusCode::kCorruptMetadata, "not a regular file")) == UnitOpenFailure::kLost);
  CHECK(ClassifyUnitOpenFailure(Status(StatusCode::kIoError, "Permission denied")) == UnitOpenFailure::kUnreadable);
  CHECK(ClassifyUnitOpenFailure(Status(StatusCode::kIoError, "connection lost")) == UnitOpenFailure::kUnreadable);
}

}  // namespace
}  // namespace borgcheck::engine
