// borgcheck's main(): parse flags, run the check, print, choose the exit code. No logic.
//
// 1. Parse: NormalizeArgs, CLI11 into RawArgs, ValidateArgs into CliOptions.
// 2. Output: stdout and stderr through checked OutputStreams (a broken pipe or a full disk
//    never aborts; it decides the exit code in step 5).
// 3. Run: RunCheck, again once a second while borg's lock is held and --lock-wait allows.
// 4. Report: findings and summary, or the error.
// 5. Exit code: the verdict or the error's code; --soft-fail turns an absent, unmounted or
//    locked repository into 75; a broken stdout into 141 (EPIPE) or 2; then --metrics-file
//    and --show-rc.
#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string_view>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "checker/base/stop_signal.h"
#include "checker/base/text_escape.h"
#include "checker/cli/cli_args.h"
#include "checker/cli/merge.h"
#include "checker/cli/run_main.h"
#include "checker/io/fault_env.h"
#include "checker/remote/borg_serve_service.h"
#include "checker/remote/sftp_env.h"
#include "checker/report/exit_codes.h"
#include "checker/report/metrics_file.h"
#include "checker/report/output.h"
#include "checker/report/progress_line.h"
#include "checker/report/text_report.h"
#include "checker/run/check_run.h"

namespace {


constexpr const char* kDescription =
    "borgcheck: verify a BorgBackup repository independently and in parallel.\n\n"
    "Without --verify-data: a keyless check of the repository layer (segment entry CRCs,\n"
    "index against log) that needs no passphrase. With --verify-data: every live object is\n"
    "also authenticated, decrypted, decompressed and re-hashed against its chunk id, and\n"
    "every archive is walked: each file's chunks must be in the repository and intact;\n"
    "a bad chunk is reported with the archives, files and byte ranges that use it.\n"
    "The repository is opened read-only; nothing is written into it.\n"
    "Many machines: --shard K/N on each, then `borgcheck merge FILE...` (see its --help).\n\n"
    "Output: findings and one summary line on stdout (-q: nothing for a clean run; -v: also notes,\n"
    "details and phase timings); errors and progress on stderr.\n\n"
    "Exit codes: 0 verified, nothing found; 1 warnings only (data intact); 90 integrity\n"
    "errors; 2 could not run or finish; 13 repository does not exist; 15 not a valid or\n"
    "supported repository; 16 invalid value in the repository config; 40 not a key\n"
    "file; 41 key of another repository; 42 key file not found; 44 no key in the\n"
    "repository config; 50 no passphrase and no terminal;\n"
    "51 BORG_PASSCOMMAND failed; 52 wrong passphrase; 53 three wrong passphrases typed;\n"
    "73 borg's lock is held; 75 soft failure (--soft-fail); 141 stdout closed (EPIPE);\n"
    "128+N killed by signal N.\n\n"
    "Passphrase: BORG_PASSPHRASE, BORG_PASSCOMMAND, BORG_PASSPHRASE_FD, the systemd\n"
    "credential borg-passphrase ($CREDENTIALS_DIRECTORY), else the empty passphrase, else\n"
    "a prompt on the terminal. Key files: BORG_KEY_FILE, else BORG_KEYS_DIR (default\n"
    "~/.config/borg/keys; BORG_BASE_DIR honoured). Repository: REPO, -r, else BORG_REPO.";

// --help in at most kHelpWidth columns (a terminal, a man page): CLI11 prints each description
// on one line, so this one wraps them at word boundaries (continuation lines are indented under
// the description by CLI11), and leaves out the "Excludes:" tags (the error for a conflicting
// pair names both options). The positional REPO is listed under "Repository:".
class HelpFormatter final : public CLI::Formatter {
 public:
  static constexpr size_t kHelpWidth = 100;
  static constexpr size_t kNameWidth = 30;
  HelpFormatter() {
    column_width(kNameWidth);
    label("Positionals", "Repository");
  }
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string s = CLI::Formatter::make_option_opts(opt);
    if (size_t at = s.find(" " + get_label("Excludes") + ":"); at != std::string::npos) s.erase(at);
    return s;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    const std::string text = CLI::Formatter::make_option_desc(opt);
    const size_t room = kHelpWidth - kNameWidth;
    std::string out, line;
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find(' ', start);
      if (end == std::string::npos) end = text.size();
      const std::string word = text.substr(start, end - start);
      if (!line.empty() && line.size() + 1 + word.size() > room) {
        out += line + "\n";
        line.clear();
      }
      line += line.empty() ? word : " " + word;
      start = end + 1;
    }
    return out + line;
  }
};

}  // namespace

