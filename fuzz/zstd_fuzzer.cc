// Fuzz target: the zstd decoder (codecs::Decompressor::DecodeRaw with CodecId::kZstd, and
// DecodeBorg1 of the same stream behind its borg 1.x header).
//
// Input: one zstd frame (borg 1.x header 03 00, borg 2 ctype 3),
// without the borg header.
// Invariant (fuzz::FuzzRawCodec, fuzz/codec_fuzz.h): no crash, no output beyond the cap
// (fuzz::kFuzzCap); a failure says why; DecodeRaw with the decoded size as expected size
// gives the same bytes and one byte more or less fails; DecodeBorg1 agrees with DecodeRaw;
// a known-good stream still decodes afterwards (the reused context is not poisoned); the
// input taken as plaintext survives compression by the library and decoding by us.
#include <cstdint>

#include "fuzz/codec_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  borgcheck::fuzz::FuzzRawCodec(borgcheck::codecs::CodecId::kZstd, borgcheck::Bytes(data, size));
  return 0;
}
