// shared_scratch_demo: proves that the concurrency gate (ci/tsan) catches a shared-buffer
// race of the kind borg once had, where LZ4.decompress() decoded into one module-level buffer
// shared by every thread. It is a program that is SUPPOSED TO FAIL, so it is not part of
// any ctest run; ci/tsan runs it and asserts that it fails, and how.
//
// What it does: eight threads, each with its own codecs::Decompressor (as pool workers have),
// decode distinct LZ4 payloads of 1-4 MiB over and over, and compare every output with the
// plaintext a single thread decoded. With `--shared-scratch` (the default) every Decompressor
// is switched to Decompressor::TEST_UseSharedLz4Scratch(true): all LZ4 decodes go through ONE
// process-wide buffer without locking. With `--private` they do not (the control run, which
// must pass, so that a failure can only come from the injected bug).
//
// How the gate fails on it:
//   * Built with -fsanitize=thread (the `tsan` preset) and run with
//     TSAN_OPTIONS=halt_on_error=1, ThreadSanitizer stops the process at its first report,
//     with exit status 66, printing to stderr a report like this one (ci/tsan, clang 14):
//
//       WARNING: ThreadSanitizer: data race (pid=21683)
//         Write of size 1 at 0x7f38d92ffff7 by thread T1:
//           #0 memmove <null> (shared_scratch_demo+0x5f98e)
//           #1 LZ4_decompress_safe <null> (liblz4.so.1+0xc09d)
//           #2 borgcheck::codecs::(anonymous namespace)::RunBackend(...) codecs/decompressor.cc:39
//           ...
//         Previous read of size 8 at 0x7f38d92ffff0 by thread T3:
//           #0 memcpy <null> (shared_scratch_demo+0x5fb1e)
//           #1 borgcheck::codecs::(anonymous namespace)::Lz4Backend::Decode(...) codecs/lz4_codec.cc:77
//           ...
//         Location is heap block of size 20971479 at 0x7f38d9200000 allocated by thread T8:
//           #0 operator new[](unsigned long)
//           #1 borgcheck::codecs::(anonymous namespace)::SharedScratch() codecs/lz4_codec.cc:36
//           ...
//       SUMMARY: ThreadSanitizer: data race (...) in memmove
//
//     Debian's liblz4 is not instrumented, yet TSan sees its writes: LZ4 copies long literal
//     runs and matches with memcpy/memmove, which TSan intercepts. Which two accesses are
//     reported first varies from run to run (memmove inside LZ4_decompress_safe against the
//     seam's copy-out memcpy, or two copies against each other), but every report on this
//     bug names the shared buffer's allocation, SharedScratch(). ci/tsan therefore requires
//     a non-zero exit status, "WARNING: ThreadSanitizer: data race" and "SharedScratch" in
//     the output, and also runs `--private`, which must pass with no report.
//   * Built without TSan, the race shows as wrong bytes: the program prints
//       shared_scratch_demo: N of M decodes differed from the single-threaded result
//     (seen: 385 of 1536 on two busy cores) and exits with status 1. If no mismatch happened
//     to occur it says so and exits 0: the non-TSan run is probabilistic; the TSan run is the
//     gate's proof.
//
// Usage: shared_scratch_demo [--shared-scratch | --private] [rounds]
// Exit status: 0 all outputs matched; 1 some differed; 2 setup failed; 66 TSan report.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "codecs/decompressor.h"
#include "tests/concurrency/concurrency_support.h"

namespace borgcheck::concurrency_test {
namespace {

constexpr size_t kThreads = 8;
constexpr size_t kPayloads = 16;

int Main(int argc, char** argv) {
  bool shared = true;
  int rounds = 12;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--shared-scratch") == 0) {
      shared = true;
    } else if (std::strcmp(argv[i], "--private") == 0) {
      shared = false;
    } else if (std::atoi(argv[i]) > 0) {
      rounds = std::atoi(argv[i]);
    } else {
      std::fprintf(stderr, "usage: shared_scratch_demo [--shared-scratch | --private] [rounds]\n");
      return 2;
    }
  }

  // Distinct, compressible payloads of 1-4 MiB: large enough that a decode takes long
  // enough for another thread's decode to land in the shared buffer meanwhile.
  std::vector<Vec> payloads, plains;
  for (size_t i = 0; i < kPayloads; ++i) {
    const size_t size = (1u << 20) + (i * 197 * 1024) % (3u << 20);
    plains.push_back(MakeMixed(size, uint32_t(7000 + i)));
    payloads.push_back(Lz4Payload(View(plains.back())));
  }
  // The single-threaded result (a private Decompressor) must be the plaintext itself.
  {
    codecs::Decompressor d;
    ByteBuffer out;
    for (size_t i = 0; i < kPayloads; ++i) {
      if (!d.DecodeBorg1(View(payloads[i]), out).ok || ToVec(out.view()) != plains[i]) {
        std::fprintf(stderr, "shared_scratch_demo: single-threaded decode of payload %zu failed\n", i);
        return 2;
      }
    }
  }

  std::vector<size_t> differed(kThreads, 0);  // element t: thread t only
  RunConcurrently(kThreads, [&](size_t t) {
    codecs::Decompressor d;  // one per thread, as pool workers have
    d.TEST_UseSharedLz4Scratch(shared);
    ByteBuffer out;
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < kPayloads; ++k) {
        const size_t i = (k + t * 3 + size_t(r)) % kPayloads;
        const codecs::DecodeResult res = d.DecodeBorg1(View(payloads[i]), out);
        if (!res.ok || out.size() != plains[i].size() ||
            std::memcmp(out.data(), plains[i].data(), out.size()) != 0) {
          differed[t]++;
        }
      }
    }
  });
  size_t total = 0;
  for (size_t n : differed) total += n;
  const size_t decodes = kThreads * size_t(rounds) * kPayloads;
  if (total > 0) {
    std::printf("shared_scratch_demo: %zu of %zu decodes differed from the single-threaded result "
                "(%s LZ4 scratch)\n",
                total, decodes, shared ? "shared" : "private");
    return 1;
  }
  std::printf("shared_scratch_demo: all %zu decodes matched the single-threaded result "
              "(%s LZ4 scratch)%s\n",
              decodes, shared ? "shared" : "private",
              shared ? "; the race did not show this time" : "");
  return 0;
}

}  // namespace
}  // namespace borgcheck::concurrency_test

int main(int argc, char** argv) {
  try {
    return borgcheck::concurrency_test::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shared_scratch_demo: %s\n", e.what());
    return 2;
  }
}
