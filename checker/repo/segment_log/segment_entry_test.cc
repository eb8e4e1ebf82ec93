#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <zlib.h>

#include "checker/io/env.h"
#include "checker/repo/segment_log/segment_entry.h"

namespace borgcheck::repo {
namespace {

std::string Entry(uint8_t tag, const std::string& key, const std::string& data) {
  std::string e(9, '\0');
  e += key + data;
  uint8_t* p = reinterpret_cast<uint8_t*>(e.data());
  StoreLE32(p + 4, uint32_t(e.size()));
  p[8] = tag;
  StoreLE32(p, Crc32(AsBytes(e).subspan(4)));
  return e;
}

TEST_CASE("entry: ISA-L CRC32 equals zlib's crc32", "[segment]") {
  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(char(i * 7 + (i >> 3)));
  for (size_t n : {0u, 1u, 15u, 16u, 63u, 64u, 1000u, 100000u}) {
    uLong z = crc32(0, reinterpret_cast<const Bytef*>(data.data()), uInt(n));
    CHECK(Crc32(AsBytes(data).first(n)) == uint32_t(z));
  }
}

TEST_CASE("entry: the COMMIT constant is a valid entry", "[segment]") {
  EntryHeader h;
  Bytes commit(kCommitEntry, sizeof kCommitEntry);
  REQUIRE(ParseEntryHeader(commit, 9, h, nullptr) == HeaderParse::kOk);
  CHECK(h.tag == kTagCommit);
  CHECK(h.size == 9);
  CHECK(EntryCrcMatches(commit));
}

TEST_CASE("entry: PUT and DELETE parse, CRC covers size, tag, key and data", "[segment]") {
  std::string key(32, 'k');
  std::string put = Entry(kTagPut, key, "payload");
  EntryHeader h;
  REQUIRE(ParseEntryHeader(AsBytes(put), put.size(), h, nullptr) == HeaderParse::kOk);
  CHECK(h.size == 48);
  CHECK(std::memcmp(h.key, key.data(), 32) == 0);
  CHECK(EntryCrcMatches(AsBytes(put)));
  for (size_t i = 4; i < put.size(); ++i) {
    std::string bad = put;
    bad[i] ^= 1;
    CHECK(!EntryCrcMatches(AsBytes(bad)));
  }
  std::string del = Entry(kTagDelete, key, "");
  REQUIRE(ParseEntryHeader(AsBytes(del), del.size(), h, nullptr) == HeaderParse::kOk);
  CHECK(h.tag == kTagDelete);
}

TEST_CASE("entry: impossible headers are invalid with a reason", "[segment]") {
  std::string key(32, 'k');
  std::string why;
  EntryHeader h;
  std::string put = Entry(kTagPut, key, "x");
  std::string bad_tag = put;
  bad_tag[8] = 3;
  CHECK(ParseEntryHeader(AsBytes(bad_tag), 100, h, &why) == HeaderParse::kInvalid);
  CHECK(why.find("acceptable tag") != std::string::npos);
  std::string huge = put;
  StoreLE32(reinterpret_cast<uint8_t*>(huge.data()) + 4, 0xffffffffu);
  CHECK(ParseEntryHeader(AsBytes(huge), uint64_t(1) << 40, h, &why) == HeaderParse::kInvalid);
  CHECK(why.find("too big") != std::string::npos);
  std::string tiny = put;
  StoreLE32(reinterpret_cast<uint8_t*>(tiny.data()) + 4, 20);
  CHECK(ParseEntryHeader(AsBytes(tiny), 100, h, &why) == HeaderParse::kInvalid);
  CHECK(why.find("too small") != std::string::npos);
  CHECK(ParseEntryHeader(AsBytes(put), put.size() - 1, h, &why) == HeaderParse::kInvalid);
  CHECK(why.find("truncated") != std::string::npos);
  CHECK(ParseEntryHeader(AsBytes(put).first(5), 5, h, &why) == HeaderParse::kInvalid);
  CHECK(ParseEntryHeader(AsBytes(put).first(20), 1000, h, &why) == HeaderParse::kNeedMore);
  std::string long_delete = Entry(kTagDelete, key, "extra");
  CHECK(ParseEntryHeader(AsBytes(long_delete), 1000, h, &why) == HeaderParse::kInvalid);
}

TEST_CASE("entry: every entry of a real segment walks and verifies", "[segment]") {
  Result<std::string> seg = io::Env::Default().ReadWholeFile(std::string(BORGCHECK_SHARED_DIR) +
                                              "/fixtures/borg1/v1.2.4/repos/repokey/data/0/2", 1 << 24);
  REQUIRE(seg.ok());
  REQUIRE(seg->compare(0, 8, "BORG_SEG") == 0);
  uint64_t off = 8;
  int puts = 0;
  while (off < seg->size()) {
    EntryHeader h;
    Bytes rest = AsBytes(*seg).subspan(off);
    REQUIRE(ParseEntryHeader(rest, rest.size(), h, nullptr) == HeaderParse::kOk);
    CHECK(EntryCrcMatches(rest.first(h.size)));
    puts += h.tag == kTagPut;
    off += h.size;
  }
  CHECK(off == seg->size());
  CHECK(puts == 16);
}

}  // namespace
}  // namespace borgcheck::repo
