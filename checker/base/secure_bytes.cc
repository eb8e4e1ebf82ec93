#include "checker/base/secure_bytes.h"

#include <openssl/crypto.h>

namespace borgcheck {

void SecureBytes::Wipe() {
  if (!v_.empty()) OPENSSL_cleanse(v_.data(), v_.size());
  v_.clear();
}

void SecureBytes::Reserve(size_t n) {
  if (n <= v_.capacity()) return;
  std::vector<uint8_t> fresh;
  fresh.reserve(n);
  fresh.assign(v_.begin(), v_.end());
  Wipe();
  v_ = std::move(fresh);
}

}  // namespace borgcheck
