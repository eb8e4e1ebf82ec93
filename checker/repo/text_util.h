// Small text helpers for the repository formats' INI and name parsing (config.cc for borg 1.x,
// borg2_segments.cc for repository version 2).
//
// Thread contract: pure functions; safe for concurrent use.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace borgcheck::repo {

// `s` without leading and trailing whitespace (std::isspace in the C locale).
inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// `s` with ASCII letters lowercased.
inline std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

// `s` with every whitespace character removed (a base64 value wrapped over continuation lines).
inline std::string WithoutWhitespace(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (!std::isspace(static_cast<unsigned char>(ch))) out.push_back(ch);
  }
  return out;
}

}  // namespace borgcheck::repo
