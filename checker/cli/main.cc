// borgcheck's main(): parse flags, run the check, print, choose the exit code. No logic.
#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <string_view>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "checker/cli/cli_args.h"
#include "checker/report/exit_codes.h"
#include "checker/report/output.h"
#include "checker/run/check_run.h"

namespace {

extern "C" void OnSignal(int signo) { borgcheck::run::RequestStopFromSignal(signo); }

constexpr const char* kDescription =
    "borgcheck: verify a BorgBackup repository independently and in parallel.\n\n"
    "Without --verify-data: a keyless check of the repository layer (segment entry CRCs,\n"
    "index against log) that needs no passphrase. With --verify-data: every live object is\n"
    "also authenticated, decrypted, decompressed and re-hashed against its chunk id.\n"
    "The repository is opened read-only; nothing is written into it.\n\n"
    "Exit codes: 0 verified, nothing found; 1 warnings only (data intact); 90 integrity\n"
    "errors; 2 could not run or finish; 13 repository does not exist; 15 not a valid or\n"
    "supported repository; 42 key file not found; 52 wrong passphrase; 73 borg's lock is\n"
    "held; 128+N killed by signal N.\n\n"
    "Passphrase: BORG_PASSPHRASE, BORG_PASSCOMMAND, BORG_PASSPHRASE_FD, else the empty\n"
    "passphrase, else a prompt on the terminal. Key files: BORG_KEY_FILE, else BORG_KEYS_DIR\n"
    "(default ~/.config/borg/keys; BORG_BASE_DIR honoured).";

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
  CLI::App app(kDescription, "borgcheck");
  cli::RawArgs raw;
  app.add_option("REPO", raw.repository, "repository path (default: $BORG_REPO)");
  app.add_flag("--verify-data", raw.verify_data,
               "authenticate, decrypt, decompress and re-hash every live object (needs the key)");
  app.add_option("--threads", raw.threads, "worker threads (default: all online cores)");
  app.add_flag("--json", raw.json, "JSON Lines on stdout: finding, progress, summary, error records");
  app.add_option("--progress", raw.progress,
                 "auto (a line on stderr when it is a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_flag("-q,--quiet", raw.quiet, "print findings and errors only");
  app.add_flag("--bypass-lock", raw.bypass_lock, "check even while borg's exclusive lock is held");
  app.set_version_flag("--version", std::string("borgcheck ") + BORGCHECK_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    bool json = false;
    for (int i = 1; i < argc; ++i) json |= std::string_view(argv[i]) == "--json";
    if (json && e.get_exit_code() != 0) {  // keep the JSON contract: one error record
      report::MakeJsonReporter(stdout)->PrintError(
          Status(StatusCode::kInvalidArgument, e.what()), report::kExitCouldNotRun);
      return report::kExitCouldNotRun;
    }
    int rc = app.exit(e);
    return rc == 0 ? 0 : report::kExitCouldNotRun;
  }

  Result<run::CheckOptions> opts = cli::ValidateArgs(raw);
  std::unique_ptr<report::Reporter> reporter =
      raw.json ? report::MakeJsonReporter(stdout) : report::MakeTextReporter(stdout, stderr, raw.quiet);
  if (!opts.ok()) {
    reporter->PrintError(opts.status(), report::kExitCouldNotRun);
    return report::kExitCouldNotRun;
  }

  // Buffers of 1 MiB and more (per-worker decrypt and plaintext buffers, blocks for entries
  // larger than a read window) are mmapped and unmapped on free. glibc's default raises this
  // threshold after the first such free, and then those buffers' churn left ~20 MiB of freed
  // heap resident at 2 threads (bench/RESULTS.md, peak RSS).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);

  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  bool show_progress = opts->progress == run::ProgressMode::kAlways ||
                       (opts->progress == run::ProgressMode::kAuto && !opts->json && !opts->quiet &&
                        isatty(STDERR_FILENO));
  run::ProgressCallback progress;
  if (show_progress) {
    progress = [&](const report::Progress& p, bool final) { reporter->PrintProgress(p, final); };
  }
  run::CheckOutcome outcome = run::RunCheck(*opts, progress);
  if (outcome.stop_signal) {
    int rc = report::kExitSignalBase + outcome.stop_signal;
    reporter->PrintError(outcome.status, rc);
    return rc;
  }
  if (!outcome.status.ok()) {
    int rc = report::ExitCodeForStatus(outcome.status);
    reporter->PrintError(outcome.status, rc);
    return rc;
  }
  int rc = outcome.summary.errors ? report::kExitIntegrityErrors
           : outcome.summary.warnings ? report::kExitWarnings
                                      : report::kExitOk;
  reporter->PrintFindings(outcome.findings);
  reporter->PrintSummary(outcome.summary, rc);
  return rc;
}
