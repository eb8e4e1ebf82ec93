// SHA-NI kernels: see sha256_ni.h. FIPS 180-4 §6.2.2 with the message schedule and the rounds
// done four words at a time by the SHA extensions:
//   1. load the state h0..h7 and rearrange it into the two registers SHA256RNDS2 works on
//      (ABEF and CDGH, high word first);
//   2. per block and lane: byte-swap the sixteen big-endian message words into four vectors;
//      sixteen groups of four rounds, each adding four round constants and issuing two
//      SHA256RNDS2; the schedule words of groups 4..15 come from SHA256MSG1 / PALIGNR /
//      SHA256MSG2 of the previous sixteen, computed two groups ahead of their use (the
//      fastest of 0, 1 and 2 groups ahead with g++ 12, by up to 5 % at four lanes); add the
//      saved state;
//   3. rearrange back and store.
// The lane count N is a template parameter so that each step is written once and the
// compiler unrolls the lane loops; every step is issued for all lanes before the next, so
// that consecutive instructions are independent and the out-of-order core overlaps the
// latencies of the lanes.
#include "checker/crypto/sha256_ni.h"

#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define BORGCHECK_SHA_NI_X86 1
#endif

namespace borgcheck::crypto::sha256_ni {

#if BORGCHECK_SHA_NI_X86

namespace {

#define SHA_NI_TARGET __attribute__((target("sha,sse4.1,ssse3")))

alignas(16) constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

template <int N>
SHA_NI_TARGET void BlocksN(uint32_t* const* state, const uint8_t* const* data, size_t nblocks) {
  // Byte order of a big-endian 32-bit word within each lane of a vector.
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i abef[N], cdgh[N];
  const uint8_t* p[N];
#pragma GCC unroll 4
  for (int l = 0; l < N; ++l) {
    __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state[l]));
    __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state[l] + 4));
    dcba = _mm_shuffle_epi32(dcba, 0xB1);                 // C D A B (high to low)
    hgfe = _mm_shuffle_epi32(hgfe, 0x1B);                 // E F G H
    abef[l] = _mm_alignr_epi8(dcba, hgfe, 8);             // A B E F
    cdgh[l] = _mm_blend_epi16(hgfe, dcba, 0xF0);          // C D G H
    p[l] = data[l];
  }
  while (nblocks-- > 0) {
    __m128i save_abef[N], save_cdgh[N], m[4][N];
#pragma GCC unroll 4
    for (int l = 0; l < N; ++l) {
      save_abef[l] = abef[l];
      save_cdgh[l] = cdgh[l];
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
#pragma GCC unroll 4
      for (int l = 0; l < N; ++l) {
        m[g][l] = _mm_shuffle_epi8(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[l] + 16 * g)), bswap);
      }
    }
#pragma GCC unroll 16
    for (int g = 0; g < 16; ++g) {
      const __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(kK + 4 * g));
      __m128i wk[N];
#pragma GCC unroll 4
      for (int l = 0; l < N; ++l) {
        wk[l] = _mm_add_epi32(m[g & 3][l], k);
        cdgh[l] = _mm_sha256rnds2_epu32(cdgh[l], abef[l], wk[l]);
      }
      // The schedule words of group g + 2 (they replace those of group g - 2, already used),
      // issued between the two round halves so that they fill the rounds' latency.
      const int h = g + 2;
      if (h >= 4 && h < 16) {
        __m128i (&w)[N] = m[h & 3];  // in: W[4h-16..]; out: W[4h..4h+3]
        const __m128i (&w1)[N] = m[(h - 3) & 3];
        const __m128i (&w2)[N] = m[(h - 2) & 3];
        const __m128i (&w3)[N] = m[(h - 1) & 3];
#pragma GCC unroll 4
        for (int l = 0; l < N; ++l) {
          __m128i t = _mm_sha256msg1_epu32(w[l], w1[l]);
          t = _mm_add_epi32(t, _mm_alignr_epi8(w3[l], w2[l], 4));
          w[l] = _mm_sha256msg2_epu32(t, w3[l]);
        }
      }
#pragma GCC unroll 4
      for (int l = 0; l < N; ++l) {
        abef[l] = _mm_sha256rnds2_epu32(abef[l], cdgh[l], _mm_shuffle_epi32(wk[l], 0x0E));
      }
    }
#pragma GCC unroll 4
    for (int l = 0; l < N; ++l) {
      abef[l] = _mm_add_epi32(abef[l], save_abef[l]);
      cdgh[l] = _mm_add_epi32(cdgh[l], save_cdgh[l]);
      p[l] += 64;
    }
  }
#pragma GCC unroll 4
  for (int l = 0; l < N; ++l) {
    __m128i feba = _mm_shuffle_epi32(abef[l], 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh[l], 0xB1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(state[l]), _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(state[l] + 4), _mm_alignr_epi8(dchg, feba, 8));
  }
}

bool DetectShaNi() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool ssse3 = (ecx & bit_SSSE3) != 0;
  const bool sse41 = (ecx & bit_SSE4_1) != 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool sha = (ebx & bit_SHA) != 0;
  return ssse3 && sse41 && sha;
}

}  // namespace

bool CpuHasShaNi() {
  static const bool has = DetectShaNi();
  return has;
}

void Blocks1(uint32_t state[8], const uint8_t* data, size_t nblocks) {
  uint32_t* const s[1] = {state};
  const uint8_t* const d[1] = {data};
  BlocksN<1>(s, d, nblocks);
}
void Blocks2(uint32_t* const state[2], const uint8_t* const data[2], size_t nblocks) {
  BlocksN<2>(state, data, nblocks);
}
void Blocks3(uint32_t* const state[3], const uint8_t* const data[3], size_t nblocks) {
  BlocksN<3>(state, data, nblocks);
}
void Blocks4(uint32_t* const state[4], const uint8_t* const data[4], size_t nblocks) {
  BlocksN<4>(state, data, nblocks);
}

#else  // not x86: no SHA-NI; CpuHasShaNi() is false and the kernels must not be called.

bool CpuHasShaNi() { return false; }
void Blocks1(uint32_t*, const uint8_t*, size_t) { std::abort(); }
void Blocks2(uint32_t* const*, const uint8_t* const*, size_t) { std::abort(); }
void Blocks3(uint32_t* const*, const uint8_t* const*, size_t) { std::abort(); }
void Blocks4(uint32_t* const*, const uint8_t* const*, size_t) { std::abort(); }

#endif

}  // namespace borgcheck::crypto::sha256_ni
