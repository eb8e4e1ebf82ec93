// Command-line parsing, in steps (after ripgrep's lowargs/hiargs): NormalizeArgs rewrites
// the borg forms CLI11 cannot express (bare --progress / -p, combined short flags); CLI11
// fills RawArgs as typed; ValidateArgs turns them into CliOptions: the run::CheckOptions the
// rest of the code sees, plus what only main uses (output, exit-code and metrics choices).
//
// Thread contract: main thread only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/cli/partial_args.h"
#include "checker/cli/remote_args.h"
#include "checker/io/env.h"
#include "checker/report/output.h"
#include "checker/run/check_options.h"

namespace borgcheck::cli {

struct RawArgs {
  std::string repository;       // positional; may be empty (then -r, then BORG_REPO)
  std::string repo_option;      // -r/--repo
  bool verify_data = false;
  int threads = 0;              // 0: all online cores
  bool json = false;
  std::string progress = "auto";
  double progress_interval = 0;  // --progress-interval, when progress_interval_given
  bool progress_interval_given = false;  // else BORGCHECK_PROGRESS_INTERVAL, else 60
  bool metrics_file_given = false;  // --metrics-file was on the command line (an empty value is refused)
  bool quiet = false;
  bool verbose = false;         // -v/--verbose/--info
  bool bypass_lock = false;
  int lock_wait = 0;
  bool show_rc = false;
  bool soft_fail = false;
  bool keep_cache = false;      // --keep-cache
  bool repository_only = false;
  bool archives_only = false;
  std::vector<std::string> match_archives;
  int first = 0;
  int last = 0;
  std::string metrics_file;
  PartialRaw partial;           // --subset, --sample, --max-duration, ... (partial_args.h)
  std::string rsh;              // --rsh (remote_args.h), when rsh_given
  bool rsh_given = false;
  int remote_connections = 0;   // when remote_connections_given
  bool remote_connections_given = false;
  double remote_timeout = 0;    // seconds, when remote_timeout_given
  bool remote_timeout_given = false;
  std::string remote_path;      // --remote-path (ssh:// only), when remote_path_given
  bool remote_path_given = false;
  std::string shard;            // --shard K/N (docs/distributed.md); "" none
};

struct CliOptions {
  run::CheckOptions check;
  report::Verbosity verbosity = report::Verbosity::kNormal;
  double progress_interval_s = 60;  // plain progress lines off a terminal
  bool show_rc = false;             // print borg's "terminating with ... status, rc N" at the end
  bool soft_fail = false;           // --soft-fail: absent/unmounted/locked repository -> exit 75
  std::string metrics_file;         // --metrics-file PATH ("" none)
  bool keep_cache = false;          // --keep-cache: leave the pages read in the page cache
                                    // (default: drop those not cached before, io::Env)
  std::vector<std::string> test_hook_notes;  // test-only hooks in effect (partial_args.h)
  uint64_t test_read_delay_us = 0;           // BORGCHECK_TEST_READ_DELAY_US
  std::optional<RemoteRepository> remote;    // an sftp:// or ssh:// repository: where and how to connect
  remote::SftpOptions sftp;                  // --remote-connections, --remote-timeout
  std::vector<std::string> remote_borg;      // ssh://: the server's borg (--remote-path, BORG_REMOTE_PATH)
};

inline constexpr double kDefaultProgressIntervalS = 60;

// argv[1..] with bare `--progress` and `-p` made `--progress=always`, `--progress WHEN`
// (WHEN one of auto, always, never) made `--progress=WHEN`, and combined short flags
// (`-qp`) split; nothing after `--` is touched. Returns the arguments without argv[0].
std::vector<std::string> NormalizeArgs(int argc, const char* const* argv);

// Returns the options, or kInvalidArgument with a message for the user.
Result<CliOptions> ValidateArgs(const RawArgs& raw);

// --soft-fail: whether a stop says the repository is absent or not mounted (exit 13, or a
// path that is an empty folder, as an unmounted mount point is) or borg's lock stayed held
// (73). `repository` is the validated path, in `env` (the local file system or the server).
bool IsSoftFailure(int exit_code, const io::Env& env, const std::string& repository);

}  // namespace borgcheck::cli
