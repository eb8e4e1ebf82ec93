// RunAndReport: the run of validated options and its report and exit code (main.cc step 3-5),
// shared by a check (main) and the merge's final pass (merge.h).
#include "checker/cli/run_main.h"

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

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/base/stop_signal.h"
#include "checker/base/text_escape.h"
#include "checker/engine/shard.h"
#include "checker/io/fault_env.h"
#include "checker/remote/borg_serve_service.h"
#include "checker/remote/sftp_env.h"
#include "checker/report/exit_codes.h"
#include "checker/report/metrics_file.h"
#include "checker/report/progress_line.h"
#include "checker/report/text_report.h"
#include "checker/run/check_run.h"

namespace borgcheck::cli {
namespace {

extern "C" void OnSignal(int signo) { borgcheck::RequestStopFromSignal(signo); }
extern "C" void OnWindowChange(int) { borgcheck::report::NoteTerminalResized(); }

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// borg's --show-rc wording.
std::string ShowRcLine(int rc) {
  const char* kind = rc == 0 ? "success" : rc == 1 ? "warning" : "error";
  return fmt::format("borgcheck: terminating with {} status, rc {}\n", kind, rc);
}

// Sleeps up to one second; false when a stop signal arrived.
bool SleepASecond() {
  struct timespec t = {1, 0};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    if (borgcheck::PendingStopSignal()) return false;
  }
  return !borgcheck::PendingStopSignal();
}

}  // namespace

