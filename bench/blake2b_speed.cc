// borgcheck_blake2b_speed: single-threaded MB/s of borgcheck's BLAKE2b (checker/crypto/blake2b.h)
// against libb2 0.98's dispatched BLAKE2b (what <blake2.h> gives) and libb2's portable reference
// code (exported, not declared), per message size: 4 KiB, 64 KiB and 8 MiB, each hashed as
// Init(32) / Update / Final per message, the way the check hashes one chunk.
//
// For each engine and size: hash the same pseudo-random buffer repeatedly for about
// --seconds (default 0.5) of wall time, five times, and print the best MB/s (10^6 bytes/s), so
// that other processes on a shared machine cost less. All engines must give the same digest or
// the program exits 1. Not a test: built only with -DBORGCHECK_BUILD_BENCH=ON.
//
// Usage: borgcheck_blake2b_speed [--seconds S]
//
// Thread contract: single-threaded.
#include <blake2.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "checker/crypto/blake2b.h"

extern "C" {
int blake2b_init_ref(blake2b_state* S, size_t outlen);
int blake2b_update_ref(blake2b_state* S, const uint8_t* in, size_t inlen);
int blake2b_final_ref(blake2b_state* S, uint8_t* out, size_t outlen);
}

namespace {

using Clock = std::chrono::steady_clock;
using HashFn = std::function<void(const uint8_t*, size_t, uint8_t*)>;

double BestMBps(const HashFn& fn, const std::vector<uint8_t>& data, double seconds) {
  uint8_t out[32];
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) {
    size_t bytes = 0;
    auto start = Clock::now();
    double elapsed = 0;
    do {
      for (int i = 0; i < 8; ++i) {
        fn(data.data(), data.size(), out);
        bytes += data.size();
      }
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < seconds / 5);
    best = std::max(best, double(bytes) / elapsed / 1e6);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.5;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S]\n", argv[0]);
      return 2;
    }
  }

  struct Engine {
    const char* name;
    HashFn fn;
  };
  const Engine engines[] = {
      {"borgcheck Blake2b",
       [](const uint8_t* p, size_t n, uint8_t* out) {
         borgcheck::crypto::Blake2b h;
         if (!h.Init(32)) std::abort();
         h.Update(p, n);
         h.Final(out);
       }},
      {"libb2 dispatched",
       [](const uint8_t* p, size_t n, uint8_t* out) {
         blake2b_state s;
         blake2b_init(&s, 32);
         blake2b_update(&s, p, n);
         blake2b_final(&s, out, 32);
       }},
      {"libb2 reference",
       [](const uint8_t* p, size_t n, uint8_t* out) {
         blake2b_state s;
         blake2b_init_ref(&s, 32);
         blake2b_update_ref(&s, p, n);
         blake2b_final_ref(&s, out, 32);
       }},
  };
  const size_t sizes[] = {4 << 10, 64 << 10, 8 << 20};

  std::mt19937_64 rng(7693);
  std::printf("%-20s %12s %12s %12s\n", "MB/s", "4 KiB", "64 KiB", "8 MiB");
  std::vector<std::vector<double>> table(std::size(engines));
  for (size_t size : sizes) {
    std::vector<uint8_t> data(size);
    for (auto& b : data) b = uint8_t(rng());
    uint8_t first[32], other[32];
    engines[0].fn(data.data(), size, first);
    for (const Engine& e : engines) {
      e.fn(data.data(), size, other);
      if (std::memcmp(first, other, 32) != 0) {
        std::fprintf(stderr, "%s gives a different digest for %zu bytes\n", e.name, size);
        return 1;
      }
    }
    for (size_t i = 0; i < std::size(engines); ++i) {
      table[i].push_back(BestMBps(engines[i].fn, data, seconds));
    }
  }
  for (size_t i = 0; i < std::size(engines); ++i) {
    std::printf("%-20s %12.0f %12.0f %12.0f\n", engines[i].name, table[i][0], table[i][1],
                table[i][2]);
  }
  return 0;
}
