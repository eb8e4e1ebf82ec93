// The Prometheus metrics file: exact text, carry-forward of the last success, atomic
// replacement. (tests/cli/test_metrics.py runs `promtool check metrics` on real runs' files.)
#include "checker/report/metrics_file.h"

#include <algorithm>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace borgcheck::report {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/borgcheck-metrics-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    if (DIR* d = ::opendir(path_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") ::unlink((path_ + "/" + n).c_str());
      }
      ::closedir(d);
    }
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(path_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") out.push_back(n);
      }
      ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string path_;
};

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const char* kRunHeader =
    "# HELP borgcheck_last_run_timestamp_seconds Unix time when the last borgcheck run ended.\n"
    "# TYPE borgcheck_last_run_timestamp_seconds gauge\n";

TEST_CASE("a failed run: run metrics only, last success carried in", "[report]") {
  MetricsRun run;
  run.repository = "/srv/a \"b\"\\c";
  run.finished_at = 1796045697.5;
  run.duration_s = 0.25;
  run.exit_code = 52;
  std::string text = FormatMetrics(run, 1796000000);
  CHECK(text == std::string(kRunHeader) +
                    "borgcheck_last_run_timestamp_seconds{repo=\"/srv/a \\\"b\\\"\\\\c\",repo_id=\"\"} 1796045697.5\n"
                    "# HELP borgcheck_last_success_timestamp_seconds Unix time when a borgcheck run last verified the "
                    "repository (exit 0 or 1); 0 if none did.\n"
                    "# TYPE borgcheck_last_success_timestamp_seconds gauge\n"
                    "borgcheck_last_success_timestamp_seconds{repo=\"/srv/a \\\"b\\\"\\\\c\",repo_id=\"\"} 1796000000\n"
                    "# HELP borgcheck_success 1 if the last run verified the repository (exit 0 or 1), else 0.\n"
                    "# TYPE borgcheck_success gauge\n"
                    "borgcheck_success{repo=\"/srv/a \\\"b\\\"\\\\c\",repo_id=\"\"} 0\n"
                    "# HELP borgcheck_exit_code Exit code of the last run (docs/exit-codes.md).\n"
                    "# TYPE borgcheck_exit_code gauge\n"
                    "borgcheck_exit_code{repo=\"/srv/a \\\"b\\\"\\\\c\",repo_id=\"\"} 52\n"
                    "# HELP borgcheck_duration_seconds Wall-clock duration of the last run.\n"
                    "# TYPE borgcheck_duration_seconds gauge\n"
                    "borgcheck_duration_seconds{repo=\"/srv/a \\\"b\\\"\\\\c\",repo_id=\"\"} 0.25\n");
  CHECK(LastSuccessIn(text, run.repository) == std::optional<double>(1796000000));
  CHECK_FALSE(LastSuccessIn(text, "/srv/other"));
  CHECK(FormatMetrics(run, std::nullopt).find("borgcheck_last_success_timestamp_seconds{repo=\"/srv/a \\\"b\\\"\\\\c\","
                                              "repo_id=\"\"} 0\n") != std::string::npos);
}

TEST_CASE("a repository path that is not valid UTF-8 still makes a file Prometheus reads", "[report]") {
  MetricsRun run;
  run.repository = "/srv/b\xffrg\n\xe2\x82";  // a stray byte, a newline, a truncated sequence
  run.finished_at = 1796045697.5;
  run.exit_code = 0;
  const std::string text = FormatMetrics(run, 1796000000);
  // EscapeText's spelling (\xff, \n, \xe2\x82), its backslashes escaped for the format.
  INFO(text);
  CHECK(text.find("borgcheck_exit_code{repo=\"/srv/b\\\\xffrg\\\\n\\\\xe2\\\\x82\",repo_id=\"\"} 0\n") != std::string::npos);
  CHECK(std::all_of(text.begin(), text.end(), [](char c) { return uint8_t(c) < 0x80; }));
  // The next run of the same path finds its last success in it.
  CHECK(LastSuccessIn(text, run.repository) == std::optional<double>(1796000000));
  // Valid UTF-8 stays as it is.
  run.repository = "/srv/b\xc3\xa4" "ckup";
  CHECK(FormatMetrics(run, 1796000000).find("{repo=\"/srv/b\xc3\xa4" "ckup\",") != std::string::npos);
}

