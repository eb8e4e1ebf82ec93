// Shared by the decompression fuzz targets (payload_fuzzer.cc and the per-codec lz4_, zstd_,
// zlib_, lzma_fuzzer.cc): the output cap they run with, the borg 1.x header of each codec,
// and one known-good payload per codec for the "context is reusable" invariant.
//
// Cap: the targets use kFuzzCap (1 MiB) instead of borg's 20971479 bytes. Every bound in
// codecs/ is relative to the cap the Decompressor is given, so a smaller cap exercises the
// same code, and a bomb then costs the fuzzer ~1 MiB per run instead of 20 MiB (which would
// cut the execution rate twentyfold). The object target (object_fuzzer.cc) keeps the real cap.
//
// Thread contract: KnownGood() builds its table once (function-local static); read-only after.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "checker/base/bytes.h"
#include "codecs/decompressor.h"

namespace borgcheck::fuzz {

inline constexpr size_t kFuzzCap = size_t{1} << 20;

// The borg 1.x payload for `body` compressed with `codec`: the 2-byte header before it, or,
// for zlib, the body itself (zlib is recognised by its own CMF/FLG bytes).
std::string Borg1Payload(codecs::CodecId codec, Bytes body);

struct KnownGood {
  std::string body;       // the codec's own stream (no borg header)
  std::string plaintext;  // what it decodes to
};
// Built with the codec libraries' own compressors from a fixed plaintext; for kNone the body
// is the plaintext. kObfuscate / kUnknown are not raw codecs and have none.
const KnownGood& KnownGoodFor(codecs::CodecId codec);

// Compresses `plaintext` with the codec library as borg does (zstd frame with its content
// size, raw LZ4 block, zlib stream, .xz with check None); kNone returns it unchanged.
std::string Compress(codecs::CodecId codec, Bytes plaintext);

// The whole body of the per-codec targets (their invariant is spelled out in each target's
// top comment, and here): decodes `body` as a raw `codec` stream and checks that
//   - a failure says why, a success stays within the cap;
//   - the expected-size variant agrees: the decoded size passes with the same bytes, one byte
//     more or less fails;
//   - the borg 1.x path (DecodeBorg1 of the header + body) gives the same verdict and bytes;
//   - the decompressor is reusable: a known-good stream still decodes right afterwards;
//   - `body`, taken as plaintext (up to kRoundTripMax bytes), survives a round trip through the
//     library's own compressor and our decoder.
void FuzzRawCodec(codecs::CodecId codec, Bytes body);
inline constexpr size_t kRoundTripMax = 64 * 1024;

}  // namespace borgcheck::fuzz
