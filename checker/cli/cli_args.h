// Command-line parsing, in two steps (after ripgrep's lowargs/hiargs): CLI11 fills RawArgs
// as typed; ValidateArgs turns them into the CheckOptions the rest of the code sees.
//
// Thread contract: main thread only.
#pragma once

#include <string>

#include "checker/base/status.h"
#include "checker/run/check_options.h"

namespace borgcheck::cli {

struct RawArgs {
  std::string repository;  // positional; may be empty (then BORG_REPO)
  bool verify_data = false;
  int threads = 0;         // 0: all online cores
  bool json = false;
  std::string progress = "auto";
  bool quiet = false;
  bool bypass_lock = false;
};

// Returns options, or kInvalidArgument with a message for the user.
Result<run::CheckOptions> ValidateArgs(const RawArgs& raw);

}  // namespace borgcheck::cli
