// The numbers of one check run, filled by checker/run and printed by the reporters.
//
// Thread contract: a plain value; the run fills it after the workers have stopped.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "checker/report/finding.h"

namespace borgcheck::report {

struct RunSummary {
  std::string repository;          // path as given
  std::string format;              // "borg1"
  std::string mode;                // key mode name ("repokey", ...) or "" for a keyless check
  bool verify_data = false;        // false: keyless repository-layer check
  uint32_t transaction = 0;        // the committed transaction checked
  std::string live_list_source;    // "index" or "log-replay"
  uint64_t segments = 0;           // committed segments read
  uint64_t objects_total = 0;      // live objects in the committed state
  uint64_t objects_verified = 0;   // live objects that passed every check
  uint64_t stored_bytes = 0;       // bytes of live objects read (entry data)
  uint64_t plaintext_bytes = 0;    // decompressed bytes hashed (verify-data only)
  uint64_t bytes_read = 0;         // all segment bytes read
  std::array<uint64_t, kStageCount> findings_by_stage{};
  uint64_t errors = 0;
  uint64_t warnings = 0;
  double elapsed_s = 0;
  unsigned threads = 0;
  std::vector<std::string> notes;  // informational lines that are not findings
};

}  // namespace borgcheck::report
