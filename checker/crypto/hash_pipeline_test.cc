// Tests for HashPipeline and LaneHash (hash_pipeline.h): every digest against one-stream
// references (OpenSSL SHA-256 and HMAC-SHA256, crypto::Blake2b over prefix || message), on the
// default engines and on the fallbacks (OpenSSL SHA-256, portable BLAKE2b, SHA-NI without
// AVX-512):
//   - random sequences of items with 0..3 messages each, of lengths around block and padding
//     boundaries and long ones, split into two parts at random (empty parts included), SHA-256,
//     two HMAC keys, BLAKE2b with a 128-byte prefix and with none, one family or both mixed;
//   - the caller's contract: Decode is called for 0, 1, ... in order, refused items are asked
//     again, `must` is true exactly when no item is in flight (and then it is not refused),
//     every item is Done once, after all its digests were written, and its messages are not
//     read after Done (they are overwritten there);
//   - a run with no items, items with no messages only, and a pipeline reused for many runs.
#include "checker/crypto/hash_pipeline.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/crypto/blake2b.h"

namespace borgcheck::crypto {
namespace {

using Vec = std::vector<uint8_t>;

Vec Random(size_t n, std::mt19937_64& rng) {
  Vec v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

struct Hashes {
  Vec hmac_key1, hmac_key2, prefix;
  LaneHash sha = LaneHash::Sha256();
  std::optional<LaneHash> hmac1, hmac2;
  std::optional<LaneHash> b2_prefixed, b2_plain;

  explicit Hashes(std::mt19937_64& rng) {
    hmac_key1 = Random(32, rng);
    hmac_key2 = Random(100, rng);  // longer than a block: hashed first
    prefix = Random(128, rng);
    Result<LaneHash> h1 = LaneHash::HmacSha256(Bytes(hmac_key1.data(), hmac_key1.size()));
    Result<LaneHash> h2 = LaneHash::HmacSha256(Bytes(hmac_key2.data(), hmac_key2.size()));
    REQUIRE(h1.ok());
    REQUIRE(h2.ok());
    hmac1 = std::move(h1).value();
    hmac2 = std::move(h2).value();
    b2_prefixed = LaneHash::Blake2b256(Bytes(prefix.data(), prefix.size()));
    b2_plain = LaneHash::Blake2b256(Bytes());
  }
};

// hash: 0 SHA-256, 1 HMAC key1, 2 HMAC key2, 3 BLAKE2b prefixed, 4 BLAKE2b plain.
std::string Reference(const Hashes& h, int hash, const Vec& m) {
  uint8_t out[32];
  unsigned int n = 32;
  static const uint8_t kEmpty = 0;
  const uint8_t* data = m.empty() ? &kEmpty : m.data();
  switch (hash) {
    case 0:
      REQUIRE(EVP_Digest(data, m.size(), out, &n, EVP_sha256(), nullptr) == 1);
      break;
    case 1:
    case 2: {
      const Vec& k = hash == 1 ? h.hmac_key1 : h.hmac_key2;
      REQUIRE(HMAC(EVP_sha256(), k.data(), int(k.size()), data, m.size(), out, &n) != nullptr);
      break;
    }
    default: {
      Blake2b b;
      REQUIRE(b.Init(32));
      if (hash == 3) b.Update(Bytes(h.prefix.data(), h.prefix.size()));
      b.Update(Bytes(data, m.size()));
      b.Final(out);
      break;
    }
  }
  return ToHex(Bytes(out, 32));
}

const LaneHash* HashOf(const Hashes& h, int hash) {
  switch (hash) {
    case 0: return &h.sha;
    case 1: return &*h.hmac1;
    case 2: return &*h.hmac2;
    case 3: return &*h.b2_prefixed;
    default: return &*h.b2_plain;
  }
}

size_t RandomLength(std::mt19937_64& rng) {
  static const size_t kLengths[] = {0,   1,   3,   55,   56,    63,    64,     65,      111,
                                    112, 119, 127, 128,  129,   191,   192,    1000,    4096,
                                    4097, 65535, 65536, 100001, 300000, 1 << 20, (1 << 20) + 7};
  if (rng() % 4 == 0) return size_t(rng() % 20000);
  return kLengths[rng() % (sizeof kLengths / sizeof kLengths[0])];
}

struct Message {
  int hash = 0;
  Vec data;
  size_t split = 0;  // first part: data[0, split)
  uint8_t out[32] = {};
  std::string want;
};

struct Item {
  std::vector<Message> messages;
  bool decoded = false;
  bool done = false;
};

// The caller side: items decoded on demand, refused at random, checked when Done.
class TestItems final : public HashPipeline::Items {
 public:
  TestItems(std::vector<Item>& items, std::mt19937_64& rng, int refuse_percent)
      : items_(items), rng_(rng), refuse_percent_(refuse_percent) {}

  int Decode(size_t i, HashPipeline::Job* jobs, bool must) override {
    CHECK(i == next_);  // in order, each item accepted once
    CHECK(must == (in_flight_ == 0));
    if (!must && int(rng_() % 100) < refuse_percent_) return -1;
    Item& it = items_[i];
    it.decoded = true;
    ++next_;
    for (size_t j = 0; j < it.messages.size(); ++j) {
      Message& m = it.messages[j];
      jobs[j].hash = HashOf(*hashes, m.hash);
      jobs[j].first = Bytes(m.data.data(), m.split);
      jobs[j].second = Bytes(m.data.data() + m.split, m.data.size() - m.split);
      jobs[j].out = m.out;
    }
    if (!it.messages.empty()) ++in_flight_;
    return int(it.messages.size());
  }

  void Done(size_t i) override {
    Item& it = items_[i];
    CHECK(it.decoded);
    CHECK_FALSE(it.done);
    it.done = true;
    if (!it.messages.empty()) --in_flight_;
    for (Message& m : it.messages) {
      CHECK(ToHex(Bytes(m.out, 32)) == m.want);
      // Not read after Done: a later digest of this buffer would now be wrong.
      std::fill(m.data.begin(), m.data.end(), uint8_t(0xA5));
    }
  }

  const Hashes* hashes = nullptr;

 private:
  std::vector<Item>& items_;
  std::mt19937_64& rng_;
  int refuse_percent_;
  size_t next_ = 0;
  size_t in_flight_ = 0;
};

// families: 0 SHA-256 only, 1 BLAKE2b only, 2 both.
std::vector<Item> RandomItems(const Hashes& h, std::mt19937_64& rng, size_t n, int families) {
  std::vector<Item> items(n);
  for (Item& it : items) {
    const size_t k = rng() % (HashPipeline::kMaxJobsPerItem + 1);
    for (size_t j = 0; j < k; ++j) {
      Message m;
      m.hash = families == 0 ? int(rng() % 3) : families == 1 ? 3 + int(rng() % 2) : int(rng() % 5);
      m.data = Random(RandomLength(rng), rng);
      const int how = int(rng() % 4);
      m.split = how == 0 ? 0 : how == 1 ? m.data.size() : size_t(rng() % (m.data.size() + 1));
      m.want = Reference(h, m.hash, m.data);
      it.messages.push_back(std::move(m));
    }
  }
  return items;
}

void RunRandom(HashPipeline& p, const Hashes& h, std::mt19937_64& rng, int families, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    const size_t n = rng() % 40;
    const int refuse = int(rng() % 3) * 40;  // 0, 40 or 80 %
    INFO("round " << round << ", " << n << " items, refusing " << refuse << "%");
    std::vector<Item> items = RandomItems(h, rng, n, families);
    TestItems t(items, rng, refuse);
    t.hashes = &h;
    p.Run(items.size(), t);
    for (size_t i = 0; i < items.size(); ++i) {
      INFO("item " << i);
      CHECK(items[i].done);
    }
  }
}

TEST_CASE("HashPipeline: random items equal one-stream digests on the default engines", "[hash_pipeline]") {
  std::mt19937_64 rng(11);
  Hashes h(rng);
  HashPipeline p;
  REQUIRE(p.status().ok());
  SECTION("SHA-256 and HMAC-SHA256") { RunRandom(p, h, rng, 0, 30); }
  SECTION("BLAKE2b") { RunRandom(p, h, rng, 1, 30); }
  SECTION("both families in one run") { RunRandom(p, h, rng, 2, 30); }
}

TEST_CASE("HashPipeline: the fallback engines give the same digests", "[hash_pipeline]") {
  std::mt19937_64 rng(12);
  Hashes h(rng);
  SECTION("OpenSSL SHA-256") {
    HashPipeline p;
    p.TEST_sha().TEST_ForceOpenSsl();
    REQUIRE(p.status().ok());
    RunRandom(p, h, rng, 0, 15);
  }
  SECTION("SHA-NI without AVX-512") {
    HashPipeline p;
    p.TEST_sha().TEST_DisableAvx512();
    RunRandom(p, h, rng, 0, 15);
  }
  SECTION("portable BLAKE2b") {
    HashPipeline p;
    REQUIRE(p.TEST_blake2b().TEST_UseEngine(Blake2b256Lanes::Engine::kPortable));
    RunRandom(p, h, rng, 1, 15);
  }
  SECTION("AVX2 BLAKE2b, where the CPU has it") {
    HashPipeline p;
    if (p.TEST_blake2b().TEST_UseEngine(Blake2b256Lanes::Engine::kAvx2)) RunRandom(p, h, rng, 1, 15);
  }
}

TEST_CASE("HashPipeline: many small items keep every lane busy and finish out of order", "[hash_pipeline]") {
  std::mt19937_64 rng(13);
  Hashes h(rng);
  HashPipeline p;
  // One long message first, then 200 short ones: the short ones finish while the long one runs.
  std::vector<Item> items(201);
  auto add = [&](Item& it, int hash, size_t len) {
    Message m;
    m.hash = hash;
    m.data = Random(len, rng);
    m.split = len / 3;
    m.want = Reference(h, m.hash, m.data);
    it.messages.push_back(std::move(m));
  };
  add(items[0], 1, 3 << 20);
  for (size_t i = 1; i < items.size(); ++i) {
    add(items[i], 1, 500 + 37 * i);
    add(items[i], 2, 64 * i);
  }
  std::vector<size_t> order;
  class Recording final : public HashPipeline::Items {
   public:
    Recording(TestItems& inner, std::vector<size_t>& order) : inner_(inner), order_(order) {}
    int Decode(size_t i, HashPipeline::Job* jobs, bool must) override { return inner_.Decode(i, jobs, must); }
    void Done(size_t i) override {
      order_.push_back(i);
      inner_.Done(i);
    }

   private:
    TestItems& inner_;
    std::vector<size_t>& order_;
  };
  TestItems t(items, rng, 0);
  t.hashes = &h;
  Recording r(t, order);
  p.Run(items.size(), r);
  REQUIRE(order.size() == items.size());
  CHECK(order.back() == 0);  // the long one is the last to finish
  for (const Item& it : items) CHECK(it.done);
}

TEST_CASE("HashPipeline: no items, and items without messages", "[hash_pipeline]") {
  std::mt19937_64 rng(14);
  Hashes h(rng);
  HashPipeline p;
  std::vector<Item> none;
  TestItems t0(none, rng, 0);
  t0.hashes = &h;
  p.Run(0, t0);
  std::vector<Item> empty(17);
  TestItems t1(empty, rng, 50);
  t1.hashes = &h;
  p.Run(empty.size(), t1);
  for (const Item& it : empty) CHECK(it.done);
}

}  // namespace
}  // namespace borgcheck::crypto
