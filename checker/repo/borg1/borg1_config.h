// The repository `config` file: Python ConfigParser INI with TAB-indented continuation
// lines (the base64 `key` value is wrapped over them). spec borg1-format.md §1.1.
//
// Thread contract: pure functions; RepoConfig is a value, const after load.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "checker/base/status.h"
#include "checker/repo/segment_log/segment_files.h"
#include "checker/report/finding.h"

namespace borgcheck::repo {


struct RepoConfig {
  int version = 0;
  uint32_t segments_per_dir = 1000;
  uint64_t max_segment_size = 524288000;
  std::string id;          // 32 raw bytes
  std::string id_hex;      // 64 lowercase hex
  std::string key_base64;  // repokey-style key blob, whitespace removed; empty if none
  bool append_only = false;
  std::vector<report::Finding> lock_findings;  // IdentifyRepository: a stale lock (borg_lock.h)
};

// Parses and validates [repository]. kNotARepository when the section or `version` is
// missing, kUnsupported for a version other than 1 (the message names the version),
// kCorruptMetadata for malformed values.
Result<RepoConfig> ParseRepoConfig(std::string_view text);

}  // namespace borgcheck::repo
