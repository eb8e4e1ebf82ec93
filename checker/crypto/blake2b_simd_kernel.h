// The BLAKE2b lane kernel, written once for every vector width (blake2b_simd.h has the
// contract). Included only by blake2b_simd.cc (portable, 1 lane), blake2b_simd_avx2.cc and
// blake2b_simd_avx512.cc, each of which is compiled with its own instruction-set flags
// (checker/crypto/CMakeLists.txt) and instantiates CompressLanes with a word type V defined in
// its own anonymous namespace, so every instantiation has internal linkage: code compiled for
// AVX-512 can never be picked by the linker for a caller that runs without it.
//
// V provides: T (a vector of kN 64-bit words, one per message), Add, Xor, Ror<r> (rotate each
// word right), Set1, Zero, Load(const uint64_t[kN]), LoadState / StoreState (the lanes' h
// arrays to and from eight vectors, one per state word), LoadBlock (the lanes' 128-byte
// blocks to sixteen vectors, one per message word).
//
// Thread contract: pure; see blake2b_simd.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "checker/crypto/blake2b_simd.h"

namespace borgcheck::crypto::blake2b_simd::kernel {

inline constexpr uint64_t kIv[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};

// RFC 7693 §2.7; rounds 10 and 11 reuse rows 0 and 1.
inline constexpr uint8_t kSigma[12][16] = {
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

#define BLAKE2B_LANES_G(a, b, c, d, x, y) \
  do {                                    \
    a = V::Add(V::Add(a, b), x);          \
    d = V::template Ror<32>(V::Xor(d, a)); \
    c = V::Add(c, d);                     \
    b = V::template Ror<24>(V::Xor(b, c)); \
    a = V::Add(V::Add(a, b), y);          \
    d = V::template Ror<16>(V::Xor(d, a)); \
    c = V::Add(c, d);                     \
    b = V::template Ror<63>(V::Xor(b, c)); \
  } while (0)

template <class V>
inline void CompressLanes(Lanes<V::kN>& lanes, size_t nblocks) {
  using T = typename V::T;
  T h[8];
  V::LoadState(lanes.h, h);
  T t = V::Load(lanes.t);
  const T last_len = V::Load(lanes.last_len);
  const T last = V::Load(lanes.last);
  const T block_bytes = V::Set1(128);
  for (size_t k = 0; k < nblocks; ++k) {
    T m[16];
    V::LoadBlock(lanes.data, 128 * k, m);
    const bool final_block = k + 1 == nblocks;
    const T counter = V::Add(t, final_block ? last_len : block_bytes);
    const T flag = final_block ? last : V::Zero();
    t = V::Add(t, block_bytes);
    T v0 = h[0], v1 = h[1], v2 = h[2], v3 = h[3], v4 = h[4], v5 = h[5], v6 = h[6], v7 = h[7];
    T v8 = V::Set1(kIv[0]), v9 = V::Set1(kIv[1]), v10 = V::Set1(kIv[2]), v11 = V::Set1(kIv[3]);
    T v12 = V::Xor(V::Set1(kIv[4]), counter), v13 = V::Set1(kIv[5]);
    T v14 = V::Xor(V::Set1(kIv[6]), flag), v15 = V::Set1(kIv[7]);
#pragma GCC unroll 12
    for (int r = 0; r < 12; ++r) {
      BLAKE2B_LANES_G(v0, v4, v8, v12, m[kSigma[r][0]], m[kSigma[r][1]]);
      BLAKE2B_LANES_G(v1, v5, v9, v13, m[kSigma[r][2]], m[kSigma[r][3]]);
      BLAKE2B_LANES_G(v2, v6, v10, v14, m[kSigma[r][4]], m[kSigma[r][5]]);
      BLAKE2B_LANES_G(v3, v7, v11, v15, m[kSigma[r][6]], m[kSigma[r][7]]);
      BLAKE2B_LANES_G(v0, v5, v10, v15, m[kSigma[r][8]], m[kSigma[r][9]]);
      BLAKE2B_LANES_G(v1, v6, v11, v12, m[kSigma[r][10]], m[kSigma[r][11]]);
      BLAKE2B_LANES_G(v2, v7, v8, v13, m[kSigma[r][12]], m[kSigma[r][13]]);
      BLAKE2B_LANES_G(v3, v4, v9, v14, m[kSigma[r][14]], m[kSigma[r][15]]);
    }
    h[0] = V::Xor(h[0], V::Xor(v0, v8));
    h[1] = V::Xor(h[1], V::Xor(v1, v9));
    h[2] = V::Xor(h[2], V::Xor(v2, v10));
    h[3] = V::Xor(h[3], V::Xor(v3, v11));
    h[4] = V::Xor(h[4], V::Xor(v4, v12));
    h[5] = V::Xor(h[5], V::Xor(v5, v13));
    h[6] = V::Xor(h[6], V::Xor(v6, v14));
    h[7] = V::Xor(h[7], V::Xor(v7, v15));
  }
  V::StoreState(h, lanes.h);
}

#undef BLAKE2B_LANES_G

}  // namespace borgcheck::crypto::blake2b_simd::kernel