int RunAndReport(CliOptions& opts, report::Reporter& reporter_ref, report::OutputStream& out,
                 report::OutputStream& err) {
  report::Reporter* reporter = &reporter_ref;
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
  struct sigaction winch = {};
  winch.sa_handler = OnWindowChange;
  winch.sa_flags = SA_RESTART;
  sigemptyset(&winch.sa_mask);
  sigaction(SIGWINCH, &winch, nullptr);

  bool show_progress = opts.check.progress == run::ProgressMode::kAlways ||
                       (opts.check.progress == run::ProgressMode::kAuto && !opts.check.json &&
                        opts.verbosity != report::Verbosity::kQuiet && isatty(STDERR_FILENO));
  run::ProgressCallback progress;
  if (show_progress) {
    progress = [&](const report::Progress& p, bool final) {
      reporter->PrintProgress(p, final);
      // JSON progress goes to stdout: once nobody reads it, nothing else we write can arrive
      // either, so stop the run (main then exits 141 for EPIPE, 2 otherwise; step 5).
      if (opts.check.json && out.broken()) RequestStopFromSignal(SIGPIPE);
    };
  }

  // 3. Run.
  const double started_at = UnixNow();
  const auto started = std::chrono::steady_clock::now();
  // The test-only read delay (cli/partial_args.h): a slow disk for the partial-run tests.
  // Local files: the page cache is left as found unless --keep-cache (io/env.h says how).
  // (It outlives every file of the run: declared before them, it goes after them.)
  const std::unique_ptr<io::Env> leave_cache = opts.keep_cache ? nullptr : io::Env::MakeLeaveCacheAsFound();
  const io::Env& local = leave_cache ? *leave_cache : io::Env::Default();
  io::FaultEnv slow_env(local);
  if (opts.test_read_delay_us) slow_env.DelayReads(std::chrono::microseconds(opts.test_read_delay_us));
  const io::Env* env = opts.test_read_delay_us ? static_cast<const io::Env*>(&slow_env) : &local;
  for (const std::string& n : opts.test_hook_notes) {
    if (!opts.check.json) err.Write("borgcheck: " + EscapeText(n) + "\n");
  }
  // An sftp:// repository: every ssh connection is made here, before any worker thread (the
  // passphrase command, if any, runs later, also before the workers).
  std::unique_ptr<remote::SftpEnv> sftp;
  std::unique_ptr<remote::BorgServeService> served;  // an ssh:// repository's borg serve session
  Status connected;
  if (opts.remote && opts.remote->transport == cli::Transport::kBorgServe) {
    remote::BorgServeTarget t;
    t.rsh = opts.remote->target.rsh;
    t.user = opts.remote->target.user;
    t.host = opts.remote->target.host;
    if (opts.remote->target.port) t.port = uint16_t(opts.remote->target.port);
    t.remote_path = opts.remote_borg;
    t.timeout = opts.sftp.timeout;
    // The replies read ahead of the verifiers, 64 MiB over all sessions (a reply larger than
    // its share still comes whole).
    t.max_buffered_bytes = std::max<uint64_t>(16ull << 20, (64ull << 20) / std::max(1u, opts.sftp.connections));
    opts.check.repository = opts.remote->path;
    opts.check.repository_url = cli::CanonicalBorgServeUrl(opts.remote->target, opts.remote->path);
    Result<std::vector<std::unique_ptr<remote::BorgRpc>>> c = remote::ConnectSessions(t, opts.sftp.connections);
    if (c.ok()) {
      served = std::make_unique<remote::BorgServeService>(std::move(c).value(), opts.remote->path, t.host);
    } else {
      connected = Status(c.status().code(), "cannot connect to " + EscapeText(opts.check.repository_url) + ": " +
                                                c.status().message());
    }
  } else if (opts.remote) {
    Result<std::unique_ptr<remote::SftpEnv>> c = remote::SftpEnv::Connect(opts.remote->target, opts.remote->path, opts.sftp);
    if (c.ok()) {
      sftp = std::move(c).value();
      env = sftp.get();
      opts.check.repository = sftp->root();
      opts.check.repository_url = cli::CanonicalRemoteUrl(opts.remote->target, sftp->root());
    } else {
      connected = Status(c.status().code(), "cannot connect to " + EscapeText(opts.check.repository_url) + ": " +
                                                c.status().message());
    }
  }
  auto run_check = [&] {
    if (connected.ok()) return served ? run::RunServedCheck(opts.check, progress, *served) : run::RunCheck(opts.check, progress, *env);
    run::CheckOutcome failed;
    failed.status = connected;
    failed.summary.repository = opts.check.RepositoryName();
    return failed;
  };
  run::CheckOutcome outcome = run_check();
  // --lock-wait: every source checks borg's lock right after reading the config, before the
  // index, the segments or packs, the state or a passphrase, so waiting is trying again once a
  // second (the sleep ends at a stop signal) until the lock is gone or the time is up.
  // The text output says that it waits, for whom, and when the wait ended (-q: nothing).
  const bool tell_wait = !opts.check.json && opts.verbosity != report::Verbosity::kQuiet;
  std::optional<std::chrono::steady_clock::time_point> waiting_since;
  while (outcome.status.code() == StatusCode::kLockHeld && !outcome.stop_signal &&
         std::chrono::steady_clock::now() - started < std::chrono::seconds(opts.check.lock_wait_seconds)) {
    if (!waiting_since) {
      waiting_since = std::chrono::steady_clock::now();
      if (tell_wait) {
        err.Write(fmt::format("borgcheck: waiting up to {} s (--lock-wait) for borg's lock to be released: {}\n",
                              opts.check.lock_wait_seconds, EscapeText(outcome.status.message())));
        err.Flush();
      }
    }
    if (!SleepASecond()) {
      outcome.stop_signal = PendingStopSignal();
      outcome.status = Status(StatusCode::kInterrupted,
                              fmt::format("stopped by signal {} before the check finished", outcome.stop_signal));
      break;
    }
    outcome = run_check();
  }
  if (waiting_since && tell_wait && outcome.status.code() != StatusCode::kLockHeld && !outcome.stop_signal) {
    err.Write(fmt::format("borgcheck: borg's lock was released after {:.0f} s\n",
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - *waiting_since).count()));
  }
  // A stop signal that ended a wait for a remote server before the engine ran (reading the
  // config over sftp, opening the repository through borg serve) is a stop like any other.
  if (!outcome.stop_signal && outcome.status.code() == StatusCode::kInterrupted) {
    if (const int sig = PendingStopSignal()) outcome.stop_signal = sig;
  }
  // The server releases borg's lock when its session ends: before the report, not at exit.
  if (served) served->Close();
  const double finished_at = UnixNow();
  const double duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // 4-5. Report and exit code.
  int rc;
  // State warnings (a corrupt state set aside, a folder that is not writable): stderr in text,
  // the summary's notes in JSON.
  auto state_notes = [&](report::RunSummary& s) {
    std::vector<std::string> lines = outcome.warnings;
    if (!outcome.state_status.ok()) lines.push_back(outcome.state_status.message());
    for (const std::string& w : lines) {
      if (opts.check.json) s.notes.push_back(w);
      else err.Write("borgcheck: warning: " + EscapeText(w) + "\n");
    }
    for (const std::string& n : opts.test_hook_notes) s.notes.push_back(n);
  };
  if (outcome.stop_signal && outcome.partial_report) {
    // Stopped mid-run: every finding so far and a partial summary, then the signal's code.
    rc = report::kExitSignalBase + outcome.stop_signal;
    outcome.summary.version = BORGCHECK_VERSION;
    outcome.summary.started_at = started_at;
    outcome.summary.finished_at = finished_at;
    state_notes(outcome.summary);
    reporter->PrintFindings(outcome.findings);
    reporter->PrintSummary(outcome.summary, rc);
    if (!opts.check.json) reporter->PrintError(outcome.status, rc);
  } else if (outcome.stop_signal) {
    rc = report::kExitSignalBase + outcome.stop_signal;
    reporter->PrintError(outcome.status, rc);
  } else if (outcome.partial_report) {
    // A remote store's connection was lost mid-run: the findings so far and a partial summary
    // (stopped "connection-lost"); 90 if they show damage (that is certain), else 2.
    rc = report::ExitCodeForSummary(outcome.summary) == report::kExitIntegrityErrors ? report::kExitIntegrityErrors
                                                                                      : report::kExitCouldNotRun;
    outcome.summary.version = BORGCHECK_VERSION;
    outcome.summary.started_at = started_at;
    outcome.summary.finished_at = finished_at;
    state_notes(outcome.summary);
    if (opts.check.json) outcome.summary.notes.push_back(outcome.status.message());
    reporter->PrintFindings(outcome.findings);
    reporter->PrintSummary(outcome.summary, rc);
    if (!opts.check.json) reporter->PrintError(outcome.status, rc);
  } else if (!outcome.status.ok()) {
    rc = report::ExitCodeForStatus(outcome.status);
    Status shown = outcome.status;
    if (opts.soft_fail && cli::IsSoftFailure(rc, *env, opts.check.repository)) {
      rc = report::kExitSoftFailure;
      shown = Status(outcome.status.code(), outcome.status.message() + " (--soft-fail: exit 75, a soft failure)");
    }
    reporter->PrintError(shown, rc);
  } else {
    rc = report::ExitCodeForSummary(outcome.summary);  // 90, 2 (could not check), 1 or 0
    outcome.summary.version = BORGCHECK_VERSION;
    outcome.summary.started_at = started_at;
    outcome.summary.finished_at = finished_at;
    state_notes(outcome.summary);
    // A state that could not be saved: the check is valid, but the rotation did not advance.
    if (!outcome.state_status.ok() && rc != report::kExitIntegrityErrors) {
      rc = report::kExitCouldNotRun;
      outcome.summary.state_not_saved = true;
    }
    reporter->PrintFindings(outcome.findings);
    // A shard's record (engine/shard.h) between its findings and its summary: what the merge
    // reads (--shard needs --json).
    if (outcome.shard && opts.check.json && !out.broken()) {
      out.Write(engine::ShardRecordJson(*outcome.shard).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                "\n");
    }
    reporter->PrintSummary(outcome.summary, rc);
  }
  out.Flush();
  if (int e = out.error()) {
    rc = report::ExitCodeForOutputError(e);
    // A closed pipe is the reader's choice (`| head`): say nothing, as a SIGPIPE'd program.
    if (e != EPIPE) err.Write(fmt::format("borgcheck: cannot write the report to stdout: {}\n", std::strerror(e)));
  }

  if (!opts.metrics_file.empty()) {
    report::MetricsRun m;
    // The repo label is the absolute path: a relative one would name different repositories
    // from different working directories (and break the carry-forward).
    // A remote one's is its URL.
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(opts.check.repository, ec).lexically_normal();
    m.repository = !opts.check.repository_url.empty() ? opts.check.repository_url
                   : ec                                ? opts.check.repository
                                                       : abs.string();
    while (m.repository.size() > 1 && m.repository.back() == '/') m.repository.pop_back();
    m.repository_id = outcome.summary.repository_id;
    m.finished_at = finished_at;
    m.duration_s = duration;
    m.exit_code = rc;
    m.success = rc == report::kExitOk || rc == report::kExitWarnings;
    m.state_last_success = outcome.state_last_success_at;
    // A run of some archives only (REPO::ARCHIVE, -a, --first, --last, --archives-only) is no
    // verification of the repository: it leaves the last-success time to the full runs.
    m.archive_selection = opts.check.SelectsArchives();
    // A --min-interval skip verified nothing: it leaves the last-success time where it was.
    m.skipped = outcome.summary.skipped;
    bool finished = outcome.status.ok() && !outcome.stop_signal && !outcome.summary.skipped;
    m.summary = finished ? &outcome.summary : nullptr;
    // Partial runs and runs with a state file add their coverage (a plain full run's file is
    // unchanged: its coverage is its success).
    const report::RunSummary& s = outcome.summary;
    if ((finished || s.skipped) && (!s.complete || !s.coverage.state_file.empty())) m.extra = report::CoverageMetrics(s);
    if (Status s = report::WriteMetricsFile(opts.metrics_file, m); !s.ok()) {
      // Verified but unrecorded: the staleness alert would fire later for no visible reason.
      // The mail of such a night says both: what the check found (-q left out the line of a
      // clean run), and that only the record failed.
      if (m.success) {
        if (!opts.check.json && opts.verbosity == report::Verbosity::kQuiet && rc == report::kExitOk) {
          out.Write(report::FormatSummaryLine(outcome.summary, rc));
          out.Flush();
        }
        err.Write(fmt::format("borgcheck: {}; the check itself ended with exit {} ({}), exit 2 because the "
                              "run is not recorded\n",
                              EscapeText(s.message()), rc, report::VerdictName(outcome.summary, rc)));
        rc = report::kExitCouldNotRun;
      } else {
        err.Write("borgcheck: " + EscapeText(s.message()) + "\n");
      }
    }
  }
  if (opts.show_rc && !opts.check.json) err.Write(ShowRcLine(rc));
  err.Flush();
  return rc;
}

}  // namespace borgcheck::cli
