// The decompression front end: detects the codec of a borg 1.x payload from its 2-byte header
// (spec borg1-format.md §5), unwraps obfuscation, hands the body to the codec's backend, and
// turns the backend's status into a DecodeResult.
//
// 1. Detect, in borg's order: `01 00` lz4, `03 00` zstd, `00 00` none, a zlib CMF/FLG pair
//    (whole payload), `02 00` lzma, `04 00` obfuscate; anything else is unknown.
// 2. Obfuscate: BE32 n, n bytes of inner payload (detected again by step 1, nesting bounded by
//    kMaxObfuscateDepth), then padding that must be zero bytes (non-zero only flags the
//    result: borg ignores the padding, the caller decides how severe that is).
// 3. Decode with the backend, output bounded by max_output (DecodeBorg1) or by the expected
//    size (DecodeRaw).

#include "codecs/decompressor.h"

#include "codecs/codec_backend.h"

namespace borgcheck::codecs {
namespace {

// borg never nests obfuscation; a little depth is allowed, a long chain is hostile input.
constexpr int kMaxObfuscateDepth = 4;
constexpr size_t kHeaderSize = 2;
constexpr size_t kObfuscateLengthSize = 4;

// borg's DecompressionError wording for a payload no codec claims.
constexpr std::string_view kNoDecompressor = "No decompressor for this data found";

bool IsZlibHeader(Bytes p) {
  return p.size() >= 2 && (p[0] & 0x0f) == 8 && (unsigned(p[0]) * 256 + p[1]) % 31 == 0;
}

// Runs one backend with `cap` and fills in the result. `cap_is_expected` picks the wording of
// the too-big message (the caller's expected size, or the configured limit).
DecodeResult RunBackend(CodecBackend& backend, Bytes body, size_t cap, bool cap_is_expected,
                        ByteBuffer& out) {
  DecodeResult r;
  r.codec = r.inner_codec = backend.id();
  std::string error;
  switch (backend.Decode(body, cap, out, error)) {
    case BackendStatus::kOk:
      r.ok = true;
      break;
    case BackendStatus::kCorrupt:
      r.error = std::move(error);
      break;
    case BackendStatus::kExceedsCap:
      r.error = std::string("decompressed size exceeds ") +
                (cap_is_expected ? "expected size" : "limit") + " of " + std::to_string(cap) +
                " bytes";
      break;
  }
  return r;
}

DecodeResult Failure(CodecId codec, std::string error) {
  DecodeResult r;
  r.codec = r.inner_codec = codec;
  r.error = std::move(error);
  return r;
}

}  // namespace

std::string_view CodecName(CodecId id) {
  switch (id) {
    case CodecId::kNone:
      return "none";
    case CodecId::kLz4:
      return "lz4";
    case CodecId::kZstd:
      return "zstd";
    case CodecId::kZlib:
      return "zlib";
    case CodecId::kLzma:
      return "lzma";
    case CodecId::kObfuscate:
      return "obfuscate";
    case CodecId::kUnknown:
      break;
  }
  return "unknown";
}

Decompressor::Decompressor(size_t max_output)
    : max_output_(max_output),
      none_(MakeNoneBackend()),
      lz4_(MakeLz4Backend()),
      zstd_(MakeZstdBackend()),
      zlib_(MakeZlibBackend()),
      lzma_(MakeLzmaBackend()) {}

Decompressor::~Decompressor() = default;

void Decompressor::TEST_UseSharedLz4Scratch(bool on) { lz4_->TEST_UseSharedScratch(on); }

DecodeResult Decompressor::DecodeBorg1(Bytes payload, ByteBuffer& out) {
  return DecodeBorg1Inner(payload, out, 0);
}

DecodeResult Decompressor::DecodeBorg1Inner(Bytes payload, ByteBuffer& out, int depth) {
  const bool has_header = payload.size() >= kHeaderSize && payload[1] == 0x00;
  const Bytes body = payload.size() >= kHeaderSize ? payload.subspan(kHeaderSize) : Bytes();
  // Step 1, in borg's detection order.
  if (has_header && payload[0] == 0x01) return RunBackend(*lz4_, body, max_output_, false, out);
  if (has_header && payload[0] == 0x03) return RunBackend(*zstd_, body, max_output_, false, out);
  if (has_header && payload[0] == 0x00) return RunBackend(*none_, body, max_output_, false, out);
  if (IsZlibHeader(payload)) return RunBackend(*zlib_, payload, max_output_, false, out);
  if (has_header && payload[0] == 0x02) return RunBackend(*lzma_, body, max_output_, false, out);
  if (!has_header || payload[0] != 0x04)
    return Failure(CodecId::kUnknown, std::string(kNoDecompressor));

  // Step 2: obfuscate.
  if (depth >= kMaxObfuscateDepth) {
    return Failure(CodecId::kObfuscate, "obfuscate nested deeper than " +
                                            std::to_string(kMaxObfuscateDepth) + " levels");
  }
  if (body.size() < kObfuscateLengthSize) {
    return Failure(CodecId::kObfuscate,
                   "obfuscate header truncated: " + std::to_string(body.size()) +
                       " bytes where a 4-byte length is needed");
  }
  const size_t n = LoadBE32(body.data());
  const Bytes rest = body.subspan(kObfuscateLengthSize);
  if (n > rest.size()) {
    return Failure(CodecId::kObfuscate, "obfuscate inner length " + std::to_string(n) +
                                            " exceeds the " + std::to_string(rest.size()) +
                                            " bytes remaining");
  }
  const DecodeResult inner = DecodeBorg1Inner(rest.first(n), out, depth + 1);
  DecodeResult r;
  r.codec = CodecId::kObfuscate;
  // The innermost real codec, also through (non-borg) nested obfuscation.
  r.inner_codec = inner.inner_codec;
  if (!inner.ok) {
    r.error = inner.error;
    return r;
  }
  r.ok = true;
  r.nonzero_padding = inner.nonzero_padding;
  for (uint8_t b : rest.subspan(n)) {
    if (b != 0) {
      r.nonzero_padding = true;
      break;
    }
  }
  return r;
}

DecodeResult Decompressor::DecodeRaw(CodecId codec, Bytes body, std::optional<size_t> expected_size,
                                     ByteBuffer& out) {
  CodecBackend* backend = nullptr;
  switch (codec) {
    case CodecId::kNone:
      backend = none_.get();
      break;
    case CodecId::kLz4:
      backend = lz4_.get();
      break;
    case CodecId::kZstd:
      backend = zstd_.get();
      break;
    case CodecId::kZlib:
      backend = zlib_.get();
      break;
    case CodecId::kLzma:
      backend = lzma_.get();
      break;
    case CodecId::kObfuscate:
      // borg 2 records obfuscation as psize/olevel in the metadata, never as a codec: the
      // caller strips the padding and passes the inner codec.
      return Failure(codec, "obfuscate is not a raw codec; decode the inner codec instead");
    case CodecId::kUnknown:
      return Failure(codec, std::string(kNoDecompressor));
  }

  if (!expected_size) return RunBackend(*backend, body, max_output_, false, out);
  if (*expected_size > max_output_) {
    // Checked before anything is allocated: the size comes from untrusted metadata.
    return Failure(codec, "expected size " + std::to_string(*expected_size) + " exceeds limit of " +
                              std::to_string(max_output_) + " bytes");
  }
  DecodeResult r = RunBackend(*backend, body, *expected_size, true, out);
  if (r.ok && out.size() != *expected_size) {
    r.ok = false;
    r.error = "decompressed size " + std::to_string(out.size()) + " does not match expected size " +
              std::to_string(*expected_size);
  }
  return r;
}

}  // namespace borgcheck::codecs
