// Small byte helpers used by every layer: spans, little/big-endian loads, hex, and a buffer
// that grows without zero-filling (decompressors and ciphers overwrite it anyway).
//
// Thread contract: free functions are pure; a ByteBuffer is owned by one thread at a time
// (each worker owns its own scratch buffers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace borgcheck {

using Bytes = std::span<const uint8_t>;
using MutableBytes = std::span<uint8_t>;

inline Bytes AsBytes(std::string_view s) {
  return Bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

inline uint32_t LoadLE32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline uint64_t LoadLE64(const uint8_t* p) {
  return uint64_t(LoadLE32(p)) | uint64_t(LoadLE32(p + 4)) << 32;
}
inline uint32_t LoadBE32(const uint8_t* p) {
  return uint32_t(p[3]) | uint32_t(p[2]) << 8 | uint32_t(p[1]) << 16 | uint32_t(p[0]) << 24;
}
inline uint64_t LoadBE64(const uint8_t* p) {
  return uint64_t(LoadBE32(p)) << 32 | uint64_t(LoadBE32(p + 4));
}
inline void StoreLE32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}

std::string ToHex(Bytes b);
// Decodes lowercase or uppercase hex; returns false on odd length or a non-hex character.
bool FromHex(std::string_view hex, std::string& out);

// A growable byte buffer that does not initialise what it grows into. Capacity only grows
// (a worker reuses one buffer for every chunk, so steady state allocates nothing).
class ByteBuffer {
 public:
  ByteBuffer() = default;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;
  // A moved-from buffer is empty with no capacity (the defaulted moves left its size and
  // capacity behind with a null pointer, so a later Resize could write through null).
  ByteBuffer(ByteBuffer&& o) noexcept
      : data_(std::move(o.data_)), size_(o.size_), capacity_(o.capacity_) {
    o.size_ = 0;
    o.capacity_ = 0;
  }
  ByteBuffer& operator=(ByteBuffer&& o) noexcept {
    if (this != &o) {
      data_ = std::move(o.data_);
      size_ = o.size_;
      capacity_ = o.capacity_;
      o.size_ = 0;
      o.capacity_ = 0;
    }
    return *this;
  }

  // Makes size() == n; contents beyond the old size are unspecified. Keeps capacity.
  void Resize(size_t n) {
    if (n > capacity_) Grow(n);
    size_ = n;
  }
  // Makes capacity() >= n, allocating exactly n when it grows (a decompressor reserves its
  // output cap once: rounding that up would over-allocate).
  void Reserve(size_t n) {
    if (n > capacity_) Reallocate(n);
  }
  void Clear() { size_ = 0; }
  void Assign(Bytes b) {
    Resize(b.size());
    if (!b.empty()) std::memcpy(data_.get(), b.data(), b.size());
  }

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  Bytes view() const { return Bytes(data_.get(), size_); }
  MutableBytes mutable_view() { return MutableBytes(data_.get(), size_); }

 private:
  void Grow(size_t n) {  // amortised growth for Resize
    size_t cap = capacity_ ? capacity_ : 4096;
    while (cap < n) cap = cap > (SIZE_MAX / 2) ? n : cap * 2;
    Reallocate(cap);
  }
  void Reallocate(size_t cap) {
    std::unique_ptr<uint8_t[]> fresh(new uint8_t[cap]);
    if (size_) std::memcpy(fresh.get(), data_.get(), size_);
    data_ = std::move(fresh);
    capacity_ = cap;
  }

  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace borgcheck
