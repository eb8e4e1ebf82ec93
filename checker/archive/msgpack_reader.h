// Allocation-free msgpack reading for the item metadata stream, where msgpack-cxx's object
// model would cost a zone allocation per item and cannot say "this value continues in the next
// chunk" without an exception:
//
//   - ValueScanner finds where one msgpack value ends, purely syntactically, and is
//     resumable: bytes can arrive in any number of pieces (an item that straddles several
//     item-stream chunks is scanned once, not once per chunk). It bounds nesting depth and
//     never allocates.
//   - Reader reads typed values from one contiguous, complete value (the bytes ValueScanner
//     delimited). A value of the wrong type, or bytes that end early, make a read return false
//     without consuming anything; nothing is ever read past the span.
//
// Both accept every msgpack format family (borg 1.x writes byte strings as str, borg 2 as bin,
// and borg 2 timestamps are ext -1).
//
// Thread contract: a ValueScanner or Reader is owned by one thread; both are plain state with
// no sharing. They point into caller-owned bytes that must outlive the calls.
#pragma once

#include <cstddef>
#include <cstdint>

#include "checker/base/bytes.h"

namespace borgcheck::archive {

enum class ScanStatus : uint8_t {
  kComplete,    // the value ended; `used` bytes of the last input belong to it
  kIncomplete,  // the input ended inside the value; all of it was consumed, state is kept
  kInvalidByte, // 0xc1 (never used by msgpack) at input offset `used`
  kTooDeep,     // a container at input offset `used` would exceed the depth limit
};

class ValueScanner {
 public:
  static constexpr uint32_t kMaxDepthLimit = 64;

  // max_depth: containers that may be open at once (1 = a map of scalars); at most
  // kMaxDepthLimit.
  explicit ValueScanner(uint32_t max_depth);

  // Forgets any partial value: the next Scan starts a new one.
  void Reset();

  // Consumes the bytes of `in` that belong to the current value. See ScanStatus for `used`.
  // After kComplete, kInvalidByte or kTooDeep call Reset() before scanning the next value.
  ScanStatus Scan(Bytes in, size_t& used);

 private:
  // A value (scalar, payload or container) just ended: closes every container it completes.
  // True when the top-level value is complete.
  bool EndValue();
  // Handles a complete header whose length field is in header_[0..header_need_).
  bool FinishHeader(size_t at, size_t& used, ScanStatus& status);
  bool Push(uint64_t elements, size_t at, size_t& used, ScanStatus& status);

  uint32_t max_depth_;
  uint32_t depth_ = 0;
  uint64_t remaining_[kMaxDepthLimit];  // elements still to come per open container
  uint64_t skip_ = 0;                   // payload bytes still to skip
  uint8_t header_kind_ = 0;             // the lead byte whose length field is being collected
  uint8_t header_need_ = 0;             // length-field bytes still missing
  uint8_t header_have_ = 0;
  uint8_t header_[4] = {};
};

class Reader {
 public:
  explicit Reader(Bytes in) : begin_(in.data()), p_(in.data()), end_(in.data() + in.size()) {}

  bool ReadMapHeader(uint32_t& n);
  bool ReadArrayHeader(uint32_t& n);
  bool ReadRaw(Bytes& out);  // str or bin
  bool ReadUint(uint64_t& v);  // any non-negative integer encoding
  bool ReadInt(int64_t& v);    // any integer that fits int64
  bool ReadBool(bool& v);
  bool ReadNil();
  // Skips one value of any type; false if it is malformed, ends early or nests deeper than
  // `max_depth` containers.
  bool Skip(uint32_t max_depth);

  bool at_end() const { return p_ == end_; }
  size_t offset() const { return size_t(p_ - begin_); }
  // The lead byte of the next value; only when !at_end().
  uint8_t peek() const { return *p_; }

 private:
  bool Need(size_t n) const { return size_t(end_ - p_) >= n; }
  // Reads a big-endian length of `width` bytes at p_ + 1.
  uint64_t LengthAt(size_t width) const;

  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace borgcheck::archive
