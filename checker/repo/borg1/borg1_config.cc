#include "checker/repo/borg1/borg1_config.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "checker/base/bytes.h"
#include "checker/repo/text_util.h"

namespace borgcheck::repo {

Result<RepoConfig> ParseRepoConfig(std::string_view text) {
  Result<IniFile> ini = ParseIni(text);
  if (!ini.ok()) return ini.status();
  auto sec = ini->find("repository");
  if (sec == ini->end()) {
    return Status(StatusCode::kNotARepository, "config has no [repository] section");
  }
  const auto& kv = sec->second;
  auto get = [&](const char* k) -> const std::string* {
    auto it = kv.find(k);
    return it == kv.end() ? nullptr : &it->second;
  };
  RepoConfig c;
  const std::string* version = get("version");
  if (!version) return Status(StatusCode::kNotARepository, "config has no repository version");
  uint64_t v = 0;
  if (!ParseSize(*version, v) || v > 1000) {
    return Status(StatusCode::kCorruptMetadata, "config: invalid version '" + *version + "'");
  }
  c.version = int(v);
  if (c.version != 1) {
    return Status(StatusCode::kUnsupported,
                  "unsupported repository version " + std::to_string(c.version) +
                      " (this check handles borg 1.x repositories, version 1)");
  }
  if (const std::string* s = get("segments_per_dir")) {
    uint64_t n = 0;
    if (!ParseSize(*s, n) || n == 0 || n > UINT32_MAX) {
      return Status(StatusCode::kInvalidRepositoryConfig, "config: invalid segments_per_dir '" + *s + "'");
    }
    c.segments_per_dir = uint32_t(n);
  }
  if (const std::string* s = get("max_segment_size")) {
    uint64_t n = 0;
    if (!ParseSize(*s, n)) {
      return Status(StatusCode::kInvalidRepositoryConfig, "config: invalid max_segment_size '" + *s + "'");
    }
    c.max_segment_size = n;
  }
  if (const std::string* s = get("append_only")) {
    std::string b = Lower(*s);
    c.append_only = b == "1" || b == "yes" || b == "true" || b == "on";
  }
  const std::string* id = get("id");
  if (!id || id->size() != 64 || !FromHex(*id, c.id)) {
    return Status(StatusCode::kInvalidRepositoryConfig, "config: repository id is not 64 hex digits");
  }
  c.id_hex = Lower(*id);
  if (const std::string* k = get("key")) c.key_base64 = WithoutWhitespace(*k);
  return c;
}

}  // namespace borgcheck::repo
