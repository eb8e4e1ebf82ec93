#include "checker/archive/msgpack_reader.h"

#include <algorithm>
#include <limits>

namespace borgcheck::archive {
namespace {

// Payload bytes that follow a fixed-size lead byte (ints, floats, fixext incl. its type byte).
int FixedPayload(uint8_t b) {
  switch (b) {
    case 0xcc: case 0xd0: return 1;
    case 0xcd: case 0xd1: return 2;
    case 0xca: case 0xce: case 0xd2: return 4;
    case 0xcb: case 0xcf: case 0xd3: return 8;
    case 0xd4: return 2;
    case 0xd5: return 3;
    case 0xd6: return 5;
    case 0xd7: return 9;
    case 0xd8: return 17;
    default: return -1;
  }
}

// Width of the length field after a variable-size lead byte (str, bin, ext, array, map).
int LengthWidth(uint8_t b) {
  switch (b) {
    case 0xc4: case 0xc7: case 0xd9: return 1;
    case 0xc5: case 0xc8: case 0xda: case 0xdc: case 0xde: return 2;
    case 0xc6: case 0xc9: case 0xdb: case 0xdd: case 0xdf: return 4;
    default: return 0;
  }
}

uint64_t LoadBE(const uint8_t* p, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i) v = v << 8 | p[i];
  return v;
}

}  // namespace

ValueScanner::ValueScanner(uint32_t max_depth)
    : max_depth_(std::min(std::max<uint32_t>(max_depth, 1), kMaxDepthLimit)) {}

void ValueScanner::Reset() {
  depth_ = 0;
  skip_ = 0;
  header_kind_ = header_need_ = header_have_ = 0;
}

bool ValueScanner::EndValue() {
  while (depth_ > 0) {
    if (--remaining_[depth_ - 1] > 0) return false;
    --depth_;
  }
  return true;
}

bool ValueScanner::Push(uint64_t elements, size_t at, size_t& used, ScanStatus& status) {
  if (elements == 0) return EndValue();
  if (depth_ == max_depth_) {
    used = at;
    status = ScanStatus::kTooDeep;
    return true;
  }
  remaining_[depth_++] = elements;
  return false;
}

bool ValueScanner::FinishHeader(size_t at, size_t& used, ScanStatus& status) {
  const uint64_t n = LoadBE(header_, header_have_);
  const uint8_t kind = header_kind_;
  header_kind_ = header_need_ = header_have_ = 0;
  switch (kind) {
    case 0xdc: case 0xdd:
      return Push(n, at, used, status);
    case 0xde: case 0xdf:
      return Push(2 * n, at, used, status);  // n < 2^32, so 2n fits
    case 0xc7: case 0xc8: case 0xc9:
      skip_ = n + 1;  // the ext type byte, then the payload
      return false;
    default:  // str, bin
      skip_ = n;
      if (skip_ == 0) return EndValue();
      return false;
  }
}

ScanStatus ValueScanner::Scan(Bytes in, size_t& used) {
  const uint8_t* p = in.data();
  const size_t n = in.size();
  size_t i = 0;
  ScanStatus status = ScanStatus::kComplete;
  while (true) {
    if (skip_ > 0) {
      const uint64_t take = std::min<uint64_t>(skip_, n - i);
      i += size_t(take);
      skip_ -= take;
      if (skip_ > 0) break;
      if (EndValue()) {
        used = i;
        return ScanStatus::kComplete;
      }
      continue;
    }
    if (header_need_ > 0) {
      while (header_need_ > 0 && i < n) {
        header_[header_have_++] = p[i++];
        --header_need_;
      }
      if (header_need_ > 0) break;
      // A too-deep container is reported at the end of its header (its lead byte may have
      // arrived in an earlier piece).
      if (FinishHeader(i, used, status)) {
        if (status != ScanStatus::kComplete) return status;
        used = i;
        return ScanStatus::kComplete;
      }
      continue;
    }
    if (i == n) break;
    const size_t at = i;
    const uint8_t b = p[i++];
    bool done = false;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
      done = EndValue();
    } else if (b <= 0x8f) {
      done = Push(2 * uint64_t(b & 0x0f), at, used, status);
    } else if (b <= 0x9f) {
      done = Push(b & 0x0f, at, used, status);
    } else if (b <= 0xbf) {
      skip_ = b & 0x1f;
      if (skip_ == 0) done = EndValue();
    } else if (b == 0xc1) {
      used = at;
      return ScanStatus::kInvalidByte;
    } else if (const int fixed = FixedPayload(b); fixed > 0) {
      skip_ = uint64_t(fixed);
    } else {
      header_kind_ = b;
      header_need_ = uint8_t(LengthWidth(b));
      header_have_ = 0;
    }
    if (done) {
      if (status != ScanStatus::kComplete) return status;
      used = i;
      return ScanStatus::kComplete;
    }
  }
  used = n;
  return ScanStatus::kIncomplete;
}

