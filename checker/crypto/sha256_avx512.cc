// 16-lane AVX-512 SHA-256 (sha256_avx512.h): FIPS 180-4 §6.2.2 with every variable a vector
// of sixteen messages' values.
//   1. The state: h0..h7 of the sixteen messages, transposed through a staging array in
//      memory (once per call), where it stays between blocks: only the working variables and
//      the schedule live in the 32 registers during the rounds.
//   2. Per block: the sixteen 64-byte blocks form a 16 x 16 matrix of words, transposed in
//      registers (four rounds of VPERMT2D swapping off-diagonal blocks of 8, 4, 2 and 1
//      words) so that vector j holds word j of every message, then byte-swapped (VPSHUFB);
//      the lines 1 KiB ahead in each message are prefetched (sixteen streams are more than
//      the hardware prefetcher follows well: +5 % at 1 MiB messages).
//   3. 64 rounds in four groups of sixteen, unrolled so that the eight working variables and
//      sixteen schedule words are registers, renamed instead of moved; Σ0, Σ1, σ0, σ1 are
//      three rotates (or two and a shift) joined by one three-input logic instruction, Ch and
//      Maj one each.
//   4. Add the state from the staging array; after the last block, transpose it back.
// Measured: 4.1-4.4 GB/s built with g++ 12 -O2, 4.7-4.9 with clang 14 (kernel alone, 16
// messages of 60,000 bytes to 1 MiB; through Sha256Lanes see bench/RESULTS.md); Intel's
// hand-written assembly in libipsec-mb reaches 6.0 GB/s on the same machine (only for
// messages under 64 KiB). Grouping the sums so that the chains through e and a are short
// gave +10 %; keeping the state in memory during the rounds, and the prefetch, a few %.
// Only the zero-masking forms of rotate, shift and shuffle are used: g++ 12's headers pass an
// uninitialised merge source to the plain forms, which -Wall reports.
#include "checker/crypto/sha256_avx512.h"

#include <cstdlib>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define BORGCHECK_SHA256_AVX512 1
#endif

namespace borgcheck::crypto::sha256_avx512 {

#if BORGCHECK_SHA256_AVX512

namespace {

#define SHA_AVX512_TARGET __attribute__((target("avx512f,avx512bw"), always_inline)) inline

constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr __mmask16 kAll = 0xffff;

template <int N>
SHA_AVX512_TARGET __m512i Ror(__m512i x) {
  return _mm512_maskz_ror_epi32(kAll, x, N);
}
// Three-input logic: imm 0x96 is a ^ b ^ c, 0xca is (a & b) | (~a & c) (Ch), 0xe8 is the
// majority (Maj).
#define SHA_XOR3(a, b, c) _mm512_ternarylogic_epi32(a, b, c, 0x96)

SHA_AVX512_TARGET __m512i BigSigma0(__m512i a) {
  return SHA_XOR3(Ror<2>(a), Ror<13>(a), Ror<22>(a));
}
SHA_AVX512_TARGET __m512i BigSigma1(__m512i e) {
  return SHA_XOR3(Ror<6>(e), Ror<11>(e), Ror<25>(e));
}
SHA_AVX512_TARGET __m512i SmallSigma0(__m512i w) {
  return SHA_XOR3(Ror<7>(w), Ror<18>(w), _mm512_maskz_srli_epi32(kAll, w, 3));
}
SHA_AVX512_TARGET __m512i SmallSigma1(__m512i w) {
  return SHA_XOR3(Ror<17>(w), Ror<19>(w), _mm512_maskz_srli_epi32(kAll, w, 10));
}

// One round with the working variables a..h: only d and h change (d = d + T1 becomes the
// next e, h = T1 + T2 the next a); the caller renames the variables for the next round
// instead of moving them. The sums are grouped so that what depends on e and a comes last:
// d + h + K + W and h + K + W are known a round early, which leaves three dependent steps
// per round on the chains through e and a instead of five.
#define SHA_ROUND(a, b, c, d, e, f, g, h, wk)                                               \
  do {                                                                                      \
    const __m512i hwk = _mm512_add_epi32(h, wk);                                            \
    const __m512i ch = _mm512_ternarylogic_epi32(e, f, g, 0xca);                            \
    const __m512i s1 = BigSigma1(e);                                                        \
    const __m512i t1 = _mm512_add_epi32(_mm512_add_epi32(hwk, ch), s1);                     \
    d = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(d, hwk), ch), s1);               \
    h = _mm512_add_epi32(_mm512_add_epi32(t1, _mm512_ternarylogic_epi32(a, b, c, 0xe8)),    \
                         BigSigma0(a));                                                     \
  } while (0)

