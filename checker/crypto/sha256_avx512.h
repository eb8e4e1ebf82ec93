// SHA-256 block compression of 16 independent messages at once in AVX-512 registers: word i
// of each message's schedule and state in one 32-bit lane of a 512-bit vector. Internal to
// checker/crypto: sha256_lanes.h uses it when 13 or more lanes are busy (fewer run faster in
// SHA-NI groups, see there for the numbers).
//
// Why this exists beside SHA-NI: SHA-NI's round instruction is a single unit, so SHA-NI lanes
// level off at about 3.5 GB/s on the benchmark CPU; the general vector units are wider, and
// sixteen messages in lock-step in plain AVX-512 arithmetic (rotates, three-input logic,
// adds) reach 4.1 GB/s there with this code (g++ 12 -O2), and 6.0 GB/s in Intel's
// hand-written assembly (libipsec-mb 1.3, 16 jobs of 60,000 bytes, same machine), which
// shows how much is left.
//
// The state is SHA-256's h0..h7 as eight host-order words per message, as in sha256_ni.h.
//
// Thread contract: a pure function over caller-owned memory; safe for concurrent use on
// distinct states. Call it only when CpuHasAvx512Sha() is true.
#pragma once

#include <cstddef>
#include <cstdint>

namespace borgcheck::crypto::sha256_avx512 {

// True when the CPU has AVX-512 F and BW and the OS saves the zmm state. Computed once.
bool CpuHasAvx512Sha();

// Compresses `nblocks` 64-byte blocks of each of the 16 messages data[i] into state[i]. The
// states must be distinct; the data may overlap.
void Blocks16(uint32_t* const state[16], const uint8_t* const data[16], size_t nblocks);

}  // namespace borgcheck::crypto::sha256_avx512
