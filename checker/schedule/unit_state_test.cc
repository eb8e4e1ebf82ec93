#include "checker/schedule/unit_state.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <stdlib.h>

#include "checker/schedule/partial_run.h"

namespace borgcheck::schedule {
namespace {

const std::string kId(64, 'b');

StateFile Sample() {
  StateFile s;
  s.repository_id = kId;
  s.repository = "/srv/borg/main";
  s.updated_at = 1800000000.5;
  s.last_run_at = 1800000001;
  s.last_run_errors = 1;
  s.last_run_complete = true;
  s.last_success_at = 1799999000.25;
  s.full_data = FullVerification{1700000000, 1690000000, true};
  s.cycle_crc = Cycle{1750000000, 0};
  UnitRecord a;
  a.identity = {500, -3, 77};
  a.seen_at = 1600000000.5;
  a.data = UnitMark{10, 20, UnitResult::kWarnings, true};
  a.crc = UnitMark{30, 30, UnitResult::kClean, false};
  UnitRecord b;
  b.identity = {1, 2, 3};
  b.slices_t = 7;
  b.slices_level = CheckLevel::kCrc;
  b.slices[3] = SliceMark{40, UnitResult::kErrors};
  s.units["segment 12"] = a;
  s.units["pack " + std::string(64, 'c')] = b;
  return s;
}

TEST_CASE("a state file round-trips through its text") {
  const StateFile s = Sample();
  Result<StateFile> back = ParseState(FormatState(s));
  REQUIRE(back.ok());
  CHECK(back->repository_id == kId);
  CHECK(back->repository == "/srv/borg/main");
  CHECK(back->updated_at == 1800000000.5);
  CHECK(back->last_run_at == 1800000001.0);
  CHECK(back->last_run_errors == 1);
  CHECK(back->last_run_complete);
  CHECK(back->last_success_at == 1799999000.25);
  REQUIRE(back->full_data);
  CHECK(back->full_data->since == 1690000000);
  CHECK_FALSE(back->full_crc);
  CHECK_FALSE(back->cycle_data);
  REQUIRE(back->cycle_crc);
  CHECK((back->cycle_crc->started_at == 1750000000 && back->cycle_crc->completed_at == 0));
  REQUIRE(back->units.size() == 2);
  const UnitRecord& a = back->units.at("segment 12");
  CHECK(a.identity == UnitIdentity{500, -3, 77});
  CHECK(a.seen_at == 1600000000.5);
  REQUIRE(a.data);
  CHECK(a.data->result == UnitResult::kWarnings);
  CHECK(a.data->by_slices);
  CHECK(a.data->done_at == 20);
  const UnitRecord& b = back->units.at("pack " + std::string(64, 'c'));
  CHECK(b.slices_t == 7);
  CHECK(b.slices_level == CheckLevel::kCrc);
  REQUIRE(b.slices.count(3));
  CHECK(b.slices.at(3).result == UnitResult::kErrors);
  // One unit per line, so that the file can be read and grepped by hand.
  const std::string text = FormatState(s);
  CHECK(text.find("\n    \"segment 12\": {") != std::string::npos);
}

TEST_CASE("the mark that counts: data counts for crc and the newer one wins") {
  UnitRecord r;
  CHECK_FALSE(r.MarkFor(CheckLevel::kCrc));
  r.crc = UnitMark{100, 100, UnitResult::kClean, false};
  CHECK_FALSE(r.MarkFor(CheckLevel::kData));
  CHECK(r.MarkFor(CheckLevel::kCrc)->at == 100);
  r.data = UnitMark{50, 50, UnitResult::kErrors, false};
  CHECK(r.MarkFor(CheckLevel::kCrc)->at == 100);
  r.data = UnitMark{150, 150, UnitResult::kErrors, false};
  CHECK(r.MarkFor(CheckLevel::kCrc)->result == UnitResult::kErrors);
}

TEST_CASE("what is not a state file of this version is refused with the reason") {
  struct Case {
    std::string text, why;
    StatusCode code = StatusCode::kCorruptMetadata;
  };
  const std::string head = "{\"borgcheck_state\":1,\"repository_id\":\"" + kId + "\",";
  const Case cases[] = {
      {"", "not valid JSON"},
      {"{\"borgcheck_state\":1", "not valid JSON"},
      {"[1]", "not a borgcheck state file"},
      {"{\"version\":1}", "not a borgcheck state file"},
      {"{\"borgcheck_state\":\"1\"}", "is not a version number"},
      {"{\"borgcheck_state\":0}", "is not a version number"},
      {"{\"borgcheck_state\":3}", "state version 3; this borgcheck reads version 2", StatusCode::kUnsupported},
      {"{\"borgcheck_state\":1,\"repository_id\":\"abc\"}", "is not 64 lowercase hex digits"},
      {head + "\"repository\":\"r\",\"updated_at\":-1}", "\"updated_at\" is not a time"},
      {head + "\"repository\":\"r\",\"updated_at\":1,\"full_verification\":{}}", "no \"units\""},
      {head + "\"repository\":\"r\",\"updated_at\":1,\"full_verification\":{},\"units\":{\"s\":{\"size\":-1}}}",
       "\"size\" is not a count"},
      {head + "\"repository\":\"r\",\"updated_at\":1,\"full_verification\":{},\"units\":{\"s\":{\"size\":1,"
              "\"mtime_ns\":1,\"inode\":1,\"data\":{\"at\":1,\"done_at\":1,\"result\":\"fine\",\"how\":\"whole\"}}}}",
       "unknown result \"fine\""},
      {head + "\"repository\":\"r\",\"updated_at\":1,\"full_verification\":{},\"units\":{\"s\":{\"size\":1,"
              "\"mtime_ns\":1,\"inode\":1,\"slices\":{\"level\":\"data\",\"t\":7,\"done\":{\"8\":{\"at\":1,"
              "\"result\":\"clean\"}}}}}}",
       "slice \"8\" out of range"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    Result<StateFile> r = ParseState(c.text);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == c.code);
    CHECK_THAT(r.status().message(), Catch::Contains(c.why));
  }
}

UnitView View(const std::string& key, uint64_t bytes, UnitIdentity id, bool on_disk = true) {
  UnitView v;
  v.key = key;
  v.bytes = bytes;
  v.on_disk = on_disk;
  if (on_disk) v.identity = id;
  return v;
}

TEST_CASE("the schedule: missing then findings then never verified then oldest first and --max-age leaves out the fresh") {
  StateFile s;
  s.repository_id = kId;
  auto mark = [&](const std::string& key, UnitIdentity id, double at, UnitResult r) {
    UnitRecord u;
    u.identity = id;
    u.data = UnitMark{at, at, r, false};
    s.units[key] = u;
  };
  const std::vector<UnitView> units = {
      View("segment 0", 10, {10, 1, 1}),   // verified at 300
      View("segment 1", 10, {10, 1, 2}),   // verified at 100
      View("segment 2", 10, {10, 1, 3}),   // never
      View("segment 3", 0, {}, false),     // missing
      View("segment 4", 10, {10, 1, 5}),   // errors at 400
      View("segment 5", 10, {10, 9, 6}),   // marked, but another file now (compacted, replaced)
      View("segment 6", 10, {10, 1, 7}),   // verified at 200
  };
  mark("segment 0", {10, 1, 1}, 300, UnitResult::kClean);
  mark("segment 1", {10, 1, 2}, 100, UnitResult::kClean);
  mark("segment 4", {10, 1, 5}, 400, UnitResult::kErrors);
  mark("segment 5", {10, 1, 6}, 500, UnitResult::kClean);
  mark("segment 6", {10, 1, 7}, 200, UnitResult::kClean);
  ScheduleOptions o;
  o.now = 1000;
  o.time_budget = true;
  CHECK(MakeSchedule(&s, units, o).order == std::vector<size_t>{3, 4, 2, 5, 1, 6, 0});
  o.time_budget = false;  // everything is read anyway: plan order
  CHECK(MakeSchedule(&s, units, o).order == std::vector<size_t>{0, 1, 2, 3, 4, 5, 6});
  o.time_budget = true;
  o.max_age_s = 750;  // verified at or after 250 is fresh: segment 0
  Schedule sch = MakeSchedule(&s, units, o);
  CHECK(sch.order == std::vector<size_t>{3, 4, 2, 5, 1, 6});
  CHECK(sch.not_due == 1);
  // A keyless run counts data marks too; a data run does not count crc marks.
  StateFile crc_only = s;
  for (auto& [k, u] : crc_only.units) std::swap(u.data, u.crc);
  o.max_age_s = 0;
  o.level = CheckLevel::kData;
  CHECK(MakeSchedule(&crc_only, units, o).order == std::vector<size_t>{3, 0, 1, 2, 4, 5, 6});
  o.level = CheckLevel::kCrc;
  CHECK(MakeSchedule(&crc_only, units, o).order == std::vector<size_t>{3, 4, 2, 5, 1, 6, 0});
  CHECK(MakeSchedule(nullptr, units, o).order == std::vector<size_t>{3, 0, 1, 2, 4, 5, 6});

  const report::RunSummary::Coverage c = ComputeCoverage(s, units, CheckLevel::kData, 1000, 750);
  CHECK(c.units_verified == 2);         // segments 0 and 4 (checked, with errors: still checked)
  CHECK(c.units_never_verified == 2);   // 2, and 5 (its file changed)
  CHECK(c.ratio == Approx(2.0 / 6));
  CHECK(c.oldest_verified_at == 0);     // some unit was never verified
}


TEST_CASE("coverage counts a partly sliced unit by its objects in the slices done within --max-age") {
  StateFile s;
  s.repository_id = kId;
  UnitRecord a;  // slices 1 and 2 within the window, 3 too old
  a.identity = {100, 1, 1};
  a.slices_t = 7;
  a.slices[1] = SliceMark{100, UnitResult::kClean};
  a.slices[2] = SliceMark{120, UnitResult::kClean};
  a.slices[3] = SliceMark{10, UnitResult::kClean};
  UnitRecord b;  // a whole mark within the window
  b.identity = {200, 1, 2};
  b.data = UnitMark{90, 90, UnitResult::kClean, false};
  UnitRecord d;  // only a slice out of the window: partly verified once, not now
  d.identity = {400, 1, 4};
  d.slices_t = 7;
  d.slices[5] = SliceMark{10, UnitResult::kClean};
  s.units = {{"segment 1", a}, {"segment 2", b}, {"segment 4", d}};
  const std::vector<UnitView> units = {View("segment 1", 100, {100, 1, 1}), View("segment 2", 200, {200, 1, 2}),
                                       View("segment 3", 50, {50, 1, 3}), View("segment 4", 400, {400, 1, 4})};
  // Segment 1 holds 5 live objects: one in slice 1, one in 2, two in 3, one in 7.
  const SliceCounter counter = [](size_t unit, uint32_t t) {
    REQUIRE(t == 7);
    return unit == 0 ? std::vector<uint64_t>{1, 1, 2, 0, 0, 0, 1} : std::vector<uint64_t>{1, 1, 1, 1, 1, 1, 1};
  };
  report::RunSummary::Coverage c = ComputeCoverage(s, units, CheckLevel::kData, 150, 100, counter, 7);
  CHECK(c.ratio == Approx((100.0 * 2 / 5 + 200) / 750));
  CHECK(c.units_verified == 1);
  CHECK(c.units_partly_verified == 1);
  CHECK(c.units_never_verified == 1);  // segment 3; segment 4 was partly verified once
  CHECK(c.oldest_verified_at == 0);
  CHECK(c.cycle_started_at == 0);      // no cycle on record
  // A source that cannot count its objects: the partly sliced unit counts for nothing.
  c = ComputeCoverage(s, units, CheckLevel::kData, 150, 100, {}, 7);
  CHECK(c.ratio == Approx(200.0 / 750));
  CHECK(c.units_partly_verified == 1);
  // Crc slices do not count for a data run; data slices count for a crc run.
  s.units["segment 1"].slices_level = CheckLevel::kCrc;
  c = ComputeCoverage(s, units, CheckLevel::kData, 150, 100, counter, 7);
  CHECK(c.ratio == Approx(200.0 / 750));
  c = ComputeCoverage(s, units, CheckLevel::kCrc, 150, 100, counter, 7);
  CHECK(c.ratio == Approx((100.0 * 2 / 5 + 200) / 750));
}

// A state folder of its own, removed at the end.
struct TempStateDir {
  std::string path;
  TempStateDir() {
    char tmpl[] = "/tmp/borgcheck-unit-state-XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    path = tmpl;
  }
  ~TempStateDir() { std::filesystem::remove_all(path); }
};

// One night of a rotation: a recorder over `units` at time `now` that marks every unit of them
// with slice k of t (or whole with k = 0), then closes. Returns the state after it.
StateFile Night(StateDir& dir, StateFile state, const std::vector<UnitView>& units, double now, uint32_t k,
                uint32_t t) {
  std::optional<ObjectFilter::Slice> slice;
  if (k) slice = ObjectFilter::Slice{k, t};
  StateRecorder rec(dir, std::move(state), units, CheckLevel::kData, true, slice, 1e9, [now] { return now; });
  for (size_t i = 0; i < units.size(); ++i) rec.UnitVerified(i, UnitResult::kClean);
  REQUIRE(rec.Close().ok());
  return rec.Snapshot();
}

TEST_CASE("a full verification completes when every unit that existed at the cycle's start was verified since") {
  TempStateDir tmp;
  Result<StateDir::Opened> opened = StateDir::Open(tmp.path, kId, "/srv/borg/main");
  REQUIRE(opened.ok());
  StateDir& dir = *opened->dir;
  const UnitView a = View("segment 1", 100, {100, 1, 1}), b = View("segment 2", 100, {100, 1, 2}),
                 c = View("segment 3", 100, {100, 1, 3});
  const double day = 86400;
  // Night 1: slice 1/3 of a and b starts a cycle.
  StateFile s = Night(dir, opened->state, {a, b}, 1 * day, 1, 3);
  REQUIRE(s.cycle_data);
  CHECK(s.cycle_data->started_at == 1 * day);
  CHECK(s.cycle_data->completed_at == 0);
  REQUIRE(s.cycle_crc);  // a data run's marks count for a keyless cycle too
  CHECK_FALSE(s.full_data);
  report::RunSummary::Coverage cov = ComputeCoverage(s, {a, b}, CheckLevel::kData, 1 * day, 8 * day, {}, 3);
  CHECK((cov.cycle_units == 2 && cov.cycle_units_done == 0 && cov.cycle_slices == 3 && cov.cycle_slices_done == 1));
  // Night 2: a new segment c (a backup) appears; slice 2 of all three.
  s = Night(dir, s, {a, b, c}, 2 * day, 2, 3);
  CHECK(s.units.at("segment 3").seen_at == 2 * day);
  cov = ComputeCoverage(s, {a, b, c}, CheckLevel::kData, 2 * day, 8 * day, {}, 3);
  CHECK((cov.cycle_units == 2 && cov.cycle_slices_done == 2));  // c is not of this cycle
  CHECK_FALSE(s.full_data);
  // Night 3: b was compacted away; slice 3 of a and c. Every unit of the cycle still on disk
  // (a) has all three slices since night 1: complete, although c lacks slice 1.
  s = Night(dir, s, {a, c}, 3 * day, 3, 3);
  REQUIRE(s.full_data);
  CHECK(s.full_data->completed_at == 3 * day);
  CHECK(s.full_data->since == 1 * day);
  CHECK(s.full_data->clean);
  CHECK(s.cycle_data->completed_at == 3 * day);
  cov = ComputeCoverage(s, {a, c}, CheckLevel::kData, 3 * day, 8 * day, {}, 3);
  CHECK(cov.full_verification_at == 3 * day);
  CHECK((cov.cycle_units == 1 && cov.cycle_units_done == 1 && cov.cycle_slices_done == 3));
  // Nights 4 and 5: a new cycle (a and c); the full verification stays dated night 3, not
  // renewed by each night of the rotation.
  s = Night(dir, s, {a, c}, 4 * day, 1, 3);
  CHECK(s.cycle_data->started_at == 4 * day);
  s = Night(dir, s, {a, c}, 5 * day, 2, 3);
  CHECK(s.full_data->completed_at == 3 * day);
  // Twenty nights skipped, then one slice: still night 3 (the cycle needs slice 3 since night 4).
  s = Night(dir, s, {a, c}, 25 * day, 1, 3);
  CHECK(s.full_data->completed_at == 3 * day);
  cov = ComputeCoverage(s, {a, c}, CheckLevel::kData, 25 * day, 8 * day, {}, 3);
  CHECK(cov.full_verification_at == 3 * day);
  CHECK(cov.cycle_slices_done == 2);  // slices 1 and 2 since night 4
  CHECK(cov.units_verified == 0);      // only slice 1 within 8 days
  CHECK(cov.units_partly_verified == 2);
  s = Night(dir, s, {a, c}, 26 * day, 3, 3);
  CHECK(s.full_data->completed_at == 26 * day);
  CHECK(s.full_data->since == 4 * day);
  // A whole run completes a cycle by itself: it starts one and verifies every unit.
  s = Night(dir, s, {a, c}, 27 * day, 0, 0);
  CHECK(s.full_data->completed_at == 27 * day);
  CHECK(s.full_data->since == 27 * day);
}

TEST_CASE("a version 1 state reads as one whose units were seen before any cycle") {
  const std::string text = "{\"borgcheck_state\":1,\"repository_id\":\"" + kId +
                           "\",\"repository\":\"r\",\"updated_at\":5,\"full_verification\":{\"data\":{\"completed_at\":4,"
                           "\"since\":1,\"clean\":true}},\"units\":{\"segment 1\":{\"size\":1,\"mtime_ns\":1,\"inode\":1,"
                           "\"data\":{\"at\":3,\"done_at\":4,\"result\":\"clean\",\"how\":\"whole\"}}}}";
  Result<StateFile> s = ParseState(text);
  REQUIRE(s.ok());
  CHECK(s->units.at("segment 1").seen_at == 0);
  CHECK_FALSE(s->cycle_data);
  REQUIRE(s->full_data);
  CHECK(s->full_data->completed_at == 4);
  Result<StateFile> again = ParseState(FormatState(*s));  // written as version 2
  REQUIRE(again.ok());
  CHECK(FormatState(*again).find("\"borgcheck_state\": 2") != std::string::npos);
}


TEST_CASE("with a time budget, units with known findings take every other place, the least recently re-read first") {
  StateFile s;
  s.repository_id = kId;
  auto mark = [&](const std::string& key, UnitIdentity id, double at, UnitResult r) {
    UnitRecord u;
    u.identity = id;
    u.data = UnitMark{at, at, r, false};
    s.units[key] = u;
  };
  const std::vector<UnitView> units = {
      View("segment 0", 10, {10, 1, 1}),  // errors, re-read at 300
      View("segment 1", 10, {10, 1, 2}),  // errors, re-read at 100
      View("segment 2", 10, {10, 1, 3}),  // warnings, re-read at 200
      View("segment 3", 10, {10, 1, 4}),  // never
      View("segment 4", 10, {10, 1, 5}),  // verified clean at 50
      View("segment 5", 0, {}, false),    // missing
      View("segment 6", 10, {10, 1, 7}),  // never
  };
  mark("segment 0", {10, 1, 1}, 300, UnitResult::kErrors);
  mark("segment 1", {10, 1, 2}, 100, UnitResult::kErrors);
  mark("segment 2", {10, 1, 3}, 200, UnitResult::kWarnings);
  mark("segment 4", {10, 1, 5}, 50, UnitResult::kClean);
  ScheduleOptions o;
  o.now = 1000;
  o.time_budget = true;
  CHECK(MakeSchedule(&s, units, o).order == std::vector<size_t>{5, 1, 3, 2, 6, 0, 4});
  // Every unit with findings: they follow each other, oldest re-read first.
  mark("segment 3", {10, 1, 4}, 150, UnitResult::kErrors);
  mark("segment 4", {10, 1, 5}, 50, UnitResult::kErrors);
  mark("segment 6", {10, 1, 7}, 250, UnitResult::kErrors);
  CHECK(MakeSchedule(&s, units, o).order == std::vector<size_t>{5, 4, 1, 3, 2, 6, 0});
}

TEST_CASE("a state folder per path: the name spells the resolved path, one-to-one") {
  CHECK(StateFolderName("/srv/borg/main") == "srv+borg+main");
  CHECK(StateFolderName("/srv/borg-main") == "srv+borg-main");
  CHECK(StateFolderName("/a+b/%c d/.x/y.z") == "a%2Bb+%25c%20d+.x+y.z");
  CHECK(StateFolderName("/.hidden") == "%2Ehidden");
  CHECK(StateFolderName("/") == "+");
  CHECK(StateFolderName("/m\xc3\xbcll~") == "m%C3%BCll%7E");
  const std::string long_a = "/" + std::string(300, 'a'), long_b = long_a + "b";
  CHECK(StateFolderName(long_a).size() == 200);
  CHECK(StateFolderName(long_a).substr(183, 1) == "~");
  CHECK(StateFolderName(long_a) != StateFolderName(long_b));
  CHECK(StateFolderName(long_a).substr(0, 183) == StateFolderName(long_b).substr(0, 183));
  CHECK(CanonicalRepositoryPath("/no/such/borgcheck/../repo//") == "/no/such/repo");
}

// A fresh --state-dir, removed at the end.
struct TempBase {
  TempBase() {
    std::string t = (std::filesystem::temp_directory_path() / "borgcheck-unit-state-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempBase() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

TEST_CASE("one state per repository id and path, a state of the earlier layout goes to the path it recorded") {
  TempBase base;
  const std::string a = "/srv/borg/main", b = "/mnt/usb/main";
  const std::string id_dir = base.path + "/" + kId;
  {
    Result<StateDir::Opened> o = StateDir::Open(base.path, kId, a);
    REQUIRE(o.ok());
    CHECK(o->dir->path() == id_dir + "/srv+borg+main/state.json");
    CHECK(o->state.repository == a);
    StateFile s = Sample();
    REQUIRE(o->dir->Save(s).ok());
  }
  {  // the copy elsewhere: its own, empty state
    Result<StateDir::Opened> o = StateDir::Open(base.path, kId, b);
    REQUIRE(o.ok());
    CHECK(o->dir->path() == id_dir + "/mnt+usb+main/state.json");
    CHECK(o->state.units.empty());
    CHECK(o->state.repository == b);
  }
  SECTION("a folder copied to another path's place is refused") {
    std::filesystem::copy_file(id_dir + "/srv+borg+main/state.json", id_dir + "/mnt+usb+main/state.json");
    Result<StateDir::Opened> o = StateDir::Open(base.path, kId, b);
    REQUIRE(o.status().code() == StatusCode::kInvalidArgument);
    CHECK(o.status().message() == "the state file " + id_dir + "/mnt+usb+main/state.json belongs to the copy at " +
                                      a + ", not to " + b +
                                      ": refused (was the folder copied?). Remove it, or pass another --state-dir");
  }
  SECTION("migration: only the run of the recorded path takes the old file") {
    std::filesystem::remove_all(id_dir);
    std::filesystem::create_directories(id_dir);
    StateFile old = Sample();
    old.repository = b + "/";  // as given on the command line
    WriteText(id_dir + "/state.json", FormatState(old));
    {
      Result<StateDir::Opened> o = StateDir::Open(base.path, kId, a);
      REQUIRE(o.ok());
      CHECK(o->state.units.empty());
    }
    CHECK(std::filesystem::exists(id_dir + "/state.json"));
    {
      Result<StateDir::Opened> o = StateDir::Open(base.path, kId, b);
      REQUIRE(o.ok());
      CHECK(o->state.units.size() == 2);
      CHECK(o->state.full_data.has_value());
    }
    CHECK_FALSE(std::filesystem::exists(id_dir + "/state.json"));
    CHECK(std::filesystem::exists(id_dir + "/mnt+usb+main/state.json"));
  }
  SECTION("migration: a relative recorded path names no folder for sure and is never moved") {
    std::filesystem::remove_all(id_dir);
    std::filesystem::create_directories(id_dir);
    StateFile old = Sample();
    old.repository = "main";
    WriteText(id_dir + "/state.json", FormatState(old));
    Result<StateDir::Opened> o = StateDir::Open(base.path, kId, a);
    REQUIRE(o.ok());
    CHECK(o->state.units.empty());
    CHECK(std::filesystem::exists(id_dir + "/state.json"));
  }
}

TEST_CASE("the same file: size, mtime, inode and ctime, a record without a ctime is compared without it") {
  const UnitIdentity now{500, 7, 77, 99};
  CHECK(SameFile(now, now));
  CHECK_FALSE(SameFile(UnitIdentity{500, 7, 77, 98}, now));  // restored: the same inode even, a new ctime
  CHECK_FALSE(SameFile(UnitIdentity{500, 7, 78, 99}, now));
  CHECK_FALSE(SameFile(UnitIdentity{501, 7, 77, 99}, now));
  CHECK_FALSE(SameFile(UnitIdentity{500, 8, 77, 99}, now));
  CHECK(SameFile(UnitIdentity{500, 7, 77, 0}, now));  // an earlier borgcheck's record
  StateFile st = Sample();
  st.units["segment 12"].identity.ctime_ns = 123456789012345678;
  Result<StateFile> back = ParseState(FormatState(st));
  REQUIRE(back.ok());
  CHECK(back->units["segment 12"].identity == UnitIdentity{500, -3, 77, 123456789012345678});
  CHECK(back->units["pack " + std::string(64, 'c')].identity.ctime_ns == 0);
  CHECK(FormatState(st).find("\"ctime_ns\":123456789012345678") != std::string::npos);
}
TEST_CASE("a unit replaced under its name stays in the cycle, a record without a ctime keeps its marks") {
  TempStateDir tmp;
  Result<StateDir::Opened> opened = StateDir::Open(tmp.path, kId, "/srv/borg/main");
  REQUIRE(opened.ok());
  StateDir& dir = *opened->dir;
  const double day = 86400;
  const UnitView a = View("segment 1", 100, {100, 1, 1, 11}), b = View("segment 2", 100, {100, 1, 2, 12});
  const UnitView b_restored = View("segment 2", 100, {100, 1, 9, 19});  // a copy restored onto the path
  StateFile s = Night(dir, opened->state, {a, b}, 1 * day, 1, 3);
  REQUIRE(s.cycle_data);
  s = Night(dir, s, {a, b_restored}, 2 * day, 2, 3);
  CHECK(s.units.at("segment 2").seen_at == 1 * day);  // the name was known when the cycle began
  s = Night(dir, s, {a, b_restored}, 3 * day, 3, 3);
  // The restored unit lost slice 1 with its marks: the cycle is not complete (it was, once, by
  // dropping the replaced unit as "new").
  CHECK_FALSE(s.full_data);
  s = Night(dir, s, {a, b_restored}, 4 * day, 1, 3);
  REQUIRE(s.full_data);
  CHECK(s.full_data->completed_at == 4 * day);

  // A record an earlier borgcheck made (no ctime) is the same file when the rest agrees: its
  // marks stay, and it gains the ctime.
  StateFile old;
  old.repository_id = kId;
  UnitRecord r;
  r.identity = {100, 1, 1, 0};
  r.data = UnitMark{5 * day, 5 * day, UnitResult::kClean, false};
  old.units["segment 1"] = r;
  StateRecorder rec(dir, old, {a}, CheckLevel::kData, false, std::nullopt, 1e9, [day] { return 6 * day; });
  REQUIRE(rec.Close().ok());
  const StateFile after = rec.Snapshot();
  REQUIRE(after.units.at("segment 1").data);
  CHECK(after.units.at("segment 1").data->at == 5 * day);
  CHECK(after.units.at("segment 1").identity.ctime_ns == 11);
}
}  // namespace
}  // namespace borgcheck::schedule
