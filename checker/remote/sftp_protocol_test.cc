// The SFTP v3 codec: requests byte for byte, replies decoded, and every malformed or lying
// reply refused (lengths past the end, counts larger than the packet, oversized packets).
#include "checker/remote/sftp_protocol.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

using namespace borgcheck;
using namespace borgcheck::remote;

namespace {

std::string U32(uint32_t v) {
  std::string s;
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(char((v >> shift) & 0xff));
  return s;
}
std::string U64(uint64_t v) { return U32(uint32_t(v >> 32)) + U32(uint32_t(v)); }
std::string Str(const std::string& s) { return U32(uint32_t(s.size())) + s; }
// Appends, where operator+ on temporaries trips g++ 12's -Wrestrict false positive (GCC PR 105329).
std::string Cat(std::initializer_list<std::string> parts) {
  std::string s;
  for (const std::string& p : parts) s += p;
  return s;
}
std::string Body(uint8_t type, uint32_t id, const std::string& rest) {
  return Cat({std::string(1, char(type)), U32(id), rest});
}
std::string Packet(const std::string& body) { return U32(uint32_t(body.size())) + body; }
std::string FullAttrs(uint64_t size, uint32_t perm, uint32_t mtime) {
  return U32(sftp::kAttrSize | sftp::kAttrUidGid | sftp::kAttrPermissions | sftp::kAttrAcModTime) + U64(size) +
         U32(1000) + U32(1000) + U32(perm) + U32(mtime - 1) + U32(mtime);
}

}  // namespace

TEST_CASE("sftp_protocol: requests are encoded as draft 02 says, and none writes", "[sftp]") {
  CHECK(sftp::EncodeInit(3) == U32(5) + "\x01" + U32(3));
  CHECK(sftp::EncodePathRequest(sftp::kStat, 7, "/a b") == Packet(Body(sftp::kStat, 7, Str("/a b"))));
  CHECK(sftp::EncodeHandleRequest(sftp::kClose, 9, std::string("\0h", 2)) ==
        Packet(Body(sftp::kClose, 9, Str(std::string("\0h", 2)))));
  // OPEN: pflags SSH_FXF_READ only, attrs with no flags.
  CHECK(sftp::EncodeOpenRead(1, "/r/config") == Packet(Body(sftp::kOpen, 1, Str("/r/config") + U32(1) + U32(0))));
  CHECK(sftp::EncodeRead(2, "h", 0x123456789ull, 255 * 1024) ==
        Packet(Body(sftp::kRead, 2, Str("h") + U64(0x123456789ull) + U32(255 * 1024))));
}

