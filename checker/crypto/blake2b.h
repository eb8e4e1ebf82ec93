// BLAKE2b (RFC 7693), hand-written for speed: a streaming hasher with any digest length from
// 1 to 64 bytes, unkeyed or keyed.
//
// Why not libb2: Debian 12's libb2 0.98.1 chooses its BLAKE2b at run time and on current CPUs
// picks its SSE4.1/AVX path, which is about 2x slower than plain portable code. Measured on the
// benchmark machine (AMD EPYC Zen 5, bench/RESULTS.md, 2026-11-29): libb2 as dispatched
// 648 MB/s, libb2's own portable reference code 1 403 MB/s (exported but not declared in
// blake2.h, so not usable from a header). BLAKE2b is the MAC and the chunk id hash of borg's
// blake2 modes (borg 1.x: MAC = BLAKE2b-256(enc_hmac_key || IV || ciphertext), id =
// BLAKE2b-256(id_key || plaintext); borg 2: id = BLAKE2b-256(id_key || plaintext)), where it
// was 70 % of the CPU of a check. This one is portable C++: the twelve rounds are unrolled with
// the message schedule as constants so that every message word is a fixed register or stack
// slot. libb2 stays only as the test oracle (blake2b_test.cc).
//
// borg's "keyed" BLAKE2b is NOT BLAKE2b's keyed mode: it is Init(32) followed by Update(key).
// InitKeyed is BLAKE2b's own keyed mode (key in the parameter block, key block padded to 128
// bytes), included for completeness and tested against the official keyed vectors.
//
// Thread contract: a Blake2b is a per-worker value and requires external synchronisation (it
// is not safe for concurrent use); distinct hashers, including copies, are independent. There
// is no global or static mutable state. Data passed to Update is only read during the call.
// Copying a hasher copies its state: borg's key-prefixed hashes absorb the key once and copy
// that state per message.
#pragma once

#include <cstddef>
#include <cstdint>

#include "checker/base/bytes.h"

namespace borgcheck::crypto {

class Blake2b {
 public:
  static constexpr size_t kBlockSize = 128;
  static constexpr size_t kMaxOutLen = 64;
  static constexpr size_t kMaxKeyLen = 64;

  // Starts an unkeyed hash with an `outlen`-byte digest. Returns false, leaving the hasher
  // unusable, unless 1 <= outlen <= 64.
  [[nodiscard]] bool Init(size_t outlen);
  // Starts BLAKE2b's keyed mode (a MAC). Returns false unless 1 <= outlen <= 64 and
  // 1 <= key.size() <= 64. An empty key means Init(outlen).
  [[nodiscard]] bool InitKeyed(size_t outlen, Bytes key);

  // Absorbs more input. Any split of the input into Update calls gives the same digest.
  void Update(Bytes data) { Update(data.data(), data.size()); }
  void Update(const uint8_t* data, size_t len);

  // Writes the outlen()-byte digest to `out` and wipes the state; Init again before reuse.
  // Requires a successful Init/InitKeyed since the last Final.
  void Final(uint8_t* out);

  size_t outlen() const { return outlen_; }

  Blake2b() = default;
  Blake2b(const Blake2b&) = default;
  Blake2b& operator=(const Blake2b&) = default;
  // Wipes the state, which may hold key bytes.
  ~Blake2b() { Wipe(); }

 private:
  void Compress(const uint8_t block[kBlockSize], size_t count, uint64_t last);
  void Wipe();

  uint64_t h_[8] = {};      // chaining value
  uint64_t t_[2] = {};      // bytes compressed so far, 128-bit counter (low, high)
  uint8_t buf_[kBlockSize] = {};
  size_t buf_len_ = 0;      // bytes in buf_, 0..128; a full block waits until more input comes
  size_t outlen_ = 0;       // 0: not initialised
};

// One-shot helper: BLAKE2b-`outlen` of `data` (unkeyed). 1 <= outlen <= 64, else false.
[[nodiscard]] bool Blake2bHash(Bytes data, uint8_t* out, size_t outlen);

}  // namespace borgcheck::crypto
