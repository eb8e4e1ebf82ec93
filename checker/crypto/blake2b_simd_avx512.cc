// The AVX-512 BLAKE2b kernels (blake2b_simd.h): 8 lanes in 512-bit registers, and 4 lanes in
// 256-bit registers with AVX-512VL's 64-bit rotate (one instruction where AVX2 needs a shuffle
// or three). Compiled with -mavx512f -mavx512vl (CMakeLists.txt): it includes nothing that
// could emit shared inline code (only intrinsics and the kernel template, instantiated with
// this file's own word types), and its functions run only after Cpu().avx512.
//
// The transposes use only VPERMT2Q (_mm512_permutex2var_epi64): g++ 12 warns that the
// unpack and 128-bit shuffle intrinsics read an uninitialised variable (its headers pass
// _mm512_undefined as the merge source), and the rotate is the zero-masking form for the
// same reason.
#include "checker/crypto/blake2b_simd.h"

#if defined(__AVX512F__) && defined(__AVX512VL__)

#include <immintrin.h>

#include "checker/crypto/blake2b_simd_kernel.h"

namespace borgcheck::crypto::blake2b_simd {
namespace {

// Transposes eight rows of eight 64-bit words in place: r[i][j] becomes r[j][i]. Three rounds
// of interleaving, at one word, two words and four words.
inline void Transpose8(__m512i r[8]) {
  const __m512i even = _mm512_setr_epi64(0, 8, 2, 10, 4, 12, 6, 14);
  const __m512i odd = _mm512_setr_epi64(1, 9, 3, 11, 5, 13, 7, 15);
  const __m512i pair_lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i pair_hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  const __m512i quad_lo = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11);
  const __m512i quad_hi = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
  __m512i a[8], b[8];
  for (int i = 0; i < 4; ++i) {
    a[2 * i] = _mm512_permutex2var_epi64(r[2 * i], even, r[2 * i + 1]);     // words 0 2 4 6
    a[2 * i + 1] = _mm512_permutex2var_epi64(r[2 * i], odd, r[2 * i + 1]);  // words 1 3 5 7
  }
  for (int g = 0; g < 2; ++g) {  // rows 0-3, then rows 4-7
    const __m512i* x = a + 4 * g;
    b[4 * g + 0] = _mm512_permutex2var_epi64(x[0], pair_lo, x[2]);  // words 0, 4
    b[4 * g + 2] = _mm512_permutex2var_epi64(x[0], pair_hi, x[2]);  // words 2, 6
    b[4 * g + 1] = _mm512_permutex2var_epi64(x[1], pair_lo, x[3]);  // words 1, 5
    b[4 * g + 3] = _mm512_permutex2var_epi64(x[1], pair_hi, x[3]);  // words 3, 7
  }
  for (int w = 0; w < 4; ++w) {
    r[w] = _mm512_permutex2var_epi64(b[w], quad_lo, b[4 + w]);
    r[w + 4] = _mm512_permutex2var_epi64(b[w], quad_hi, b[4 + w]);
  }
}

struct Avx512Word {
  using T = __m512i;
  static constexpr int kN = 8;
  static T Add(T a, T b) { return _mm512_add_epi64(a, b); }
  static T Xor(T a, T b) { return _mm512_xor_si512(a, b); }
  template <int R>
  static T Ror(T a) {
    return _mm512_maskz_ror_epi64(0xff, a, R);
  }
  static T Set1(uint64_t v) { return _mm512_set1_epi64(static_cast<long long>(v)); }
  static T Zero() { return _mm512_setzero_si512(); }
  static T Load(const uint64_t* p) { return _mm512_loadu_si512(p); }
  static void LoadState(uint64_t* const* h, T out[8]) {
    for (int l = 0; l < 8; ++l) out[l] = _mm512_loadu_si512(h[l]);
    Transpose8(out);
  }
  static void StoreState(const T in[8], uint64_t* const* h) {
    T r[8];
    for (int i = 0; i < 8; ++i) r[i] = in[i];
    Transpose8(r);
    for (int l = 0; l < 8; ++l) _mm512_storeu_si512(h[l], r[l]);
  }
  static void LoadBlock(const uint8_t* const* data, size_t offset, T m[16]) {
    for (int half = 0; half < 2; ++half) {
      T* r = m + 8 * half;
      for (int l = 0; l < 8; ++l) r[l] = _mm512_loadu_si512(data[l] + offset + 64 * half);
      Transpose8(r);
    }
  }
};

// Transposes four rows of four 64-bit words in place (AVX2 instructions; no merge source).
inline void Transpose4(__m256i r[4]) {
  const __m256i t0 = _mm256_unpacklo_epi64(r[0], r[1]);
  const __m256i t1 = _mm256_unpackhi_epi64(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi64(r[2], r[3]);
  const __m256i t3 = _mm256_unpackhi_epi64(r[2], r[3]);
  r[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
  r[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
  r[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
  r[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
}

struct Avx512VlWord {
  using T = __m256i;
  static constexpr int kN = 4;
  static T Add(T a, T b) { return _mm256_add_epi64(a, b); }
  static T Xor(T a, T b) { return _mm256_xor_si256(a, b); }
  template <int R>
  static T Ror(T a) {
    return _mm256_maskz_ror_epi64(0xf, a, R);
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

void Compress8Avx512(Lanes<8>& lanes, size_t nblocks) {
  kernel::CompressLanes<Avx512Word>(lanes, nblocks);
}

void Compress4Avx512(Lanes<4>& lanes, size_t nblocks) {
  kernel::CompressLanes<Avx512VlWord>(lanes, nblocks);
}

}  // namespace borgcheck::crypto::blake2b_simd

#else  // built without AVX-512 (not x86-64): Cpu().avx512 is false, so these are never called.

#include <cstdlib>

namespace borgcheck::crypto::blake2b_simd {
void Compress8Avx512(Lanes<8>&, size_t) { std::abort(); }
void Compress4Avx512(Lanes<4>&, size_t) { std::abort(); }
}  // namespace borgcheck::crypto::blake2b_simd

#endif