uint64_t Reader::LengthAt(size_t width) const { return LoadBE(p_ + 1, int(width)); }

bool Reader::ReadMapHeader(uint32_t& n) {
  if (!Need(1)) return false;
  const uint8_t b = *p_;
  if (b >= 0x80 && b <= 0x8f) {
    n = b & 0x0f;
    p_ += 1;
    return true;
  }
  const size_t w = b == 0xde ? 2 : b == 0xdf ? 4 : 0;
  if (w == 0 || !Need(1 + w)) return false;
  n = uint32_t(LengthAt(w));
  p_ += 1 + w;
  return true;
}

bool Reader::ReadArrayHeader(uint32_t& n) {
  if (!Need(1)) return false;
  const uint8_t b = *p_;
  if (b >= 0x90 && b <= 0x9f) {
    n = b & 0x0f;
    p_ += 1;
    return true;
  }
  const size_t w = b == 0xdc ? 2 : b == 0xdd ? 4 : 0;
  if (w == 0 || !Need(1 + w)) return false;
  n = uint32_t(LengthAt(w));
  p_ += 1 + w;
  return true;
}

bool Reader::ReadRaw(Bytes& out) {
  if (!Need(1)) return false;
  const uint8_t b = *p_;
  size_t w = 0;
  uint64_t len = 0;
  if (b >= 0xa0 && b <= 0xbf) {
    len = b & 0x1f;
  } else if (b == 0xd9 || b == 0xc4) {
    w = 1;
  } else if (b == 0xda || b == 0xc5) {
    w = 2;
  } else if (b == 0xdb || b == 0xc6) {
    w = 4;
  } else {
    return false;
  }
  if (!Need(1 + w)) return false;
  if (w > 0) len = LengthAt(w);
  if (!Need(1 + w + len)) return false;
  out = Bytes(p_ + 1 + w, size_t(len));
  p_ += 1 + w + len;
  return true;
}

bool Reader::ReadUint(uint64_t& v) {
  int64_t s;
  if (Need(1) && *p_ == 0xcf) {
    if (!Need(9)) return false;
    v = LengthAt(8);
    p_ += 9;
    return true;
  }
  const uint8_t* before = p_;
  if (!ReadInt(s)) return false;
  if (s < 0) {
    p_ = before;
    return false;
  }
  v = uint64_t(s);
  return true;
}

bool Reader::ReadInt(int64_t& v) {
  if (!Need(1)) return false;
  const uint8_t b = *p_;
  if (b <= 0x7f) {
    v = b;
    p_ += 1;
    return true;
  }
  if (b >= 0xe0) {
    v = int8_t(b);
    p_ += 1;
    return true;
  }
  size_t w = 0;
  bool is_signed = false;
  switch (b) {
    case 0xcc: w = 1; break;
    case 0xcd: w = 2; break;
    case 0xce: w = 4; break;
    case 0xcf: w = 8; break;
    case 0xd0: w = 1; is_signed = true; break;
    case 0xd1: w = 2; is_signed = true; break;
    case 0xd2: w = 4; is_signed = true; break;
    case 0xd3: w = 8; is_signed = true; break;
    default: return false;
  }
  if (!Need(1 + w)) return false;
  const uint64_t raw = LengthAt(w);
  if (is_signed) {
    const int shift = int(64 - 8 * w);
    v = int64_t(raw << shift) >> shift;  // sign-extend
  } else {
    if (raw > uint64_t(std::numeric_limits<int64_t>::max())) return false;
    v = int64_t(raw);
  }
  p_ += 1 + w;
  return true;
}

bool Reader::ReadBool(bool& v) {
  if (!Need(1) || (*p_ != 0xc2 && *p_ != 0xc3)) return false;
  v = *p_ == 0xc3;
  p_ += 1;
  return true;
}

bool Reader::ReadNil() {
  if (!Need(1) || *p_ != 0xc0) return false;
  p_ += 1;
  return true;
}

bool Reader::Skip(uint32_t max_depth) {
  ValueScanner scanner(max_depth);
  size_t used = 0;
  if (scanner.Scan(Bytes(p_, size_t(end_ - p_)), used) != ScanStatus::kComplete) return false;
  p_ += used;
  return true;
}

}  // namespace borgcheck::archive
