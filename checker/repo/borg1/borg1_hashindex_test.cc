#include <catch2/catch.hpp>

#include <algorithm>

#include "checker/repo/segment_log/segment_files.h"
#include "checker/io/env.h"
#include "checker/repo/borg1/borg1_hashindex.h"
#include "checker/repo/segment_log/segment_format.h"

namespace borgcheck::repo {
namespace {

std::string Fixture(const std::string& rel) {
  Result<std::string> r = io::Env::Default().ReadWholeFile(std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg1/" + rel, 1 << 24);
  REQUIRE(r.ok());
  return *r;
}

TEST_CASE("index: the fixture's index.29 lists 102 objects, checked by integrity.29", "[index]") {
  std::string idx = Fixture("v1.2.4/repos/repokey/index.29");
  Result<HashIndexContents> c = ParseHashIndex(AsBytes(idx));
  REQUIRE(c.ok());
  CHECK(c->entries.size() == 102);
  CHECK(c->num_entries_header == 102);
  CHECK(c->num_buckets == (idx.size() - 18) / 40);
  bool manifest = std::any_of(c->entries.begin(), c->entries.end(), [](const IndexEntry& e) {
    return std::all_of(e.id.begin(), e.id.end(), [](uint8_t b) { return b == 0; });
  });
  CHECK(manifest);
  std::string integ = Fixture("v1.2.4/repos/repokey/integrity.29");
  std::string why;
  CHECK(CheckIndexIntegrity(AsBytes(idx), "index.29", kIndexHeaderSize, AsBytes(integ), &why) == IntegrityOutcome::kVerified);
  std::string bad = idx;
  bad[1000] ^= 1;
  CHECK(CheckIndexIntegrity(AsBytes(bad), "index.29", kIndexHeaderSize, AsBytes(integ), &why) == IntegrityOutcome::kMismatch);
  CHECK(CheckIndexIntegrity(AsBytes(idx), "index.28", kIndexHeaderSize, AsBytes(integ), &why) == IntegrityOutcome::kMismatch);
  CHECK(CheckIndexIntegrity(AsBytes(idx), "index.29", kIndexHeaderSize, AsBytes(std::string("\x01")), &why) ==
        IntegrityOutcome::kMalformed);
}

TEST_CASE("index: malformed headers and absurd sizes are refused before allocation", "[index]") {
  std::string idx = Fixture("v1.2.4/repos/repokey/index.29");
  auto with = [&](size_t pos, uint32_t v) {
    std::string s = idx;
    StoreLE32(reinterpret_cast<uint8_t*>(s.data()) + pos, v);
    return s;
  };
  CHECK(ParseHashIndex(AsBytes(with(12, 0x7fffffff))).status().code() == StatusCode::kCorruptMetadata);
  CHECK(ParseHashIndex(AsBytes(with(12, 0x80000000))).status().code() == StatusCode::kCorruptMetadata);
  CHECK(ParseHashIndex(AsBytes(with(8, 5))).status().message().find("header says 5 entries") != std::string::npos);
  std::string magic = idx;
  magic[0] = 'X';
  CHECK(!ParseHashIndex(AsBytes(magic)).ok());
  std::string ksize = idx;
  ksize[16] = 16;
  CHECK(!ParseHashIndex(AsBytes(ksize)).ok());
  CHECK(!ParseHashIndex(AsBytes(idx).first(17)).ok());
  // A bucket whose segment value is beyond MAX_VALUE but not a marker.
  HashIndexContents c = ParseHashIndex(AsBytes(idx)).value();
  for (size_t b = 0; b < c.num_buckets; ++b) {
    size_t pos = 18 + b * 40 + 32;
    if (LoadLE32(reinterpret_cast<const uint8_t*>(idx.data()) + pos) < kIndexMaxValue) {
      CHECK(ParseHashIndex(AsBytes(with(pos, 0xfffffc00))).status().message().find("invalid segment value") !=
            std::string::npos);
      break;
    }
  }
}

}  // namespace
}  // namespace borgcheck::repo
