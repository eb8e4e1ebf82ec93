#include "checker/report/metrics_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "checker/base/text_escape.h"

namespace borgcheck::report {
namespace {

constexpr size_t kMaxPreviousFile = 1 << 20;  // a metrics file of ours is a few KiB

// A label value as the text format wants it: valid UTF-8 with backslash, double quote and line
// feed escaped. A value that is not valid UTF-8 (a repository path with such bytes) would make
// the whole file unreadable to Prometheus: it is written as EscapeText spells it for text
// output (each invalid byte as "\xNN", and so on), then escaped for the format.
std::string LabelText(const std::string& raw) { return IsValidUtf8(raw) ? raw : EscapeText(raw); }

std::string EscapeLabel(const std::string& raw) {
  const std::string v = LabelText(raw);
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// Prometheus floats: integers exactly, others with enough digits to round-trip.
std::string Value(double v) {
  if (v == double(int64_t(v)) && v > -1e15 && v < 1e15) return fmt::format("{}", int64_t(v));
  return fmt::format("{}", v);
}

class Writer {
 public:
  explicit Writer(const MetricsRun& run)
      : labels_(fmt::format("repo=\"{}\",repo_id=\"{}\"", EscapeLabel(run.repository),
                            EscapeLabel(run.repository_id))) {}

  void Gauge(const std::string& name, const std::string& help, double value) {
    Header(name, help);
    text_ += fmt::format("{}{{{}}} {}\n", name, labels_, Value(value));
  }
  void Header(const std::string& name, const std::string& help) {
    text_ += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
  }
  void Sample(const std::string& name, const std::vector<std::pair<std::string, std::string>>& extra, double value) {
    std::string labels = labels_;
    for (const auto& [k, v] : extra) labels += fmt::format(",{}=\"{}\"", k, EscapeLabel(v));
    text_ += fmt::format("{}{{{}}} {}\n", name, labels, Value(value));
  }
  std::string Take() { return std::move(text_); }

 private:
  const std::string labels_;
  std::string text_;
};

// Parses `{k="v",...}` starting at text[i] == '{'; returns the value of `key`, and sets i
// past the closing brace. nullopt on malformed text.
std::optional<std::string> LabelValue(const std::string& text, size_t& i, const std::string& key) {
  std::optional<std::string> found;
  ++i;
  while (i < text.size() && text[i] != '}') {
    size_t eq = text.find('=', i);
    if (eq == std::string::npos || eq + 1 >= text.size() || text[eq + 1] != '"') return std::nullopt;
    std::string name = text.substr(i, eq - i);
    std::string value;
    size_t j = eq + 2;
    for (; j < text.size() && text[j] != '"'; ++j) {
      if (text[j] == '\\' && j + 1 < text.size()) {
        ++j;
        value += text[j] == 'n' ? '\n' : text[j];
      } else {
        value += text[j];
      }
    }
    if (j >= text.size()) return std::nullopt;
    if (name == key) found = value;
    i = j + 1;
    if (i < text.size() && text[i] == ',') ++i;
  }
  if (i >= text.size()) return std::nullopt;
  ++i;
  return found;
}

Result<std::string> ReadPrevious(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? std::string() : Result<std::string>(StatusCode::kIoError, std::strerror(errno));
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, size_t(n));
    if (text.size() > kMaxPreviousFile) break;  // not ours; what was read is parsed anyway
  }
  ::close(fd);
  return text;
}

Status WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status(StatusCode::kIoError, n < 0 ? std::strerror(errno) : "short write");
    done += size_t(n);
  }
  return Status::Ok();
}

}  // namespace

