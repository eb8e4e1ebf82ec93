// Hash lanes change nothing a check finds: every fixture repository of every generation (borg
// 1.x: v1.2.4, v1.4.4 and corrupt/; borg 2.0.0b5: every repository and corrupt/; borg 2 master:
// every repository and corrupt/, all from shared/fixtures/*/EXPECTED.tsv) is checked with
// --verify-data with the lanes off (CheckOptions::hash_lanes false, what BORGCHECK_LANES=0 sets
// for benchmarking) and on, at 1 and 2 threads: the status, the sorted findings (severity, stage,
// location, chunk id, message, second read) and every summary counter must be identical. The
// lanes-off run is also held against EXPECTED.tsv (clean repositories have no error, damaged
// ones name exactly their bad chunk ids), so that the comparison is never between runs that
// failed alike.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "checker/report/finding.h"
#include "checker/run/check_options.h"
#include "checker/run/check_run.h"
#include "tests/test_support.h"

namespace borgcheck::testing {
namespace {

using report::Finding;

struct Row {
  std::string dir;       // the generation's fixture folder
  std::string rel;       // repository, relative to dir
  std::string keys_dir;  // BORG_KEYS_DIR
  std::string key_file;  // BORG_KEY_FILE, if any
  bool clean = false;
  std::set<std::string> bad_ids;
};

std::vector<Row> Rows(const std::string& dir, bool borg1) {
  std::ifstream tsv(dir + "/EXPECTED.tsv");
  REQUIRE(tsv.good());
  std::vector<Row> rows;
  std::string line;
  std::getline(tsv, line);  // header
  while (std::getline(tsv, line)) {
    if (line.empty()) continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string col; std::getline(ss, col, '\t');) cols.push_back(col);
    REQUIRE(cols.size() >= 3);
    Row r;
    r.dir = dir;
    r.rel = cols[0];
    r.clean = cols[1] == "clean";
    std::stringstream ids(cols[2]);
    for (std::string id; std::getline(ids, id, ',');) {
      if (id != "-" && !id.empty()) r.bad_ids.insert(id);
    }
    if (borg1) {
      // corrupt/ cases are copies of v1.2.4 repositories and use its keys.
      r.keys_dir = dir + "/" + (r.rel.rfind("v1.4.4/", 0) == 0 ? "v1.4.4" : "v1.2.4") + "/keys";
    } else {
      r.keys_dir = dir + "/keys";
      // The borg 2 fixtures name their key files in the notes: "key file <path>.key; ..." or
      // "key file <path>.key (...)".
      const std::string key = "key file ";
      if (cols.size() >= 4 && cols[3].rfind(key, 0) == 0) {
        r.key_file = dir + "/" + cols[3].substr(key.size(), cols[3].find_first_of("; ", key.size()) - key.size());
      }
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string Describe(const Finding& f) {
  return std::string(report::SeverityName(f.severity)) + " " + std::string(report::StageName(f.stage)) + " " +
         report::LocationSuffix(f) + " " + (f.chunk_id ? report::ChunkIdHex(*f.chunk_id) : std::string("-")) + " " +
         f.message + " reread=" + std::string(report::RereadName(f.reread));
}

// Everything a run reports except its elapsed time.
std::vector<std::string> Report(const run::CheckOutcome& out) {
  const report::RunSummary& s = out.summary;
  std::vector<std::string> v = {
      "status " + std::to_string(int(out.status.code())) + " " + out.status.message(),
      "mode " + s.mode,
      "format " + s.format,
      "objects_total " + std::to_string(s.objects_total),
      "objects_verified " + std::to_string(s.objects_verified),
      "stored_bytes " + std::to_string(s.stored_bytes),
      "plaintext_bytes " + std::to_string(s.plaintext_bytes),
      "errors " + std::to_string(s.errors),
      "warnings " + std::to_string(s.warnings),
  };
  for (int i = 0; i < report::kStageCount; ++i) {
    v.push_back(std::string(report::StageName(report::Stage(i))) + " " +
                std::to_string(s.findings_by_stage[size_t(i)]));
  }
  for (const std::string& n : s.notes) v.push_back("note " + n);
  for (const Finding& f : out.findings) v.push_back(Describe(f));
  return v;
}

run::CheckOutcome Run(const Row& r, bool lanes, unsigned threads) {
  run::CheckOptions opts;
  opts.repository = r.dir + "/" + r.rel;
  opts.verify_data = true;
  opts.threads = threads;
  opts.progress = run::ProgressMode::kNever;
  opts.quiet = true;
  opts.hash_lanes = lanes;
  return run::RunCheck(opts, {});
}

void CompareLanes(const std::vector<Row>& rows) {
  for (const Row& r : rows) {
    DYNAMIC_SECTION(r.rel) {
      ScopedEnv env({{"BORG_PASSPHRASE", std::string("test")},
                     {"BORG_KEYS_DIR", r.keys_dir},
                     {"BORG_KEY_FILE", r.key_file.empty() ? std::nullopt : std::optional<std::string>(r.key_file)},
                     {"BORG_PASSCOMMAND", std::nullopt},
                     {"BORG_PASSPHRASE_FD", std::nullopt}});
      const run::CheckOutcome off = Run(r, false, 1);
      REQUIRE(off.status.ok());
      std::set<std::string> bad;
      for (const Finding& f : off.findings) {
        if (f.severity == report::Severity::kError && f.chunk_id) bad.insert(report::ChunkIdHex(*f.chunk_id));
      }
      if (r.clean) {
        CHECK(CountErrors(off) == 0);
      } else {
        CHECK(bad == r.bad_ids);
      }
      CHECK(off.summary.objects_verified > 0);
      const std::vector<std::string> want = Report(off);
      for (unsigned threads : {1u, 2u}) {
        INFO("--threads " << threads);
        CHECK(Report(Run(r, true, threads)) == want);
        if (threads > 1) CHECK(Report(Run(r, false, threads)) == want);
      }
    }
  }
}

TEST_CASE("hash lanes off and on give the same report: borg 1.x fixtures", "[lanes][borg1]") {
  const std::vector<Row> rows = Rows(SharedDir() + "/fixtures/borg1", true);
  REQUIRE(rows.size() >= 30);
  CompareLanes(rows);
}

TEST_CASE("hash lanes off and on give the same report: borg 2.0.0b5 fixtures", "[lanes][borg2b5]") {
  const std::vector<Row> rows = Rows(SharedDir() + "/fixtures/borg2b5", false);
  REQUIRE(rows.size() >= 23);
  CompareLanes(rows);
}

TEST_CASE("hash lanes off and on give the same report: borg 2 master fixtures", "[lanes][borg2master]") {
  const std::vector<Row> rows = Rows(SharedDir() + "/fixtures/borg2master", false);
  REQUIRE(rows.size() >= 10);
  CompareLanes(rows);
}

}  // namespace
}  // namespace borgcheck::testing
