// SecureBytes: key material that is wiped (OPENSSL_cleanse) when destroyed or reassigned.
// Never print one; ToHex() of key material is forbidden outside tests.
//
// Thread contract: after the key is loaded (before workers start) SecureBytes are only read,
// so concurrent reads are safe; mutation requires external synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "checker/base/bytes.h"

namespace borgcheck {

class SecureBytes {
 public:
  SecureBytes() = default;
  explicit SecureBytes(Bytes b) : v_(b.begin(), b.end()) {}
  explicit SecureBytes(size_t n) : v_(n, 0) {}
  SecureBytes(const SecureBytes& o) : v_(o.v_) {}
  SecureBytes& operator=(const SecureBytes& o) {
    if (this != &o) { Wipe(); v_ = o.v_; }
    return *this;
  }
  SecureBytes(SecureBytes&& o) noexcept : v_(std::move(o.v_)) { o.v_.clear(); }
  SecureBytes& operator=(SecureBytes&& o) noexcept {
    if (this != &o) { Wipe(); v_ = std::move(o.v_); o.v_.clear(); }
    return *this;
  }
  ~SecureBytes() { Wipe(); }

  void Wipe();
  uint8_t* data() { return v_.data(); }
  const uint8_t* data() const { return v_.data(); }
  size_t size() const { return v_.size(); }
  bool empty() const { return v_.empty(); }
  Bytes view() const { return Bytes(v_.data(), v_.size()); }
  void Append(Bytes b) { Reserve(v_.size() + b.size()); v_.insert(v_.end(), b.begin(), b.end()); }

 private:
  // Growing a vector would leave a copy of the old bytes in freed memory: reserve by
  // copying into a fresh buffer and wiping the old one ourselves.
  void Reserve(size_t n);
  std::vector<uint8_t> v_;
};

}  // namespace borgcheck
