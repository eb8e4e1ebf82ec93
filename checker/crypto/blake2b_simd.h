// BLAKE2b block compression (RFC 7693 §3.2) of 1, 4 or 8 independent messages in lock-step:
// one 64-bit word of each message per vector lane (AVX2: 4 messages in 256-bit registers,
// AVX-512: 8 in 512-bit registers), portable code for one. Internal to checker/crypto:
// blake2b_lanes.h is the interface; the benchmark (bench/hash_engines.cc) calls these to
// measure each width.
//
// Why per message and not within one: BLAKE2b's four G functions per half-round already keep
// four scalar ALUs busy, so vectorising one message (libb2's SSE/AVX path) only adds shuffles
// and is slower than scalar code on the benchmark CPU; words of different messages need no
// shuffling after the initial transpose of each block.
//
// Counters: for block k of a call (0-based), lane l is compressed with the byte counter
// t[l] + 128 (k + 1) and no final flag, except the call's last block, which uses
// t[l] + 128 (nblocks - 1) + last_len[l] and the final flag last[l] (all ones or 0). The high
// counter word is always 0: a message is shorter than 2^64 bytes. The caller advances its own
// counters.
//
// Thread contract: pure functions over caller-owned memory, safe for concurrent use on
// distinct states. Call a kernel only when Cpu() says it may run here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace borgcheck::crypto::blake2b_simd {

struct CpuFeatures {
  bool avx2 = false;      // AVX2, with the OS saving ymm state
  bool avx512 = false;    // AVX-512 F and VL, with the OS saving zmm state
};
// Detected once (cpuid, xgetbv); safe for concurrent use.
const CpuFeatures& Cpu();

template <int N>
struct Lanes {
  uint64_t* h[N];             // each 8 words, updated in place; distinct
  const uint8_t* data[N];     // each nblocks * 128 bytes
  uint64_t t[N];              // bytes compressed before this call
  uint64_t last_len[N];       // bytes of the call's last block counted (1..128; 0 for empty)
  uint64_t last[N];           // final flag of the call's last block: ~0 or 0
};

void Compress1(Lanes<1>& lanes, size_t nblocks);
void Compress4Avx2(Lanes<4>& lanes, size_t nblocks);      // needs Cpu().avx2
void Compress4Avx512(Lanes<4>& lanes, size_t nblocks);    // needs Cpu().avx512 (VL rotates)
void Compress8Avx512(Lanes<8>& lanes, size_t nblocks);    // needs Cpu().avx512

}  // namespace borgcheck::crypto::blake2b_simd
