#include "checker/report/output.h"

#include <cmath>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/report/exit_codes.h"

namespace borgcheck::report {
namespace {

std::string Rate(uint64_t bytes, double s) {
  return s > 0 ? FormatBytes(uint64_t(double(bytes) / s)) + "/s" : "-";
}

class TextReporter final : public Reporter {
 public:
  TextReporter(FILE* out, FILE* err, bool quiet) : out_(out), err_(err), quiet_(quiet) {}

  void PrintFindings(const std::vector<Finding>& sorted) override {
    for (const Finding& f : sorted) {
      std::string line = fmt::format("{}: {}", SeverityName(f.severity), StageName(f.stage));
      if (f.chunk_id) line += " chunk " + ChunkIdHex(*f.chunk_id);
      std::string loc = LocationSuffix(f);
      if (!loc.empty()) line += " " + loc;
      line += ": " + f.message;
      if (f.reread != Reread::kNotReread) line += fmt::format(" (second read: {})", RereadName(f.reread));
      fmt::print(out_, "{}\n", line);
    }
    std::fflush(out_);
  }

  void PrintSummary(const RunSummary& s, int exit_code) override {
    if (quiet_) return;
    for (const std::string& n : s.notes) fmt::print(out_, "note: {}\n", n);
    // borg 2 master keeps objects in packs and has no transactions: `segments` counts packs.
    std::string where = s.format == "borgstore-v4"
                            ? fmt::format("{} packs ({})", s.segments, s.live_list_source)
                            : fmt::format("{} segments, transaction {} ({})", s.segments,
                                          s.transaction, s.live_list_source);
    fmt::print(out_,
               "{} {}: {} of {} objects verified ({} stored, {} plaintext) in {}, "
               "{} errors, {} warnings, {:.2f}s, {}, {} threads: {}\n",
               s.verify_data ? "verify-data" : "repository check (keyless)",
               s.mode.empty() ? s.format : s.format + " " + s.mode, s.objects_verified,
               s.objects_total, FormatBytes(s.stored_bytes), FormatBytes(s.plaintext_bytes),
               where, s.errors, s.warnings, s.elapsed_s,
               Rate(s.bytes_read, s.elapsed_s), s.threads, VerdictName(exit_code));
    std::fflush(out_);
  }

  void PrintError(const Status& status, int /*exit_code*/) override {
    fmt::print(err_, "borgcheck: {}\n", status.message());
    std::fflush(err_);
  }

  void PrintProgress(const Progress& p, bool final) override {
    if (final) {
      fmt::print(err_, "\r\033[K");
      std::fflush(err_);
      return;
    }
    double pct = p.bytes_total ? 100.0 * double(p.bytes_done) / double(p.bytes_total) : 100.0;
    double rate = p.elapsed_s > 0 ? double(p.bytes_done) / p.elapsed_s : 0;
    std::string eta = "-";
    if (rate > 0 && p.bytes_total >= p.bytes_done) {
      uint64_t secs = uint64_t(double(p.bytes_total - p.bytes_done) / rate);
      eta = fmt::format("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    }
    fmt::print(err_, "\r\033[K{:5.1f}% {} of {}, {}/s, ETA {}", pct, FormatBytes(p.bytes_done),
               FormatBytes(p.bytes_total), FormatBytes(uint64_t(rate)), eta);
    std::fflush(err_);
  }

 private:
  FILE* out_;
  FILE* err_;
  bool quiet_;
};

nlohmann::json Optional(const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

class JsonReporter final : public Reporter {
 public:
  explicit JsonReporter(FILE* out) : out_(out) {}

  void Emit(const nlohmann::json& j) {
    fmt::print(out_, "{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    std::fflush(out_);
  }

  void PrintFindings(const std::vector<Finding>& sorted) override {
    for (const Finding& f : sorted) {
      Emit({{"type", "finding"},
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
    Emit({{"type", "summary"},
          {"repository", s.repository},
          {"format", s.format},
          {"mode", s.mode.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.mode)},
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
          {"warnings", s.warnings},
          {"findings_by_stage", by_stage},
          {"elapsed_s", s.elapsed_s},
          {"throughput_bytes_per_s", s.elapsed_s > 0 ? double(s.bytes_read) / s.elapsed_s : 0.0},
          {"threads", s.threads},
          {"notes", s.notes},
          {"verdict", VerdictName(exit_code)},
          {"exit_code", exit_code}});
  }

  void PrintError(const Status& status, int exit_code) override {
    Emit({{"type", "error"},
          {"code", StatusCodeName(status.code())},
          {"exit_code", exit_code},
          {"message", status.message()}});
  }

  void PrintProgress(const Progress& p, bool final) override {
    double rate = p.elapsed_s > 0 ? double(p.bytes_done) / p.elapsed_s : 0;
    nlohmann::json eta = nullptr;
    if (rate > 0 && p.bytes_total >= p.bytes_done) eta = double(p.bytes_total - p.bytes_done) / rate;
    Emit({{"type", "progress"},
          {"bytes_done", p.bytes_done},
          {"bytes_total", p.bytes_total},
          {"objects_done", p.objects_done},
          {"objects_total", p.objects_total},
          {"rate_bytes_per_s", rate},
          {"eta_s", eta},
          {"elapsed_s", p.elapsed_s},
          {"final", final}});
  }

 private:
  FILE* out_;
};

}  // namespace

std::unique_ptr<Reporter> MakeTextReporter(FILE* out, FILE* err, bool quiet) {
  return std::make_unique<TextReporter>(out, err, quiet);
}
std::unique_ptr<Reporter> MakeJsonReporter(FILE* out) { return std::make_unique<JsonReporter>(out); }

std::string VerdictName(int exit_code) {
  switch (exit_code) {
    case kExitOk: return "ok";
    case kExitWarnings: return "warnings";
    case kExitIntegrityErrors: return "integrity-errors";
    default: return "could-not-run";
  }
}

std::string FormatBytes(uint64_t n) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = double(n);
  int u = 0;
  while (v >= 1024 && u < 5) { v /= 1024; ++u; }
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

}  // namespace borgcheck::report
