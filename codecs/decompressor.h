// The decompression front end: one Decompressor per worker, reused for every chunk.
//
// borg 1.x payloads carry a 2-byte compression header (spec borg1-format.md §5): `00 00` none,
// `01 00` raw LZ4 block, `02 00` xz, `03 00` zstd frame, `04 00` obfuscate (BE32 n, inner
// payload of n bytes with its own header, zero padding), and zlib recognised without a borg
// header (CMF&0x0f == 8 && (CMF*256+FLG) % 31 == 0). borg 2 names the codec in object
// metadata instead; DecodeRaw() serves that case.
//
// Every codec lives in its own file behind the small CodecBackend interface
// (codecs/codec_backend.h). Output is bounded: no decode writes more than max_output bytes,
// and a stream that would is reported as a failure, never allocated.
//
// Thread contract: a Decompressor is NOT safe for concurrent use. Each worker owns one
// (made once per worker, reused across chunks: zstd/lzma/zlib contexts and the output
// buffer live here). Different Decompressors share nothing mutable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "checker/base/bytes.h"

namespace borgcheck::codecs {

enum class CodecId : uint8_t { kNone, kLz4, kZstd, kZlib, kLzma, kObfuscate, kUnknown };

std::string_view CodecName(CodecId id);  // "none", "lz4", "zstd", "zlib", "lzma", "obfuscate"

// borg's largest plaintext chunk: MAX_DATA_SIZE = 20971479 bytes.
inline constexpr size_t kBorgMaxDataSize = 20971479;

struct DecodeResult {
  bool ok = false;
  CodecId codec = CodecId::kUnknown;        // outermost codec found (kObfuscate for 04 00)
  // For obfuscate: the wrapped codec (the innermost one if obfuscation is nested); else == codec.
  CodecId inner_codec = CodecId::kUnknown;
  // Obfuscate only: the padding after the inner payload was not all zero bytes. borg always
  // writes zeros, and in the unencrypted modes nothing else covers them (spec §6.5).
  bool nonzero_padding = false;
  // When !ok: what failed, in borg's wording where borg has one, e.g. "lz4 decompress failed",
  // "Error -3 while decompressing data: incorrect data check" (zlib), "zstd decompress failed:
  // <zstd error name>", "decompressed size exceeds limit of 20971479 bytes", "trailing data
  // after zstd stream", "No decompressor for this data found" (codec kUnknown).
  std::string error;
};

class CodecBackend;

class Decompressor {
 public:
  // max_output: the hard cap on plaintext size for any one object.
  explicit Decompressor(size_t max_output = kBorgMaxDataSize);
  ~Decompressor();
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;

  // Decodes a borg 1.x compressed payload C (header included) into `out` (resized to the
  // plaintext size). On failure `out` contents are unspecified.
  DecodeResult DecodeBorg1(Bytes payload, ByteBuffer& out);

  // Decodes a body with a codec known from elsewhere (borg 2 metadata). expected_size, when
  // given, must match the decoded size exactly (and bounds the output); one above max_output
  // fails before anything is allocated. kObfuscate and kUnknown are not raw codecs and fail.
  DecodeResult DecodeRaw(CodecId codec, Bytes body, std::optional<size_t> expected_size,
                         ByteBuffer& out);

  // Test-only seam (tests/concurrency): makes this decompressor use a process-wide shared
  // scratch buffer for LZ4, reproducing borg's LZ4.decompress() bug so the TSan/concurrency
  // gate can prove it would catch it. Never called outside tests. Off by default. While on,
  // every LZ4 decode goes through ONE static buffer of kBorgMaxDataSize bytes shared by all
  // Decompressors, with no locking (deliberately racy), and the LZ4 output cap is at most
  // kBorgMaxDataSize. Requires external synchronisation with this Decompressor's decodes.
  void TEST_UseSharedLz4Scratch(bool on);

  size_t max_output() const { return max_output_; }

 private:
  DecodeResult DecodeBorg1Inner(Bytes payload, ByteBuffer& out, int depth);

  size_t max_output_;
  std::unique_ptr<CodecBackend> none_, lz4_, zstd_, zlib_, lzma_;
};

}  // namespace borgcheck::codecs
