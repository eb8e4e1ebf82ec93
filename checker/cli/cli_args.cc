#include "checker/cli/cli_args.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/archive/archive_select.h"
#include "checker/base/text_escape.h"
#include "checker/report/exit_codes.h"
#include "checker/schedule/shard_split.h"

namespace borgcheck::cli {
namespace {

bool IsProgressWhen(const std::string& s) { return s == "auto" || s == "always" || s == "never"; }

// Short flags that take no value; only tokens made of these are split ("-qp" -> "-q" "-p").
bool IsCombinedShortFlags(const std::string& s) {
  if (s.size() < 3 || s[0] != '-' || s[1] == '-') return false;
  for (size_t i = 1; i < s.size(); ++i) {
    if (std::string("hpqv").find(s[i]) == std::string::npos) return false;
  }
  return true;
}

Status Invalid(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

}  // namespace

std::vector<std::string> NormalizeArgs(int argc, const char* const* argv) {
  std::vector<std::string> in;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (IsCombinedShortFlags(a)) {
      for (size_t j = 1; j < a.size(); ++j) in.push_back(std::string("-") + a[j]);
    } else {
      in.push_back(a);
    }
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string& a = in[i];
    if (a == "--") {
      out.insert(out.end(), in.begin() + long(i), in.end());
      break;
    }
    if (a == "--progress" && i + 1 < in.size() && IsProgressWhen(in[i + 1])) {
      out.push_back("--progress=" + in[++i]);
    } else if (a == "--progress" || a == "-p") {
      out.push_back("--progress=always");  // borg's bare flag: never eats the next argument
    } else {
      out.push_back(a);
    }
  }
  return out;
}

Result<CliOptions> ValidateArgs(const RawArgs& raw) {
  CliOptions cli;
  run::CheckOptions& o = cli.check;
  // borg's habit `borg check -r REPO`: the word "check" before -r is the subcommand borgcheck
  // does not have, not a repository (one named "check" is still reachable as ./check).
  if (raw.repository == "check" && !raw.repo_option.empty()) {
    return Invalid("borgcheck has no subcommands: 'check' before -r " + raw.repo_option +
                   " is borg's habit; run borgcheck -r " + raw.repo_option + " (or borgcheck " + raw.repo_option +
                   "), with the options of borg check");
  }
  if (!raw.repository.empty() && !raw.repo_option.empty()) {
    return Invalid("the repository is given twice (REPO " + raw.repository + " and -r/--repo " + raw.repo_option +
                   "): pass one of them");
  }
  o.repository = raw.repository.empty() ? raw.repo_option : raw.repository;
  if (o.repository.empty()) {
    if (const char* env = std::getenv("BORG_REPO")) o.repository = env;
  }
  if (o.repository.empty()) return Invalid("no repository given: pass REPO or set BORG_REPO");
  // borg 1.x's REPO::ARCHIVE names the repository and one archive of it ("REPO::" is REPO).
  // (An IPv6 host in brackets, sftp://[::1]/..., holds "::" of its own.)
  const size_t v6_end = o.repository.find("://[") != std::string::npos ? o.repository.find(']') : 0;
  if (size_t sep = o.repository.find("::", v6_end == std::string::npos ? 0 : v6_end);
      sep != std::string::npos) {
    o.archive = o.repository.substr(sep + 2);
    o.repository.resize(sep);
    if (o.repository.empty()) return Invalid("no repository before '::' in " + o.archive);
  }
  // borg's file:///abs/path is the local path /abs/path.
  if (o.repository.rfind("file:///", 0) == 0) o.repository.erase(0, 7);
  if (LooksRemote(o.repository)) {
    Result<RemoteRepository> remote = ParseRemoteRepository(o.repository);
    if (!remote.ok()) return remote.status();
    Result<std::vector<std::string>> rsh = SshCommand(raw.rsh, raw.rsh_given);
    if (!rsh.ok()) return rsh.status();
    remote->target.rsh = std::move(rsh).value();
    if (remote->transport == Transport::kBorgServe) {
      Result<std::vector<std::string>> borg = RemoteBorgCommand(raw.remote_path, raw.remote_path_given);
      if (!borg.ok()) return borg.status();
      cli.remote_borg = std::move(borg).value();
    } else if (raw.remote_path_given) {
      return Invalid("--remote-path names the server's borg for ssh:// repositories; an sftp:// repository runs no "
                     "borg on the server");
    }
    cli.remote = std::move(remote).value();
    // Until main connects and resolves the path: the URL as given names the repository.
    o.repository_url = o.repository;
  } else if (raw.rsh_given || raw.remote_connections_given || raw.remote_timeout_given || raw.remote_path_given) {
    return Invalid("--rsh, --remote-connections, --remote-timeout and --remote-path are for remote repositories "
                   "(sftp://, ssh://); " +
                   EscapeText(o.repository) + " is a local path");
  }
  if (raw.remote_connections_given &&
      (raw.remote_connections < 1 || unsigned(raw.remote_connections) > kMaxRemoteConnections)) {
    return Invalid(fmt::format("--remote-connections must be between 1 and {}", kMaxRemoteConnections));
  }
  const bool serve = cli.remote && cli.remote->transport == Transport::kBorgServe;
  cli.sftp.connections = raw.remote_connections_given ? unsigned(raw.remote_connections)
                         : serve                      ? kDefaultServeConnections
                                                      : kDefaultRemoteConnections;
  // Asked for: that many, at once. The default: the link's round trip decides (sftp only).
  cli.sftp.more_connections_from = raw.remote_connections_given || serve ? std::chrono::microseconds(0)
                                                                         : kMoreConnectionsFrom;
  const double timeout = raw.remote_timeout_given ? raw.remote_timeout : kDefaultRemoteTimeoutS;
  if (!(timeout >= 1 && timeout <= 86400)) {
    return Invalid("--remote-timeout must be between 1 and 86400 seconds");
  }
  cli.sftp.timeout = std::chrono::milliseconds(int64_t(timeout * 1000));
  while (o.repository.size() > 1 && o.repository.back() == '/') o.repository.pop_back();
  o.verify_data = raw.verify_data;
  if (raw.threads < 0 || raw.threads > 1024) {
    return Invalid("--threads must be between 1 and 1024 (0 or omitted: all online cores)");
  }
  o.threads = raw.threads ? unsigned(raw.threads) : std::max(1u, std::thread::hardware_concurrency());
  o.json = raw.json;
  o.quiet = raw.quiet;
  o.bypass_lock = raw.bypass_lock;
  cli.keep_cache = raw.keep_cache;
  if (raw.progress == "auto") o.progress = run::ProgressMode::kAuto;
  else if (raw.progress == "always") o.progress = run::ProgressMode::kAlways;
  else if (raw.progress == "never") o.progress = run::ProgressMode::kNever;
  else return Invalid("--progress must be auto, always or never");

  cli.verbosity = raw.quiet ? report::Verbosity::kQuiet
                  : raw.verbose ? report::Verbosity::kVerbose
                                : report::Verbosity::kNormal;
  double interval = raw.progress_interval;
  std::string interval_from = "--progress-interval";
  if (!raw.progress_interval_given) {
    if (const char* env = std::getenv("BORGCHECK_PROGRESS_INTERVAL"); env && *env) {
      char* end = nullptr;
      interval = std::strtod(env, &end);
      interval_from = "BORGCHECK_PROGRESS_INTERVAL";
      if (*end != '\0') interval = -1;
    } else {
      interval = kDefaultProgressIntervalS;
    }
  }
  if (!(interval >= 0.1 && interval <= 86400)) {
    return Invalid(interval_from + " must be a number of seconds between 0.1 and 86400");
  }
  cli.progress_interval_s = interval;
  // Benchmarking only (bench/compare --lanes off): BORGCHECK_LANES=0 hashes one object at a
  // time, to measure what the hash lanes gain; the findings are the same either way.
  if (const char* env = std::getenv("BORGCHECK_LANES"); env && std::string(env) == "0") o.hash_lanes = false;

  if (raw.lock_wait < 0 || raw.lock_wait > 86400) return Invalid("--lock-wait must be between 0 and 86400 seconds");
  o.lock_wait_seconds = unsigned(raw.lock_wait);
  if (raw.first < 0 || raw.last < 0) return Invalid("--first and --last take a positive number of archives");
  o.repository_only = raw.repository_only;
  o.archives_only = raw.archives_only;
  o.match_archives = raw.match_archives;
  o.first = unsigned(raw.first);
  o.last = unsigned(raw.last);
  bool selects_archives = !o.match_archives.empty() || o.first || o.last || !o.archive.empty();
  if (o.repository_only && selects_archives) {
    return Invalid("--repository-only contradicts an archive selection (-a/--match-archives, --first, --last, "
                   "REPO::ARCHIVE), as in borg check");
  }
  if (!o.archive.empty() && (!o.match_archives.empty() || o.first || o.last)) {
    return Invalid("REPO::ARCHIVE names one archive: it cannot be combined with -a/--match-archives, --first or "
                   "--last (as in borg)");
  }
  for (const std::string& p : o.match_archives) {
    if (std::string why = archive::CheckArchivePattern(p); !why.empty()) {
      return Invalid("-a/--match-archives " + p + ": " + why);
    }
  }
  // The archives can be read only with the key: a keyless run would check none of them and
  // must not pretend to have checked the selection.
  if ((o.archives_only || selects_archives) && !o.verify_data) {
    return Invalid(std::string(o.archives_only ? "--archives-only" : "an archive selection (-a/--match-archives, "
                                                                     "--first, --last, REPO::ARCHIVE)") +
                   " needs --verify-data: the archives are read with the key, and a run without it checks the "
                   "repository layer only");
  }

  if (Status s = ApplyPartialArgs(raw.partial, o, cli.test_hook_notes, cli.test_read_delay_us); !s.ok()) return s;
  if (cli.remote && cli.remote->transport == Transport::kBorgServe && o.sample_bytes) {
    return Invalid("--sample with a size is not available for ssh:// repositories: borg serve does not say how "
                   "large the repository is; give a share instead (--sample 5%)");
  }
  if (!raw.shard.empty()) {
    if (Status st = schedule::ParseShard(raw.shard, o.shard_k, o.shard_n); !st.ok()) return st;
    if (!raw.json) {
      return Invalid("--shard writes what the merge needs as JSON Lines: add --json and send stdout to a file "
                     "(borgcheck --verify-data --shard K/N --json REPO > shard-K-of-N.jsonl; docs/distributed.md)");
    }
    if (serve) {
      return Invalid("an ssh:// repository (borg serve) cannot be sharded: its units are runs of the server's scan, "
                     "which another process does not cut the same way; shard it over sftp:// or on a shared file "
                     "system (docs/distributed.md)");
    }
    const PartialRaw& p = raw.partial;
    if (!p.subset.empty() || !p.sample.empty() || !p.max_duration.empty() || !p.max_age.empty() ||
        !p.min_interval.empty() || !p.state_dir.empty()) {
      return Invalid("--shard reads a fixed split of whole segments or packs: it cannot be combined with --subset, "
                     "--sample, --max-duration, --max-age, --min-interval or --state-dir");
    }
    if (o.archives_only || selects_archives) {
      return Invalid("--shard checks whole segments or packs and the merge walks every archive: an archive "
                     "selection (--archives-only, -a/--match-archives, --first, --last, REPO::ARCHIVE) is not "
                     "available with --shard");
    }
    if (raw.metrics_file_given) {
      return Invalid("--metrics-file with --shard would record one shard's success as the repository's: give it "
                     "to the merge (borgcheck merge --metrics-file PATH.prom SHARDS...)");
    }
    // The shard record names the repository for the merge in JSON, which holds UTF-8 only.
    try {
      (void)nlohmann::json(o.RepositoryName()).dump();
    } catch (const nlohmann::json::exception&) {
      return Invalid("the repository's path is not valid UTF-8: the shard record cannot name it for the merge "
                     "(docs/distributed.md); run the shards through a symbolic link whose name is");
    }
    // The merge opens the repository the shard names, from wherever it runs: a local path is
    // recorded absolute.
    if (!cli.remote) {
      std::error_code ec;
      std::filesystem::path abs = std::filesystem::absolute(o.repository, ec).lexically_normal();
      if (!ec) o.repository = abs.string();
      while (o.repository.size() > 1 && o.repository.back() == '/') o.repository.pop_back();
    }
  }

  cli.show_rc = raw.show_rc;
  cli.soft_fail = raw.soft_fail;
  // An empty path (an unset variable in `--metrics-file "$PROM"`) would silently write nothing,
  // and the staleness alert would fire days later for no visible reason.
  if (raw.metrics_file_given && raw.metrics_file.empty()) {
    return Invalid("--metrics-file needs a file name (it was given an empty one); leave the option out to write no "
                   "metrics");
  }
  cli.metrics_file = raw.metrics_file;
  return cli;
}

bool IsSoftFailure(int exit_code, const io::Env& env, const std::string& repository) {
  if (exit_code == report::kExitRepoDoesNotExist || exit_code == report::kExitLockHeld) return true;
  if (exit_code != report::kExitNotARepository) return false;
  Result<std::vector<io::DirEntry>> entries = env.List(repository);
  return entries.ok() && entries->empty();
}

}  // namespace borgcheck::cli
