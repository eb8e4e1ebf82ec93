// The 4-lane AVX2 BLAKE2b kernel (blake2b_simd.h). Compiled with -mavx2 (CMakeLists.txt): it
// includes nothing that could emit shared inline code (only intrinsics and the kernel
// template, instantiated with this file's own word type), and Compress4Avx2 runs only after
// Cpu().avx2. Rotations by 32, 24 and 16 are byte shuffles, by 63 an add and a shift (AVX2 has
// no 64-bit rotate).
#include "checker/crypto/blake2b_simd.h"

#if defined(__AVX2__)

#include <immintrin.h>

#include "checker/crypto/blake2b_simd_kernel.h"

namespace borgcheck::crypto::blake2b_simd {
namespace {

// Transposes four rows of four 64-bit words in place: r[i][j] becomes r[j][i].
inline void Transpose4(__m256i r[4]) {
  const __m256i t0 = _mm256_unpacklo_epi64(r[0], r[1]);  // r0[0] r1[0] r0[2] r1[2]
  const __m256i t1 = _mm256_unpackhi_epi64(r[0], r[1]);  // r0[1] r1[1] r0[3] r1[3]
  const __m256i t2 = _mm256_unpacklo_epi64(r[2], r[3]);
  const __m256i t3 = _mm256_unpackhi_epi64(r[2], r[3]);
  r[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
  r[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
  r[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
  r[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
}

struct Avx2Word {
  using T = __m256i;
  static constexpr int kN = 4;
  static T Add(T a, T b) { return _mm256_add_epi64(a, b); }
  static T Xor(T a, T b) { return _mm256_xor_si256(a, b); }
  template <int R>
  static T Ror(T a) {
    if constexpr (R == 32) {
      return _mm256_shuffle_epi32(a, 0xb1);
    } else if constexpr (R == 24) {
      return _mm256_shuffle_epi8(a, _mm256_setr_epi8(3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8,
                                                     9, 10, 3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14,
                                                     15, 8, 9, 10));
    } else if constexpr (R == 16) {
      return _mm256_shuffle_epi8(a, _mm256_setr_epi8(2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14,
                                                     15, 8, 9, 2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12,
                                                     13, 14, 15, 8, 9));
    } else {
      static_assert(R == 63);
      return _mm256_or_si256(_mm256_srli_epi64(a, 63), _mm256_add_epi64(a, a));
    }
  }
  static T Set1(uint64_t v) { return _mm256_set1_epi64x(static_cast<long long>(v)); }
  static T Zero() { return _mm256_setzero_si256(); }
  static T Load(const uint64_t* p) { return _mm256_loadu_si256(reinterpret_cast<const T*>(p)); }
  static void LoadState(uint64_t* const* h, T out[8]) {
    for (int half = 0; half < 2; ++half) {
      T* r = out + 4 * half;
      for (int l = 0; l < 4; ++l) r[l] = _mm256_loadu_si256(reinterpret_cast<const T*>(h[l] + 4 * half));
      Transpose4(r);
    }
  }
  static void StoreState(const T in[8], uint64_t* const* h) {
    for (int half = 0; half < 2; ++half) {
      T r[4] = {in[4 * half], in[4 * half + 1], in[4 * half + 2], in[4 * half + 3]};
      Transpose4(r);
      for (int l = 0; l < 4; ++l) _mm256_storeu_si256(reinterpret_cast<T*>(h[l] + 4 * half), r[l]);
    }
  }
  static void LoadBlock(const uint8_t* const* data, size_t offset, T m[16]) {
    for (int q = 0; q < 4; ++q) {
      T* r = m + 4 * q;
      for (int l = 0; l < 4; ++l) {
        r[l] = _mm256_loadu_si256(reinterpret_cast<const T*>(data[l] + offset + 32 * q));
      }
      Transpose4(r);
    }
  }
};

}  // namespace

void Compress4Avx2(Lanes<4>& lanes, size_t nblocks) {
  kernel::CompressLanes<Avx2Word>(lanes, nblocks);
}

}  // namespace borgcheck::crypto::blake2b_simd

#else  // built without AVX2 (not x86-64): Cpu().avx2 is false, so this is never called.

#include <cstdlib>

namespace borgcheck::crypto::blake2b_simd {
void Compress4Avx2(Lanes<4>&, size_t) { std::abort(); }
}  // namespace borgcheck::crypto::blake2b_simd

#endif
