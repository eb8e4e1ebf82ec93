// Clearing the upper halves of the AVX registers (VZEROUPPER) after code that leaves them dirty.
//
// Why: ISA-L's AVX-512 CRC-32 (crc32_gzip_refl_by16_10, repo::Crc32) returns with the upper
// halves of the vector registers dirty. On the benchmark machine (AMD Zen 5) every legacy-SSE
// instruction after that carries a false dependency on the old upper half of its register, and
// SHA-NI has no VEX form: OpenSSL's one-stream SHA-256 fell from 2.0 to 1.63 GB/s and the 2- and
// 4-lane SHA-NI kernels (sha256_ni.h) to 1.58 and 1.22 GB/s, slower than one stream
// (measured with bench/hash_engines when this was found, commit 6cd0bb2; one VZEROUPPER
// restores 2.0 / 2.84 / 3.4 GB/s). OpenSSL's own AVX code (AES-CTR, OCB, ChaCha20-Poly1305)
// cleans up after itself, as GCC's code does.
//
// Thread contract: a pure function of the calling thread's registers; the CPU check is a constant
// computed once. Safe for concurrent use.
#pragma once

namespace borgcheck::crypto {

// VZEROUPPER on a CPU with AVX; nothing otherwise (then no code can have dirtied the upper halves).
// Call it after a library routine that may leave them dirty, before SSE-encoded code (SHA-NI).
void ClearUpperVectorState();

}  // namespace borgcheck::crypto
