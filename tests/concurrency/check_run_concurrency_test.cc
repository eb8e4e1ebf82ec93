// The whole check run (run::RunCheck, as `borgcheck` calls it) of every repository generation
// at 1, 2, 8 and 64 threads, with --verify-data and without: the status, the sorted findings
// and every summary counter must be identical whatever the thread count (only elapsed time and
// the thread count itself may differ). STYLE.md §5: `--threads 1` and `--threads 8` print the
// same report. The repositories:
//   * borg 1.x: every fixture in shared/fixtures/borg1 (the clean v1.2.4 and v1.4.4
//     repositories and every corrupt/ case);
//   * borg 2.0.0b5: three clean fixtures (repokey AES-OCB; keyfile BLAKE2 ChaCha20 with
//     obfuscation; compression-mix, 15 segments after a compact) and every corrupt/ case;
//   * borg 2 master (borgstore version 4, packs read on workers): repokey and keyfile AES-OCB,
//     none-blake3, and the bit-flip copy.
//
// The 1-thread run is also checked against the generation's EXPECTED.tsv (clean repositories
// have no error finding, damaged ones name their bad chunk ids), so that the comparison is
// never between runs that all failed the same way.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "checker/report/finding.h"
#include "checker/run/check_options.h"
#include "checker/run/check_run.h"

