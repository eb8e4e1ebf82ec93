#include "checker/cli/partial_args.h"

#include <catch2/catch.hpp>
#include <cstdlib>

namespace borgcheck::cli {
namespace {

TEST_CASE("calendar: days in a month and ISO weekdays") {
  CHECK(DaysInMonth(2026, 2) == 28);
  CHECK(DaysInMonth(2028, 2) == 29);
  CHECK(DaysInMonth(2100, 2) == 28);
  CHECK(DaysInMonth(2000, 2) == 29);
  CHECK(DaysInMonth(2026, 4) == 30);
  CHECK(DaysInMonth(2026, 12) == 31);
  CHECK(IsoWeekday({2026, 11, 30}) == 1);  // a Monday
  CHECK(IsoWeekday({2026, 12, 1}) == 2);
  CHECK(IsoWeekday({2026, 12, 6}) == 7);
  CHECK(IsoWeekday({2027, 1, 1}) == 5);
  CHECK(IsoWeekday({2024, 2, 29}) == 4);
}

TEST_CASE("subset: n/t and daily/week and daily/month") {
  const LocalDate wednesday{2026, 12, 2};
  Result<SubsetChoice> c = ParseSubset("3/7", wednesday);
  REQUIRE(c.ok());
  CHECK((c->k == 3 && c->t == 7 && c->label == "3/7"));
  c = ParseSubset("daily/week", wednesday);
  REQUIRE(c.ok());
  CHECK((c->k == 3 && c->t == 7));
  CHECK(c->label == "3/7 (daily/week, 2026-12-02, Wednesday)");
  c = ParseSubset("daily/month", LocalDate{2027, 2, 28});
  REQUIRE(c.ok());
  CHECK((c->k == 28 && c->t == 28));
  CHECK(c->label == "28/28 (daily/month, 2027-02-28)");
  c = ParseSubset("daily/month", LocalDate{2026, 12, 31});
  REQUIRE(c.ok());
  CHECK((c->k == 31 && c->t == 31));
  for (const char* bad : {"0/7", "8/7", "1/0", "7", "a/b", "1/1000001", "-1/7", "1 /7", "daily/year", ""}) {
    INFO(bad);
    Result<SubsetChoice> r = ParseSubset(bad, wednesday);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("--subset takes n/t"));
  }
  CHECK(ParseSubset("1/1", wednesday).ok());
}

TEST_CASE("sample: a share or a size") {
  Result<SampleChoice> s = ParseSample("5%");
  REQUIRE(s.ok());
  CHECK(s->fraction == Approx(0.05));
  CHECK(ParseSample("100%")->fraction == 1.0);
  CHECK(ParseSample("0.5%")->fraction == Approx(0.005));
  CHECK(ParseSample("50G")->bytes == 50ull << 30);
  CHECK(ParseSample("50GiB")->bytes == 50ull << 30);
  CHECK(ParseSample("50GB")->bytes == 50000000000ull);
  CHECK(ParseSample("1.5T")->bytes == 3ull << 39);
  CHECK(ParseSample("4096")->bytes == 4096);
  for (const char* bad : {"0%", "101%", "-5%", "5 %", "G", "5X", "", "0", "abc"}) {
    INFO(bad);
    REQUIRE_FALSE(ParseSample(bad).ok());
  }
}

TEST_CASE("a duration written as two words is refused with how to write it") {
  using V = std::vector<std::string>;
  CHECK(CheckSplitDurations(V{"--max-duration", "2h", "/repo"}).ok());
  CHECK(CheckSplitDurations(V{"--max-duration", "2", "/repo"}).ok());       // seconds, then the repository
  CHECK(CheckSplitDurations(V{"--max-duration", "2h", "hours"}).ok());      // a repository named "hours"
  CHECK(CheckSplitDurations(V{"--threads", "2", "hours"}).ok());            // not a duration flag
  CHECK(CheckSplitDurations(V{"--max-duration"}).ok());
  CHECK(CheckSplitDurations(V{"--max-duration", "2"}).ok());
  const Status s = CheckSplitDurations(V{"-v", "--max-duration", "2", "hours", "/repo"});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "--max-duration takes one word: write '2 hours' as 2h (a number and s, m, h, d or w, "
                       "without a space)");
  CHECK(CheckSplitDurations(V{"--max-age=30", "DAYS"}).message() ==
        "--max-age takes one word: write '30 DAYS' as 30d (a number and s, m, h, d or w, without a space)");
  CHECK(CheckSplitDurations(V{"--min-interval", "90", "min"}).message() ==
        "--min-interval takes one word: write '90 min' as 90m (a number and s, m, h, d or w, without a space)");
}

