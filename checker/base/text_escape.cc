#include "checker/base/text_escape.h"

#include <cstddef>
#include <cstdint>

namespace borgcheck {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// The length of the valid UTF-8 sequence of two or more bytes at s[i], and its code point; 0
// when s[i] does not start one (a stray continuation byte, an overlong form, a surrogate, a
// code point above U+10FFFF, a truncated sequence).
size_t DecodeMultiByte(std::string_view s, size_t i, uint32_t& cp) {
  const auto at = [&](size_t k) { return uint8_t(s[i + k]); };
  const uint8_t b0 = at(0);
  size_t len;
  uint32_t min;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    len = 2;
    min = 0x80;
    cp = b0 & 0x1f;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    len = 3;
    min = 0x800;
    cp = b0 & 0x0f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    len = 4;
    min = 0x10000;
    cp = b0 & 0x07;
  } else {
    return 0;  // ASCII is handled by the caller; 0x80-0xc1 and 0xf5-0xff never start one
  }
  if (s.size() - i < len) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((at(k) & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (at(k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

// Valid code points above U+007F that are still written as "\uNNNN".
bool IsEscapedCodePoint(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) ||                    // C1 controls
         cp == 0x061c || cp == 0x200e || cp == 0x200f ||  // bidi marks
         (cp >= 0x202a && cp <= 0x202e) ||                // bidi embeddings and overrides
         (cp >= 0x2066 && cp <= 0x2069) ||                // bidi isolates
         cp == 0x2028 || cp == 0x2029;                    // line and paragraph separators
}

void AppendByteEscape(std::string& out, uint8_t b) {
  out += "\\x";
  out += kHex[b >> 4];
  out += kHex[b & 0xf];
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (uint8_t(s[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t len = DecodeMultiByte(s, i, cp);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string EscapeText(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = uint8_t(s[i]);
    if (b < 0x80) {
      ++i;
      if (b >= 0x20 && b < 0x7f && b != '\\') out += char(b);
      else if (b == '\\') out += "\\\\";
      else if (b == '\n') out += "\\n";
      else if (b == '\r') out += "\\r";
      else if (b == '\t') out += "\\t";
      else AppendByteEscape(out, b);
      continue;
    }
    uint32_t cp = 0;
    const size_t len = DecodeMultiByte(s, i, cp);
    if (len == 0) {
      AppendByteEscape(out, b);
      ++i;
    } else if (IsEscapedCodePoint(cp)) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 0xf];
      i += len;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string MessageExcerpt(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  return std::string(s.substr(0, max_bytes)) + "...";
}

}  // namespace borgcheck
