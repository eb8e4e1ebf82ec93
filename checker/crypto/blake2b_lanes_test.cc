// Tests for Blake2b256Lanes and Blake2bPrefix (blake2b_lanes.h), on every engine this CPU has
// (AVX-512, AVX2, portable: narrower ones forced with TEST_UseEngine), so that the 8-lane,
// both 4-lane and the portable kernels all run:
//   - BLAKE2b-256 of "" and "abc" (RFC 7693's function at digest length 32), and borg's
//     key-prefixed form over a 128-byte key (values from Python's hashlib.blake2b);
//   - differential against libb2 and crypto::Blake2b (the check's current BLAKE2b): every
//     length 0..300 in every lane, prefixes of 0, 1, 127, 128, 129, 200 and 256 bytes, and
//     1 MiB + k around block boundaries;
//   - unequal lanes: every ordered pair of lengths from a set around the block boundaries,
//     and random mixes of 3 to 8 lanes fed in random pieces with Run between pieces (so
//     every group size, and final blocks inside wide kernel calls); HashAll with 1..8 lanes;
//   - the lane contract: Run on idle lanes, a starved lane is returned at once, Reset.
#include "checker/crypto/blake2b_lanes.h"

#include <blake2.h>

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
using Engine = Blake2b256Lanes::Engine;

