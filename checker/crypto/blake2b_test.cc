// Tests for borgcheck's BLAKE2b: RFC 7693 Appendix A, the keyed-mode KAT (blake2b-kat.txt of
// the BLAKE2 reference package: key 00..3f, inputs 00..n-1 for n = 0..255), borg's key-prefixed
// pattern with a copied state, and randomised equivalence with libb2 (the oracle; borgcheck no
// longer hashes with it) for digest lengths 32 and 64 over inputs fed in random-sized pieces.
#include "checker/crypto/blake2b.h"

#include <blake2.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "checker/base/bytes.h"

namespace borgcheck::crypto {
namespace {

std::string Digest(Blake2b& h) {
  std::vector<uint8_t> out(h.outlen());
  h.Final(out.data());
  return ToHex(out);
}

std::string Hash(Bytes data, size_t outlen) {
  Blake2b h;
  REQUIRE(h.Init(outlen));
  h.Update(data);
  return Digest(h);
}

std::string Libb2(Bytes data, size_t outlen, Bytes key = {}) {
  std::vector<uint8_t> out(outlen);
  blake2b_state s;
  if (key.empty()) {
    REQUIRE(blake2b_init(&s, outlen) == 0);
  } else {
    REQUIRE(blake2b_init_key(&s, outlen, key.data(), key.size()) == 0);
  }
  REQUIRE(blake2b_update(&s, data.data(), data.size()) == 0);
  REQUIRE(blake2b_final(&s, out.data(), outlen) == 0);
  return ToHex(out);
}

std::vector<uint8_t> Sequence(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i);
  return v;
}

std::vector<uint8_t> Random(size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

// Feeds `data` in pieces of 0..max_piece bytes (empty pieces included).
void UpdateInPieces(Blake2b& h, Bytes data, std::mt19937_64& rng, size_t max_piece) {
  size_t pos = 0;
  while (pos < data.size()) {
    size_t n = std::min<size_t>(rng() % (max_piece + 1), data.size() - pos);
    h.Update(data.subspan(pos, n));
    pos += n;
  }
}

TEST_CASE("BLAKE2b-512 of \"abc\" is RFC 7693 Appendix A") {
  CHECK(Hash(AsBytes("abc"), 64) ==
        "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
        "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923");
}

TEST_CASE("BLAKE2b of the empty input, 512 and 256 bits") {
  CHECK(Hash({}, 64) ==
        "786a02f742015903c6c6fd852552d272912f4740e15847618a86e217f71f5419"
        "d25e1031afee585313896444934eb04b903a685b1448b755d56f701afe9be2ce");
  CHECK(Hash({}, 32) == "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8");
}

TEST_CASE("keyed BLAKE2b-512 matches the KAT's first and last entries") {
  const std::vector<uint8_t> key = Sequence(64);
  Blake2b h;
  REQUIRE(h.InitKeyed(64, key));
  CHECK(Digest(h) ==
        "10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786"
        "b5e996e8f0f4eb981fc214b005f42d2ff4233499391653df7aefcbc13fc51568");
  REQUIRE(h.InitKeyed(64, key));
  h.Update(Sequence(255));
  CHECK(Digest(h) ==
        "142709d62e28fcccd0af97fad0f8465b971e82201dc51070faa0372aa43e9248"
        "4be1c1e73ba10906d5d1853db6a4106e0a7bf9800d373d6dee2d46d62ef2a461");
}

TEST_CASE("keyed BLAKE2b equals libb2's keyed mode for every KAT entry and other key sizes") {
  const std::vector<uint8_t> input = Sequence(256);
  for (size_t keylen : {1, 17, 32, 64}) {
    const std::vector<uint8_t> key = Sequence(keylen);
    for (size_t n = 0; n < 256; ++n) {
      INFO("key length " << keylen << ", input length " << n);
      Blake2b h;
      REQUIRE(h.InitKeyed(64, key));
      h.Update(Bytes(input).first(n));
      CHECK(Digest(h) == Libb2(Bytes(input).first(n), 64, key));
    }
  }
}

TEST_CASE("every digest length from 1 to 64 equals libb2") {
  std::mt19937_64 rng(1);
  const std::vector<uint8_t> data = Random(300, rng);
  for (size_t outlen = 1; outlen <= 64; ++outlen) {
    INFO("outlen " << outlen);
    CHECK(Hash(data, outlen) == Libb2(data, outlen));
  }
}

TEST_CASE("invalid parameters are refused") {
  Blake2b h;
  CHECK_FALSE(h.Init(0));
  CHECK_FALSE(h.Init(65));
  const std::vector<uint8_t> key = Sequence(65);
  CHECK_FALSE(h.InitKeyed(32, key));
  CHECK_FALSE(h.InitKeyed(0, Bytes(key).first(16)));
  CHECK(h.InitKeyed(32, Bytes(key).first(64)));
}

TEST_CASE("randomised: equals libb2 for lengths 0..2000, pieces of random size") {
  std::mt19937_64 rng(7693);
  const std::vector<uint8_t> data = Random(2000, rng);
  for (size_t outlen : {32, 64}) {
    for (size_t n = 0; n <= 2000; ++n) {
      INFO("outlen " << outlen << ", length " << n);
      const Bytes in = Bytes(data).first(n);
      Blake2b h;
      REQUIRE(h.Init(outlen));
      UpdateInPieces(h, in, rng, n % 3 == 0 ? 7 : 300);
      REQUIRE(Digest(h) == Libb2(in, outlen));
    }
  }
}

TEST_CASE("randomised: equals libb2 for large inputs, whole and in pieces") {
  std::mt19937_64 rng(2);
  // Around the block size multiples and well past the 4 KiB and 64 KiB sizes borg chunks
  // commonly have; 3 MiB + 1 crosses many blocks with a partial last one.
  for (size_t n : {size_t(128) * 1024, size_t(128) * 1024 + 1, size_t(65536) - 1,
                   size_t(3) * 1024 * 1024 + 1}) {
    const std::vector<uint8_t> data = Random(n, rng);
    for (size_t outlen : {32, 64}) {
      INFO("outlen " << outlen << ", length " << n);
      const std::string want = Libb2(data, outlen);
      CHECK(Hash(data, outlen) == want);
      Blake2b h;
      REQUIRE(h.Init(outlen));
      UpdateInPieces(h, data, rng, 100000);
      CHECK(Digest(h) == want);
    }
  }
}

TEST_CASE("borg's key-prefixed BLAKE2b-256 from a copied state equals hashing the concatenation") {
  // borg 1.x MAC and id: BLAKE2b-256(key(128) || message); the key is absorbed once and each
  // message continues a copy, which must not disturb the saved state.
  std::mt19937_64 rng(3);
  const std::vector<uint8_t> key = Random(128, rng);
  Blake2b keyed;
  REQUIRE(keyed.Init(32));
  keyed.Update(key);
  for (size_t n : {0, 1, 127, 128, 129, 4096}) {
    INFO("message length " << n);
    const std::vector<uint8_t> msg = Random(n, rng);
    std::vector<uint8_t> concat = key;
    concat.insert(concat.end(), msg.begin(), msg.end());
    Blake2b copy = keyed;
    copy.Update(msg);
    CHECK(Digest(copy) == Libb2(concat, 32));
  }
}

}  // namespace
}  // namespace borgcheck::crypto
