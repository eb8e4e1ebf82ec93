#include "checker/engine/unit_state.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <stdlib.h>

#include "checker/engine/partial_run.h"

namespace borgcheck::engine {
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
  UnitRecord a;
  a.identity = {500, -3, 77};
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
  REQUIRE(back->units.size() == 2);
  const UnitRecord& a = back->units.at("segment 12");
  CHECK(a.identity == UnitIdentity{500, -3, 77});
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
      {"{\"borgcheck_state\":2}", "state version 2; this borgcheck reads version 1", StatusCode::kUnsupported},
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

TEST_CASE("one state per repository id and path; a state of the earlier layout goes to the path it recorded") {
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

TEST_CASE("the same file: size, mtime, inode and ctime; a record without a ctime is compared without it") {
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
}  // namespace
}  // namespace borgcheck::engine