TEST_CASE("a finished run: the numbers and findings of every stage", "[report]") {
  RunSummary s;
  s.verify_data = true;
  s.objects_total = 102;
  s.objects_verified = 101;
  s.stored_bytes = 266859;
  s.bytes_read = 276462;
  s.errors = 1;
  s.findings_by_stage[int(Stage::kAuthentication)] = 1;
  MetricsRun run;
  run.repository = "/srv/r";
  run.repository_id = "3fe7";
  run.finished_at = 100;
  run.exit_code = 90;
  run.summary = &s;
  run.extra.push_back({"borgcheck_coverage_ratio", "Share covered.", {{"slice", "3"}}, 0.5});
  std::string text = FormatMetrics(run, 50);
  const std::string l = "{repo=\"/srv/r\",repo_id=\"3fe7\"}";
  for (const std::string& line : std::vector<std::string>{
           "borgcheck_success" + l + " 0\n", "borgcheck_exit_code" + l + " 90\n", "borgcheck_verify_data" + l + " 1\n",
        "borgcheck_objects" + l + " 102\n", "borgcheck_objects_verified" + l + " 101\n",
        "borgcheck_verified_bytes" + l + " 266859\n", "borgcheck_read_bytes" + l + " 276462\n",
        "borgcheck_errors" + l + " 1\n", "borgcheck_warnings" + l + " 0\n",
        "borgcheck_findings{repo=\"/srv/r\",repo_id=\"3fe7\",stage=\"authentication\"} 1\n",
        "borgcheck_findings{repo=\"/srv/r\",repo_id=\"3fe7\",stage=\"segment\"} 0\n",
        "borgcheck_last_success_timestamp_seconds" + l + " 50\n",
        "# TYPE borgcheck_coverage_ratio gauge\n"
        "borgcheck_coverage_ratio{repo=\"/srv/r\",repo_id=\"3fe7\",slice=\"3\"} 0.5\n"}) {
    INFO(line);
    CHECK(text.find(line) != std::string::npos);
  }
  // One HELP/TYPE pair per metric name, nine stage samples.
  size_t types = 0, stages = 0;
  for (size_t i = text.find("# TYPE borgcheck_findings "); i != std::string::npos; i = text.find("# TYPE borgcheck_findings ", i + 1)) ++types;
  for (size_t i = text.find("borgcheck_findings{"); i != std::string::npos; i = text.find("borgcheck_findings{", i + 1)) ++stages;
  CHECK(types == 1);
  CHECK(stages == report::kStageCount);
}

TEST_CASE("WriteMetricsFile carries the last success across failures and replaces the file", "[report]") {
  TempDir dir;
  const std::string path = dir.path() + "/borgcheck.prom";
  MetricsRun ok;
  ok.repository = "/srv/r";
  ok.success = true;
  ok.finished_at = 1000;
  REQUIRE(WriteMetricsFile(path, ok).ok());
  CHECK(LastSuccessIn(Read(path), "/srv/r") == std::optional<double>(1000));

  struct stat before {};
  REQUIRE(::stat(path.c_str(), &before) == 0);
  MetricsRun failed = ok;
  failed.success = false;
  failed.exit_code = 2;
  failed.finished_at = 2000;
  REQUIRE(WriteMetricsFile(path, failed).ok());
  std::string text = Read(path);
  CHECK(LastSuccessIn(text, "/srv/r") == std::optional<double>(1000));  // carried forward
  CHECK(text.find("borgcheck_last_run_timestamp_seconds{repo=\"/srv/r\",repo_id=\"\"} 2000\n") != std::string::npos);
  struct stat after {};
  REQUIRE(::stat(path.c_str(), &after) == 0);
  CHECK(after.st_ino != before.st_ino);  // a new file renamed over the old one, not rewritten in place
  CHECK((after.st_mode & 0777) == 0644);
  CHECK(dir.Names() == std::vector<std::string>{"borgcheck.prom"});  // no temporary file left

  failed.finished_at = 3000;
  REQUIRE(WriteMetricsFile(path, failed).ok());
  CHECK(LastSuccessIn(Read(path), "/srv/r") == std::optional<double>(1000));  // still carried

  // Another repository's file is no source for this one's last success.
  failed.repository = "/srv/other";
  REQUIRE(WriteMetricsFile(path, failed).ok());
  CHECK(LastSuccessIn(Read(path), "/srv/other") == std::optional<double>(0));
}

TEST_CASE("WriteMetricsFile reports a folder it cannot write", "[report]") {
  MetricsRun run;
  run.repository = "/srv/r";
  Status s = WriteMetricsFile("/nonexistent-borgcheck-dir/x.prom", run);
  CHECK(s.code() == StatusCode::kIoError);
  // The folder is named: the recipes' folder is made by node_exporter's package, not by us.
  CHECK(s.message() == "cannot write the metrics file /nonexistent-borgcheck-dir/x.prom: its folder "
                       "/nonexistent-borgcheck-dir/ does not exist (create it, or install node_exporter's textfile "
                       "collector; docs/nightly.md)");
}

TEST_CASE("a run of some archives carries the last success forward and has its own time", "[report]") {
  TempDir dir;
  const std::string path = dir.path() + "/selection.prom";
  MetricsRun full;
  full.repository = "/srv/r";
  full.success = true;
  full.finished_at = 1000;
  REQUIRE(WriteMetricsFile(path, full).ok());
  MetricsRun some = full;
  some.archive_selection = true;
  some.finished_at = 2000;
  REQUIRE(WriteMetricsFile(path, some).ok());
  const std::string text = Read(path);
  CHECK(LastSuccessIn(text, "/srv/r") == std::optional<double>(1000));
  CHECK(LastSuccessIn(text, "/srv/r", kSelectionSuccess) == std::optional<double>(2000));
  some.success = false;
  some.finished_at = 3000;
  REQUIRE(WriteMetricsFile(path, some).ok());
  CHECK(LastSuccessIn(Read(path), "/srv/r") == std::optional<double>(1000));
  CHECK(LastSuccessIn(Read(path), "/srv/r", kSelectionSuccess) == std::optional<double>(2000));
  REQUIRE(WriteMetricsFile(path, full).ok());  // a full run: no selection time
  CHECK(LastSuccessIn(Read(path), "/srv/r", kSelectionSuccess) == std::nullopt);
}

}  // namespace
}  // namespace borgcheck::report
