// Tagged envelopes (0x60-0x90): the golden vectors of spec borg2-format.md §B.3.6, then one
// small case per kind of damage.
#include "checker/crypto/tagged_envelope.h"

#include <catch2/catch.hpp>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <string>
#include <vector>

#include "checker/crypto/blake3.h"

namespace borgcheck::crypto {
namespace {

std::vector<uint8_t> Range(int from, int to) {
  std::vector<uint8_t> v;
  for (int i = from; i < to; ++i) v.push_back(uint8_t(i));
  return v;
}

const std::vector<uint8_t> kCryptKey = Range(0, 64);
const std::vector<uint8_t> kIdKey = Range(100, 132);
const std::string kPlain = "123456789";

// The chunk id master's test suite uses for each mode: the mode's id hash of the plaintext.
std::array<uint8_t, 32> ChunkIdFor(TaggedMac mac) {
  std::array<uint8_t, 32> id{};
  Bytes p = AsBytes(kPlain);
  switch (mac) {
    case TaggedMac::kSha256:
      SHA256(p.data(), p.size(), id.data());
      break;
    case TaggedMac::kHmacSha256: {
      unsigned n = 32;
      HMAC(EVP_sha256(), kIdKey.data(), int(kIdKey.size()), p.data(), p.size(), id.data(), &n);
      break;
    }
    case TaggedMac::kKeyedBlake3:
      Blake3Keyed(kIdKey.data(), p, id.data());
      break;
    case TaggedMac::kBlake3: {
      Blake3Hasher h = Blake3Hasher::Plain();
      h.Update(p);
      h.Finalize(id.data(), 32);
      break;
    }
  }
  return id;
}

std::string Hex(Bytes b) { return ToHex(b); }

struct Golden {
  TaggedMac mac;
  const char* name;
  const char* envelope_hex;  // the 34-byte header; the 9 plaintext bytes follow
};

const Golden kGolden[] = {
    {TaggedMac::kSha256, "none-sha256", "80001ab01692fad0f0b89f27983cbf51b1bd20ab73de736aea83363b749ee6ba314f"},
    {TaggedMac::kBlake3, "none-blake3", "90008dec559eda6de95536f198f6b54b3b2728678c94ca1b3f0b77cf37e5b11c9b7c"},
    {TaggedMac::kHmacSha256, "authenticated-sha256", "600033ecaaf8c34d4142fa502278986c8f49efbcbf879de16d3c2767e1252bfb1994"},
    {TaggedMac::kKeyedBlake3, "authenticated-blake3", "70006de48e2139f8995790ec81b256e87f40ef5810d140d28396a8d07734ab05a358"},
};

TEST_CASE("tagged envelope: golden vectors of spec B.3.6 seal and open", "[tagged]") {
  for (const Golden& g : kGolden) {
    INFO(g.name);
    TaggedEnvelope env(g.mac, Bytes(kCryptKey.data(), kCryptKey.size()));
    REQUIRE(env.status().ok());
    std::array<uint8_t, 32> id = ChunkIdFor(g.mac);
    std::vector<uint8_t> sealed = env.Seal(AsBytes(kPlain), Bytes(), id.data());
    CHECK(Hex(Bytes(sealed.data(), kTaggedHeaderSize)) == g.envelope_hex);
    CHECK(std::string(sealed.begin() + kTaggedHeaderSize, sealed.end()) == kPlain);

    std::string raw;
    REQUIRE(FromHex(g.envelope_hex, raw));
    raw += kPlain;
    Bytes payload;
    TaggedResult r = env.Open(AsBytes(raw), Bytes(), id.data(), payload);
    CHECK(r.outcome == TaggedOutcome::kOk);
    CHECK(std::string(payload.begin(), payload.end()) == kPlain);
  }
}

TEST_CASE("tagged envelope: every kind of damage is a named failure", "[tagged]") {
  for (const Golden& g : kGolden) {
    INFO(g.name);
    TaggedEnvelope env(g.mac, Bytes(kCryptKey.data(), kCryptKey.size()));
    std::array<uint8_t, 32> id = ChunkIdFor(g.mac);
    std::vector<uint8_t> good = env.Seal(AsBytes(kPlain), Bytes(), id.data());
    Bytes payload;

    SECTION("payload byte flipped") {
      std::vector<uint8_t> bad = good;
      bad[kTaggedHeaderSize + 4] ^= 0x01;
      TaggedResult r = env.Open(Bytes(bad.data(), bad.size()), Bytes(), id.data(), payload);
      CHECK(r.outcome == TaggedOutcome::kBadTag);
      CHECK(r.message == "envelope tag verification failed");
    }
    SECTION("tag byte flipped") {
      std::vector<uint8_t> bad = good;
      bad[2] ^= 0x80;
      CHECK(env.Open(Bytes(bad.data(), bad.size()), Bytes(), id.data(), payload).outcome == TaggedOutcome::kBadTag);
    }
    SECTION("reserved byte set") {
      std::vector<uint8_t> bad = good;
      bad[1] = 1;
      CHECK(env.Open(Bytes(bad.data(), bad.size()), Bytes(), id.data(), payload).outcome == TaggedOutcome::kBadTag);
    }
    SECTION("another chunk id") {
      std::array<uint8_t, 32> other = id;
      other[31] ^= 1;
      CHECK(env.Open(Bytes(good.data(), good.size()), Bytes(), other.data(), payload).outcome == TaggedOutcome::kBadTag);
    }
    SECTION("object version 2 AAD does not open a version 1 envelope") {
      std::vector<uint8_t> aad(42, 'x');
      CHECK(env.Open(Bytes(good.data(), good.size()), Bytes(aad.data(), aad.size()), id.data(), payload).outcome ==
            TaggedOutcome::kBadTag);
    }
    SECTION("truncated below the header") {
      TaggedResult r = env.Open(Bytes(good.data(), kTaggedHeaderSize - 1), Bytes(), id.data(), payload);
      CHECK(r.outcome == TaggedOutcome::kTruncated);
      CHECK(r.message == "truncated envelope");
    }
    SECTION("another mode's type byte") {
      std::vector<uint8_t> bad = good;
      bad[0] = uint8_t(g.mac) == 0x80 ? 0x90 : 0x80;
      TaggedResult r = env.Open(Bytes(bad.data(), bad.size()), Bytes(), id.data(), payload);
      CHECK(r.outcome == TaggedOutcome::kBadType);
      CHECK(r.message == "Invalid encryption envelope");
    }
  }
}

TEST_CASE("tagged envelope: the object version 2 AAD (42 bytes) round-trips and is bound", "[tagged]") {
  TaggedEnvelope env(TaggedMac::kHmacSha256, Bytes(kCryptKey.data(), kCryptKey.size()));
  std::array<uint8_t, 32> id = ChunkIdFor(TaggedMac::kHmacSha256);
  std::vector<uint8_t> aad(42);
  std::memcpy(aad.data(), "BORG_OBJ\x02", 9);
  std::memcpy(aad.data() + 9, id.data(), 32);
  aad[41] = 'D';
  std::vector<uint8_t> sealed = env.Seal(AsBytes(kPlain), Bytes(aad.data(), aad.size()), id.data());
  Bytes payload;
  CHECK(env.Open(Bytes(sealed.data(), sealed.size()), Bytes(aad.data(), aad.size()), id.data(), payload).outcome ==
        TaggedOutcome::kOk);
  aad[41] = 'M';  // the meta slot must not open a data envelope
  CHECK(env.Open(Bytes(sealed.data(), sealed.size()), Bytes(aad.data(), aad.size()), id.data(), payload).outcome ==
        TaggedOutcome::kBadTag);
}

TEST_CASE("tagged envelope: keyed modes need a key, and keys are separated by domain", "[tagged]") {
  TaggedEnvelope keyless(TaggedMac::kHmacSha256, Bytes());
  CHECK(keyless.status().code() == StatusCode::kInvalidArgument);
  uint8_t a[32], b[32];
  REQUIRE(DeriveTaggedKey(TaggedMac::kHmacSha256, Bytes(kCryptKey.data(), 64), a).ok());
  REQUIRE(DeriveTaggedKey(TaggedMac::kKeyedBlake3, Bytes(kCryptKey.data(), 64), b).ok());
  CHECK(Hex(Bytes(a, 32)) != Hex(Bytes(b, 32)));
  CHECK_FALSE(DeriveTaggedKey(TaggedMac::kSha256, Bytes(kCryptKey.data(), 64), a).ok());
}

}  // namespace
}  // namespace borgcheck::crypto
