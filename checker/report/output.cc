#include "checker/report/output.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/base/text_escape.h"
#include "checker/report/exit_codes.h"
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
nlohmann::json OptionalText(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }
nlohmann::json OptionalTime(double unix_s) {
  return unix_s > 0 ? nlohmann::json(FormatRfc3339(unix_s)) : nlohmann::json(nullptr);
}

class JsonReporter final : public Reporter {
 public:
  explicit JsonReporter(OutputStream& out) : out_(out) {}

  void Emit(const nlohmann::json& j) {
    out_.Write(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    out_.Flush();
  }

  static nlohmann::json AffectedJson(const Finding& f) {
    if (!f.affected) return nullptr;
    nlohmann::json uses = nlohmann::json::array();
    for (const AffectedUse& u : f.affected->uses) {
      uses.push_back({{"archive", u.archive},
                      {"archive_id", ChunkIdHex(u.archive_id)},
                      {"use", u.use},
                      {"path", Optional(u.path)},
                      {"begin", Optional(u.begin)},
                      {"end", Optional(u.end)},
                      {"via", Optional(u.via)},
                      {"items_read", Optional(u.items_read)},
                      {"path_before", Optional(u.path_before)},
                      {"path_after", Optional(u.path_after)}});
    }
    return uses;
  }

  void PrintFindings(const std::vector<Finding>& sorted) override {
    for (const Finding& f : sorted) {
      if (out_.broken()) return;
      Emit({{"type", "finding"},
            {"affected", AffectedJson(f)},
            {"affected_total", f.affected ? nlohmann::json(f.affected->total) : nlohmann::json(nullptr)},
            {"advice", OptionalText(f.advice)},
            {"severity", SeverityName(f.severity)},
            {"stage", StageName(f.stage)},
            {"chunk_id", f.chunk_id ? nlohmann::json(ChunkIdHex(*f.chunk_id)) : nlohmann::json(nullptr)},
            {"segment", Optional(f.segment)},
            {"offset", Optional(f.offset)},
            {"location", LocationSuffix(f)},
            {"message", f.message},
            {"reread", RereadName(f.reread)}});
    }
  }

  void PrintSummary(const RunSummary& s, int exit_code) override {
    nlohmann::json by_stage = nlohmann::json::object();
    for (int i = 0; i < kStageCount; ++i) by_stage[std::string(StageName(Stage(i)))] = s.findings_by_stage[i];
    nlohmann::json coverage = nullptr;
    if (s.has_coverage) {
      const RunSummary::Coverage& c = s.coverage;
      const double oldest_age = c.oldest_verified_at > 0 && s.finished_at > 0
                                    ? std::max(0.0, s.finished_at - c.oldest_verified_at) : -1;
      nlohmann::json cycle = nullptr;
      if (c.cycle_started_at > 0) {
        cycle = {{"started_at", OptionalTime(c.cycle_started_at)},
                 {"completed_at", OptionalTime(c.cycle_completed_at)},
                 {"units", c.cycle_units},
                 {"units_done", c.cycle_units_done},
                 {"slices", c.cycle_slices ? nlohmann::json(c.cycle_slices) : nlohmann::json(nullptr)},
                 {"slices_done", c.cycle_slices ? nlohmann::json(c.cycle_slices_done) : nlohmann::json(nullptr)}};
      }
      coverage = {{"ratio", c.ratio},
                  {"max_age_s", c.max_age_s > 0 ? nlohmann::json(c.max_age_s) : nlohmann::json(nullptr)},
                  {"units_verified", c.units_verified},
                  {"units_partly_verified", c.units_partly_verified},
                  {"units_never_verified", c.units_never_verified},
                  {"cycle", cycle},
                  {"full_verification_at", OptionalTime(c.full_verification_at)},
                  {"oldest_unit_verified_at", OptionalTime(c.oldest_verified_at)},
                  {"oldest_unit_age_s", oldest_age >= 0 ? nlohmann::json(oldest_age) : nlohmann::json(nullptr)},
                  {"state_file", OptionalText(c.state_file)}};
    }
    Emit({{"type", "summary"},
          {"complete", s.complete},
          {"stopped", OptionalText(s.stopped)},
          {"subset", OptionalText(s.subset)},
          {"sample_fraction", s.sample_fraction > 0 ? nlohmann::json(s.sample_fraction) : nlohmann::json(nullptr)},
          {"sample_seed", s.sample_fraction > 0 ? nlohmann::json(s.sample_seed) : nlohmann::json(nullptr)},
          {"bytes_total", s.bytes_total},
          {"bytes_skipped", s.bytes_skipped},
          {"units_total", s.units_total},
          {"units_not_due", s.units_not_due},
          {"coverage", coverage},
          {"repository", s.repository},
          {"repository_id", OptionalText(s.repository_id)},
          {"format", s.format},
          {"mode", OptionalText(s.mode)},
          {"verify_data", s.verify_data},
          {"transaction", s.transaction},
          {"live_list_source", s.live_list_source},
          {"segments", s.segments},
          {"objects_total", s.objects_total},
          {"objects_verified", s.objects_verified},
          {"stored_bytes", s.stored_bytes},
          {"plaintext_bytes", s.plaintext_bytes},
          {"bytes_read", s.bytes_read},
          {"errors", s.errors},
          {"io_errors", s.io_errors},
          {"warnings", s.warnings},
          {"findings_by_stage", by_stage},
          {"elapsed_s", s.elapsed_s},
          {"throughput_bytes_per_s", s.elapsed_s > 0 ? double(s.bytes_read) / s.elapsed_s : 0.0},
          {"threads", s.threads},
          {"notes", s.notes},
          {"archives_total", Optional(s.archives_total)},
          {"archives_checked", Optional(s.archives_checked)},
          {"archives_not_checked", OptionalText(s.archives_not_checked)},
          {"version", OptionalText(s.version)},
          {"started_at", OptionalTime(s.started_at)},
          {"finished_at", OptionalTime(s.finished_at)},
          {"verdict", s.skipped ? std::string("skipped") : VerdictName(s, exit_code)},
          {"exit_code", exit_code}});
  }

  void PrintError(const Status& status, int exit_code) override {
    Emit({{"type", "error"},
          {"code", StatusCodeName(status.code())},
          {"exit_code", exit_code},
          {"message", status.message()}});
  }

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
