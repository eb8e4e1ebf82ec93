#include "checker/cli/cli_args.h"

#include <cstdlib>
#include <thread>

namespace borgcheck::cli {

Result<run::CheckOptions> ValidateArgs(const RawArgs& raw) {
  run::CheckOptions o;
  o.repository = raw.repository;
  if (o.repository.empty()) {
    if (const char* env = std::getenv("BORG_REPO")) o.repository = env;
  }
  if (o.repository.empty()) {
    return Status(StatusCode::kInvalidArgument, "no repository given: pass REPO or set BORG_REPO");
  }
  if (o.repository.find("://") != std::string::npos || o.repository.rfind("ssh:", 0) == 0 ||
      (o.repository.find(':') != std::string::npos && o.repository.front() != '/' &&
       o.repository.find(':') < o.repository.find('/'))) {
    return Status(StatusCode::kInvalidArgument,
                  "remote repositories are not supported: " + o.repository +
                      " (borgcheck reads a local path; mount the repository or run it on the server)");
  }
  while (o.repository.size() > 1 && o.repository.back() == '/') o.repository.pop_back();
  o.verify_data = raw.verify_data;
  if (raw.threads < 0 || raw.threads > 1024) {
    return Status(StatusCode::kInvalidArgument, "--threads must be between 1 and 1024 (0 or omitted: all online cores)");
  }
  o.threads = raw.threads ? unsigned(raw.threads) : std::max(1u, std::thread::hardware_concurrency());
  o.json = raw.json;
  o.quiet = raw.quiet;
  o.bypass_lock = raw.bypass_lock;
  if (raw.progress == "auto") o.progress = run::ProgressMode::kAuto;
  else if (raw.progress == "always") o.progress = run::ProgressMode::kAlways;
  else if (raw.progress == "never") o.progress = run::ProgressMode::kNever;
  else return Status(StatusCode::kInvalidArgument, "--progress must be auto, always or never");
  return o;
}

}  // namespace borgcheck::cli
