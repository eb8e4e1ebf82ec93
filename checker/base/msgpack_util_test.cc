#include "checker/base/msgpack_util.h"

#include <catch2/catch.hpp>

namespace borgcheck::msgpack_util {
namespace {

// {"k": "a", b"k": 7, "k": bin "zz"} followed by `tail`.
std::string MapWithDuplicateKeys(const std::string& tail = "") {
  return std::string("\x83\xa1k\xa1" "a" "\xc4\x01k\x07\xa1k\xc4\x02zz", 15) + tail;
}

TEST_CASE("UnpackWhole rejects trailing bytes with borg's wording, UnpackPrefix ignores them") {
  const std::string packed = MapWithDuplicateKeys("\xc0");
  msgpack::object_handle oh;
  std::string err;
  CHECK_FALSE(UnpackWhole(AsBytes(packed), 4, oh, err));
  CHECK(err == "extra bytes after the msgpack value");
  err.clear();
  REQUIRE(UnpackPrefix(AsBytes(packed), 4, oh, err));
  CHECK(err.empty());
  CHECK(oh.get().type == msgpack::type::MAP);
}

TEST_CASE("malformed or too deep input reports msgpack's message") {
  msgpack::object_handle oh;
  std::string err;
  CHECK_FALSE(UnpackWhole(AsBytes(std::string("\xdc\xff\xff", 3)), 4, oh, err));
  CHECK(err == "array size overflow");
  CHECK_FALSE(UnpackPrefix(AsBytes(std::string("\x91\x91\x91\x90", 4)), 2, oh, err));
  CHECK(err == "depth size overflow");
}

TEST_CASE("Find takes the last str/bin key match, FindFirst the first") {
  const std::string packed = MapWithDuplicateKeys();
  msgpack::object_handle oh;
  std::string err;
  REQUIRE(UnpackWhole(AsBytes(packed), 4, oh, err));
  const msgpack::object& m = oh.get();
  Bytes last;
  REQUIRE(AsRaw(Find(m, "k"), last));
  CHECK(std::string(last.begin(), last.end()) == "zz");
  REQUIRE(FindFirst(m, "k") != nullptr);
  CHECK(AsText(*FindFirst(m, "k")) == "a");
  CHECK(Find(m, "x") == nullptr);
  CHECK(FindFirst(m, "x") == nullptr);
  Bytes none;
  CHECK_FALSE(AsRaw(nullptr, none));
  CHECK_FALSE(AsRaw(&m.via.map.ptr[1].val, none));  // 7 is neither str nor bin
  CHECK_FALSE(AsText(m.via.map.ptr[1].val).has_value());
}

TEST_CASE("kReference points into the input, kCopy into the zone") {
  const std::string packed = MapWithDuplicateKeys();
  const char* begin = packed.data();
  const char* end = begin + packed.size();
  msgpack::object_handle oh;
  std::string err;
  REQUIRE(UnpackWhole(AsBytes(packed), 4, oh, err, Strings::kReference));
  std::string_view ref = *AsText(*Find(oh.get(), "k"));
  CHECK((ref.data() >= begin && ref.data() < end));
  REQUIRE(UnpackWhole(AsBytes(packed), 4, oh, err, Strings::kCopy));
  std::string_view copy = *AsText(*Find(oh.get(), "k"));
  CHECK_FALSE((copy.data() >= begin && copy.data() < end));
  CHECK(copy == "zz");
}

}  // namespace
}  // namespace borgcheck::msgpack_util
