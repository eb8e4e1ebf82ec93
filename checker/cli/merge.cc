#include "checker/cli/merge.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/base/text_escape.h"
#include "checker/cli/cli_args.h"
#include "checker/cli/run_main.h"
#include "checker/report/exit_codes.h"
#include "checker/report/json_records.h"
#include "checker/report/output.h"
#include "checker/report/text_report.h"

namespace borgcheck::cli {
namespace {

Status Refused(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

// Messages keep the raw bytes: the text reporter escapes a message as a whole when it prints it.
std::string Name(const RunFile& f) { return f.name == "-" ? std::string("standard input") : f.name; }

// The file's whole text, at most kMaxRunFileBytes.
Result<std::string> ReadRunText(const std::string& name) {
  std::string text;
  std::istream* in = &std::cin;
  std::ifstream file;
  if (name != "-") {
    file.open(name, std::ios::binary);
    if (!file) return Status(StatusCode::kIoError, "cannot open " + name + ": " + std::strerror(errno));
    in = &file;
  }
  char buf[1 << 16];
  while (*in) {
    in->read(buf, sizeof buf);
    text.append(buf, size_t(in->gcount()));
    if (text.size() > kMaxRunFileBytes) {
      return Refused(fmt::format("{} is larger than {} GiB: not a run's output", name == "-" ? "standard input" : name,
                                 kMaxRunFileBytes >> 30));
    }
  }
  if (in->bad()) return Status(StatusCode::kIoError, "cannot read " + name);
  return text;
}

}  // namespace

bool RunFile::Finished() const {
  if (!summary || error) return false;
  if (!summary->stopped.empty() || summary->skipped) return false;
  if (!summary->shard.empty() && !shard) return false;
  return true;
}

Result<RunFile> ParseRunFile(std::string name, std::string_view text) {
  RunFile f;
  f.name = std::move(name);
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto where = [&] { return fmt::format("{} line {}", Name(f), line_no); };
    if (!report::JsonNestingWithin(line, kMaxRecordDepth)) {
      return Refused(where() + fmt::format(": nested deeper than {} levels: not a record of borgcheck --json",
                                           kMaxRecordDepth));
    }
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string()) {
      return Refused(where() + ": not a record of borgcheck --json (a JSON object with a `type`)");
    }
    const std::string type = j["type"].get<std::string>();
    if (f.summary || f.error) {
      return Refused(where() + ": a record after the run's end (" + type +
                     "): each run's output goes in a file of its own");
    }
    if (type == "progress") continue;
    if (type == "finding") {
      Result<report::Finding> r = report::ParseFindingJson(j);
      if (!r.ok()) return Refused(where() + ": " + r.status().message());
      f.findings.push_back(std::move(r).value());
    } else if (type == "shard") {
      if (f.shard) return Refused(where() + ": a second shard record");
      Result<engine::ShardResult> r = engine::ParseShardRecord(j);
      if (!r.ok()) return Refused(where() + ": " + r.status().message());
      f.shard = std::move(r).value();
    } else if (type == "summary") {
      int rc = 0;
      Result<report::RunSummary> r = report::ParseSummaryJson(j, &rc);
      if (!r.ok()) return Refused(where() + ": " + r.status().message());
      f.summary = std::move(r).value();
      f.exit_code = rc;
    } else if (type == "error") {
      Result<std::pair<Status, int>> r = report::ParseErrorJson(j);
      if (!r.ok()) return Refused(where() + ": " + r.status().message());
      f.error = r->first;
      f.exit_code = r->second;
      if (f.exit_code == report::kExitOk || f.exit_code == report::kExitWarnings ||
          f.exit_code == report::kExitIntegrityErrors) {
        return Refused(where() + fmt::format(": an error record with exit code {}, which only a summary has",
                                             f.exit_code));
      }
    } else if (type == "fleet") {
      return Refused(where() + ": a fleet report; merge the runs it was made of instead");
    } else {
      return Refused(where() + ": unknown record type " + type);
    }
  }
  if (!f.summary && !f.error) {
    return Refused(Name(f) + " holds no summary: the run did not finish (killed, preempted, out of disk?) or this "
                             "is not the output of borgcheck --json");
  }
  return f;
}

