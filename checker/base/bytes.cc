#include "checker/base/bytes.h"

namespace borgcheck {

std::string ToHex(Bytes b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(b.size() * 2, '\0');
  for (size_t i = 0; i < b.size(); ++i) {
    out[2 * i] = kDigits[b[i] >> 4];
    out[2 * i + 1] = kDigits[b[i] & 0x0f];
  }
  return out;
}

static int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool FromHex(std::string_view hex, std::string& out) {
  if (hex.size() % 2) return false;
  out.resize(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = char(hi << 4 | lo);
  }
  return true;
}

}  // namespace borgcheck
