#include <catch2/catch.hpp>

#include <utility>

#include "checker/base/bytes.h"

namespace borgcheck {
namespace {

TEST_CASE("ByteBuffer: a moved-from buffer is empty and reusable", "[bytes]") {
  ByteBuffer a;
  a.Assign(AsBytes("hello"));
  ByteBuffer b(std::move(a));
  CHECK(b.size() == 5);
  CHECK(a.size() == 0);      // NOLINT(bugprone-use-after-move): testing the moved-from state
  CHECK(a.capacity() == 0);  // NOLINT(bugprone-use-after-move)
  a.Resize(10);              // must allocate, not write through a null pointer
  a.data()[9] = 1;
  ByteBuffer c;
  c = std::move(b);
  CHECK(c.view().size() == 5);
  CHECK(b.capacity() == 0);  // NOLINT(bugprone-use-after-move)
  b.Assign(AsBytes("x"));
  CHECK(b.size() == 1);
}

TEST_CASE("ByteBuffer: growth keeps contents, Resize does not shrink capacity", "[bytes]") {
  ByteBuffer a;
  a.Assign(AsBytes("abc"));
  a.Resize(100000);
  CHECK(a.data()[0] == 'a');
  CHECK(a.data()[2] == 'c');
  size_t cap = a.capacity();
  a.Resize(1);
  CHECK(a.capacity() == cap);
}

TEST_CASE("hex round trip", "[bytes]") {
  std::string raw;
  CHECK(FromHex("00ff10Ab", raw));
  CHECK(ToHex(AsBytes(raw)) == "00ff10ab");
  CHECK(!FromHex("abc", raw));
  CHECK(!FromHex("zz", raw));
}

}  // namespace
}  // namespace borgcheck