int main(int argc, char** argv) {
  using namespace borgcheck;
#ifdef BORGCHECK_FUZZING_UNSAFE_SKIP_AUTH
  // A fuzzing build ignores MAC results (so mutations reach the parsers): such a binary must
  // never give a verdict on a real repository.
  std::fprintf(stderr, "borgcheck: this binary was built for fuzzing (MAC checks skipped) and "
                       "cannot verify repositories; use a release build\n");
  (void)argc;
  (void)argv;
  return report::kExitCouldNotRun;
#endif
  // SIGPIPE would kill us mid-report; ignored, a closed stdout is EPIPE on the next write.
  std::signal(SIGPIPE, SIG_IGN);
  report::OutputStream out(STDOUT_FILENO), err(STDERR_FILENO);

  // 1. Parse.
  CLI::App app(kDescription, "borgcheck");
  app.formatter(std::make_shared<HelpFormatter>());
  cli::RawArgs raw;
  app.add_option("REPO", raw.repository,
                 "repository path, sftp:// or ssh:// URL, or borg 1.x's REPO::ARCHIVE (default: -r, $BORG_REPO)");
  app.add_option("-r,--repo", raw.repo_option, "repository path, sftp:// or ssh:// URL (as borg 2's -r)");
  app.add_flag("--verify-data", raw.verify_data,
               "authenticate, decrypt, decompress and re-hash every live object (needs the key)");
  app.add_option("--threads", raw.threads, "worker threads (default: all online cores)");
  app.add_flag("--json", raw.json, "JSON Lines on stdout: finding, progress, summary, error records");
  app.add_option("-p,--progress", raw.progress,
                 "bare: always; auto (default: on a terminal), always, never")
      ->type_name("[=WHEN]")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  CLI::Option* interval = app.add_option("--progress-interval", raw.progress_interval,
                 "seconds between plain progress lines off a terminal (default: "
                 "$BORGCHECK_PROGRESS_INTERVAL, else 60)");
  CLI::Option* quiet = app.add_flag("-q,--quiet", raw.quiet, "print nothing for a clean run; else findings, errors and the summary line");
  app.add_flag("-v,--verbose,--info", raw.verbose, "also print notes, details and phase timings")->excludes(quiet);
  app.add_flag("--show-rc", raw.show_rc, "print the exit code on stderr at the end, as borg does");
  app.add_flag("--bypass-lock", raw.bypass_lock, "check even while borg's exclusive lock is held");
  app.add_option("--lock-wait", raw.lock_wait, "wait up to N seconds for borg's lock to be released (default: 0)")
      ->type_name("N");
  app.add_flag("--soft-fail", raw.soft_fail,
               "exit 75 (borgmatic's soft failure) when the repository is absent, not mounted, or locked");
  app.add_flag("--keep-cache", raw.keep_cache,
               "leave what it read in the page cache (default: drop what was not cached before)");
  CLI::Option* repo_only = app.add_flag("--repository-only", raw.repository_only,
                                        "objects only: do not walk the archives");
  CLI::Option* archives_only =
      app.add_flag("--archives-only", raw.archives_only,
                   "walk the archives and verify only the objects they reference (needs --verify-data)");
  CLI::Option* match = app.add_option("-a,--match-archives,--glob-archives", raw.match_archives,
                                      "only archives matching PATTERN (sh:GLOB, re:REGEX, id:NAME, aid:HEX; "
                                      "needs --verify-data)")
                           ->type_name("PATTERN")
                           ->allow_extra_args(false);  // one value each: `-a PATTERN REPO` keeps REPO
  CLI::Option* first = app.add_option("--first", raw.first, "only the N oldest archives (by archive time)")->type_name("N");
  CLI::Option* last = app.add_option("--last", raw.last, "only the N newest archives (by archive time)")->type_name("N");
  repo_only->excludes(archives_only);
  first->excludes(last);
  (void)match;
  // Partial runs (docs/nightly.md).
  app.add_option("--subset", raw.partial.subset,
                 "check slice n of t of the objects (by chunk id), or today's: daily/week, daily/month")
      ->type_name("n/t");
  app.add_option("--sample", raw.partial.sample, "check a random sample: a share (5%) or a size (50G); no coverage "
                 "guarantee")
      ->type_name("P%|SIZE");
  app.add_option("--sample-seed", raw.partial.sample_seed, "the sample's seed (the summary reports it), to repeat one")
      ->type_name("N");
  app.add_option("--max-duration", raw.partial.max_duration,
                 "start no new segment or pack after this long (2h, 90m); the least recently verified go first")
      ->type_name("DURATION");
  app.add_option("--max-age", raw.partial.max_age, "verify again what was verified longer ago (30d); skip the rest")
      ->type_name("DURATION");
  app.add_option("--min-interval", raw.partial.min_interval,
                 "do nothing (exit 0) if a clean full verification finished within this (7d)")
      ->type_name("DURATION");
  app.add_option("--state-dir", raw.partial.state_dir,
                 "where partial runs keep their state (default: $STATE_DIRECTORY, $XDG_STATE_HOME/borgcheck, "
                 "~/.local/state/borgcheck)")
      ->type_name("DIR");
  // Remote repositories (docs/remote.md).
  CLI::Option* rsh = app.add_option("--rsh", raw.rsh, "the ssh command for remote repositories (default: $BORG_RSH, else ssh)")
                         ->type_name("CMD");
  CLI::Option* remote_path =
      app.add_option("--remote-path", raw.remote_path,
                     "the server's borg for ssh:// repositories (default: $BORG_REMOTE_PATH, else borg)")
          ->type_name("CMD");
  CLI::Option* remote_connections = app.add_option("--remote-connections", raw.remote_connections,
                 fmt::format("ssh connections to the server (sftp://: default {} where the first one's round "
                             "trip takes {} ms or more, else 1; ssh://: borg serve sessions, default {})",
                             cli::kDefaultRemoteConnections, cli::kMoreConnectionsFrom.count() / 1000,
                             cli::kDefaultServeConnections))
      ->type_name("N");
  CLI::Option* remote_timeout =
      app.add_option("--remote-timeout", raw.remote_timeout,
                     fmt::format("seconds without an answer after which the server counts as lost (default: {:.0f})",
                                 cli::kDefaultRemoteTimeoutS))
          ->type_name("SECONDS");
  app.add_option("--shard", raw.shard,
                 "check shard K of N (whole segments or packs, balanced by bytes) for `borgcheck merge`; needs --json "
                 "(docs/distributed.md)")
      ->type_name("K/N");
  app.add_option("--metrics-file", raw.metrics_file,
                 "write Prometheus metrics for node_exporter's textfile collector (replaced atomically)")
      ->type_name("PATH.prom");
  app.set_version_flag("--version", std::string("borgcheck ") + BORGCHECK_VERSION);
  // CLI11's messages quote the arguments (an unknown option, a value that does not convert):
  // escaped as every other string from the command line (checker/base/text_escape.h).
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    const std::string what = e.what();
    const std::string message = CLI::FailureMessage::simple(a, e);  // what + "\n" + a hint
    return EscapeText(what) + message.substr(std::min(what.size(), message.size()));
  });

  std::vector<std::string> args = cli::NormalizeArgs(argc, argv);
  // `borgcheck merge FILE...` (docs/distributed.md); a repository named "merge" is ./merge.
  if (!args.empty() && args.front() == "merge") {
    return cli::MergeMain(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  }
  // Errors before parsing keep the JSON contract when --json is among the arguments.
  const bool json_arg = std::find(args.begin(), args.end(), "--json") != args.end();
  if (Status split = cli::CheckSplitDurations(args); !split.ok()) {
    std::unique_ptr<report::Reporter> r =
        json_arg ? report::MakeJsonReporter(out) : report::MakeTextReporter(out, err, {});
    r->PrintError(split, report::kExitCouldNotRun);
    return report::kExitCouldNotRun;
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last-first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (json_arg && e.get_exit_code() != 0) {  // keep the JSON contract: one error record
      report::MakeJsonReporter(out)->PrintError(Status(StatusCode::kInvalidArgument, e.what()),
                                                report::kExitCouldNotRun);
      return out.broken() ? report::ExitCodeForOutputError(out.error()) : report::kExitCouldNotRun;
    }
    int rc = app.exit(e);
    return rc == 0 ? 0 : report::kExitCouldNotRun;
  }

  raw.progress_interval_given = interval->count() > 0;
  raw.metrics_file_given = app.count("--metrics-file") > 0;
  raw.rsh_given = rsh->count() > 0;
  raw.remote_connections_given = remote_connections->count() > 0;
  raw.remote_path_given = remote_path->count() > 0;
  raw.remote_timeout_given = remote_timeout->count() > 0;
  Result<cli::CliOptions> parsed = cli::ValidateArgs(raw);
  report::TextOptions text;
  text.verbosity = parsed.ok() ? parsed->verbosity : report::Verbosity::kNormal;
  text.progress_on_terminal = isatty(STDERR_FILENO);
  if (parsed.ok()) text.progress_interval_s = parsed->progress_interval_s;
  std::unique_ptr<report::Reporter> reporter =
      raw.json ? report::MakeJsonReporter(out) : report::MakeTextReporter(out, err, text);
  if (!parsed.ok()) {
    reporter->PrintError(parsed.status(), report::kExitCouldNotRun);
    return report::kExitCouldNotRun;
  }
  cli::CliOptions& opts = *parsed;

  return cli::RunAndReport(opts, *reporter, out, err);
}
