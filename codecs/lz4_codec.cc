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
// asking for cap+1 bytes: if it yields more than `cap`, the block decodes cleanly past the cap,
// which is reported as kExceedsCap. This second pass only runs on the failure path. The
// buffer has 64 bytes of slack beyond the cap (see Decode).

#include <lz4.h>

#include <algorithm>
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
    // LZ4 judges a malformed block's end against the end of the output buffer: a block that
    // decodes fine with room to spare fails when the buffer is exactly its size. So decode
    // with kSlack bytes of room beyond the cap and treat a result above the cap as too big
    // (found by fuzz/lz4_fuzzer: corpus/lz4/crash-*).
    constexpr size_t kSlack = 64;
    if (cap > size_t(INT_MAX) - kSlack) cap = size_t(INT_MAX) - kSlack;  // LZ4's sizes are int
    size_t room = cap + kSlack;

    uint8_t* dst;
    if (use_shared_scratch_) {
      if (room > kSharedScratchSize) room = kSharedScratchSize;
      if (cap > room) cap = room;
      dst = SharedScratch();
    } else {
      out.Reserve(room);
      dst = out.data();
    }
    const int capacity = int(room);

    const int n = LZ4_decompress_safe(src, reinterpret_cast<char*>(dst), src_size, capacity);
    if (n >= 0 && size_t(n) > cap) return BackendStatus::kExceedsCap;
    if (n < 0) {
      const int target = int(std::min(room, cap + 1));
      const int partial = LZ4_decompress_safe_partial(src, reinterpret_cast<char*>(dst), src_size,
                                                      target, capacity);
      if (partial >= 0 && size_t(partial) > cap) return BackendStatus::kExceedsCap;
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