std::vector<ExtraMetric> CoverageMetrics(const RunSummary& s) {
  std::vector<ExtraMetric> m;
  auto add = [&](std::string name, std::string help, double v) { m.push_back({std::move(name), std::move(help), {}, v}); };
  add("borgcheck_complete", "1 if the last run checked every object of the repository, else 0 (a partial run).",
      s.complete ? 1 : 0);
  add("borgcheck_skipped_bytes", "Bytes of the repository the last run did not read (slices, time budget, --max-age).",
      double(s.bytes_skipped));
  if (!s.has_coverage) return m;
  add("borgcheck_coverage_ratio",
      "Share of the repository's bytes (an ssh:// repository's objects) verified within --max-age (any age "
      "without it).",
      s.coverage.ratio);
  add("borgcheck_coverage_units_verified", "Segments, packs or batches verified within --max-age.",
      double(s.coverage.units_verified));
  add("borgcheck_coverage_units_never_verified", "Segments, packs or batches with no verification on record.",
      double(s.coverage.units_never_verified));
  add("borgcheck_full_verification_timestamp_seconds",
      "Unix time a full verification (every segment or pack) last completed; 0 if none did.",
      s.coverage.full_verification_at);
  add("borgcheck_oldest_verification_timestamp_seconds",
      "Unix time the least recently verified segment or pack was verified; 0 while one never was.",
      s.coverage.oldest_verified_at);
  const RunSummary::Coverage& c = s.coverage;
  add("borgcheck_cycle_started_timestamp_seconds",
      "Unix time the current full verification (cycle) started; 0 if none did.", c.cycle_started_at);
  add("borgcheck_cycle_done_ratio",
      "Share of the current cycle done: slices done of t in a slice rotation, else segments or packs verified; "
      "1 once it completed.",
      c.cycle_completed_at > 0 ? 1.0
      : c.cycle_slices         ? double(c.cycle_slices_done) / c.cycle_slices
      : c.cycle_units          ? double(c.cycle_units_done) / double(c.cycle_units)
                               : 0.0);
  return m;
}

std::string FormatMetrics(const MetricsRun& run, std::optional<double> last_success,
                          std::optional<double> last_selection_success) {
  Writer w(run);
  w.Gauge("borgcheck_last_run_timestamp_seconds", "Unix time when the last borgcheck run ended.", run.finished_at);
  w.Gauge("borgcheck_last_success_timestamp_seconds",
          "Unix time when a borgcheck run last verified the repository (exit 0 or 1); 0 if none did.",
          run.Verified() ? run.finished_at : last_success.value_or(0));
  w.Gauge("borgcheck_success", "1 if the last run verified the repository (exit 0 or 1), else 0.",
          run.success ? 1 : 0);
  w.Gauge("borgcheck_exit_code", "Exit code of the last run (docs/exit-codes.md).", run.exit_code);
  w.Gauge("borgcheck_duration_seconds", "Wall-clock duration of the last run.", run.duration_s);
  if (const RunSummary* s = run.summary) {
    w.Gauge("borgcheck_verify_data", "1 if the last run was --verify-data, 0 for the keyless check.",
            s->verify_data ? 1 : 0);
    w.Gauge("borgcheck_objects", "Live objects in the repository at the last run.", double(s->objects_total));
    w.Gauge("borgcheck_objects_verified", "Live objects that passed every check of the last run.",
            double(s->objects_verified));
    w.Gauge("borgcheck_verified_bytes", "Stored bytes of the objects that passed the last run.",
            double(s->stored_bytes));
    w.Gauge("borgcheck_read_bytes", "Bytes read by the last run.", double(s->bytes_read));
    w.Gauge("borgcheck_errors", "Findings of severity error (data is bad) in the last run.", double(s->errors));
    w.Gauge("borgcheck_warnings", "Findings of severity warning (data intact) in the last run.", double(s->warnings));
    w.Header("borgcheck_findings", "Findings of the last run per stage (docs/json.md).");
    for (int i = 0; i < kStageCount; ++i) {
      w.Sample("borgcheck_findings", {{"stage", std::string(StageName(Stage(i)))}}, double(s->findings_by_stage[i]));
    }
  }
  if (run.archive_selection) {
    w.Gauge(std::string(kSelectionSuccess),
            "Unix time when a run of some archives only (REPO::ARCHIVE, -a, --first, --last, --archives-only) last "
            "verified them; 0 if none did.",
            run.success ? run.finished_at : last_selection_success.value_or(0));
  }
  for (const ExtraMetric& m : run.extra) {
    w.Header(m.name, m.help);
    w.Sample(m.name, m.labels, m.value);
  }
  return w.Take();
}