Result<MergeInput> PlanMerge(std::vector<RunFile> files) {
  MergeInput in;
  if (files.empty()) return Refused("nothing to merge: name the files of the runs (or - for standard input)");
  // A file with only an error record is a run that could not start (a wrong passphrase, a
  // held lock): it says nothing of whether it was a shard.
  bool any_shard = false, any_run = false;
  for (const RunFile& f : files) {
    if (!f.summary) continue;
    const bool is_shard = f.shard || !f.summary->shard.empty();
    (is_shard ? any_shard : any_run) = true;
  }
  if (!any_shard) {
    // A fleet: one run per repository, each with its own verdict and exit code, also a run that
    // stopped early (a time budget, a lost connection, a signal: its summary says so and its
    // exit code counts) or could not start (its error record): refusing the fleet for it would
    // hide another repository's 90.
    std::map<std::string, std::string> seen;  // repository id or name -> file
    for (RunFile& f : files) {
      const std::string key = f.summary && !f.summary->repository_id.empty() ? f.summary->repository_id
                              : f.summary                                    ? f.summary->repository
                                                                             : "file " + f.name;
      if (auto [it, added] = seen.emplace(key, f.name); !added) {
        return Refused(fmt::format("{} and {} are runs of the same repository ({}): merge one run per repository",
                                   it->second, Name(f), key));
      }
    }
    in.runs = std::move(files);
    return in;
  }
  for (const RunFile& f : files) {
    if (!f.summary) {
      return Refused(fmt::format("{}: the run could not start (exit {}: {}). Run that shard again, then merge", Name(f),
                                 f.exit_code, f.error ? f.error->message() : std::string("no record")));
    }
  }
  if (any_run) {
    return Refused("the files mix shards (--shard) and whole runs: merge each repository's shards first "
                   "(borgcheck merge --json SHARDS... > REPO.jsonl), then the fleet");
  }
  const RunFile* first = nullptr;
  std::map<uint32_t, const RunFile*> by_k;
  for (const RunFile& f : files) {
    if (!f.Finished() || !f.shard) {
      std::string why = f.error ? "it ended with an error (exit " + std::to_string(f.exit_code) + "): " + f.error->message()
                        : f.summary && !f.summary->stopped.empty() ? "it was stopped (" + f.summary->stopped + ")"
                                                                   : "it holds no shard record";
      const std::string which = f.summary && !f.summary->shard.empty() ? "shard " + f.summary->shard : "the shard";
      return Refused(fmt::format("{}: {} did not finish: {}. Run it again, then merge", Name(f), which, why));
    }
    const engine::ShardResult& s = *f.shard;
    if (!first) first = &f;
    const engine::ShardResult& a = *first->shard;
    if (s.repository_id != a.repository_id || s.repository != a.repository || s.format != a.format) {
      return Refused(fmt::format("{} and {} are shards of different repositories ({} {} and {} {}): merge each "
                                 "repository's shards on their own",
                                 Name(*first), Name(f), a.repository, a.repository_id,
                                 s.repository, s.repository_id));
    }
    if (s.transaction != a.transaction || s.plan != a.plan) {
      return Refused(fmt::format("{} checked transaction {} (plan {}), {} transaction {} (plan {}): the repository "
                                 "changed between the shards; run them all again",
                                 Name(*first), a.transaction, a.plan, Name(f), s.transaction, s.plan));
    }
    if (s.n != a.n) {
      return Refused(fmt::format("{} is a shard of {}, {} of {}: shards of one split only", Name(*first), a.n, Name(f), s.n));
    }
    if (s.verify_data != a.verify_data || s.repository_only != a.repository_only) {
      return Refused(fmt::format("{} and {} were run with different options (--verify-data, --repository-only): run "
                                 "every shard with the same ones",
                                 Name(*first), Name(f)));
    }
    if (auto [it, added] = by_k.emplace(s.k, &f); !added) {
      return Refused(fmt::format("shard {} of {} is in two files, {} and {}: merge each once", s.k, s.n,
                                 Name(*it->second), Name(f)));
    }
  }
  const uint32_t n = first->shard->n;
  std::vector<uint32_t> missing;
  for (uint32_t k = 1; k <= n; ++k) {
    if (!by_k.count(k)) missing.push_back(k);
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 20; ++i) list += (i ? ", " : "") + std::to_string(missing[i]);
    if (missing.size() > 20) list += fmt::format(" and {} more", missing.size() - 20);
    return Refused(fmt::format("{} {} of {} {} missing (no file holds {} record: a failed, preempted or unfinished "
                               "task?): run {} again (--shard K/{}), then merge all {}",
                               missing.size() == 1 ? "shard" : "shards", list, n, missing.size() == 1 ? "is" : "are",
                               missing.size() == 1 ? "its" : "their", missing.size() == 1 ? "it" : "them", n, n));
  }
  engine::ShardSet set;
  for (auto& [k, f] : by_k) set.shards.push_back(*f->shard);
  in.shards = std::move(set);
  return in;
}