TEST_CASE("sftp_protocol: replies are decoded", "[sftp]") {
  SECTION("VERSION with extensions") {
    Result<uint32_t> v = sftp::ParseVersion(Cat({"\x02", U32(3), Str("limits@openssh.com"), Str("1")}));
    REQUIRE(v.ok());
    CHECK(*v == 3);
    CHECK(!sftp::ParseVersion(Cat({"\x02", U32(3), Str("x"), U32(5), "ab"})).ok());  // data runs past the end
    CHECK(!sftp::ParseVersion(Cat({"\x02", std::string("\0\0", 2)})).ok());
  }
  SECTION("STATUS, with and without message") {
    Result<sftp::StatusReply> s = sftp::ParseStatus(Body(sftp::kStatus, 4, U32(2) + Str("No such file") + Str("")));
    REQUIRE(s.ok());
    CHECK(s->code == sftp::kFxNoSuchFile);
    CHECK(s->message == "No such file");
    Result<sftp::StatusReply> bare = sftp::ParseStatus(Body(sftp::kStatus, 4, U32(1)));
    REQUIRE(bare.ok());
    CHECK(bare->code == sftp::kFxEof);
    CHECK(!sftp::ParseStatus(Body(sftp::kStatus, 4, U32(4) + U32(100) + "short")).ok());
    CHECK(!sftp::ParseStatus(Body(sftp::kHandle, 4, U32(4))).ok());
  }
  SECTION("HANDLE") {
    Result<std::string> h = sftp::ParseHandle(Body(sftp::kHandle, 1, Str("abc")));
    REQUIRE(h.ok());
    CHECK(*h == "abc");
    CHECK(!sftp::ParseHandle(Body(sftp::kHandle, 1, Str(std::string(257, 'h')))).ok());
    CHECK(!sftp::ParseHandle(Body(sftp::kHandle, 1, Str("abc") + "x")).ok());  // trailing bytes
  }
  SECTION("DATA") {
    const std::string body = Body(sftp::kData, 1, Str("payload"));
    Result<std::string_view> d = sftp::ParseData(body);
    REQUIRE(d.ok());
    CHECK(*d == "payload");
    CHECK(d->data() == body.data() + 9);  // a view into the packet: no copy
    CHECK(!sftp::ParseData(Body(sftp::kData, 1, U32(0xffffffff) + "x")).ok());
  }
  SECTION("ATTRS: every field, and extended pairs skipped") {
    Result<sftp::Attrs> a = sftp::ParseAttrsReply(Body(sftp::kAttrs, 1, FullAttrs(5ull << 30, 0100644, 1700000000)));
    REQUIRE(a.ok());
    CHECK(a->size == (5ull << 30));
    CHECK(a->permissions == 0100644);
    CHECK(a->mtime == 1700000000);
    CHECK(std::string(sftp::TypeName(a->permissions)) == "regular file");
    const std::string ext = U32(sftp::kAttrPermissions | sftp::kAttrExtended) + U32(0010600) + U32(2) + Str("a") +
                            Str("b") + Str("c") + Str("d");
    Result<sftp::Attrs> e = sftp::ParseAttrsReply(Body(sftp::kAttrs, 1, ext));
    REQUIRE(e.ok());
    CHECK(std::string(sftp::TypeName(e->permissions)) == "FIFO");
    CHECK(!e->has_size());
    // An extended count larger than the bytes could hold.
    CHECK(!sftp::ParseAttrsReply(Body(sftp::kAttrs, 1, U32(sftp::kAttrExtended) + U32(0x7fffffff))).ok());
    CHECK(!sftp::ParseAttrsReply(Body(sftp::kAttrs, 1, U32(sftp::kAttrSize) + "1234")).ok());
  }
  SECTION("NAME") {
    const std::string body = Body(sftp::kName, 3, U32(2) + Str(".") + Str("drwx") + FullAttrs(4096, 040755, 1) +
                                                      Str("link") + Str("lrwx") + FullAttrs(4, 0120777, 1));
    Result<std::vector<sftp::NameEntry>> n = sftp::ParseName(body);
    REQUIRE(n.ok());
    REQUIRE(n->size() == 2);
    CHECK((*n)[1].name == "link");
    CHECK(std::string(sftp::TypeName((*n)[1].attrs.permissions)) == "symlink");
    // A count the packet cannot hold is refused before anything is reserved.
    CHECK(!sftp::ParseName(Body(sftp::kName, 3, U32(0xffffffff) + Str("x"))).ok());
    CHECK(!sftp::ParseName(Body(sftp::kName, 3, U32(2) + Str("a") + Str("b") + U32(0))).ok());
  }
  SECTION("a reply too short for its id") {
    sftp::ReplyHeader h;
    CHECK(!sftp::ParseReplyHeader(std::string("\x65\0\0", 3), &h));
  }
}

TEST_CASE("sftp_protocol: PacketReader cuts the stream into packets, whatever the reads", "[sftp]") {
  const std::string a = Packet(Body(sftp::kStatus, 1, U32(0)));
  const std::string b = Packet(Body(sftp::kData, 2, Str(std::string(100000, 'x'))));
  const std::string stream = a + b + a;
  for (size_t piece : {size_t(1), size_t(3), size_t(4096), stream.size()}) {
    sftp::PacketReader r;
    std::vector<std::string> got;
    for (size_t at = 0; at < stream.size(); at += piece) {
      const size_t n = std::min(piece, stream.size() - at);
      r.Append(reinterpret_cast<const uint8_t*>(stream.data() + at), n);
      std::string_view body;
      Status error;
      while (r.Next(&body, &error)) got.emplace_back(body);
      REQUIRE(error.ok());
    }
    REQUIRE(got.size() == 3);
    CHECK(got[0] == a.substr(4));
    CHECK(got[1] == b.substr(4));
    CHECK(got[2] == a.substr(4));
    CHECK(r.buffered() == 0);
  }
}

TEST_CASE("sftp_protocol: PacketReader refuses lengths of 0 and over 1 MiB + 1 KiB", "[sftp]") {
  for (uint32_t len : {0u, sftp::kMaxPacket + 1, 0xffffffffu}) {
    sftp::PacketReader r;
    const std::string s = U32(len) + "xxxx";
    r.Append(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    std::string_view body;
    Status error;
    CHECK(!r.Next(&body, &error));
    CHECK(error.code() == StatusCode::kIoError);
  }
  // The largest allowed packet passes.
  sftp::PacketReader r;
  const std::string big = Packet(std::string(sftp::kMaxPacket, 'y'));
  for (size_t at = 0; at < big.size(); at += sftp::PacketReader::kReadChunk) {
    r.Append(reinterpret_cast<const uint8_t*>(big.data() + at), std::min(sftp::PacketReader::kReadChunk, big.size() - at));
  }
  std::string_view body;
  Status error;
  REQUIRE(r.Next(&body, &error));
  CHECK(body.size() == sftp::kMaxPacket);
}
