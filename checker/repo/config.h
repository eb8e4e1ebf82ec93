// The repository `config` file: Python ConfigParser INI with TAB-indented continuation
// lines (the base64 `key` value is wrapped over them). spec borg1-format.md §1.1.
//
// Thread contract: pure functions; RepoConfig is a value, const after load.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "checker/base/status.h"

namespace borgcheck::repo {

// section (lowercased) -> key (lowercased) -> value (continuation lines joined with '\n').
using IniFile = std::map<std::string, std::map<std::string, std::string>>;
Result<IniFile> ParseIni(std::string_view text);

struct RepoConfig {
  int version = 0;
  uint32_t segments_per_dir = 1000;
  uint64_t max_segment_size = 524288000;
  std::string id;          // 32 raw bytes
  std::string id_hex;      // 64 lowercase hex
  std::string key_base64;  // repokey-style key blob, whitespace removed; empty if none
  bool append_only = false;
};

// Parses and validates [repository]. kNotARepository when the section or `version` is
// missing, kUnsupported for a version other than 1 (the message names the version),
// kCorruptMetadata for malformed values.
Result<RepoConfig> ParseRepoConfig(std::string_view text);

// ConfigParser-style size with optional suffix (K, M, G, T, P; powers of 1000 as borg's
// parse_file_size): "5M" -> 5000000.
bool ParseSize(std::string_view s, uint64_t& out);

}  // namespace borgcheck::repo
