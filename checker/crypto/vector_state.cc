#include "checker/crypto/vector_state.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace borgcheck::crypto {

#if defined(__x86_64__) || defined(__i386__)

namespace {

bool CpuHasAvx() {
  static const bool has = __builtin_cpu_supports("avx");
  return has;
}

__attribute__((target("avx"))) void ZeroUpper() { _mm256_zeroupper(); }

}  // namespace

void ClearUpperVectorState() {
  if (CpuHasAvx()) ZeroUpper();
}

#else

void ClearUpperVectorState() {}

#endif

}  // namespace borgcheck::crypto