TEST_CASE("durations") {
  CHECK(*ParseDuration("2h", "--max-duration") == 7200);
  CHECK(*ParseDuration("90m", "--max-duration") == 5400);
  CHECK(*ParseDuration("30d", "--max-age") == 30 * 86400);
  CHECK(*ParseDuration("1w", "--min-interval") == 7 * 86400);
  CHECK(*ParseDuration("1.5h", "--max-duration") == 5400);
  CHECK(*ParseDuration("45", "--max-duration") == 45);
  CHECK(*ParseDuration("45s", "--max-duration") == 45);
  for (const char* bad : {"0", "0h", "-1h", "2x", "h", "", "1000000d"}) {
    INFO(bad);
    Result<double> r = ParseDuration(bad, "--max-age");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::StartsWith("--max-age takes a duration"));
  }
}

struct Env {
  explicit Env(std::vector<std::pair<const char*, const char*>> vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k);
      saved.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      if (v) setenv(k, v, 1);
      else unsetenv(k);
    }
  }
  ~Env() {
    for (const auto& [k, v] : saved) {
      if (v) setenv(k.c_str(), v->c_str(), 1);
      else unsetenv(k.c_str());
    }
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
};

TEST_CASE("the state folder: --state-dir then STATE_DIRECTORY then XDG_STATE_HOME then HOME and only with a state flag") {
  Env env({{"STATE_DIRECTORY", nullptr}, {"XDG_STATE_HOME", nullptr}, {"HOME", "/home/u"},
           {"BORGCHECK_TEST_HOOKS", nullptr}, {"BORGCHECK_TEST_TODAY", nullptr}});
  std::vector<std::string> notes;
  uint64_t delay = 0;
  auto dir = [&](PartialRaw raw) {
    run::CheckOptions o;
    REQUIRE(ApplyPartialArgs(raw, o, notes, delay).ok());
    return o.state_dir;
  };
  PartialRaw none;
  none.subset = "1/7";
  CHECK(dir(none).empty());  // a slice alone keeps no state
  PartialRaw age;
  age.max_age = "30d";
  CHECK(dir(age) == "/home/u/.local/state/borgcheck");
  setenv("XDG_STATE_HOME", "/xdg", 1);
  CHECK(dir(age) == "/xdg/borgcheck");
  setenv("XDG_STATE_HOME", "relative", 1);  // not absolute: ignored, as the XDG spec says
  CHECK(dir(age) == "/home/u/.local/state/borgcheck");
  setenv("STATE_DIRECTORY", "/var/lib/borgcheck:/var/lib/other", 1);
  CHECK(dir(age) == "/var/lib/borgcheck");
  PartialRaw given;
  given.state_dir = "/srv/state/";
  CHECK(dir(given) == "/srv/state");
}

TEST_CASE("test hooks take effect only with their consent variable and are refused without it") {
  std::vector<std::string> notes;
  uint64_t delay = 0;
  run::CheckOptions o;
  {
    Env env({{"BORGCHECK_TEST_HOOKS", nullptr}, {"BORGCHECK_TEST_TODAY", "2026-12-02"}});
    Status s = ApplyPartialArgs(PartialRaw{}, o, notes, delay);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::StartsWith("BORGCHECK_TEST_TODAY is a test-only hook"));
  }
  {
    Env env({{"BORGCHECK_TEST_HOOKS", "yes"}, {"BORGCHECK_TEST_READ_DELAY_US", "5"}});
    CHECK_FALSE(ApplyPartialArgs(PartialRaw{}, o, notes, delay).ok());
  }
  {
    Env env({{"BORGCHECK_TEST_HOOKS", kTestHooksConsent}, {"BORGCHECK_TEST_TODAY", "2026-12-02"},
             {"BORGCHECK_TEST_READ_DELAY_US", "250"}});
    PartialRaw raw;
    raw.subset = "daily/week";
    REQUIRE(ApplyPartialArgs(raw, o, notes, delay).ok());
    CHECK((o.subset_k == 3 && o.subset_t == 7));
    CHECK(delay == 250);
    CHECK(o.now_unix > 0);
    CHECK(notes.size() == 2);
  }
  {
    Env env({{"BORGCHECK_TEST_HOOKS", kTestHooksConsent}, {"BORGCHECK_TEST_TODAY", "2026-02-30"}});
    CHECK_FALSE(ApplyPartialArgs(PartialRaw{}, o, notes, delay).ok());
  }
}

TEST_CASE("sample-seed needs --sample and a sample without one gets a seed") {
  Env env({{"BORGCHECK_TEST_HOOKS", nullptr}});
  std::vector<std::string> notes;
  uint64_t delay = 0;
  run::CheckOptions o;
  PartialRaw raw;
  raw.sample_seed = "12";
  CHECK_FALSE(ApplyPartialArgs(raw, o, notes, delay).ok());
  raw.sample = "5%";
  REQUIRE(ApplyPartialArgs(raw, o, notes, delay).ok());
  CHECK(o.sample_seed == 12);
  raw.sample_seed = "18446744073709551615";
  REQUIRE(ApplyPartialArgs(raw, o, notes, delay).ok());
  CHECK(o.sample_seed == UINT64_MAX);
  raw.sample_seed = "18446744073709551616";
  CHECK_FALSE(ApplyPartialArgs(raw, o, notes, delay).ok());
}

}  // namespace
}  // namespace borgcheck::cli