namespace borgcheck::concurrency_test {
namespace {

namespace fs = std::filesystem;
using report::Finding;

const unsigned kThreadCounts[] = {1, 2, 8, 64};

std::string Borg1Dir() { return std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg1"; }
std::string B5Dir() { return std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg2b5"; }
std::string MasterDir() { return std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg2master"; }

struct FixtureRepo {
  std::string rel;        // "v1.2.4/repos/none", "corrupt/mac-repokey", ...
  std::string keys_dir;   // where its key files are (BORG_KEYS_DIR)
  std::string dir = Borg1Dir();  // the generation's fixture folder (rel is relative to it)
  std::string key_file;   // BORG_KEY_FILE, if set
  std::string expected_class;           // EXPECTED.tsv: "clean" or "integrity-errors"
  std::set<std::string> bad_chunk_ids;  // EXPECTED.tsv, hex
};

std::vector<FixtureRepo> FixtureRepos() {
  std::vector<FixtureRepo> repos;
  std::ifstream tsv(Borg1Dir() + "/EXPECTED.tsv");
  REQUIRE(tsv.good());
  std::string line;
  std::getline(tsv, line);  // header
  while (std::getline(tsv, line)) {
    if (line.empty()) continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string col; std::getline(ss, col, '\t');) cols.push_back(col);
    REQUIRE(cols.size() >= 3);
    FixtureRepo r;
    r.rel = cols[0];
    r.expected_class = cols[1];
    std::stringstream ids(cols[2]);
    for (std::string id; std::getline(ids, id, ',');) {
      if (id != "-" && !id.empty()) r.bad_chunk_ids.insert(id);
    }
    // corrupt/ cases are copies of v1.2.4 repositories and use its keys.
    const std::string set = r.rel.rfind("v1.4.4/", 0) == 0 ? "v1.4.4" : "v1.2.4";
    r.keys_dir = Borg1Dir() + "/" + set + "/keys";
    repos.push_back(std::move(r));
  }
  // Every repository directory on disk is in EXPECTED.tsv (none is silently left out).
  size_t on_disk = 0;
  for (const char* parent : {"v1.2.4/repos", "v1.4.4/repos", "corrupt"}) {
    for (const auto& e : fs::directory_iterator(Borg1Dir() + "/" + parent)) {
      if (!e.is_directory()) continue;
      ++on_disk;
      const std::string rel = std::string(parent) + "/" + e.path().filename().string();
      INFO(rel);
      CHECK(std::any_of(repos.begin(), repos.end(), [&](const FixtureRepo& r) { return r.rel == rel; }));
    }
  }
  CHECK(on_disk == repos.size());
  return repos;
}

std::string Describe(const Finding& f) {
  std::string s = std::string(report::SeverityName(f.severity)) + " " +
                  std::string(report::StageName(f.stage)) + " " + report::LocationSuffix(f) + " " +
                  (f.chunk_id ? report::ChunkIdHex(*f.chunk_id) : std::string("-")) + " " +
                  f.message + " reread=" + std::string(report::RereadName(f.reread));
  return s;
}

std::vector<std::string> DescribeAll(const std::vector<Finding>& findings) {
  std::vector<std::string> out;
  for (const Finding& f : findings) out.push_back(Describe(f));
  return out;
}

// Every field of the summary except elapsed_s and threads, as text, so that a difference
// shows which counter moved.
std::vector<std::string> SummaryFields(const report::RunSummary& s) {
  std::vector<std::string> v = {
      "repository " + s.repository,
      "format " + s.format,
      "mode " + s.mode,
      "verify_data " + std::to_string(s.verify_data),
      "transaction " + std::to_string(s.transaction),
      "live_list_source " + s.live_list_source,
      "segments " + std::to_string(s.segments),
      "objects_total " + std::to_string(s.objects_total),
      "objects_verified " + std::to_string(s.objects_verified),
      "stored_bytes " + std::to_string(s.stored_bytes),
      "plaintext_bytes " + std::to_string(s.plaintext_bytes),
      "bytes_read " + std::to_string(s.bytes_read),
      "errors " + std::to_string(s.errors),
      "warnings " + std::to_string(s.warnings),
  };
  for (int i = 0; i < report::kStageCount; ++i) {
    v.push_back("findings_by_stage[" + std::string(report::StageName(report::Stage(i))) +
                "] " + std::to_string(s.findings_by_stage[size_t(i)]));
  }
  for (const std::string& n : s.notes) v.push_back("note " + n);
  return v;
}

struct RunResult {
  std::string status;  // code and message
  int stop_signal = 0;
  std::vector<std::string> findings;
  std::vector<std::string> summary;
  std::vector<Finding> raw_findings;
};

RunResult Run(const FixtureRepo& repo, bool verify_data, unsigned threads) {
  run::CheckOptions opts;
  opts.repository = repo.dir + "/" + repo.rel;
  opts.verify_data = verify_data;
  opts.threads = threads;
  opts.progress = run::ProgressMode::kNever;
  opts.quiet = true;
  // With more than one thread, also run the progress thread (it reads the workers' atomic
  // counters while they run); the one-thread run has none, so progress must not change results.
  std::atomic<int> progress_calls{0};
  run::ProgressCallback progress;
  if (threads > 1) {
    progress = [&](const report::Progress&, bool) { progress_calls.fetch_add(1); };
  }
  run::CheckOutcome out = run::RunCheck(opts, progress);
  if (threads > 1) CHECK(progress_calls.load() >= 1);  // at least the final call
  RunResult r;
  r.status = std::to_string(int(out.status.code())) + " " + out.status.message();
  r.stop_signal = out.stop_signal;
  r.findings = DescribeAll(out.findings);
  r.summary = SummaryFields(out.summary);
  CHECK(out.summary.threads == threads);
  r.raw_findings = std::move(out.findings);
  return r;
}

void SetKeyEnvironment(const FixtureRepo& repo) {
  // The key loader reads these on the main thread before any worker exists.
  REQUIRE(setenv("BORG_PASSPHRASE", "test", 1) == 0);
  REQUIRE(setenv("BORG_KEYS_DIR", repo.keys_dir.c_str(), 1) == 0);
  if (repo.key_file.empty()) {
    unsetenv("BORG_KEY_FILE");
  } else {
    REQUIRE(setenv("BORG_KEY_FILE", repo.key_file.c_str(), 1) == 0);
  }
  unsetenv("BORG_PASSCOMMAND");
  unsetenv("BORG_PASSPHRASE_FD");
}

// The one-thread run is right (so the comparison is not between runs that all failed alike).
void CheckAgainstExpected(const FixtureRepo& repo, bool verify_data, const RunResult& r) {
  INFO(repo.rel << (verify_data ? " --verify-data" : " (keyless)"));
  REQUIRE(r.status.rfind("0 ", 0) == 0);
  REQUIRE(r.stop_signal == 0);
  size_t errors = 0;
  std::set<std::string> bad_ids;
  for (const Finding& f : r.raw_findings) {
    if (f.severity != report::Severity::kError) continue;
    ++errors;
    if (f.chunk_id) bad_ids.insert(report::ChunkIdHex(*f.chunk_id));
  }
  if (!verify_data) {
    // Without keys only the repository layer is checked: of the damaged cases, only the one
    // with a stale entry CRC is visible.
    if (repo.rel == "corrupt/crc-repokey") {
      CHECK(bad_ids == repo.bad_chunk_ids);
    } else {
      CHECK(errors == 0);
    }
    return;
  }
  if (repo.expected_class == "clean") {
    CHECK(errors == 0);
  } else {
    REQUIRE(repo.expected_class == "integrity-errors");
    CHECK(bad_ids == repo.bad_chunk_ids);
  }
}

TEST_CASE("RunCheck gives identical findings and summaries at 1, 2, 8 and 64 threads",
          "[concurrency][check_run]") {
  const std::vector<FixtureRepo> repos = FixtureRepos();
  REQUIRE(repos.size() >= 30);
  for (const FixtureRepo& repo : repos) {
    DYNAMIC_SECTION(repo.rel) {
      SetKeyEnvironment(repo);
      for (bool verify_data : {true, false}) {
        INFO((verify_data ? "--verify-data" : "keyless"));
        const RunResult one = Run(repo, verify_data, 1);
        CheckAgainstExpected(repo, verify_data, one);
        for (unsigned threads : kThreadCounts) {
          if (threads == 1) continue;
          INFO("--threads " << threads);
          const RunResult many = Run(repo, verify_data, threads);
          CHECK(many.status == one.status);
          CHECK(many.stop_signal == one.stop_signal);
          CHECK(many.findings == one.findings);
          CHECK(many.summary == one.summary);
        }
      }
    }
  }
}

// The rows of a borg 2 EXPECTED.tsv (repo, outcome class, bad ids, notes) whose repo is in
// `wanted`: every name in `wanted` must be a row.
std::vector<FixtureRepo> Borg2Rows(const std::string& dir, const std::vector<std::string>& wanted) {
  std::ifstream tsv(dir + "/EXPECTED.tsv");
  REQUIRE(tsv.good());
  std::vector<FixtureRepo> repos;
  std::string line;
  std::getline(tsv, line);  // header
  while (std::getline(tsv, line)) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string col; std::getline(ss, col, '\t');) cols.push_back(col);
    if (cols.size() < 3 || std::find(wanted.begin(), wanted.end(), cols[0]) == wanted.end()) continue;
    FixtureRepo r;
    r.rel = cols[0];
    r.dir = dir;
    r.keys_dir = dir + "/keys";
    r.expected_class = cols[1];
    std::stringstream ids(cols[2]);
    for (std::string id; std::getline(ids, id, ',');) {
      if (id != "-" && !id.empty()) r.bad_chunk_ids.insert(id);
    }
    // 2.0.0b5 names its key files in the notes: "key file <name>.key; ..."
    const std::string key = "key file ";
    if (cols.size() >= 4 && cols[3].rfind(key, 0) == 0 && dir == B5Dir()) {
      r.key_file = dir + "/" + cols[3].substr(key.size(), cols[3].find(';') - key.size());
    }
    repos.push_back(std::move(r));
  }
  REQUIRE(repos.size() == wanted.size());
  return repos;
}

// What a keyless check (checksums only) must find: the chunk ids its errors name, and how many
// error findings there are.
struct KeylessExpectation {
  std::set<std::string> ids;
  size_t errors = 0;
};

// Runs every repository at 1, 2, 8 and 64 threads, with and without --verify-data, and compares;
// `keyless(repo)` is what the keyless 1-thread run must find.
template <typename Keyless>
void CompareThreadCounts(const std::vector<FixtureRepo>& repos, const std::string& format, Keyless keyless) {
  for (const FixtureRepo& repo : repos) {
    DYNAMIC_SECTION(repo.rel) {
      SetKeyEnvironment(repo);
      for (bool verify_data : {true, false}) {
        INFO((verify_data ? "--verify-data" : "keyless"));
        const RunResult one = Run(repo, verify_data, 1);
        REQUIRE(one.status.rfind("0 ", 0) == 0);
        REQUIRE(one.stop_signal == 0);
        CHECK(std::find(one.summary.begin(), one.summary.end(), "format " + format) != one.summary.end());
        std::set<std::string> bad_ids;
        size_t errors = 0;
        for (const Finding& f : one.raw_findings) {
          if (f.severity != report::Severity::kError) continue;
          ++errors;
          if (f.chunk_id) bad_ids.insert(report::ChunkIdHex(*f.chunk_id));
        }
        if (verify_data) {
          CHECK(bad_ids == repo.bad_chunk_ids);
          if (repo.expected_class == "clean") CHECK(one.raw_findings.empty());
        } else {
          const KeylessExpectation want = keyless(repo);
          CHECK(bad_ids == want.ids);
          CHECK(errors == want.errors);
        }
        for (unsigned threads : kThreadCounts) {
          if (threads == 1) continue;
          INFO("--threads " << threads);
          const RunResult many = Run(repo, verify_data, threads);
          CHECK(many.status == one.status);
          CHECK(many.stop_signal == one.stop_signal);
          CHECK(many.findings == one.findings);
          CHECK(many.summary == one.summary);
        }
      }
    }
  }
}

TEST_CASE("RunCheck on borg 2.0.0b5 gives identical findings and summaries at 1, 2, 8 and 64 threads",
          "[concurrency][check_run][borg2b5]") {
  std::vector<std::string> wanted = {"repokey-aes-ocb", "keyfile-blake2-chacha20-poly1305", "compression-mix"};
  for (const auto& e : fs::directory_iterator(B5Dir() + "/corrupt")) {
    if (e.is_directory()) wanted.push_back("corrupt/" + e.path().filename().string());
  }
  REQUIRE(wanted.size() == 3 + 11);
  const std::vector<FixtureRepo> repos = Borg2Rows(B5Dir(), wanted);
  // Keyless, only the two copies whose checksums were left stale show their damage.
  CompareThreadCounts(repos, "borg2-b5", [](const FixtureRepo& r) {
    return r.rel == "corrupt/chpo-data-stale-xxh64" || r.rel == "corrupt/chpo-entry-header-crc"
               ? KeylessExpectation{r.bad_chunk_ids, 1}
               : KeylessExpectation{};
  });
}

TEST_CASE("RunCheck on borg 2 master gives identical findings and summaries at 1, 2, 8 and 64 threads",
          "[concurrency][check_run][borg2master]") {
  const std::vector<FixtureRepo> repos =
      Borg2Rows(MasterDir(), {"repos/aes256-ocb_sha256_repokey", "repos/aes256-ocb_sha256_keyfile",
                              "repos/none-blake3", "corrupt/aes256-ocb_sha256_repokey__bitflip"});
  // Keyless, the bit flip shows only as its pack's content hash (a finding without a chunk id).
  CompareThreadCounts(repos, "borgstore-v4", [](const FixtureRepo& r) {
    return KeylessExpectation{{}, r.expected_class == "clean" ? 0u : 1u};
  });
}

}  // namespace
}  // namespace borgcheck::concurrency_test
