// The validated options of one check run: all the rest of the code sees of the command line
// (the CLI parses raw flags, then builds this; see checker/cli/).
//
// Thread contract: a value; const once the run starts.
#pragma once

#include <string>

namespace borgcheck::run {

enum class ProgressMode { kAuto, kAlways, kNever };

struct CheckOptions {
  std::string repository;       // path (from the argument or BORG_REPO)
  bool verify_data = false;     // false: keyless repository-layer check
  unsigned threads = 1;         // >= 1
  bool json = false;            // JSON Lines on stdout
  ProgressMode progress = ProgressMode::kAuto;
  bool quiet = false;
  bool bypass_lock = false;
};

}  // namespace borgcheck::run