std::optional<double> LastSuccessIn(const std::string& text, const std::string& repository, std::string_view metric) {
  const std::string prefix = std::string(metric) + "{";
  for (size_t line = 0; line < text.size();) {
    size_t end = text.find('\n', line);
    if (end == std::string::npos) end = text.size();
    if (text.compare(line, prefix.size(), prefix) == 0) {
      size_t i = line + prefix.size() - 1;
      std::optional<std::string> repo = LabelValue(text, i, "repo");
      if (repo && *repo == LabelText(repository) && i < end) {
        std::string value = text.substr(i, end - i);
        char* stop = nullptr;
        double v = std::strtod(value.c_str(), &stop);
        if (stop != value.c_str() && v >= 0) return v;
      }
    }
    line = end + 1;
  }
  return std::nullopt;
}

std::optional<std::string> RepoIdIn(const std::string& text, const std::string& repository) {
  for (size_t line = 0; line < text.size();) {
    size_t end = text.find('\n', line);
    if (end == std::string::npos) end = text.size();
    const size_t brace = text.find('{', line);
    if (text.compare(line, 10, "borgcheck_") == 0 && brace < end) {
      size_t i = brace;
      std::optional<std::string> repo = LabelValue(text, i, "repo");
      i = brace;
      std::optional<std::string> id = LabelValue(text, i, "repo_id");
      if (repo && *repo == LabelText(repository) && id && !id->empty()) return id;
    }
    line = end + 1;
  }
  return std::nullopt;
}

Status WriteMetricsFile(const std::string& path, const MetricsRun& given) {
  MetricsRun run = given;
  std::optional<double> previous;
  std::optional<double> previous_selection;
  if (!run.Verified() || run.repository_id.empty()) {
    Result<std::string> old = ReadPrevious(path);
    if (old.ok()) {
      previous = LastSuccessIn(*old, run.repository);
      previous_selection = LastSuccessIn(*old, run.repository, kSelectionSuccess);
      if (run.repository_id.empty()) run.repository_id = RepoIdIn(*old, run.repository).value_or("");
    }
    if (run.state_last_success && (!previous || *previous < *run.state_last_success)) {
      previous = run.state_last_success;
    }
  }
  std::string text = FormatMetrics(run, previous, previous_selection);

  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string tmp = (slash == std::string::npos ? "" : dir) + "." + name + "." + std::to_string(::getpid()) + ".tmp";
  auto fail = [&](const std::string& what) {
    int e = errno;
    ::unlink(tmp.c_str());
    return Status(StatusCode::kIoError, "cannot write the metrics file " + path + " (" + what + "): " + std::strerror(e));
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int e = errno;
    struct stat st {};
    if (e == ENOENT && ::stat(dir.c_str(), &st) != 0) {
      // The recipes' folder (node_exporter's textfile folder) is made by its package, not by
      // borgcheck: say which folder is missing rather than which temporary file.
      return Status(StatusCode::kIoError, "cannot write the metrics file " + path + ": its folder " + dir +
                                              " does not exist (create it, or install node_exporter's textfile "
                                              "collector; docs/nightly.md)");
    }
    return Status(StatusCode::kIoError, "cannot write the metrics file " + path + " (creating " + tmp + "): " +
                                            std::strerror(e));
  }
  Status s = WriteAll(fd, text);
  if (!s.ok()) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status(StatusCode::kIoError, "cannot write the metrics file " + path + ": " + s.message());
  }
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) {
    Status st = fail("fsync");
    ::close(fd);
    return st;
  }
  if (::close(fd) != 0) return fail("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename");
  return Status::Ok();
}

}  // namespace borgcheck::report
