// Fuzz target: the zlib decoder (codecs::Decompressor::DecodeRaw with CodecId::kZlib, and
// DecodeBorg1 of the same stream, which borg 1.x recognises by its CMF/FLG bytes).
//
// Input: one zlib stream (RFC 1950; borg 1.x writes it with no header of its own, borg 2 as
// ctype 5).
// Invariant (fuzz::FuzzRawCodec, fuzz/codec_fuzz.h): no crash, no output beyond the cap
// (fuzz::kFuzzCap); a failure says why; DecodeRaw with the decoded size as expected size
// gives the same bytes and one byte more or less fails; DecodeBorg1 agrees with DecodeRaw;
// a known-good stream still decodes afterwards (the reused context is not poisoned); the
// input taken as plaintext survives compression by the library and decoding by us.
#include <cstdint>

#include "fuzz/codec_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  borgcheck::fuzz::FuzzRawCodec(borgcheck::codecs::CodecId::kZlib, borgcheck::Bytes(data, size));
  return 0;
}
