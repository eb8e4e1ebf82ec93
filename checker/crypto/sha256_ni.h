// SHA-256 block compression on the x86 SHA extensions (SHA-NI), one to four independent
// messages in lock-step. Internal to checker/crypto: sha256_lanes.h is the interface the
// checker uses; the benchmark (bench/sha256_speed.cc) calls these directly to measure how many
// lanes pay.
//
// Why lanes: one SHA256RNDS2 does two rounds and its result feeds the next one, so a single
// message runs at the instruction's latency (about 4 cycles on the AMD Zen 5 benchmark
// machine), while the unit could start a new one every other cycle. Blocks of independent
// messages have no dependency on each other, so compressing them interleaved fills those
// cycles (numbers: sha256_lanes.h).
//
// The state is SHA-256's h0..h7 as eight host-order words (FIPS 180-4 §6.2); the kernels
// convert to and from the SHA-NI register layout once per call, not per block.
//
// Thread contract: pure functions over caller-owned memory; safe for concurrent use on
// distinct states. Call them only when CpuHasShaNi() is true (they execute SHA, SSE4.1 and
// SSSE3 instructions unconditionally).
#pragma once

#include <cstddef>
#include <cstdint>

namespace borgcheck::crypto::sha256_ni {

// True when the CPU (cpuid) has SHA, SSE4.1 and SSSE3. Computed once; safe for concurrent use.
bool CpuHasShaNi();

// Compresses `nblocks` 64-byte blocks of `data` into `state`.
void Blocks1(uint32_t state[8], const uint8_t* data, size_t nblocks);

// Compresses `nblocks` blocks of each of the N messages data[i] into state[i], interleaved.
// The states must be distinct; the data may overlap or be the same.
void Blocks2(uint32_t* const state[2], const uint8_t* const data[2], size_t nblocks);
void Blocks3(uint32_t* const state[3], const uint8_t* const data[3], size_t nblocks);
void Blocks4(uint32_t* const state[4], const uint8_t* const data[4], size_t nblocks);

}  // namespace borgcheck::crypto::sha256_ni