int FleetExitCode(const std::vector<int>& codes) {
  bool integrity = false, other = false, warnings = false;
  for (int c : codes) {
    if (c == report::kExitIntegrityErrors) integrity = true;
    else if (c == report::kExitWarnings) warnings = true;
    else if (c != report::kExitOk) other = true;
  }
  return integrity ? report::kExitIntegrityErrors
         : other   ? report::kExitCouldNotRun
         : warnings ? report::kExitWarnings
                    : report::kExitOk;
}

namespace {

int PrintFleet(const std::vector<RunFile>& runs, bool json, report::Reporter& reporter, report::OutputStream& out) {
  std::vector<int> codes;
  nlohmann::json list = nlohmann::json::array();
  std::map<std::string, size_t> verdicts;
  for (const RunFile& r : runs) {
    codes.push_back(r.exit_code);
    std::string verdict, repository, id;
    if (r.summary) {
      reporter.PrintFindings(r.findings);
      reporter.PrintSummary(*r.summary, r.exit_code);
      verdict = report::VerdictName(*r.summary, r.exit_code);
      repository = r.summary->repository;
      id = r.summary->repository_id;
    } else {
      reporter.PrintError(Status(r.error->code(), Name(r) + ": " + r.error->message()), r.exit_code);
      verdict = report::VerdictName(r.exit_code);
    }
    verdicts[verdict]++;
    list.push_back({{"file", r.name},
                    {"repository", repository.empty() ? nlohmann::json(nullptr) : nlohmann::json(repository)},
                    {"repository_id", id.empty() ? nlohmann::json(nullptr) : nlohmann::json(id)},
                    {"verdict", verdict},
                    {"exit_code", r.exit_code},
                    {"errors", r.summary ? nlohmann::json(r.summary->errors) : nlohmann::json(nullptr)},
                    {"warnings", r.summary ? nlohmann::json(r.summary->warnings) : nlohmann::json(nullptr)}});
  }
  const int rc = FleetExitCode(codes);
  if (json) {
    out.Write(nlohmann::json({{"type", "fleet"},
                              {"repositories", std::move(list)},
                              {"verdict", report::VerdictName(rc)},
                              {"exit_code", rc}})
                  .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
              "\n");
  } else {
    std::string counts;
    for (const auto& [v, c] : verdicts) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", c, v);
    out.Write(fmt::format("fleet: {} repositor{}: {}; exit {} ({})\n", runs.size(), runs.size() == 1 ? "y" : "ies",
                          counts, rc, report::VerdictName(rc)));
  }
  out.Flush();
  return rc;
}

}  // namespace

