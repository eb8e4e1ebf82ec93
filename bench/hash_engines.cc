// One-stream and lane hash speeds (hash_engines.h).
//
// Per message size S (60,000 bytes, 1 MiB, 8 MiB) the input is 48 messages of S bytes, read
// from 16 distinct pseudo-random buffers in turn (so that lanes hashed together never share a
// buffer; 48 is a multiple of every lane count measured, so no lane idles at the end). Each engine
// hashes all 24, repeatedly until 0.1 s of CPU time has passed; the rate is message bytes per
// CPU second (CLOCK_THREAD_CPUTIME_ID, so other processes on a shared machine cost wall time,
// not the number), and the reported value is the median of `repeat` such rates. Engines:
//   sha256_openssl           EVP_Digest, one message after the other (what the check does)
//   sha256_lanes_<k>         crypto::Sha256Lanes::HashAll with k = 1, 2, 3, 4, 8, 12, 16 lanes
//                            (SHA-NI; 16 lanes run on the AVX-512 kernel where the CPU has it)
//   sha256_shani_16          16 lanes with the AVX-512 kernel disabled (four SHA-NI groups)
//   hmac_openssl             EVP_MAC HMAC-SHA256, keyed once, re-initialised per message
//                            (object_crypto.cc's pattern)
//   hmac_lanes_<k>, hmac_shani_16   the same with an HmacSha256Key
//   hmac_lanes_fallback      the OpenSSL fallback engine (TEST_ForceOpenSsl), 2 lanes
//   blake2b_borgcheck        crypto::Blake2b-256 with the 128-byte key absorbed once and the
//                            state copied per message (object_crypto.cc's pattern)
//   blake2b_lanes_<k>        crypto::Blake2b256Lanes::HashAll over Blake2bPrefix(key), k = 1,
//                            2, 3, 4, 8 lanes on the widest engine
//   blake2b_avx2_4           the same, forced onto the AVX2 engine, 4 lanes
// Engines the CPU lacks are left out (then sha256_lanes_* is the OpenSSL fallback, and named
// so). Every engine's digests are compared with OpenSSL's / libb2's once before timing.
#include "bench/hash_engines.h"

#include <blake2.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "checker/base/bytes.h"
#include "checker/crypto/blake2b.h"
#include "checker/crypto/blake2b_lanes.h"
#include "checker/crypto/sha256_lanes.h"

namespace borgcheck::bench {
namespace {

using crypto::Blake2b256Lanes;
using crypto::Sha256Lanes;

constexpr size_t kBuffers = 16;
constexpr size_t kMessages = 48;
constexpr size_t kShaLanes[] = {1, 2, 3, 4, 8, 12, 16};

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "borgcheck_primitives: %s\n", msg.c_str());
  std::exit(1);
}

