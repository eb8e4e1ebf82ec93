#include "checker/report/output.h"

#include <memory>

#include <nlohmann/json.hpp>

#include "checker/base/text_escape.h"
#include "checker/report/exit_codes.h"
#include "checker/report/json_records.h"
#include "checker/report/progress_line.h"

namespace borgcheck::report {
namespace {

class TextReporter final : public Reporter {
 public:
  TextReporter(OutputStream& out, OutputStream& err, const TextOptions& options)
      : out_(out), err_(err), options_(options) {}

  void PrintFindings(const std::vector<Finding>& sorted) override {
    out_.Write(FormatFindings(sorted));
    out_.Flush();
  }

  void PrintSummary(const RunSummary& s, int exit_code) override {
    // -q leaves out the line of a clean run only: whatever else a cron mail carries (findings,
    // warnings, could not check) comes with the verdict and what was verified.
    if (options_.verbosity == Verbosity::kQuiet && exit_code == kExitOk) return;
    if (options_.verbosity == Verbosity::kVerbose) out_.Write(FormatVerboseLines(s));
    out_.Write(FormatSummaryLine(s, exit_code));
    out_.Write(FormatCoverageLine(s));
    out_.Flush();
  }

  void PrintError(const Status& status, int /*exit_code*/) override {
    err_.Write("borgcheck: " + EscapeText(status.message()) + "\n");
    err_.Flush();
  }

  void PrintProgress(const Progress& p, bool final) override {
    if (err_.broken()) return;  // stderr is gone: progress goes quiet, the run goes on
    window_.Add(p.elapsed_s, p.bytes_done);
    if (!options_.progress_on_terminal) {
      // A log gets one plain line every interval (none for a run shorter than that) and no
      // final one: the summary line follows.
      if (final || p.elapsed_s - last_plain_s_ < options_.progress_interval_s) return;
      last_plain_s_ = p.elapsed_s;
      err_.Write(PlainProgressLine(p, window_.Rate()) + "\n");
      err_.Flush();
      return;
    }
    if (final) {
      err_.Write("\r\033[K");
      err_.Flush();
      return;
    }
    if (TakeTerminalResized() || columns_ == 0) columns_ = TerminalColumns(err_.fd()).value_or(80);
    err_.Write("\r\033[K" + TerminalProgressLine(p, window_.Rate(), columns_));
    err_.Flush();
  }

 private:
  OutputStream& out_;
  OutputStream& err_;
  const TextOptions options_;
  RateWindow window_;
  size_t columns_ = 0;       // 0: not read yet
  double last_plain_s_ = 0;  // elapsed time of the last plain line (0: the run's start)
};

nlohmann::json Optional(const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

class JsonReporter final : public Reporter {
 public:
  explicit JsonReporter(OutputStream& out) : out_(out) {}

  void Emit(const nlohmann::json& j) {
    out_.Write(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    out_.Flush();
  }

  void PrintFindings(const std::vector<Finding>& sorted) override {
    for (const Finding& f : sorted) {
      if (out_.broken()) return;
      Emit(FindingJson(f));
    }
  }

  void PrintSummary(const RunSummary& s, int exit_code) override { Emit(SummaryJson(s, exit_code)); }

  void PrintError(const Status& status, int exit_code) override { Emit(ErrorJson(status, exit_code)); }

  void PrintProgress(const Progress& p, bool final) override {
    if (out_.broken()) return;
    window_.Add(p.elapsed_s, p.bytes_done);
    double rate = p.elapsed_s > 0 ? double(p.bytes_done) / p.elapsed_s : 0;
    std::optional<double> eta = EtaSeconds(p, window_.Rate());
    if (final && p.bytes_done >= p.bytes_total) eta = 0.0;
    Emit({{"type", "progress"},
          {"bytes_done", p.bytes_done},
          {"bytes_total", p.bytes_total},
          {"objects_done", p.objects_done},
          {"objects_total", p.objects_total},
          {"rate_bytes_per_s", rate},
          {"eta_s", Optional(eta)},
          {"elapsed_s", p.elapsed_s},
          {"phase", p.phase},
          {"final", final}});
  }

 private:
  OutputStream& out_;
  RateWindow window_;
};

}  // namespace

std::unique_ptr<Reporter> MakeTextReporter(OutputStream& out, OutputStream& err, const TextOptions& options) {
  return std::make_unique<TextReporter>(out, err, options);
}
std::unique_ptr<Reporter> MakeJsonReporter(OutputStream& out) { return std::make_unique<JsonReporter>(out); }

std::string VerdictName(int exit_code) {
  switch (exit_code) {
    case kExitOk: return "ok";
    case kExitWarnings: return "warnings";
    case kExitIntegrityErrors: return "integrity-errors";
    default: return exit_code > kExitSignalBase && exit_code < kExitSignalBase + 65 ? "interrupted" : "could-not-run";
  }
}

std::string VerdictName(const RunSummary& s, int exit_code) {
  if (exit_code == kExitCouldNotRun && s.stopped == "connection-lost") return "connection-lost";
  if (exit_code == kExitCouldNotRun && s.io_errors) return "could-not-check";
  if (exit_code == kExitCouldNotRun && s.state_not_saved) return "state-not-saved";
  return VerdictName(exit_code);
}

}  // namespace borgcheck::report
