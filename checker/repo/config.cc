#include "checker/repo/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "checker/base/bytes.h"
#include "checker/repo/text_util.h"

namespace borgcheck::repo {
Result<IniFile> ParseIni(std::string_view text) {
  IniFile ini;
  std::string section;
  std::string* last_value = nullptr;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string_view t = Trim(line);
    if (t.empty()) continue;  // ConfigParser keeps blank lines inside values; borg writes none
    bool continuation = std::isspace(static_cast<unsigned char>(line.front()));
    if (continuation) {
      if (!last_value) {
        return Status(StatusCode::kCorruptMetadata,
                      "config line " + std::to_string(line_no) + ": continuation without a key");
      }
      last_value->append("\n").append(t);
      continue;
    }
    if (t.front() == '#' || t.front() == ';') continue;
    if (t.front() == '[') {
      if (t.back() != ']') {
        return Status(StatusCode::kCorruptMetadata,
                      "config line " + std::to_string(line_no) + ": malformed section header");
      }
      section = Lower(Trim(t.substr(1, t.size() - 2)));
      ini[section];
      last_value = nullptr;
      continue;
    }
    size_t eq = t.find_first_of("=:");
    if (eq == std::string_view::npos || section.empty()) {
      return Status(StatusCode::kCorruptMetadata,
                    "config line " + std::to_string(line_no) + ": expected 'key = value'");
    }
    std::string key = Lower(Trim(t.substr(0, eq)));
    last_value = &(ini[section][key] = std::string(Trim(t.substr(eq + 1))));
  }
  return ini;
}

bool ParseSize(std::string_view s, uint64_t& out) {
  s = Trim(s);
  if (s.empty()) return false;
  uint64_t mult = 1;
  char last = char(std::toupper(static_cast<unsigned char>(s.back())));
  static constexpr std::string_view kSuffixes = "KMGTP";
  if (size_t p = kSuffixes.find(last); p != std::string_view::npos) {
    for (size_t i = 0; i <= p; ++i) mult *= 1000;
    s.remove_suffix(1);
  }
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return false;
  if (v > UINT64_MAX / mult) return false;
  out = v * mult;
  return true;
}

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
      return Status(StatusCode::kCorruptMetadata, "config: invalid segments_per_dir '" + *s + "'");
    }
    c.segments_per_dir = uint32_t(n);
  }
  if (const std::string* s = get("max_segment_size")) {
    uint64_t n = 0;
    if (!ParseSize(*s, n)) {
      return Status(StatusCode::kCorruptMetadata, "config: invalid max_segment_size '" + *s + "'");
    }
    c.max_segment_size = n;
  }
  if (const std::string* s = get("append_only")) {
    std::string b = Lower(*s);
    c.append_only = b == "1" || b == "yes" || b == "true" || b == "on";
  }
  const std::string* id = get("id");
  if (!id || id->size() != 64 || !FromHex(*id, c.id)) {
    return Status(StatusCode::kCorruptMetadata, "config: repository id is not 64 hex digits");
  }
  c.id_hex = Lower(*id);
  if (const std::string* k = get("key")) c.key_base64 = WithoutWhitespace(*k);
  return c;
}

}  // namespace borgcheck::repo