// Sixteen rounds from round 16 j on; `SCHEDULE` computes w[k] for rounds 16..63 first.
#define SHA_SCHEDULE(k)                                                                         \
  w[k] = _mm512_add_epi32(_mm512_add_epi32(SmallSigma1(w[((k) + 14) & 15]), w[((k) + 9) & 15]), \
                          _mm512_add_epi32(SmallSigma0(w[((k) + 1) & 15]), w[k]))
#define SHA_ROUND_K(a, b, c, d, e, f, g, h, k, schedule)                                 \
  do {                                                                                   \
    if (schedule) SHA_SCHEDULE(k);                                                       \
    SHA_ROUND(a, b, c, d, e, f, g, h,                                                    \
              _mm512_add_epi32(w[k], _mm512_set1_epi32(int(kK[16 * j + (k)]))));        \
  } while (0)
#define SHA_ROUNDS16(schedule)                                     \
  do {                                                             \
    SHA_ROUND_K(a, b, c, d, e, f, g, h, 0, schedule);              \
    SHA_ROUND_K(h, a, b, c, d, e, f, g, 1, schedule);              \
    SHA_ROUND_K(g, h, a, b, c, d, e, f, 2, schedule);              \
    SHA_ROUND_K(f, g, h, a, b, c, d, e, 3, schedule);              \
    SHA_ROUND_K(e, f, g, h, a, b, c, d, 4, schedule);              \
    SHA_ROUND_K(d, e, f, g, h, a, b, c, 5, schedule);              \
    SHA_ROUND_K(c, d, e, f, g, h, a, b, 6, schedule);              \
    SHA_ROUND_K(b, c, d, e, f, g, h, a, 7, schedule);              \
    SHA_ROUND_K(a, b, c, d, e, f, g, h, 8, schedule);              \
    SHA_ROUND_K(h, a, b, c, d, e, f, g, 9, schedule);              \
    SHA_ROUND_K(g, h, a, b, c, d, e, f, 10, schedule);             \
    SHA_ROUND_K(f, g, h, a, b, c, d, e, 11, schedule);             \
    SHA_ROUND_K(e, f, g, h, a, b, c, d, 12, schedule);             \
    SHA_ROUND_K(d, e, f, g, h, a, b, c, 13, schedule);             \
    SHA_ROUND_K(c, d, e, f, g, h, a, b, 14, schedule);             \
    SHA_ROUND_K(b, c, d, e, f, g, h, a, 15, schedule);             \
  } while (0)

// Index vectors for VPERMT2D that swap the off-diagonal s x s blocks of rows r[i] and r[i | s]
// (bit s of i clear): the low row keeps its columns without bit s and takes the high row's
// others, and the other way round. After s = 8, 4, 2, 1 a 16 x 16 matrix is transposed.
struct SwapIndex {
  alignas(64) int lo[16];
  alignas(64) int hi[16];
};
constexpr SwapIndex MakeSwapIndex(int s) {
  SwapIndex x{};
  for (int c = 0; c < 16; ++c) {
    x.lo[c] = (c & s) ? 16 + (c ^ s) : c;
    x.hi[c] = (c & s) ? 16 + c : (c ^ s);
  }
  return x;
}
constexpr SwapIndex kSwap[4] = {MakeSwapIndex(8), MakeSwapIndex(4), MakeSwapIndex(2),
                                MakeSwapIndex(1)};

