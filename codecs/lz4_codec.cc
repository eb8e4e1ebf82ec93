// Codec "lz4" (borg 1.x header `01 00`, borg 2 ctype 1): one raw LZ4 block, no frame and no
// size prefix, so the plaintext size is not known from the data.
//
// Decoding: LZ4_decompress_safe straight into `out` with capacity `cap` (Reserve does not
// zero-fill, and after the first chunk the buffer is already that big), then Resize to the
// result. borg instead guesses a size and retries with 1.5x larger buffers; one pass at the
// cap is simpler and never allocates more than the cap. LZ4_decompress_safe itself requires
// the block to consume exactly its input, so trailing bytes make it fail.
//
// LZ4 reports "output too small" and "malformed" the same way (a negative result). To tell a
// bomb from a corrupt block, a failed decode is retried with LZ4_decompress_safe_partial
// limited to `cap` bytes: if that yields a full `cap` bytes, the block decodes cleanly up to
// the cap and wants more, which is reported as kExceedsCap. This second pass only runs on the
// failure path.

#include <lz4.h>

#include <climits>
#include <cstring>

#include "codecs/codec_backend.h"

namespace borgcheck::codecs {
namespace {

// The test seam's one process-wide scratch buffer (TEST_UseSharedScratch). It reproduces
// borg's historical bug where LZ4.decompress() decoded into a module-level buffer shared by
// every thread, so concurrent restores corrupted each other's data. It is deliberately used
// WITHOUT any locking: the concurrency tests (and TSan) must be able to see the race. Its
// size is fixed at first use so that racing threads overwrite each other's bytes rather than
// free each other's buffers; in shared mode the effective cap is min(cap, this size).
// Allocated lazily (the function-local static is initialised thread-safely); never freed.
constexpr size_t kSharedScratchSize = kBorgMaxDataSize;

uint8_t* SharedScratch() {
  static uint8_t* const scratch = new uint8_t[kSharedScratchSize];
  return scratch;
}

class Lz4Backend final : public CodecBackend {
 public:
  CodecId id() const override { return CodecId::kLz4; }

  void TEST_UseSharedScratch(bool on) override { use_shared_scratch_ = on; }

  BackendStatus Decode(Bytes body, size_t cap, ByteBuffer& out, std::string& error) override {
    if (body.size() > size_t(INT_MAX)) {
      error = "lz4 decompress failed";
      return BackendStatus::kCorrupt;
    }
    const int src_size = int(body.size());
    const char* src = reinterpret_cast<const char*>(body.data());
    if (cap > size_t(INT_MAX)) cap = size_t(INT_MAX);  // LZ4's sizes are int

    uint8_t* dst;
    if (use_shared_scratch_) {
      if (cap > kSharedScratchSize) cap = kSharedScratchSize;
      dst = SharedScratch();
    } else {
      out.Reserve(cap == 0 ? 1 : cap);
      dst = out.data();
    }
    const int capacity = int(cap);

    const int n = LZ4_decompress_safe(src, reinterpret_cast<char*>(dst), src_size, capacity);
    if (n < 0) {
      const int partial = LZ4_decompress_safe_partial(src, reinterpret_cast<char*>(dst), src_size,
                                                      capacity, capacity);
      if (capacity > 0 && partial == capacity) return BackendStatus::kExceedsCap;
      error = "lz4 decompress failed";
      return BackendStatus::kCorrupt;
    }
    if (use_shared_scratch_) {
      // The racy copy-out that borg's bug amounted to: another thread may have decoded into
      // the scratch between our decode and this copy.
      out.Resize(size_t(n));
      if (n > 0) std::memcpy(out.data(), dst, size_t(n));
    } else {
      out.Resize(size_t(n));
    }
    return BackendStatus::kOk;
  }

 private:
  bool use_shared_scratch_ = false;  // test seam only; off by default
};

}  // namespace

std::unique_ptr<CodecBackend> MakeLz4Backend() { return std::make_unique<Lz4Backend>(); }

}  // namespace borgcheck::codecs