Vec Random(size_t n, std::mt19937_64& rng) {
  Vec v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

Bytes View(const Vec& v) { return Bytes(v.data(), v.size()); }

// The oracle: libb2 over prefix || message, cross-checked with crypto::Blake2b.
std::string Reference(Bytes prefix, Bytes m) {
  uint8_t a[32], b[32];
  blake2b_state s;
  REQUIRE(blake2b_init(&s, 32) == 0);
  if (!prefix.empty()) REQUIRE(blake2b_update(&s, prefix.data(), prefix.size()) == 0);
  if (!m.empty()) REQUIRE(blake2b_update(&s, m.data(), m.size()) == 0);
  REQUIRE(blake2b_final(&s, a, 32) == 0);
  Blake2b h;
  REQUIRE(h.Init(32));
  h.Update(prefix);
  h.Update(m);
  h.Final(b);
  REQUIRE(ToHex(Bytes(a, 32)) == ToHex(Bytes(b, 32)));
  return ToHex(Bytes(a, 32));
}

std::vector<Engine> Engines() {
  std::vector<Engine> out;
  for (Engine e : {Engine::kAvx512, Engine::kAvx2, Engine::kPortable}) {
    Blake2b256Lanes probe;
    if (probe.TEST_UseEngine(e)) out.push_back(e);
  }
  return out;
}

struct Lanes {
  explicit Lanes(Engine e) {
    REQUIRE(lanes.TEST_UseEngine(e));
    REQUIRE(lanes.engine() == e);
  }
  Blake2b256Lanes lanes;
};

std::string One(Blake2b256Lanes& lanes, size_t lane, const Blake2bPrefix* prefix, Bytes m) {
  lanes.Submit(lane, prefix, m);
  REQUIRE(lanes.Run() == (Blake2b256Lanes::LaneMask(1) << lane));
  REQUIRE(lanes.IsDone(lane));
  uint8_t out[32];
  lanes.Take(lane, out);
  REQUIRE(lanes.IsIdle(lane));
  REQUIRE(lanes.Run() == 0);
  return ToHex(Bytes(out, 32));
}

// Runs msgs[i] in lane i, all at once, each fed in random pieces of up to max_piece bytes
// (0: whole) as Run hands its lane back.
std::vector<std::string> Together(Blake2b256Lanes& lanes,
                                  const std::vector<const Blake2bPrefix*>& prefixes,
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
    const size_t left = msgs[i].size() - pos[i];
    const size_t piece = max_piece == 0 ? left : std::min<size_t>(rng() % (max_piece + 1), left);
    lanes.Update(i, msgs[i].subspan(pos[i], piece));
    pos[i] += piece;
    if (pos[i] == msgs[i].size() && rng() % 2 == 0) lanes.Finish(i);
  };
  for (size_t i = 0; i < n; ++i) {
    if (prefixes[i] != nullptr) {
      lanes.Start(i, *prefixes[i]);
    } else {
      lanes.Start(i);
    }
    feed(i);
  }
  size_t done = 0, rounds = 0;
  while (done < n) {
    const Blake2b256Lanes::LaneMask ready = lanes.Run();
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

TEST_CASE("blake2b lanes: the default engine is the widest the CPU has") {
  Blake2b256Lanes lanes;
  CHECK(lanes.engine() == Blake2b256Lanes::BestEngine());
  CHECK(lanes.TEST_UseEngine(Engine::kPortable));
  CHECK(lanes.engine() == Engine::kPortable);
  if (Blake2b256Lanes::BestEngine() != Engine::kAvx512) {
    CHECK_FALSE(lanes.TEST_UseEngine(Engine::kAvx512));
    CHECK(lanes.engine() == Engine::kPortable);
  }
}

TEST_CASE("blake2b lanes: known digests, plain and key-prefixed") {
  Vec key(128);
  for (size_t i = 0; i < key.size(); ++i) key[i] = uint8_t(i);
  const Blake2bPrefix prefix = Blake2bPrefix::Create(View(key));
  for (Engine e : Engines()) {
    Lanes l(e);
    for (size_t lane = 0; lane < Blake2b256Lanes::kMaxLanes; ++lane) {
      CHECK(One(l.lanes, lane, nullptr, AsBytes("")) ==
            "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8");
      CHECK(One(l.lanes, lane, nullptr, AsBytes("abc")) ==
            "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319");
      CHECK(One(l.lanes, lane, &prefix, AsBytes("")) ==
            "c3582f71ebb2be66fa5dd750f80baae97554f3b015663c8be377cfcb2488c1d1");
      CHECK(One(l.lanes, lane, &prefix, AsBytes("abc")) ==
            "cf338e2be2243f528d08c06528f6ce53fbe786f045da8fadbac5b976c0021590");
    }
  }
}

TEST_CASE("blake2b lanes: every length 0..300 equals libb2, in every lane, several prefixes") {
  std::mt19937_64 rng(7693);
  const Vec data = Random(300, rng);
  std::vector<Vec> prefix_bytes;
  for (size_t n : {0, 1, 127, 128, 129, 200, 256}) prefix_bytes.push_back(Random(n, rng));
  std::vector<Blake2bPrefix> prefixes;
  for (const Vec& p : prefix_bytes) prefixes.push_back(Blake2bPrefix::Create(View(p)));
  for (Engine e : Engines()) {
    Lanes l(e);
    for (size_t len = 0; len <= 300; ++len) {
      INFO("length " << len);
      const Bytes m(data.data(), len);
      REQUIRE(One(l.lanes, len % 8, nullptr, m) == Reference({}, m));
      for (size_t p = 0; p < prefixes.size(); ++p) {
        INFO("prefix length " << prefix_bytes[p].size());
        REQUIRE(One(l.lanes, (len + p + 1) % 8, &prefixes[p], m) ==
                Reference(View(prefix_bytes[p]), m));
      }
    }
  }
}

TEST_CASE("blake2b lanes: 1 MiB + k around block boundaries equals libb2") {
  std::mt19937_64 rng(1 << 20);
  const Vec data = Random((1 << 20) + 300, rng);
  const Vec key = Random(128, rng);
  const Blake2bPrefix prefix = Blake2bPrefix::Create(View(key));
  const Bytes s1(data.data(), 100), s2(data.data() + 5, 129), s3(data.data() + 9, 0);
  const std::string r1 = Reference(View(key), s1), r2 = Reference({}, s2),
                    r3 = Reference(View(key), s3);
  for (int k : {-129, -128, -1, 0, 1, 127, 128, 129}) {
    INFO("1 MiB + " << k);
    const Bytes m(data.data(), size_t((1 << 20) + k));
    const Bytes m1(data.data() + 1, m.size() + 1);
    const std::string plain = Reference({}, m), keyed = Reference(View(key), m),
                      plain1 = Reference({}, m1);
    for (Engine e : Engines()) {
      Lanes l(e);
      CHECK(One(l.lanes, 0, nullptr, m) == plain);
      CHECK(One(l.lanes, 7, &prefix, m) == keyed);
      // Five lanes (the 8-lane kernel on AVX-512): the message, one byte longer, and three
      // short ones that finish first.
      auto d = Together(l.lanes, {&prefix, nullptr, &prefix, nullptr, &prefix},
                        {m, m1, s1, s2, s3}, rng, 0);
      CHECK(d[0] == keyed);
      CHECK(d[1] == plain1);
      CHECK(d[2] == r1);
      CHECK(d[3] == r2);
      CHECK(d[4] == r3);
    }
  }
}

TEST_CASE("blake2b lanes: two lanes of unequal lengths, every combination") {
  std::mt19937_64 rng(2);
  const std::vector<size_t> lengths = {0,   1,   127, 128,  129,  255,      256,
                                       257, 383, 384, 1000, 4096 + 7, 65536 + 3};
  const Vec data = Random(70000, rng);
  const Vec key = Random(128, rng);
  const Blake2bPrefix prefix = Blake2bPrefix::Create(View(key));
  for (Engine e : Engines()) {
    Lanes l(e);
    for (size_t a : lengths) {
      for (size_t b : lengths) {
        for (int keyed = 0; keyed < 4; ++keyed) {
          INFO("lengths " << a << ", " << b << ", keyed " << keyed);
          const Blake2bPrefix* pa = keyed & 1 ? &prefix : nullptr;
          const Blake2bPrefix* pb = keyed & 2 ? &prefix : nullptr;
          const Bytes ma(data.data(), a), mb(data.data() + 3, b);
          auto d = Together(l.lanes, {pa, pb}, {ma, mb}, rng, 0);
          REQUIRE(d[0] == Reference(pa ? View(key) : Bytes(), ma));
          REQUIRE(d[1] == Reference(pb ? View(key) : Bytes(), mb));
        }
      }
    }
  }
}

TEST_CASE("blake2b lanes: 3 to 8 lanes, random lengths, fed in random pieces") {
  std::mt19937_64 rng(3);
  const Vec data = Random(100000, rng);
  std::vector<Vec> prefix_bytes;
  for (size_t n : {0, 1, 128, 129, 256}) prefix_bytes.push_back(Random(n, rng));
  std::vector<Blake2bPrefix> prefixes;
  for (const Vec& p : prefix_bytes) prefixes.push_back(Blake2bPrefix::Create(View(p)));
  for (Engine e : Engines()) {
    Lanes l(e);
    for (int trial = 0; trial < 180; ++trial) {
      const size_t n = 3 + trial % 6;
      std::vector<const Blake2bPrefix*> ps(n);
      std::vector<int> pi(n);
      std::vector<Bytes> ms(n);
      for (size_t i = 0; i < n; ++i) {
        pi[i] = int(rng() % (prefixes.size() + 1)) - 1;
        ps[i] = pi[i] < 0 ? nullptr : &prefixes[size_t(pi[i])];
        const size_t len = rng() % 4 == 0 ? rng() % 100000 : rng() % 900;
        ms[i] = Bytes(data.data() + rng() % (data.size() - len + 1), len);
      }
      const size_t max_piece = trial % 3 == 0 ? 0 : 1 + rng() % 300;
      auto d = Together(l.lanes, ps, ms, rng, max_piece);
      for (size_t i = 0; i < n; ++i) {
        INFO("trial " << trial << " lane " << i << " length " << ms[i].size() << " prefix "
                      << pi[i]);
        REQUIRE(d[i] == Reference(pi[i] < 0 ? Bytes() : View(prefix_bytes[size_t(pi[i])]), ms[i]));
      }
    }
  }
}

TEST_CASE("blake2b lanes: HashAll keeps 1..8 lanes busy over many jobs") {
  std::mt19937_64 rng(5);
  const Vec data = Random(1 << 18, rng);
  const Vec key = Random(128, rng);
  const Blake2bPrefix prefix = Blake2bPrefix::Create(View(key));
  std::vector<Bytes> msgs;
  for (int i = 0; i < 50; ++i) {
    const size_t len = i % 6 == 0 ? rng() % (1 << 18) : rng() % 5000;
    msgs.emplace_back(data.data() + (data.size() - len) * (i % 2), len);
  }
  for (Engine e : Engines()) {
    Lanes l(e);
    for (size_t lanes = 1; lanes <= Blake2b256Lanes::kMaxLanes; ++lanes) {
      std::vector<Vec> out(msgs.size(), Vec(32));
      std::vector<Blake2b256Lanes::Job> jobs;
      for (size_t i = 0; i < msgs.size(); ++i) {
        jobs.push_back({i % 3 == 0 ? nullptr : &prefix, msgs[i], out[i].data()});
      }
      l.lanes.HashAll(jobs, lanes);
      for (size_t i = 0; i < msgs.size(); ++i) {
        INFO("lanes " << lanes << " job " << i);
        CHECK(ToHex(View(out[i])) == Reference(jobs[i].prefix ? View(key) : Bytes(), msgs[i]));
      }
      for (size_t i = 0; i < Blake2b256Lanes::kMaxLanes; ++i) CHECK(l.lanes.IsIdle(i));
    }
  }
}

TEST_CASE("blake2b lanes: the lane contract") {
  for (Engine e : Engines()) {
    Lanes l(e);
    Blake2b256Lanes& lanes = l.lanes;
    CHECK(lanes.Run() == 0);
    const Vec big(1 << 16, 0x61), small(100, 0x62);
    lanes.Start(5);  // no input yet: needs the caller at once, nothing else advances
    lanes.Submit(0, nullptr, View(big));
    CHECK(lanes.Run() == 0b100000u);
    CHECK(lanes.Run() == 0b100000u);
    lanes.Update(5, View(small));
    CHECK(lanes.Run() == 0b100000u);  // lane 5 consumed its 100 bytes; lane 0 still busy
    CHECK_FALSE(lanes.IsDone(5));
    CHECK_FALSE(lanes.IsDone(0));
    lanes.Finish(5);
    std::string d0, d5;
    while (d0.empty() || d5.empty()) {
      const Blake2b256Lanes::LaneMask m = lanes.Run();
      REQUIRE(m != 0);
      uint8_t d[32];
      if (m & 1) {
        REQUIRE(lanes.IsDone(0));
        lanes.Take(0, d);
        d0 = ToHex(Bytes(d, 32));
      }
      if (m & 0b100000) {
        REQUIRE(lanes.IsDone(5));
        lanes.Take(5, d);
        d5 = ToHex(Bytes(d, 32));
      }
    }
    CHECK(d0 == Reference({}, View(big)));
    CHECK(d5 == Reference({}, View(small)));
    const Vec key(128, 7);
    const Blake2bPrefix prefix = Blake2bPrefix::Create(View(key));
    lanes.Start(1, prefix);
    lanes.Update(1, View(big));
    lanes.Submit(3, &prefix, View(small));
    lanes.Reset();
    for (size_t i = 0; i < Blake2b256Lanes::kMaxLanes; ++i) CHECK(lanes.IsIdle(i));
    CHECK(lanes.Run() == 0);
    CHECK(One(lanes, 1, &prefix, View(small)) == Reference(View(key), View(small)));
  }
}

}  // namespace
}  // namespace borgcheck::crypto
