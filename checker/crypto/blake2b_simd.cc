// The portable one-lane BLAKE2b kernel and the CPU check (blake2b_simd.h). The AVX2 and
// AVX-512 kernels are in blake2b_simd_avx2.cc and blake2b_simd_avx512.cc, compiled with
// their own instruction-set flags.
#include "checker/crypto/blake2b_simd.h"

#include <bit>
#include <cstring>

#include "checker/crypto/blake2b_simd_kernel.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace borgcheck::crypto::blake2b_simd {
namespace {

struct Word {
  using T = uint64_t;
  static constexpr int kN = 1;
  static T Add(T a, T b) { return a + b; }
  static T Xor(T a, T b) { return a ^ b; }
  template <int R>
  static T Ror(T a) {
    return std::rotr(a, R);
  }
  static T Set1(uint64_t v) { return v; }
  static T Zero() { return 0; }
  static T Load(const uint64_t* p) { return p[0]; }
  static void LoadState(uint64_t* const* h, T out[8]) { std::memcpy(out, h[0], 64); }
  static void StoreState(const T in[8], uint64_t* const* h) { std::memcpy(h[0], in, 64); }
  static void LoadBlock(const uint8_t* const* data, size_t offset, T m[16]) {
    std::memcpy(m, data[0] + offset, 128);
    if constexpr (std::endian::native == std::endian::big) {
      for (int i = 0; i < 16; ++i) m[i] = __builtin_bswap64(m[i]);
    }
  }
};

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx & bit_OSXSAVE) != 0;
  const bool avx = (ecx & bit_AVX) != 0;
  if (!osxsave || !avx) return f;
  // XCR0: which register states the OS saves on a context switch.
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool os_ymm = (xcr0_lo & 0x6) == 0x6;     // SSE and AVX state
  const bool os_zmm = (xcr0_lo & 0xe6) == 0xe6;   // and opmask, ZMM_Hi256, Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  f.avx2 = os_ymm && (ebx & bit_AVX2) != 0;
  f.avx512 = f.avx2 && os_zmm && (ebx & bit_AVX512F) != 0 && (ebx & bit_AVX512VL) != 0;
#endif
  return f;
}

}  // namespace

const CpuFeatures& Cpu() {
  static const CpuFeatures features = Detect();
  return features;
}

void Compress1(Lanes<1>& lanes, size_t nblocks) { kernel::CompressLanes<Word>(lanes, nblocks); }

}  // namespace borgcheck::crypto::blake2b_simd
