// Tests for Sha256Lanes and HmacSha256Key (sha256_lanes.h) on every path: every case runs on
// the default engine (SHA-NI, with the 16-lane AVX-512 kernel for 13+ busy lanes on a CPU
// that has both), on SHA-NI alone (TEST_DisableAvx512: many lanes in SHA-NI groups) and on
// the OpenSSL fallback (TEST_ForceOpenSsl).
//   - FIPS 180-4 / NIST example vectors: "", "abc", the 448- and 896-bit messages, a million
//     'a' (fed in pieces, and whole);
//   - RFC 4231 HMAC-SHA256 test cases 1-7 (case 5 truncated to 128 bits as the RFC gives it);
//   - differential against OpenSSL's one-shot SHA256 / HMAC: every length 0..300 in every lane
//     position, keys of 0, 1, 64, 65 and 200 bytes, and 1 MiB + k around block boundaries;
//   - lanes of unequal lengths: every ordered pair of lengths from a set around the block and
//     padding boundaries, keyed and not; random mixes of 3 to 16 lanes fed in random pieces
//     with Run between pieces (every group split, and the AVX-512 kernel with its unused
//     lanes); HashAll with 1..16 lanes;
//   - the lane contract: Run on idle lanes, a starved lane is returned at once, Reset.
#include "checker/crypto/sha256_lanes.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/crypto/sha256_avx512.h"
#include "checker/crypto/sha256_ni.h"

