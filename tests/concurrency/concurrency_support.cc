#include "tests/concurrency/concurrency_support.h"

#include <blake2.h>
#include <lz4.h>
#include <lzma.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <exception>
#include <fstream>
#include <latch>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/segment_log/segment_format.h"

namespace borgcheck::concurrency_test {
namespace {

// No Catch2 here: the demo executable links this file too, and Catch2 assertions are not
// safe off the main thread. Failures throw.
[[noreturn]] void Fail(const std::string& what) { throw std::runtime_error(what); }

uint32_t XorShift(uint32_t& x) {
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return x;
}

Vec Unhex(const std::string& hex) {
  std::string out;
  if (!FromHex(hex, out)) Fail("bad hex in the fixture vectors");
  return Vec(out.begin(), out.end());
}

void AppendBE32(Vec& v, uint32_t x) {
  for (int i = 3; i >= 0; --i) v.push_back(uint8_t(x >> (8 * i)));
}

// Appends b to v by resize and copy: g++ 12 at -O3 reports phantom overlaps in vector::insert
// into a small vector (-Warray-bounds, -Wstringop-overread).
void Append(Vec& v, Bytes b) {
  if (b.empty()) return;
  const size_t at = v.size();
  v.resize(at + b.size());
  std::memcpy(v.data() + at, b.data(), b.size());
}

Vec WithHeader(uint8_t b0, Vec body) {
  Vec out{b0, 0x00};
  Append(out, Bytes(body.data(), body.size()));
  return out;
}

Vec Lz4Body(Bytes plain) {
  Vec out(size_t(LZ4_compressBound(int(plain.size()))));
  const int n = LZ4_compress_default(reinterpret_cast<const char*>(plain.data()),
                                     reinterpret_cast<char*>(out.data()), int(plain.size()),
                                     int(out.size()));
  if (n <= 0) Fail("LZ4_compress_default failed");
  out.resize(size_t(n));
  return out;
}

Vec ZstdBody(Bytes plain) {
  Vec out(ZSTD_compressBound(plain.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), plain.data(), plain.size(), 3);
  if (ZSTD_isError(n)) Fail(std::string("ZSTD_compress: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

Vec ZlibStream(Bytes plain) {
  uLongf len = compressBound(uLong(plain.size()));
  Vec out(len);
  if (compress2(out.data(), &len, plain.data(), uLong(plain.size()), 6) != Z_OK) Fail("compress2");
  out.resize(len);
  return out;
}

Vec XzBody(Bytes plain) {
  Vec out(lzma_stream_buffer_bound(plain.size()));
  size_t pos = 0;
  if (lzma_easy_buffer_encode(1, LZMA_CHECK_CRC64, nullptr, plain.data(), plain.size(),
                              out.data(), &pos, out.size()) != LZMA_OK) {
    Fail("lzma_easy_buffer_encode failed");
  }
  out.resize(pos);
  return out;
}

Vec Obfuscate(const Vec& inner, size_t padding) {
  Vec out{0x04, 0x00};
  AppendBE32(out, uint32_t(inner.size()));
  out.insert(out.end(), inner.begin(), inner.end());
  out.insert(out.end(), padding, 0x00);
  return out;
}

// BLAKE2b-256(prefix || msg): borg's "keyed" BLAKE2b is a plain hash with the key prepended.
Vec Blake2b256(Bytes prefix, Bytes msg) {
  Vec out(32);
  blake2b_state s;
  if (blake2b_init(&s, 32) != 0 || blake2b_update(&s, prefix.data(), prefix.size()) != 0 ||
      blake2b_update(&s, msg.data(), msg.size()) != 0 || blake2b_final(&s, out.data(), 32) != 0) {
    Fail("blake2b failed");
  }
  return out;
}

Vec HmacSha256(Bytes key, Bytes msg) {
  Vec out(32);
  unsigned int n = 0;
  if (HMAC(EVP_sha256(), key.data(), int(key.size()), msg.data(), msg.size(), out.data(), &n) ==
          nullptr ||
      n != 32) {
    Fail("HMAC-SHA256 failed");
  }
  return out;
}

}  // namespace

Vec MakeText(size_t n, uint32_t seed) {
  static const char* const kWords[] = {"segment ", "chunk ", "borg ",   "archive ", "index ",
                                       "commit\n", "repo ",  "0123 ",   "verify ",  "xattr ",
                                       "mtime ",   "inode ", "manifest ", "tam ",   "lz4 ",
                                       "zstd "};
  Vec v;
  v.reserve(n + 16);
  uint32_t x = seed * 2654435761u + 0x9e3779b9u;
  if (x == 0) x = 1;
  while (v.size() < n) {
    const char* w = kWords[XorShift(x) % 16];
    while (*w) v.push_back(uint8_t(*w++));
    // A number now and then makes every seed's text unique, not just a reshuffle.
    if (x % 7 == 0) {
      for (char c : std::to_string(x % 100000)) v.push_back(uint8_t(c));
    }
  }
  v.resize(n);
  return v;
}

Vec MakeRandom(size_t n, uint32_t seed) {
  Vec v(n);
  uint32_t x = seed * 747796405u + 2891336453u;
  if (x == 0) x = 1;
  for (uint8_t& b : v) b = uint8_t(XorShift(x) >> 24);
  return v;
}

Vec MakeMixed(size_t n, uint32_t seed) {
  Vec v = MakeText(n, seed);
  const size_t r = n / 8;
  Vec noise = MakeRandom(r, seed ^ 0x5a5a5a5au);
  std::copy(noise.begin(), noise.end(), v.begin() + std::ptrdiff_t(n / 2 - r / 2));
  return v;
}

std::string PayloadCodecName(PayloadCodec c) {
  switch (c) {
    case PayloadCodec::kNone: return "none";
    case PayloadCodec::kLz4: return "lz4";
    case PayloadCodec::kZstd: return "zstd";
    case PayloadCodec::kZlib: return "zlib";
    case PayloadCodec::kLzma: return "lzma";
    case PayloadCodec::kObfuscateZstd: return "obfuscate(zstd)";
    case PayloadCodec::kObfuscateLz4: return "obfuscate(lz4)";
  }
  return "?";
}

Vec Lz4Payload(Bytes plain) { return WithHeader(0x01, Lz4Body(plain)); }

Vec CompressPayload(PayloadCodec codec, Bytes plain, size_t padding) {
  switch (codec) {
    case PayloadCodec::kNone: return WithHeader(0x00, ToVec(plain));
    case PayloadCodec::kLz4: return Lz4Payload(plain);
    case PayloadCodec::kZstd: return WithHeader(0x03, ZstdBody(plain));
    case PayloadCodec::kZlib: return ZlibStream(plain);
    case PayloadCodec::kLzma: return WithHeader(0x02, XzBody(plain));
    case PayloadCodec::kObfuscateZstd:
      return Obfuscate(WithHeader(0x03, ZstdBody(plain)), padding);
    case PayloadCodec::kObfuscateLz4: return Obfuscate(Lz4Payload(plain), padding);
  }
  Fail("unknown codec");
}

const nlohmann::json& FixtureVectors() {
  static const nlohmann::json j = [] {
    const std::string path =
        std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg1/vectors-v1.2.4.json";
    std::ifstream f(path);
    if (!f.good()) Fail("cannot open " + path);
    return nlohmann::json::parse(f);
  }();
  return j;
}

const nlohmann::json& FixtureRepo(crypto::KeyMode mode) {
  const nlohmann::json& repos = FixtureVectors().at("repos");
  const std::string name(crypto::KeyModeName(mode));
  if (!repos.contains(name)) Fail("no fixture vectors for mode " + name);
  return repos.at(name);
}

crypto::KeyMaterial FixtureKey(crypto::KeyMode mode) {
  crypto::KeyMaterial km;
  const nlohmann::json& repo = FixtureRepo(mode);
  if (!crypto::NeedsKey(mode)) return km;
  const nlohmann::json& k = repo.at("key");
  km.enc_key = SecureBytes(View(Unhex(k.at("enc_key"))));
  km.enc_hmac_key = SecureBytes(View(Unhex(k.at("enc_hmac_key"))));
  km.id_key = SecureBytes(View(Unhex(k.at("id_key"))));
  const Vec rid = Unhex(k.at("repository_id"));
  km.repository_id.assign(rid.begin(), rid.end());
  km.tam_required = k.at("tam_required").get<bool>();
  return km;
}

Vec SealObject(crypto::KeyMode mode, const crypto::KeyMaterial& key, Bytes payload, uint64_t iv) {
  Vec obj{static_cast<uint8_t>(mode)};
  if (!crypto::IsEncrypted(mode)) {
    Append(obj, payload);
    return obj;
  }
  // IV (8 bytes BE) || AES-256-CTR(enc_key, counter = 00*8 || IV)(C); MAC over both.
  Vec iv_ct(8 + payload.size());
  for (int i = 0; i < 8; ++i) iv_ct[size_t(i)] = uint8_t(iv >> (56 - 8 * i));
  uint8_t counter[16] = {};
  std::memcpy(counter + 8, iv_ct.data(), 8);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int outl = 0;
  const bool ok =
      ctx != nullptr &&
      EVP_EncryptInit_ex(ctx, EVP_aes_256_ctr(), nullptr, key.enc_key.data(), counter) == 1 &&
      (payload.empty() ||
       EVP_EncryptUpdate(ctx, iv_ct.data() + 8, &outl, payload.data(), int(payload.size())) == 1);
  EVP_CIPHER_CTX_free(ctx);
  if (!ok) Fail("AES-256-CTR failed");
  const Vec mac = crypto::UsesBlake2(mode) ? Blake2b256(key.enc_hmac_key.view(), View(iv_ct))
                                           : HmacSha256(key.enc_hmac_key.view(), View(iv_ct));
  obj.insert(obj.end(), mac.begin(), mac.end());
  obj.insert(obj.end(), iv_ct.begin(), iv_ct.end());
  return obj;
}

Vec ChunkIdOf(crypto::KeyMode mode, const crypto::KeyMaterial& key, Bytes plain) {
  if (!crypto::NeedsKey(mode)) {
    Vec out(32);
    unsigned int n = 0;
    if (EVP_Digest(plain.data(), plain.size(), out.data(), &n, EVP_sha256(), nullptr) != 1) {
      Fail("SHA-256 failed");
    }
    return out;
  }
  return crypto::UsesBlake2(mode) ? Blake2b256(key.id_key.view(), plain)
                                  : HmacSha256(key.id_key.view(), plain);
}

Vec MakePutEntry(Bytes id, Bytes object) {
  if (id.size() != repo::kKeySize) Fail("a chunk id is 32 bytes");
  Vec e(repo::kHeaderSizeWithKey);
  StoreLE32(e.data() + 4, uint32_t(repo::kHeaderSizeWithKey + object.size()));
  e[8] = repo::kTagPut;
  std::memcpy(e.data() + 9, id.data(), id.size());
  Append(e, object);
  FixEntryCrc(e);
  return e;
}

void FixEntryCrc(Vec& entry) {
  StoreLE32(entry.data(), repo::Crc32(Bytes(entry.data() + 4, entry.size() - 4)));
}

void RunConcurrently(size_t threads, const std::function<void(size_t)>& fn) {
  std::latch start(std::ptrdiff_t(threads) + 1);
  std::mutex mu;
  std::exception_ptr first;  // guarded by mu
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        fn(t);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  start.arrive_and_wait();
  for (std::thread& th : pool) th.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace borgcheck::concurrency_test
