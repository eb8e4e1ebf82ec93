// Internal to borgcheck::codecs: the one small interface every codec implements, one codec per
// file (none_codec.cc, lz4_codec.cc, zstd_codec.cc, zlib_codec.cc, lzma_codec.cc). The
// Decompressor front end (decompressor.cc) detects the codec, picks the backend, and turns a
// BackendStatus into the DecodeResult callers see. Nothing outside codecs/ includes this file.
//
// Thread contract: a backend is owned by exactly one Decompressor and so by one worker at a
// time; it is NOT safe for concurrent use (requires external synchronisation). Each backend
// owns its library context (ZSTD_DCtx, z_stream, lzma_stream), made once and reused for every
// chunk. Backends share no mutable state with each other or with other Decompressors, with
// one deliberate exception: the LZ4 test seam TEST_UseSharedScratch (see lz4_codec.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "checker/base/bytes.h"
#include "codecs/decompressor.h"

namespace borgcheck::codecs {

// How one backend decode ended. kExceedsCap is kept apart from kCorrupt so that the front end
// words every "too big" failure the same way, whatever the codec.
enum class BackendStatus : uint8_t {
  kOk,          // `out` holds the plaintext, out.size() <= cap
  kCorrupt,     // the stream is malformed, truncated or has trailing data; see `error`
  kExceedsCap,  // the stream is (or claims to be) larger than cap; nothing that size was made
};

class CodecBackend {
 public:
  virtual ~CodecBackend() = default;

  virtual CodecId id() const = 0;

  // Decodes the whole of `body` (the stream without any borg header) into `out`, resized to
  // the plaintext size. `cap` is the hard limit on the plaintext size: a backend never asks
  // `out` for more than cap + 1 bytes (the extra byte is how streaming decoders notice that a
  // stream goes past cap). The whole of `body` must be one complete stream: anything left
  // over is kCorrupt ("trailing data after ... stream"). On kCorrupt `error` says what failed
  // in borg's wording where borg has one; on failure `out` contents are unspecified.
  // `body` is borrowed for the duration of the call only.
  [[nodiscard]] virtual BackendStatus Decode(Bytes body, size_t cap, ByteBuffer& out,
                                             std::string& error) = 0;

  // Test-only seam, implemented by the LZ4 backend only (a no-op elsewhere): see
  // Decompressor::TEST_UseSharedLz4Scratch.
  virtual void TEST_UseSharedScratch(bool /*on*/) {}
};

// Factories, one per codec file. Each makes the backend's library context up front; if that
// fails (out of memory) the backend reports kCorrupt with a message on every Decode.
std::unique_ptr<CodecBackend> MakeNoneBackend();
std::unique_ptr<CodecBackend> MakeLz4Backend();
std::unique_ptr<CodecBackend> MakeZstdBackend();
std::unique_ptr<CodecBackend> MakeZlibBackend();
std::unique_ptr<CodecBackend> MakeLzmaBackend();

// cap + 1 without overflow: the most a streaming backend may ask its output buffer for.
inline size_t CapPlusOne(size_t cap) { return cap == SIZE_MAX ? cap : cap + 1; }

// For the streaming decoders (zlib, lzma), which learn the plaintext size only by producing
// it: makes room after the `produced` bytes already in `out` (keeping them) and returns how
// many bytes may now be written at out.data() + produced. The buffer starts near a guess from
// the input size and doubles, but never beyond `limit` (cap + 1), so a bomb costs at most
// that. Returns 0 only when produced == limit, i.e. the stream went past the cap.
inline size_t GrowStreamingOutput(ByteBuffer& out, size_t produced, size_t input_size,
                                  size_t limit) {
  if (produced >= limit) return 0;
  size_t want = produced == 0 ? (input_size > SIZE_MAX / 4 ? SIZE_MAX : input_size * 4)
                              : (produced > SIZE_MAX / 2 ? SIZE_MAX : produced * 2);
  if (want < 64 * 1024) want = 64 * 1024;
  if (want > limit) want = limit;
  out.Resize(produced);  // so that growing copies exactly the bytes produced so far
  out.Reserve(want);
  const size_t usable = out.capacity() < limit ? out.capacity() : limit;
  return usable - produced;
}

}  // namespace borgcheck::codecs
