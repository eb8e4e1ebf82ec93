// Codec "zlib" (borg 1.x: no borg header, the whole payload is an RFC 1950 stream recognised by
// its own CMF/FLG bytes; borg 2 ctype 5): CMF/FLG header, deflate data, Adler-32.
//
// Decoding: one z_stream made once (inflateInit) and rewound with inflateReset for every chunk.
// zlib cannot say up front how big the output is, so inflate runs into a buffer that grows
// (GrowStreamingOutput) but never past cap + 1 bytes; reaching the extra byte means the stream
// is bigger than the cap. Errors use the wording of Python's zlib module, which is what borg
// reports ("Error -3 while decompressing data: incorrect data check").

#include <zlib.h>

#include <climits>

#include "codecs/codec_backend.h"

namespace borgcheck::codecs {
namespace {

std::string ZlibError(int code, const char* msg) {
  std::string s = "Error " + std::to_string(code) + " while decompressing data";
  if (msg != nullptr) s += std::string(": ") + msg;
  return s;
}

class ZlibBackend final : public CodecBackend {
 public:
  ZlibBackend() { init_ok_ = inflateInit(&zs_) == Z_OK; }
  ~ZlibBackend() override {
    if (init_ok_) inflateEnd(&zs_);
  }
  ZlibBackend(const ZlibBackend&) = delete;
  ZlibBackend& operator=(const ZlibBackend&) = delete;

  CodecId id() const override { return CodecId::kZlib; }

  BackendStatus Decode(Bytes body, size_t cap, ByteBuffer& out, std::string& error) override {
    if (!init_ok_) {
      error = ZlibError(Z_MEM_ERROR, "could not initialise the decompressor");
      return BackendStatus::kCorrupt;
    }
    if (body.size() > UINT_MAX) {  // avail_in is a uInt; borg objects are far smaller
      error = ZlibError(Z_BUF_ERROR, "input too large");
      return BackendStatus::kCorrupt;
    }
    inflateReset(&zs_);
    zs_.next_in = const_cast<Bytef*>(body.data());  // zlib does not write through next_in
    zs_.avail_in = uInt(body.size());

    const size_t limit = CapPlusOne(cap);
    size_t produced = 0;
    size_t writable = 0;
    for (;;) {
      if (writable == 0) {
        writable = GrowStreamingOutput(out, produced, body.size(), limit);
        if (writable == 0) return BackendStatus::kExceedsCap;
      }
      const uInt chunk = writable > UINT_MAX ? UINT_MAX : uInt(writable);
      zs_.next_out = out.data() + produced;
      zs_.avail_out = chunk;
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      const size_t made = chunk - zs_.avail_out;
      produced += made;
      writable -= made;
      if (rc == Z_STREAM_END) break;
      if (rc == Z_OK) continue;
      if (rc == Z_BUF_ERROR && zs_.avail_out == 0) continue;  // needs more room: grow
      if (rc == Z_BUF_ERROR) {  // no progress with room left: the input ran out
        error = ZlibError(Z_BUF_ERROR, "incomplete or truncated stream");
      } else {
        error = ZlibError(rc, zs_.msg);
      }
      return BackendStatus::kCorrupt;
    }
    if (produced > cap) return BackendStatus::kExceedsCap;
    if (zs_.avail_in != 0) {
      error = "trailing data after zlib stream";
      return BackendStatus::kCorrupt;
    }
    out.Resize(produced);
    return BackendStatus::kOk;
  }

 private:
  z_stream zs_{};  // owned; reused for every chunk via inflateReset
  bool init_ok_ = false;
};

}  // namespace

std::unique_ptr<CodecBackend> MakeZlibBackend() { return std::make_unique<ZlibBackend>(); }

}  // namespace borgcheck::codecs