double CpuNow() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Median over `repeat` of: MB/s of calling fn (which hashes `bytes`) until 0.1 s CPU.
double Rate(int repeat, size_t bytes, const std::function<void()>& fn) {
  std::vector<double> rates;
  for (int r = 0; r < repeat; ++r) {
    size_t total = 0;
    const double start = CpuNow();
    double elapsed = 0;
    do {
      fn();
      total += bytes;
      elapsed = CpuNow() - start;
    } while (elapsed < 0.1);
    rates.push_back(double(total) / 1e6 / elapsed);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

class OpenSslHmac {
 public:
  explicit OpenSslHmac(Bytes key) {
    mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    ctx_ = mac_ ? EVP_MAC_CTX_new(mac_) : nullptr;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    if (!ctx_ || EVP_MAC_init(ctx_, key.data(), key.size(), params) != 1) Die("HMAC init failed");
  }
  ~OpenSslHmac() {
    EVP_MAC_CTX_free(ctx_);
    EVP_MAC_free(mac_);
  }
  OpenSslHmac(const OpenSslHmac&) = delete;
  OpenSslHmac& operator=(const OpenSslHmac&) = delete;
  void Compute(Bytes m, uint8_t out[32]) {
    size_t n = 0;
    if (EVP_MAC_init(ctx_, nullptr, 0, nullptr) != 1 ||
        EVP_MAC_update(ctx_, m.data(), m.size()) != 1 || EVP_MAC_final(ctx_, out, &n, 32) != 1) {
      Die("HMAC failed");
    }
  }

 private:
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* ctx_ = nullptr;
};

}  // namespace

std::string MeasureHashLanes(int repeat) {
  constexpr size_t kSizes[] = {60000, 1 << 20, 8 << 20};
  std::mt19937_64 rng(2104);
  std::vector<std::vector<uint8_t>> buffers(kBuffers, std::vector<uint8_t>(8 << 20));
  for (auto& b : buffers) {
    for (auto& x : b) x = uint8_t(rng());
  }
  std::vector<uint8_t> key(128);
  for (auto& x : key) x = uint8_t(rng());
  const Bytes hmac_key(key.data(), 32);
  Result<crypto::HmacSha256Key> prepared = crypto::HmacSha256Key::Create(hmac_key);
  if (!prepared.ok()) Die(prepared.status().message());
  const crypto::Blake2bPrefix prefix = crypto::Blake2bPrefix::Create(Bytes(key.data(), 128));
  crypto::Blake2b keyed;
  if (!keyed.Init(32)) Die("blake2b init failed");
  keyed.Update(Bytes(key.data(), 128));

  Sha256Lanes sha;
  if (!sha.status().ok()) Die(sha.status().message());
  Sha256Lanes sha_shani;
  sha_shani.TEST_DisableAvx512();
  Sha256Lanes sha_fallback;
  sha_fallback.TEST_ForceOpenSsl();
  if (!sha_fallback.status().ok()) Die(sha_fallback.status().message());
  const bool shani = sha.engine() == Sha256Lanes::Engine::kShaNi;
  Blake2b256Lanes b2;
  Blake2b256Lanes b2_avx2;
  const bool has_avx2 = b2_avx2.TEST_UseEngine(Blake2b256Lanes::Engine::kAvx2);
  OpenSslHmac hmac(hmac_key);

  std::string json = "{";
  for (size_t size : kSizes) {
    std::vector<Bytes> msgs;
    for (size_t i = 0; i < kMessages; ++i) msgs.emplace_back(buffers[i % kBuffers].data(), size);
    const size_t bytes = kMessages * size;
    std::vector<uint8_t> out(32 * kMessages), want(32 * kMessages);
    std::vector<std::pair<std::string, double>> rates;

    // References, and a check of every engine against them before it is timed.
    auto check = [&](const std::string& name) {
      if (out != want) Die(name + " gives a different digest at " + std::to_string(size));
    };
    auto sha_jobs = [&](const crypto::HmacSha256Key* k) {
      std::vector<Sha256Lanes::Job> jobs;
      for (size_t i = 0; i < kMessages; ++i) jobs.push_back({k, msgs[i], out.data() + 32 * i});
      return jobs;
    };
    auto b2_jobs = [&] {
      std::vector<Blake2b256Lanes::Job> jobs;
      for (size_t i = 0; i < kMessages; ++i) {
        jobs.push_back({&prefix, msgs[i], out.data() + 32 * i});
      }
      return jobs;
    };

    // SHA-256.
    auto openssl_sha = [&] {
      for (size_t i = 0; i < kMessages; ++i) {
        unsigned int n = 0;
        if (EVP_Digest(msgs[i].data(), size, out.data() + 32 * i, &n, EVP_sha256(), nullptr) != 1) {
          Die("SHA-256 failed");
        }
      }
    };
    openssl_sha();
    want = out;
    rates.emplace_back("sha256_openssl", Rate(repeat, bytes, openssl_sha));
    const std::string sha_name = shani ? "sha256_lanes_" : "sha256_fallback_lanes_";
    for (size_t k : kShaLanes) {
      const auto jobs = sha_jobs(nullptr);
      sha.HashAll(jobs, k);
      check(sha_name + std::to_string(k));
      rates.emplace_back(sha_name + std::to_string(k), Rate(repeat, bytes, [&] { sha.HashAll(jobs, k); }));
    }
    if (sha.uses_avx512()) {
      const auto jobs = sha_jobs(nullptr);
      sha_shani.HashAll(jobs, 16);
      check("sha256_shani_16");
      rates.emplace_back("sha256_shani_16", Rate(repeat, bytes, [&] { sha_shani.HashAll(jobs, 16); }));
    }

    // HMAC-SHA256.
    auto openssl_hmac = [&] {
      for (size_t i = 0; i < kMessages; ++i) hmac.Compute(msgs[i], out.data() + 32 * i);
    };
    openssl_hmac();
    want = out;
    for (size_t i = 0; i < kMessages; ++i) {  // EVP_MAC keyed once must equal one-shot HMAC
      uint8_t one[32];
      unsigned int n = 0;
      if (HMAC(EVP_sha256(), hmac_key.data(), int(hmac_key.size()), msgs[i].data(), size, one,
               &n) == nullptr ||
          std::memcmp(one, want.data() + 32 * i, 32) != 0) {
        Die("EVP_MAC and HMAC() disagree");
      }
    }
    rates.emplace_back("hmac_openssl", Rate(repeat, bytes, openssl_hmac));
    const std::string hmac_name = shani ? "hmac_lanes_" : "hmac_fallback_lanes_";
    for (size_t k : kShaLanes) {
      const auto jobs = sha_jobs(&*prepared);
      sha.HashAll(jobs, k);
      check(hmac_name + std::to_string(k));
      rates.emplace_back(hmac_name + std::to_string(k), Rate(repeat, bytes, [&] { sha.HashAll(jobs, k); }));
    }
    if (sha.uses_avx512()) {
      const auto jobs = sha_jobs(&*prepared);
      sha_shani.HashAll(jobs, 16);
      check("hmac_shani_16");
      rates.emplace_back("hmac_shani_16", Rate(repeat, bytes, [&] { sha_shani.HashAll(jobs, 16); }));
    }
    if (shani) {
      const auto jobs = sha_jobs(&*prepared);
      sha_fallback.HashAll(jobs, 2);
      check("hmac_lanes_fallback");
      rates.emplace_back("hmac_lanes_fallback",
                         Rate(repeat, bytes, [&] { sha_fallback.HashAll(jobs, 2); }));
    }

    // borg's BLAKE2b-256(key(128) || message).
    auto own_b2 = [&] {
      for (size_t i = 0; i < kMessages; ++i) {
        crypto::Blake2b s = keyed;
        s.Update(msgs[i]);
        s.Final(out.data() + 32 * i);
      }
    };
    for (size_t i = 0; i < kMessages; ++i) {
      blake2b_state s;
      blake2b_init(&s, 32);
      blake2b_update(&s, key.data(), 128);
      blake2b_update(&s, msgs[i].data(), size);
      blake2b_final(&s, want.data() + 32 * i, 32);
    }
    own_b2();
    check("blake2b_borgcheck");
    rates.emplace_back("blake2b_borgcheck", Rate(repeat, bytes, own_b2));
    for (size_t k : {1, 2, 3, 4, 8}) {
      const auto jobs = b2_jobs();
      b2.HashAll(jobs, k);
      check("blake2b_lanes_" + std::to_string(k));
      rates.emplace_back("blake2b_lanes_" + std::to_string(k),
                         Rate(repeat, bytes, [&] { b2.HashAll(jobs, k); }));
    }
    if (has_avx2) {
      const auto jobs = b2_jobs();
      b2_avx2.HashAll(jobs, 4);
      check("blake2b_avx2_4");
      rates.emplace_back("blake2b_avx2_4", Rate(repeat, bytes, [&] { b2_avx2.HashAll(jobs, 4); }));
    }

    json += fmt::format("{}\"{}\": {{", size == kSizes[0] ? "" : ", ", size);
    for (size_t i = 0; i < rates.size(); ++i) {
      json += fmt::format("{}\"{}\": {:.0f}", i == 0 ? "" : ", ", rates[i].first, rates[i].second);
    }
    json += "}";
  }
  json += "}";
  return json;
}

}  // namespace borgcheck::bench