namespace borgcheck::crypto {
namespace {

using Vec = std::vector<uint8_t>;
using Engine = Sha256Lanes::Engine;

Vec Random(size_t n, std::mt19937_64& rng) {
  Vec v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

Bytes View(const Vec& v) { return Bytes(v.data(), v.size()); }

std::string OpenSslSha256(Bytes m) {
  uint8_t out[32];
  unsigned int n = 0;
  REQUIRE(EVP_Digest(m.data(), m.size(), out, &n, EVP_sha256(), nullptr) == 1);
  return ToHex(Bytes(out, n));
}

std::string OpenSslHmac(Bytes key, Bytes m) {
  uint8_t out[32];
  unsigned int n = 0;
  static const uint8_t kEmpty = 0;
  REQUIRE(HMAC(EVP_sha256(), key.empty() ? &kEmpty : key.data(), int(key.size()), m.data(),
               m.size(), out, &n) != nullptr);
  return ToHex(Bytes(out, n));
}

std::string Reference(const HmacSha256Key* key, Bytes key_bytes, Bytes m) {
  return key != nullptr ? OpenSslHmac(key_bytes, m) : OpenSslSha256(m);
}

HmacSha256Key MakeKey(Bytes key) {
  Result<HmacSha256Key> k = HmacSha256Key::Create(key);
  REQUIRE(k.ok());
  return *k;
}

// The paths under test: the default engine, SHA-NI without AVX-512, the OpenSSL fallback.
enum class Path { kDefault, kShaNiOnly, kOpenSsl };
const Path kPaths[] = {Path::kDefault, Path::kShaNiOnly, Path::kOpenSsl};

// A lanes object on the requested path (on a CPU without SHA-NI the first two are the
// fallback too, and on one without AVX-512 the first two are the same).
struct Lanes {
  explicit Lanes(Path p) {
    REQUIRE(lanes.status().ok());
    if (p == Path::kShaNiOnly) lanes.TEST_DisableAvx512();
    if (p == Path::kOpenSsl) lanes.TEST_ForceOpenSsl();
    REQUIRE(lanes.status().ok());
    const bool shani = p != Path::kOpenSsl && sha256_ni::CpuHasShaNi();
    REQUIRE(lanes.engine() == (shani ? Engine::kShaNi : Engine::kOpenSsl));
    REQUIRE(lanes.uses_avx512() ==
            (p == Path::kDefault && shani && sha256_avx512::CpuHasAvx512Sha()));
  }
  Sha256Lanes lanes;
};

// Digest of one message through lane `lane` (the others idle).
std::string One(Sha256Lanes& lanes, size_t lane, const HmacSha256Key* key, Bytes m) {
  lanes.Submit(lane, key, m);
  REQUIRE(lanes.Run() == (Sha256Lanes::LaneMask(1) << lane));
  REQUIRE(lanes.IsDone(lane));
  uint8_t out[32];
  lanes.Take(lane, out);
  REQUIRE(lanes.IsIdle(lane));
  REQUIRE(lanes.Run() == 0);
  return ToHex(Bytes(out, 32));
}

// Runs the messages in lanes 0..n-1 at once, each fed in random pieces (up to max_piece
// bytes, empty pieces included) as Run hands its lane back; returns the digests.
std::vector<std::string> Together(Sha256Lanes& lanes, const std::vector<const HmacSha256Key*>& keys,
                                  const std::vector<Bytes>& msgs, std::mt19937_64& rng,
                                  size_t max_piece) {
  const size_t n = msgs.size();
  std::vector<size_t> pos(n, 0);
  std::vector<std::string> out(n);
  auto feed = [&](size_t i) {
    if (pos[i] == msgs[i].size()) {
      lanes.Finish(i);
      return;
    }
    size_t piece = max_piece == 0 ? msgs[i].size() - pos[i]
                                  : std::min<size_t>(rng() % (max_piece + 1), msgs[i].size() - pos[i]);
    lanes.Update(i, msgs[i].subspan(pos[i], piece));
    pos[i] += piece;
    if (pos[i] == msgs[i].size() && rng() % 2 == 0) lanes.Finish(i);
  };
  for (size_t i = 0; i < n; ++i) {
    if (keys[i] != nullptr) {
      lanes.Start(i, *keys[i]);
    } else {
      lanes.Start(i);
    }
    feed(i);
  }
  size_t done = 0;
  size_t rounds = 0;
  while (done < n) {
    Sha256Lanes::LaneMask ready = lanes.Run();
    REQUIRE(ready != 0);
    REQUIRE(++rounds < 10'000'000);
    for (size_t i = 0; i < n; ++i) {
      if ((ready & (1u << i)) == 0) continue;
      if (lanes.IsDone(i)) {
        uint8_t d[32];
        lanes.Take(i, d);
        out[i] = ToHex(Bytes(d, 32));
        ++done;
      } else {
        feed(i);
      }
    }
  }
  REQUIRE(lanes.Run() == 0);
  return out;
}

TEST_CASE("sha256 lanes: the default engine follows the CPU") {
  Sha256Lanes lanes;
  REQUIRE(lanes.status().ok());
  CHECK(lanes.engine() == (sha256_ni::CpuHasShaNi() ? Engine::kShaNi : Engine::kOpenSsl));
  CHECK(lanes.uses_avx512() == (sha256_ni::CpuHasShaNi() && sha256_avx512::CpuHasAvx512Sha()));
}

TEST_CASE("sha256 lanes: NIST example vectors") {
  for (Path e : kPaths) {
    Lanes l(e);
    const std::string m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    const std::string m896 =
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
        "lmnopqrsmnopqrstnopqrstu";
    for (size_t lane = 0; lane < Sha256Lanes::kMaxLanes; ++lane) {
      CHECK(One(l.lanes, lane, nullptr, AsBytes("")) ==
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
      CHECK(One(l.lanes, lane, nullptr, AsBytes("abc")) ==
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
      CHECK(One(l.lanes, lane, nullptr, AsBytes(m448)) ==
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
      CHECK(One(l.lanes, lane, nullptr, AsBytes(m896)) ==
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    }
    const std::string kMillion = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    const Vec a(1000000, 'a');
    CHECK(One(l.lanes, 1, nullptr, View(a)) == kMillion);
    // The same million 'a', streamed 1000 bytes at a time (the NIST description), in two lanes
    // at once with "abc" in the other.
    std::mt19937_64 rng(1);
    const Vec abc = {'a', 'b', 'c'};
    auto d = Together(l.lanes, {nullptr, nullptr}, {View(a), View(abc)}, rng, 1000);
    CHECK(d[0] == kMillion);
    CHECK(d[1] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  }
}

TEST_CASE("sha256 lanes: RFC 4231 HMAC-SHA256 test cases") {
  struct Case {
    Vec key;
    std::string data;
    std::string mac;
  };
  auto bytes = [](std::string_view s) { return Vec(s.begin(), s.end()); };
  Vec key4;
  for (uint8_t i = 1; i <= 25; ++i) key4.push_back(i);
  const std::vector<Case> cases = {
      {Vec(20, 0x0b), "Hi There",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {bytes("Jefe"), "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {Vec(20, 0xaa), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {key4, std::string(50, '\xcd'),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {Vec(20, 0x0c), "Test With Truncation", "a3b6167473100ee06e0c796c2955552b"},
      {Vec(131, 0xaa), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {Vec(131, 0xaa),
       "This is a test using a larger than block-size key and a larger than block-size data. "
       "The key needs to be hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (Path e : kPaths) {
    Lanes l(e);
    for (size_t c = 0; c < cases.size(); ++c) {
      INFO("test case " << c + 1);
      const HmacSha256Key key = MakeKey(View(cases[c].key));
      const std::string mac = One(l.lanes, c % Sha256Lanes::kMaxLanes, &key, AsBytes(cases[c].data));
      CHECK(mac.substr(0, cases[c].mac.size()) == cases[c].mac);
    }
  }
}

TEST_CASE("sha256 lanes: every length 0..300 equals OpenSSL, in every lane, several keys") {
  std::mt19937_64 rng(4231);
  const Vec data = Random(300, rng);
  std::vector<Vec> key_bytes;
  for (size_t n : {0, 1, 64, 65, 200}) key_bytes.push_back(Random(n, rng));
  std::vector<HmacSha256Key> keys;
  for (const Vec& k : key_bytes) keys.push_back(MakeKey(View(k)));
  for (Path e : kPaths) {
    Lanes l(e);
    for (size_t len = 0; len <= 300; ++len) {
      INFO("length " << len);
      const Bytes m(data.data(), len);
      const size_t lane = len % Sha256Lanes::kMaxLanes;
      REQUIRE(One(l.lanes, lane, nullptr, m) == OpenSslSha256(m));
      for (size_t k = 0; k < keys.size(); ++k) {
        INFO("key length " << key_bytes[k].size());
        REQUIRE(One(l.lanes, (lane + k + 1) % Sha256Lanes::kMaxLanes, &keys[k], m) ==
                OpenSslHmac(View(key_bytes[k]), m));
      }
    }
  }
}

TEST_CASE("sha256 lanes: 1 MiB + k around block boundaries equals OpenSSL") {
  std::mt19937_64 rng(1 << 20);
  const Vec data = Random((1 << 20) + 200, rng);
  const Vec key_bytes = Random(32, rng);
  const HmacSha256Key key = MakeKey(View(key_bytes));
  for (Path e : kPaths) {
    Lanes l(e);
    for (int k : {-65, -64, -63, -56, -55, -9, -8, -1, 0, 1, 8, 9, 55, 56, 63, 64, 65, 119, 120}) {
      INFO("1 MiB + " << k);
      const Bytes m(data.data(), size_t((1 << 20) + k));
      CHECK(One(l.lanes, 0, nullptr, m) == OpenSslSha256(m));
      CHECK(One(l.lanes, 3, &key, m) == OpenSslHmac(View(key_bytes), m));
      // Two lanes: the message against a short one, and against itself one byte longer.
      const Bytes m1(data.data(), m.size() + 1);
      auto d = Together(l.lanes, {&key, nullptr}, {m, m1}, rng, 0);
      CHECK(d[0] == OpenSslHmac(View(key_bytes), m));
      CHECK(d[1] == OpenSslSha256(m1));
    }
  }
}

TEST_CASE("sha256 lanes: two lanes of unequal lengths, every combination") {
  std::mt19937_64 rng(2);
  const std::vector<size_t> lengths = {0,   1,   55,  56,   63,   64,   65,         119,
                                       120, 127, 128, 129,  191,  1000, 4096 + 7,  65536 + 3};
  const Vec data = Random(70000, rng);
  const Vec key_bytes = Random(32, rng);
  const HmacSha256Key key = MakeKey(View(key_bytes));
  for (Path e : kPaths) {
    Lanes l(e);
    for (size_t a : lengths) {
      for (size_t b : lengths) {
        for (int keyed = 0; keyed < 4; ++keyed) {
          INFO("lengths " << a << ", " << b << ", keyed " << keyed);
          const HmacSha256Key* ka = keyed & 1 ? &key : nullptr;
          const HmacSha256Key* kb = keyed & 2 ? &key : nullptr;
          // Different offsets, so that equal lengths are still different messages.
          const Bytes ma(data.data(), a);
          const Bytes mb(data.data() + 3, b);
          auto d = Together(l.lanes, {ka, kb}, {ma, mb}, rng, 0);
          REQUIRE(d[0] == Reference(ka, View(key_bytes), ma));
          REQUIRE(d[1] == Reference(kb, View(key_bytes), mb));
        }
      }
    }
  }
}

TEST_CASE("sha256 lanes: 3 to 16 lanes, random lengths, fed in random pieces") {
  std::mt19937_64 rng(3);
  const Vec data = Random(300000, rng);
  std::vector<Vec> key_bytes;
  for (size_t n : {0, 1, 64, 65, 200}) key_bytes.push_back(Random(n, rng));
  std::vector<HmacSha256Key> keys;
  for (const Vec& k : key_bytes) keys.push_back(MakeKey(View(k)));
  for (Path e : kPaths) {
    Lanes l(e);
    for (int trial = 0; trial < 280; ++trial) {
      const size_t n = 3 + trial % 14;
      std::vector<const HmacSha256Key*> ks(n);
      std::vector<int> key_index(n);
      std::vector<Bytes> ms(n);
      for (size_t i = 0; i < n; ++i) {
        key_index[i] = int(rng() % (keys.size() + 1)) - 1;
        ks[i] = key_index[i] < 0 ? nullptr : &keys[size_t(key_index[i])];
        const size_t len = rng() % 4 == 0 ? rng() % 300000 : rng() % 700;
        const size_t off = rng() % (data.size() - len + 1);
        ms[i] = Bytes(data.data() + off, len);
      }
      const size_t max_piece = trial % 3 == 0 ? 0 : 1 + rng() % 200;
      auto d = Together(l.lanes, ks, ms, rng, max_piece);
      for (size_t i = 0; i < n; ++i) {
        INFO("trial " << trial << " lane " << i << " length " << ms[i].size() << " key "
                      << key_index[i]);
        const Bytes kb = key_index[i] < 0 ? Bytes() : View(key_bytes[size_t(key_index[i])]);
        REQUIRE(d[i] == Reference(ks[i], kb, ms[i]));
      }
    }
  }
}

TEST_CASE("sha256 lanes: HashAll keeps 1..16 lanes busy over many jobs") {
  std::mt19937_64 rng(5);
  const Vec data = Random(1 << 18, rng);
  const Vec key_bytes = Random(32, rng);
  const HmacSha256Key key = MakeKey(View(key_bytes));
  std::vector<Bytes> msgs;
  for (int i = 0; i < 60; ++i) {
    const size_t len = i % 5 == 0 ? rng() % (1 << 18) : rng() % 5000;
    msgs.emplace_back(data.data() + (data.size() - len) * (i % 2), len);
  }
  for (Path e : kPaths) {
    Lanes l(e);
    for (size_t lanes = 1; lanes <= Sha256Lanes::kMaxLanes; ++lanes) {
      std::vector<Vec> out(msgs.size(), Vec(32));
      std::vector<Sha256Lanes::Job> jobs;
      for (size_t i = 0; i < msgs.size(); ++i) {
        jobs.push_back({i % 3 == 0 ? nullptr : &key, msgs[i], out[i].data()});
      }
      l.lanes.HashAll(jobs, lanes);
      for (size_t i = 0; i < msgs.size(); ++i) {
        INFO("lanes " << lanes << " job " << i);
        CHECK(ToHex(View(out[i])) ==
              Reference(jobs[i].key, View(key_bytes), msgs[i]));
      }
      for (size_t i = 0; i < Sha256Lanes::kMaxLanes; ++i) CHECK(l.lanes.IsIdle(i));
    }
    l.lanes.HashAll({});  // no jobs: nothing to do
    CHECK(l.lanes.Run() == 0);
  }
}

TEST_CASE("sha256 lanes: the lane contract") {
  for (Path e : kPaths) {
    Lanes l(e);
    Sha256Lanes& lanes = l.lanes;
    CHECK(lanes.Run() == 0);  // all idle
    const Vec big(1 << 16, 0x61);
    const Vec small(100, 0x62);
    // A started lane without input needs the caller at once; the busy lane is not advanced
    // by that Run (its digest comes out right after the other lane is fed).
    lanes.Start(2);
    lanes.Submit(0, nullptr, View(big));
    const bool fallback = l.lanes.engine() == Engine::kOpenSsl;
    CHECK(lanes.Run() == (fallback ? 0b101u : 0b100u));
    CHECK(lanes.Run() == (fallback ? 0b101u : 0b100u));
    lanes.Update(2, View(small));
    Sha256Lanes::LaneMask m = lanes.Run();
    CHECK((m & 0b100) != 0);  // lane 2 consumed its 100 bytes (starved again, not done)
    CHECK_FALSE(lanes.IsDone(2));
    lanes.Finish(2);
    std::string d0, d2;
    for (;;) {
      m = lanes.Run();
      REQUIRE(m != 0);
      uint8_t d[32];
      if (m & 1) {
        REQUIRE(lanes.IsDone(0));
        lanes.Take(0, d);
        d0 = ToHex(Bytes(d, 32));
      }
      if (m & 4) {
        REQUIRE(lanes.IsDone(2));
        lanes.Take(2, d);
        d2 = ToHex(Bytes(d, 32));
      }
      if (!d0.empty() && !d2.empty()) break;
    }
    CHECK(d0 == OpenSslSha256(View(big)));
    CHECK(d2 == OpenSslSha256(View(small)));
    CHECK(lanes.Run() == 0);
    // Reset abandons messages in progress; the lanes work normally afterwards.
    const Vec kb(32, 7);
    const HmacSha256Key key = MakeKey(View(kb));
    lanes.Start(1, key);
    lanes.Update(1, View(big));
    lanes.Submit(3, &key, View(small));
    lanes.Reset();
    for (size_t i = 0; i < Sha256Lanes::kMaxLanes; ++i) CHECK(lanes.IsIdle(i));
    CHECK(lanes.Run() == 0);
    CHECK(One(lanes, 1, &key, View(small)) == OpenSslHmac(View(kb), View(small)));
  }
}

}  // namespace
}  // namespace borgcheck::crypto