SHA_AVX512_TARGET void Transpose16(__m512i r[16]) {
  for (int k = 0; k < 4; ++k) {
    const int s = 8 >> k;
    const __m512i lo = _mm512_load_si512(kSwap[k].lo), hi = _mm512_load_si512(kSwap[k].hi);
    for (int i = 0; i < 16; ++i) {
      if (i & s) continue;
      const __m512i a = r[i], b = r[i | s];
      r[i] = _mm512_permutex2var_epi32(a, lo, b);
      r[i | s] = _mm512_permutex2var_epi32(a, hi, b);
    }
  }
}

__attribute__((target("avx512f,avx512bw"))) void Compress(uint32_t* const* state,
                                                          const uint8_t* const* data,
                                                          size_t nblocks) {
  // Byte order of a big-endian 32-bit word, in each 128-bit lane.
  const __m512i bswap = _mm512_set_epi64(
      0x0c0d0e0f08090a0bLL, 0x0405060700010203LL, 0x0c0d0e0f08090a0bLL, 0x0405060700010203LL,
      0x0c0d0e0f08090a0bLL, 0x0405060700010203LL, 0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  alignas(64) uint32_t staged[8][16];
  for (int l = 0; l < 16; ++l) {
    for (int i = 0; i < 8; ++i) staged[i][l] = state[l][i];
  }
  for (size_t blk = 0; blk < nblocks; ++blk) {
    __m512i w[16];
    for (int l = 0; l < 16; ++l) {
      w[l] = _mm512_loadu_si512(data[l] + 64 * blk);
      // Through an integer: the address may lie past the message (a prefetch never faults).
      _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(data[l]) +
                                                 64 * blk + 1024),
                   _MM_HINT_T0);
    }
    Transpose16(w);
    for (int j = 0; j < 16; ++j) w[j] = _mm512_maskz_shuffle_epi8(~__mmask64{0}, w[j], bswap);
    __m512i a = _mm512_load_si512(staged[0]), b = _mm512_load_si512(staged[1]),
            c = _mm512_load_si512(staged[2]), d = _mm512_load_si512(staged[3]),
            e = _mm512_load_si512(staged[4]), f = _mm512_load_si512(staged[5]),
            g = _mm512_load_si512(staged[6]), h = _mm512_load_si512(staged[7]);
    {
      constexpr int j = 0;
      SHA_ROUNDS16(false);
    }
    for (int j = 1; j < 4; ++j) SHA_ROUNDS16(true);
    const __m512i v[8] = {a, b, c, d, e, f, g, h};
    for (int i = 0; i < 8; ++i) {
      _mm512_store_si512(staged[i], _mm512_add_epi32(_mm512_load_si512(staged[i]), v[i]));
    }
  }
  for (int l = 0; l < 16; ++l) {
    for (int i = 0; i < 8; ++i) state[l][i] = staged[i][l];
  }
}

#undef SHA_ROUNDS16
#undef SHA_ROUND_K
#undef SHA_SCHEDULE
#undef SHA_ROUND
#undef SHA_XOR3

bool Detect() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  if ((ecx & bit_OSXSAVE) == 0) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xe6) != 0xe6) return false;  // SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM state
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (ebx & bit_AVX512F) != 0 && (ebx & bit_AVX512BW) != 0;
}

}  // namespace

bool CpuHasAvx512Sha() {
  static const bool has = Detect();
  return has;
}

void Blocks16(uint32_t* const state[16], const uint8_t* const data[16], size_t nblocks) {
  Compress(state, data, nblocks);
}

#else  // not x86-64: CpuHasAvx512Sha() is false and Blocks16 must not be called.

bool CpuHasAvx512Sha() { return false; }
void Blocks16(uint32_t* const*, const uint8_t* const*, size_t) { std::abort(); }

#endif

}  // namespace borgcheck::crypto::sha256_avx512