int MergeMain(std::vector<std::string> args, report::OutputStream& out, report::OutputStream& err) {
  CLI::App app(
      "borgcheck merge: one verdict from the JSON Lines of the N shards of one repository\n"
      "(borgcheck --shard K/N --json), with a final pass on the repository (the checks that span\n"
      "segments or packs, and the archives); or one fleet verdict from whole runs of several\n"
      "repositories. The passphrase comes from the environment, as for any run. docs/distributed.md",
      "borgcheck merge");
  RawArgs raw;
  std::vector<std::string> files;
  app.add_option("FILE", files, "a run's JSON Lines (- for standard input)")->required();
  app.add_flag("--json", raw.json, "JSON Lines on stdout, as a run writes them (a fleet adds a fleet record)");
  CLI::Option* quiet = app.add_flag("-q,--quiet", raw.quiet, "print nothing for a clean result");
  app.add_flag("-v,--verbose,--info", raw.verbose, "also print notes, details and phase timings")->excludes(quiet);
  app.add_option("--threads", raw.threads, "worker threads of the final pass (default: all online cores)");
  app.add_option("--metrics-file", raw.metrics_file, "Prometheus metrics of the merged run (shards only)")
      ->type_name("PATH.prom");
  app.add_flag("--bypass-lock", raw.bypass_lock, "check even while borg's exclusive lock is held");
  app.add_option("--lock-wait", raw.lock_wait, "wait up to N seconds for borg's lock to be released")->type_name("N");
  CLI::Option* rsh = app.add_option("--rsh", raw.rsh, "the ssh command for an sftp:// repository")->type_name("CMD");
  CLI::Option* conns = app.add_option("--remote-connections", raw.remote_connections, "ssh connections (sftp://)")
                           ->type_name("N");
  CLI::Option* timeout = app.add_option("--remote-timeout", raw.remote_timeout, "seconds without an answer (sftp://)")
                             ->type_name("SECONDS");
  app.add_flag("--show-rc", raw.show_rc, "print the exit code on stderr at the end, as borg does");
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {  // as main's: argv is escaped
    const std::string what = e.what();
    const std::string message = CLI::FailureMessage::simple(a, e);
    return EscapeText(what) + message.substr(std::min(what.size(), message.size()));
  });
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
    if (json && e.get_exit_code() != 0) {
      report::MakeJsonReporter(out)->PrintError(Status(StatusCode::kInvalidArgument, e.what()),
                                                report::kExitCouldNotRun);
      return report::kExitCouldNotRun;
    }
    const int rc = app.exit(e);
    return rc == 0 ? 0 : report::kExitCouldNotRun;
  }
  raw.metrics_file_given = app.count("--metrics-file") > 0;
  raw.rsh_given = rsh->count() > 0;
  raw.remote_connections_given = conns->count() > 0;
  raw.remote_timeout_given = timeout->count() > 0;
  raw.progress = "never";

  report::TextOptions text;
  text.verbosity = raw.quiet ? report::Verbosity::kQuiet : raw.verbose ? report::Verbosity::kVerbose
                                                                       : report::Verbosity::kNormal;
  std::unique_ptr<report::Reporter> reporter =
      raw.json ? report::MakeJsonReporter(out) : report::MakeTextReporter(out, err, text);
  auto refuse = [&](const Status& s) {
    reporter->PrintError(s, report::kExitCouldNotRun);
    out.Flush();
    return report::kExitCouldNotRun;
  };

  std::vector<RunFile> parsed;
  size_t stdin_uses = 0;
  for (const std::string& name : files) {
    if (name == "-" && ++stdin_uses > 1) return refuse(Refused("- (standard input) is named twice"));
    Result<std::string> t = ReadRunText(name);
    if (!t.ok()) return refuse(t.status());
    Result<RunFile> f = ParseRunFile(name, *t);
    if (!f.ok()) return refuse(f.status());
    parsed.push_back(std::move(f).value());
  }
  Result<MergeInput> plan = PlanMerge(std::move(parsed));
  if (!plan.ok()) return refuse(plan.status());

  if (!plan->shards) {
    if (raw.metrics_file_given) {
      return refuse(Refused("--metrics-file names one repository's metrics: a fleet's runs write their own "
                            "(borgcheck --metrics-file in each task)"));
    }
    const int rc = PrintFleet(plan->runs, raw.json, *reporter, out);
    if (raw.show_rc && !raw.json) err.Write(fmt::format("borgcheck: terminating with {} status, rc {}\n",
                                                        rc == 0 ? "success" : rc == 1 ? "warning" : "error", rc));
    return out.broken() ? report::ExitCodeForOutputError(out.error()) : rc;
  }

  // The final pass on the repository the shards name, with their options.
  const engine::ShardResult& s = plan->shards->shards.front();
  raw.repository = s.repository;
  raw.verify_data = s.verify_data;
  raw.repository_only = s.repository_only;
  Result<CliOptions> opts = ValidateArgs(raw);
  if (!opts.ok()) return refuse(opts.status());
  opts->check.finish_shards = &*plan->shards;
  return RunAndReport(*opts, *reporter, out, err);
}

}  // namespace borgcheck::cli
