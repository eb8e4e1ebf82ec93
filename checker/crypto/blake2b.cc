// BLAKE2b after RFC 7693 §3: see blake2b.h for why it is ours and not libb2's.
//
// Outline:
//   1. Init/InitKeyed: h = IV xor the parameter block's first word (digest length, key
//      length, fanout 1, depth 1; salt and personalisation zero); the keyed mode then absorbs
//      the key padded with zeros to one block.
//   2. Update: whole blocks are compressed straight from the caller's memory; only a partial
//      block, or the most recent full one, is kept in buf_, because the final block must be
//      compressed with the last-block flag and Update cannot know which block is last.
//   3. Final: pad the buffered tail with zeros, compress it as the last block, emit h
//      little-endian, truncated to outlen, and wipe.
//
// Speed: Compress keeps the 16-word working vector in locals and indexes the message through
// the sigma schedule with compile-time constants (the ROUND macro expands each of the twelve
// rounds with literal round numbers), so the compiler sees straight-line 64-bit adds, xors
// and rotates (std::rotr) with no table lookups at run time.
#include "checker/crypto/blake2b.h"

#include <bit>
#include <cstring>

namespace borgcheck::crypto {
namespace {

constexpr uint64_t kIv[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};

// RFC 7693 §2.7; rounds 10 and 11 reuse rows 0 and 1.
constexpr uint8_t kSigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

inline uint64_t Load64(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
  return w;
}

inline void Store64(uint8_t* p, uint64_t w) {
  if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
  std::memcpy(p, &w, 8);
}

// A wipe the compiler may not drop as a dead store.
void SecureZero(void* p, size_t n) {
  volatile uint8_t* v = static_cast<volatile uint8_t*>(p);
  while (n-- > 0) *v++ = 0;
}

}  // namespace

bool Blake2b::Init(size_t outlen) { return InitKeyed(outlen, Bytes()); }

bool Blake2b::InitKeyed(size_t outlen, Bytes key) {
  outlen_ = 0;
  if (outlen == 0 || outlen > kMaxOutLen || key.size() > kMaxKeyLen) return false;
  for (int i = 0; i < 8; ++i) h_[i] = kIv[i];
  // Parameter block word 0: digest length, key length, fanout 1, depth 1 (RFC 7693 §2.5).
  h_[0] ^= 0x01010000ULL ^ (uint64_t(key.size()) << 8) ^ uint64_t(outlen);
  t_[0] = t_[1] = 0;
  buf_len_ = 0;
  outlen_ = outlen;
  if (!key.empty()) {
    std::memset(buf_, 0, kBlockSize);
    std::memcpy(buf_, key.data(), key.size());
    buf_len_ = kBlockSize;  // the padded key block; compressed once more input (or Final) comes
  }
  return true;
}

void Blake2b::Update(const uint8_t* data, size_t len) {
  if (len == 0) return;
  if (buf_len_ > 0) {
    size_t take = kBlockSize - buf_len_;
    if (len <= take) {  // still fits; it may be the last block, so do not compress yet
      std::memcpy(buf_ + buf_len_, data, len);
      buf_len_ += len;
      return;
    }
    std::memcpy(buf_ + buf_len_, data, take);
    data += take;
    len -= take;
    Compress(buf_, kBlockSize, 0);  // more input follows, so this block is not the last
    buf_len_ = 0;
  }
  // len > 0 here: compress whole blocks from the input while more than one block remains.
  while (len > kBlockSize) {
    Compress(data, kBlockSize, 0);
    data += kBlockSize;
    len -= kBlockSize;
  }
  std::memcpy(buf_, data, len);  // 1..128 bytes: possibly the last block
  buf_len_ = len;
}

void Blake2b::Final(uint8_t* out) {
  std::memset(buf_ + buf_len_, 0, kBlockSize - buf_len_);
  Compress(buf_, buf_len_, ~uint64_t(0));  // the counter counts only the real bytes
  uint8_t full[kMaxOutLen];
  for (int i = 0; i < 8; ++i) Store64(full + 8 * i, h_[i]);
  std::memcpy(out, full, outlen_);
  SecureZero(full, sizeof full);
  Wipe();
}

void Blake2b::Wipe() {
  SecureZero(h_, sizeof h_);
  SecureZero(buf_, sizeof buf_);
  t_[0] = t_[1] = 0;
  buf_len_ = 0;
  outlen_ = 0;
}

#define BLAKE2B_G(a, b, c, d, x, y) \
  do {                              \
    a = a + b + (x);                \
    d = std::rotr(d ^ a, 32);       \
    c = c + d;                      \
    b = std::rotr(b ^ c, 24);       \
    a = a + b + (y);                \
    d = std::rotr(d ^ a, 16);       \
    c = c + d;                      \
    b = std::rotr(b ^ c, 63);       \
  } while (0)

#define BLAKE2B_ROUND(r)                                                 \
  do {                                                                   \
    BLAKE2B_G(v0, v4, v8, v12, m[kSigma[r][0]], m[kSigma[r][1]]);        \
    BLAKE2B_G(v1, v5, v9, v13, m[kSigma[r][2]], m[kSigma[r][3]]);        \
    BLAKE2B_G(v2, v6, v10, v14, m[kSigma[r][4]], m[kSigma[r][5]]);       \
    BLAKE2B_G(v3, v7, v11, v15, m[kSigma[r][6]], m[kSigma[r][7]]);       \
    BLAKE2B_G(v0, v5, v10, v15, m[kSigma[r][8]], m[kSigma[r][9]]);       \
    BLAKE2B_G(v1, v6, v11, v12, m[kSigma[r][10]], m[kSigma[r][11]]);     \
    BLAKE2B_G(v2, v7, v8, v13, m[kSigma[r][12]], m[kSigma[r][13]]);      \
    BLAKE2B_G(v3, v4, v9, v14, m[kSigma[r][14]], m[kSigma[r][15]]);      \
  } while (0)

// RFC 7693 §3.2 F, after adding `count` (the block's input bytes) to the 128-bit counter.
// `last` is all ones for the final block, else 0.
void Blake2b::Compress(const uint8_t block[kBlockSize], size_t count, uint64_t last) {
  t_[0] += count;
  t_[1] += t_[0] < count ? 1 : 0;

  uint64_t m[16];
  for (int i = 0; i < 16; ++i) m[i] = Load64(block + 8 * i);

  uint64_t v0 = h_[0], v1 = h_[1], v2 = h_[2], v3 = h_[3];
  uint64_t v4 = h_[4], v5 = h_[5], v6 = h_[6], v7 = h_[7];
  uint64_t v8 = kIv[0], v9 = kIv[1], v10 = kIv[2], v11 = kIv[3];
  uint64_t v12 = kIv[4] ^ t_[0], v13 = kIv[5] ^ t_[1], v14 = kIv[6] ^ last, v15 = kIv[7];

  BLAKE2B_ROUND(0);
  BLAKE2B_ROUND(1);
  BLAKE2B_ROUND(2);
  BLAKE2B_ROUND(3);
  BLAKE2B_ROUND(4);
  BLAKE2B_ROUND(5);
  BLAKE2B_ROUND(6);
  BLAKE2B_ROUND(7);
  BLAKE2B_ROUND(8);
  BLAKE2B_ROUND(9);
  BLAKE2B_ROUND(10);
  BLAKE2B_ROUND(11);

  h_[0] ^= v0 ^ v8;
  h_[1] ^= v1 ^ v9;
  h_[2] ^= v2 ^ v10;
  h_[3] ^= v3 ^ v11;
  h_[4] ^= v4 ^ v12;
  h_[5] ^= v5 ^ v13;
  h_[6] ^= v6 ^ v14;
  h_[7] ^= v7 ^ v15;
}

#undef BLAKE2B_ROUND
#undef BLAKE2B_G

bool Blake2bHash(Bytes data, uint8_t* out, size_t outlen) {
  Blake2b h;
  if (!h.Init(outlen)) return false;
  h.Update(data);
  h.Final(out);
  return true;
}

}  // namespace borgcheck::crypto
