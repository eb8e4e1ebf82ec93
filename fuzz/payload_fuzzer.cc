// Fuzz target: a borg 1.x compressed payload, the bytes an object envelope yields
// (codecs::Decompressor::DecodeBorg1): codec detection in borg's order, obfuscation with its
// length field, nesting bound and padding, and dispatch to every codec.
//
// Input: a payload, header included (e.g. `03 00` + zstd frame, `04 00` + BE32 n + inner
// payload + padding, or a bare zlib stream).
// Invariant:
//   - a failure says why; a success stays within the cap (fuzz::kFuzzCap), names a real codec,
//     and unless it is obfuscation its inner codec is itself and it has no padding;
//   - a plain (non-obfuscated) success agrees with DecodeRaw of the same body with that codec;
//   - the decompressor is reusable: afterwards the known-good payload of the codec that was
//     detected still decodes to its plaintext.
#include <cstdint>
#include <cstring>
#include <optional>

#include "codecs/decompressor.h"
#include "fuzz/codec_fuzz.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using codecs::CodecId;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static codecs::Decompressor d(fuzz::kFuzzCap);
  static ByteBuffer out, check;
  const Bytes payload(data, size);

  const codecs::DecodeResult r = d.DecodeBorg1(payload, out);
  if (!r.ok) {
    FUZZ_CHECK(!r.error.empty());
  } else {
    FUZZ_CHECK(out.size() <= fuzz::kFuzzCap);
    FUZZ_CHECK(r.codec != CodecId::kUnknown && r.inner_codec != CodecId::kUnknown &&
               r.inner_codec != CodecId::kObfuscate);
    if (r.codec != CodecId::kObfuscate) {
      FUZZ_CHECK(r.inner_codec == r.codec && !r.nonzero_padding);
      const Bytes body = r.codec == CodecId::kZlib ? payload : payload.subspan(2);
      const codecs::DecodeResult raw = d.DecodeRaw(r.codec, body, std::nullopt, check);
      FUZZ_CHECK(raw.ok && check.size() == out.size());
      FUZZ_CHECK(out.empty() || std::memcmp(check.data(), out.data(), out.size()) == 0);
    }
  }

  const CodecId used = r.inner_codec;
  if (used != CodecId::kUnknown && used != CodecId::kObfuscate) {
    const fuzz::KnownGood& good = fuzz::KnownGoodFor(used);
    const std::string good_payload = fuzz::Borg1Payload(used, AsBytes(good.body));
    FUZZ_CHECK(d.DecodeBorg1(AsBytes(good_payload), check).ok);
    FUZZ_CHECK(check.size() == good.plaintext.size() &&
               std::memcmp(check.data(), good.plaintext.data(), check.size()) == 0);
  }
  return 0;
}
