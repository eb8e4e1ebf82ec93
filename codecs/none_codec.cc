// Codec "none" (borg 1.x header `00 00`, borg 2 ctype 0): the body is the plaintext.

#include "codecs/codec_backend.h"

namespace borgcheck::codecs {
namespace {

class NoneBackend final : public CodecBackend {
 public:
  CodecId id() const override { return CodecId::kNone; }

  BackendStatus Decode(Bytes body, size_t cap, ByteBuffer& out, std::string& /*error*/) override {
    // Checked before the copy so an oversized object is never duplicated.
    if (body.size() > cap) return BackendStatus::kExceedsCap;
    out.Assign(body);
    return BackendStatus::kOk;
  }
};

}  // namespace

std::unique_ptr<CodecBackend> MakeNoneBackend() { return std::make_unique<NoneBackend>(); }

}  // namespace borgcheck::codecs
