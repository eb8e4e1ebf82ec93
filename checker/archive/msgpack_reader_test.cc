#include "checker/archive/msgpack_reader.h"

#include <catch2/catch.hpp>
#include <msgpack.hpp>
#include <string>
#include <vector>

namespace borgcheck::archive {
namespace {

// One value of every msgpack format family, packed by msgpack-cxx.
std::vector<std::string> EveryFormat() {
  std::vector<std::string> out;
  auto pack = [&](auto&& fn) {
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> pk(b);
    fn(pk);
    out.emplace_back(b.data(), b.size());
  };
  using P = msgpack::packer<msgpack::sbuffer>;
  pack([](P& p) { p.pack_nil(); });
  pack([](P& p) { p.pack_true(); });
  pack([](P& p) { p.pack_fix_uint8(5); });
  pack([](P& p) { p.pack_fix_int8(-3); });
  pack([](P& p) { p.pack_uint8(200); });
  pack([](P& p) { p.pack_uint16(60000); });
  pack([](P& p) { p.pack_uint32(4000000000u); });
  pack([](P& p) { p.pack_uint64(1ull << 60); });
  pack([](P& p) { p.pack_int8(-100); });
  pack([](P& p) { p.pack_int16(-30000); });
  pack([](P& p) { p.pack_int32(-2000000000); });
  pack([](P& p) { p.pack_int64(-(1ll << 60)); });
  pack([](P& p) { p.pack_float(1.5f); });
  pack([](P& p) { p.pack_double(2.5); });
  pack([](P& p) { p.pack_str(3); p.pack_str_body("abc", 3); });
  pack([](P& p) { std::string s(40, 'x'); p.pack_str(40); p.pack_str_body(s.data(), 40); });
  pack([](P& p) { std::string s(300, 'y'); p.pack_str(300); p.pack_str_body(s.data(), 300); });
  pack([](P& p) { std::string s(70000, 'z'); p.pack_str(70000); p.pack_str_body(s.data(), 70000); });
  pack([](P& p) { p.pack_bin(0); });
  pack([](P& p) { std::string s(32, '\x01'); p.pack_bin(32); p.pack_bin_body(s.data(), 32); });
  pack([](P& p) { std::string s(300, '\x02'); p.pack_bin(300); p.pack_bin_body(s.data(), 300); });
  pack([](P& p) { p.pack_ext(1, -1); p.pack_ext_body("a", 1); });     // fixext 1
  pack([](P& p) { p.pack_ext(8, -1); p.pack_ext_body("12345678", 8); });  // timestamp 64
  pack([](P& p) { p.pack_ext(12, -1); p.pack_ext_body("123456789012", 12); });  // ext 8
  pack([](P& p) { p.pack_array(0); });
  pack([](P& p) { p.pack_map(0); });
  pack([](P& p) {
    p.pack_array(20);
    for (int i = 0; i < 20; ++i) p.pack_fix_uint8(uint8_t(i));
  });
  pack([](P& p) {
    p.pack_map(2);
    p.pack_str(1); p.pack_str_body("k", 1);
    p.pack_array(2); p.pack_nil(); p.pack_map(1); p.pack_nil(); p.pack_array(0);
    p.pack_str(1); p.pack_str_body("m", 1);
    p.pack_map(17);
    for (int i = 0; i < 17; ++i) { p.pack_fix_uint8(uint8_t(i)); p.pack_true(); }
  });
  return out;
}

Bytes B(const std::string& s) { return AsBytes(s); }

TEST_CASE("ValueScanner finds the end of every format, fed whole or one byte at a time") {
  for (const std::string& v : EveryFormat()) {
    CAPTURE(v.size(), uint32_t(uint8_t(v[0])));
    ValueScanner sc(8);
    size_t used = 0;
    const std::string with_tail = v + "\x01\x02";
    REQUIRE(sc.Scan(B(with_tail), used) == ScanStatus::kComplete);
    CHECK(used == v.size());

    sc.Reset();
    for (size_t i = 0; i < v.size(); ++i) {
      const ScanStatus st = sc.Scan(Bytes(reinterpret_cast<const uint8_t*>(v.data()) + i, 1), used);
      if (i + 1 < v.size()) {
        REQUIRE(st == ScanStatus::kIncomplete);
        CHECK(used == 1);
      } else {
        REQUIRE(st == ScanStatus::kComplete);
        CHECK(used == 1);
      }
    }
  }
}

TEST_CASE("ValueScanner splits a value at every boundary into two pieces") {
  const std::vector<std::string> all = EveryFormat();
  const std::string& v = all.back();  // the nested map
  for (size_t cut = 0; cut <= v.size(); ++cut) {
    ValueScanner sc(8);
    size_t used = 0;
    const ScanStatus first = sc.Scan(B(v.substr(0, cut)), used);
    if (cut < v.size()) {
      REQUIRE(first == ScanStatus::kIncomplete);
      REQUIRE(sc.Scan(B(v.substr(cut) + "tail"), used) == ScanStatus::kComplete);
      CHECK(used == v.size() - cut);
    } else {
      CHECK(first == ScanStatus::kComplete);
      CHECK(used == v.size());
    }
  }
}

TEST_CASE("ValueScanner reports 0xc1 and too deep nesting at their offsets") {
  ValueScanner sc(3);
  size_t used = 0;
  CHECK(sc.Scan(B(std::string("\x92\x01\xc1", 3)), used) == ScanStatus::kInvalidByte);
  CHECK(used == 2);
  sc.Reset();
  CHECK(sc.Scan(B(std::string("\x91\x91\x91\x91\x01", 5)), used) == ScanStatus::kTooDeep);
  CHECK(used == 3);
  sc.Reset();
  // map32 header split across pieces, too deep at the end of its header.
  CHECK(sc.Scan(B(std::string("\x91\x91\x91\xdf\x00", 5)), used) == ScanStatus::kIncomplete);
  CHECK(sc.Scan(B(std::string("\x00\x00\x01", 3)), used) == ScanStatus::kTooDeep);
  CHECK(used == 3);
  sc.Reset();
  // An empty container opens nothing: it fits at any depth.
  CHECK(sc.Scan(B(std::string("\x91\x91\x91\x90", 4)), used) == ScanStatus::kComplete);
  CHECK(used == 4);
}

TEST_CASE("ValueScanner never allocates for a forged huge length: it waits for the bytes") {
  ValueScanner sc(4);
  size_t used = 0;
  // str32 of 4 GiB - 1, array32 of 4 billion elements.
  CHECK(sc.Scan(B(std::string("\xdb\xff\xff\xff\xff" "abc", 8)), used) == ScanStatus::kIncomplete);
  CHECK(used == 8);
  sc.Reset();
  CHECK(sc.Scan(B(std::string("\xdd\xff\xff\xff\xff\x01\x02", 7)), used) == ScanStatus::kIncomplete);
}

TEST_CASE("Reader reads typed values and refuses wrong types without consuming") {
  const std::string s = std::string("\x93\xa3" "abc\xc4\x02zz\xd0\x85", 11);
  Reader r(B(s));
  uint32_t n = 0;
  REQUIRE(r.ReadArrayHeader(n));
  CHECK(n == 3);
  uint64_t u = 0;
  CHECK_FALSE(r.ReadUint(u));
  CHECK(r.offset() == 1);
  Bytes raw;
  REQUIRE(r.ReadRaw(raw));
  CHECK(std::string(raw.begin(), raw.end()) == "abc");
  REQUIRE(r.ReadRaw(raw));
  CHECK(std::string(raw.begin(), raw.end()) == "zz");
  CHECK_FALSE(r.ReadUint(u));  // -123 is not a uint
  int64_t i = 0;
  REQUIRE(r.ReadInt(i));
  CHECK(i == -123);
  CHECK(r.at_end());
  CHECK_FALSE(r.ReadNil());

  // uint64 above INT64_MAX: a uint, not an int.
  const std::string big("\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 9);
  Reader rb(B(big));
  CHECK_FALSE(rb.ReadInt(i));
  REQUIRE(rb.ReadUint(u));
  CHECK(u == UINT64_MAX);

  // A str whose length runs past the span.
  const std::string cut("\xd9\x10" "abc", 5);
  Reader rc(B(cut));
  CHECK_FALSE(rc.ReadRaw(raw));
  CHECK(rc.offset() == 0);
  CHECK_FALSE(rc.Skip(4));
}

}  // namespace
}  // namespace borgcheck::archive
