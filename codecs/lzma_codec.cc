// Codec "lzma" (borg 1.x header `02 00`, borg 2 ctype 2): one .xz stream as written by Python's
// lzma.compress(format=FORMAT_XZ, check=CHECK_NONE), i.e. integrity check type "None".
//
// Decoding: one lzma_stream owned by the backend; lzma_stream_decoder re-initialises it for
// every chunk, which lets liblzma reuse the decoder it already allocated. Any check type is
// accepted (borg decodes with Python's lzma, which does the same). Only one stream is decoded
// (no LZMA_CONCATENATED): anything after it is trailing data. Output grows through
// GrowStreamingOutput, never past cap + 1 bytes.
//
// Memory: the dictionary size in the stream header is untrusted and sets the decoder's own
// allocation, so the decoder runs under a memlimit. kMemlimit admits every preset borg can use
// (xz -9 / -9e need about 65 MiB to decode) with room to spare.

#include <lzma.h>

#include "codecs/codec_backend.h"

namespace borgcheck::codecs {
namespace {

constexpr uint64_t kMemlimit = uint64_t(128) << 20;

std::string LzmaError(lzma_ret rc, const lzma_stream& strm) {
  const std::string prefix = "lzma decompress failed: ";
  switch (rc) {
    case LZMA_FORMAT_ERROR:
      return prefix + "input format not recognised as xz";
    case LZMA_OPTIONS_ERROR:
      return prefix + "unsupported options in the stream";
    case LZMA_DATA_ERROR:
      return prefix + "corrupt input data";
    case LZMA_BUF_ERROR:
      return prefix + "compressed data ended before the end-of-stream marker was reached";
    case LZMA_MEM_ERROR:
      return prefix + "out of memory";
    case LZMA_MEMLIMIT_ERROR:
      return prefix + "stream needs " + std::to_string(lzma_memusage(&strm)) +
             " bytes of decoder memory, over the limit of " + std::to_string(kMemlimit);
    default:
      return prefix + "liblzma error " + std::to_string(int(rc));
  }
}

class LzmaBackend final : public CodecBackend {
 public:
  LzmaBackend() = default;
  ~LzmaBackend() override { lzma_end(&strm_); }
  LzmaBackend(const LzmaBackend&) = delete;
  LzmaBackend& operator=(const LzmaBackend&) = delete;

  CodecId id() const override { return CodecId::kLzma; }

  BackendStatus Decode(Bytes body, size_t cap, ByteBuffer& out, std::string& error) override {
    lzma_ret rc = lzma_stream_decoder(&strm_, kMemlimit, 0);
    if (rc != LZMA_OK) {
      error = LzmaError(rc, strm_);
      return BackendStatus::kCorrupt;
    }
    strm_.next_in = body.data();
    strm_.avail_in = body.size();

    const size_t limit = CapPlusOne(cap);
    size_t produced = 0;
    size_t writable = 0;
    for (;;) {
      if (writable == 0) {
        writable = GrowStreamingOutput(out, produced, body.size(), limit);
        if (writable == 0) return BackendStatus::kExceedsCap;
      }
      strm_.next_out = out.data() + produced;
      strm_.avail_out = writable;
      rc = lzma_code(&strm_, LZMA_FINISH);
      const size_t made = writable - strm_.avail_out;
      produced += made;
      writable -= made;
      if (rc == LZMA_STREAM_END) break;
      if (rc == LZMA_OK) continue;
      if (rc == LZMA_BUF_ERROR && strm_.avail_out == 0) continue;  // needs more room: grow
      error = LzmaError(rc, strm_);
      return BackendStatus::kCorrupt;
    }
    if (produced > cap) return BackendStatus::kExceedsCap;
    if (strm_.avail_in != 0) {
      error = "trailing data after lzma stream";
      return BackendStatus::kCorrupt;
    }
    out.Resize(produced);
    return BackendStatus::kOk;
  }

 private:
  lzma_stream strm_ = LZMA_STREAM_INIT;  // owned; its decoder is reused across chunks
};

}  // namespace

std::unique_ptr<CodecBackend> MakeLzmaBackend() { return std::make_unique<LzmaBackend>(); }

}  // namespace borgcheck::codecs
