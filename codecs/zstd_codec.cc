// Codec "zstd" (borg 1.x header `03 00`, borg 2 ctype 3): exactly one zstd frame, as written by
// ZSTD_compress, whose header carries the content size.
//
// Decoding follows borg: the frame content size must be known and (here) within the cap; the
// frame is decoded in one shot with a DCtx made once and reused, into a buffer of exactly that
// size, and the result must be exactly that size. The size claimed by the header is untrusted,
// so it is compared with the cap before anything is allocated. Bytes after the first frame
// (including further frames, which ZSTD_decompressDCtx would otherwise accept) are rejected.

#include <zstd.h>

#include "codecs/codec_backend.h"

namespace borgcheck::codecs {
namespace {

class ZstdBackend final : public CodecBackend {
 public:
  ZstdBackend() : dctx_(ZSTD_createDCtx()) {}
  ~ZstdBackend() override { ZSTD_freeDCtx(dctx_); }
  ZstdBackend(const ZstdBackend&) = delete;
  ZstdBackend& operator=(const ZstdBackend&) = delete;

  CodecId id() const override { return CodecId::kZstd; }

  BackendStatus Decode(Bytes body, size_t cap, ByteBuffer& out, std::string& error) override {
    if (dctx_ == nullptr) {
      error = "zstd decompress failed: could not create a decompression context";
      return BackendStatus::kCorrupt;
    }
    const unsigned long long content_size = ZSTD_getFrameContentSize(body.data(), body.size());
    if (content_size == ZSTD_CONTENTSIZE_ERROR) {
      error = "zstd decompress failed: not a valid zstd frame header";
      return BackendStatus::kCorrupt;
    }
    if (content_size == ZSTD_CONTENTSIZE_UNKNOWN) {
      error = "zstd decompress failed: frame content size unknown";
      return BackendStatus::kCorrupt;
    }
    if (content_size > cap) return BackendStatus::kExceedsCap;

    const size_t frame_size = ZSTD_findFrameCompressedSize(body.data(), body.size());
    if (ZSTD_isError(frame_size)) {
      error = std::string("zstd decompress failed: ") + ZSTD_getErrorName(frame_size);
      return BackendStatus::kCorrupt;
    }
    if (frame_size != body.size()) {
      error = "trailing data after zstd stream";
      return BackendStatus::kCorrupt;
    }

    const size_t size = size_t(content_size);
    out.Reserve(size == 0 ? 1 : size);
    const size_t n = ZSTD_decompressDCtx(dctx_, out.data(), size, body.data(), body.size());
    if (ZSTD_isError(n)) {
      error = std::string("zstd decompress failed: ") + ZSTD_getErrorName(n);
      return BackendStatus::kCorrupt;
    }
    if (n != size) {
      error = "zstd decompress failed: size mismatch";
      return BackendStatus::kCorrupt;
    }
    out.Resize(n);
    return BackendStatus::kOk;
  }

 private:
  ZSTD_DCtx* const dctx_;  // owned; reused for every frame
};

}  // namespace

std::unique_ptr<CodecBackend> MakeZstdBackend() { return std::make_unique<ZstdBackend>(); }

}  // namespace borgcheck::codecs
