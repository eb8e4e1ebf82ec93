#include "checker/archive/metadata_decode.h"

#include <catch2/catch.hpp>
#include <msgpack.hpp>
#include <string>

#include "checker/archive/archive_test_util.h"

namespace borgcheck::archive {
namespace {

using testing::TestId;

// A msgpack writer for metadata maps: `bin` packs byte strings as bin (borg 2) or str (1.x).
class Packer {
 public:
  explicit Packer(bool bin) : bin_(bin), pk_(buf_) {}
  Packer& Map(uint32_t n) { pk_.pack_map(n); return *this; }
  Packer& Array(uint32_t n) { pk_.pack_array(n); return *this; }
  Packer& Str(std::string_view s) {
    pk_.pack_str(uint32_t(s.size()));
    pk_.pack_str_body(s.data(), uint32_t(s.size()));
    return *this;
  }
  Packer& Raw(std::string_view s) {
    if (!bin_) return Str(s);
    pk_.pack_bin(uint32_t(s.size()));
    pk_.pack_bin_body(s.data(), uint32_t(s.size()));
    return *this;
  }
  Packer& Id(const ChunkId& id) { return Raw(std::string_view(reinterpret_cast<const char*>(id.data()), 32)); }
  Packer& Int(int64_t v) { pk_.pack_int64(v); return *this; }
  Packer& Bool(bool v) { v ? pk_.pack_true() : pk_.pack_false(); return *this; }
  std::string Take() { return std::string(buf_.data(), buf_.size()); }

 private:
  bool bin_;
  msgpack::sbuffer buf_;
  msgpack::packer<msgpack::sbuffer> pk_;
};

std::string Manifest1x(bool bin) {
  Packer p(bin);
  p.Map(6);
  p.Str("archives").Map(3);
  p.Raw("a1").Map(2).Str("id").Id(TestId(1)).Str("time").Raw("2026-12-01T13:29:45.564588");
  p.Raw("a2").Map(2).Str("id").Id(TestId(2)).Str("time").Raw("2026-12-01T13:30:00.000000");
  // a1 again: borg's dict keeps the first position and the last value
  p.Raw("a1").Map(2).Str("id").Id(TestId(3)).Str("time").Raw("2026-12-01T13:31:00.000000");
  p.Str("config").Map(1).Str("tam_required").Bool(true);
  p.Str("item_keys").Array(2).Raw("path").Raw("future_key");
  p.Str("tam").Map(0);
  p.Str("timestamp").Raw("2026-12-01T13:29:38.108637");
  p.Str("version").Int(1);
  return p.Take();
}

TEST_CASE("a borg 1.x / b5 manifest lists its archives, item keys and TAM flags") {
  for (bool bin : {false, true}) {
    const std::string m = Manifest1x(bin);
    ManifestInfo info;
    std::string err;
    REQUIRE(DecodeManifest(AsBytes(m), bin ? Generation::kBorg2b5 : Generation::kBorg1, info, err));
    CHECK(info.version == 1);
    CHECK(info.has_tam);
    CHECK(info.tam_required);
    CHECK(info.timestamp == "2026-12-01T13:29:38.108637");
    REQUIRE(info.archives.size() == 2);
    CHECK(info.archives[0].name == "a1");
    CHECK(info.archives[0].id == TestId(3));
    CHECK(info.archives[0].time == "2026-12-01T13:31:00.000000");
    CHECK(info.archives[1].name == "a2");
    CHECK(info.archives[1].id == TestId(2));
    CHECK(info.item_keys == std::vector<std::string>{"path", "future_key"});
    const ItemKeySet keys = ItemKeysFor(Generation::kBorg1, info);
    CHECK(keys.Contains("future_key"));
    CHECK(keys.Contains("chunks_healthy"));
    CHECK_FALSE(keys.Contains("hlid"));
  }
}

TEST_CASE("a master manifest has its item keys in config and no archive list") {
  Packer p(true);
  p.Map(4);
  p.Str("archives").Map(0);
  p.Str("config").Map(1).Str("item_keys").Array(2).Str("digests").Str("inode");
  p.Str("timestamp").Str("2026-11-29T19:37:25.000000+00:00");
  p.Str("version").Int(2);
  const std::string m = p.Take();
  ManifestInfo info;
  std::string err;
  REQUIRE(DecodeManifest(AsBytes(m), Generation::kBorg2Master, info, err));
  CHECK(info.version == 2);
  CHECK_FALSE(info.has_tam);
  CHECK(info.archives.empty());
  CHECK(info.item_keys == std::vector<std::string>{"digests", "inode"});
}

TEST_CASE("malformed manifests fail with the reason") {
  ManifestInfo info;
  std::string err;
  CHECK_FALSE(DecodeManifest(AsBytes(std::string("\x91\x01", 2)), Generation::kBorg1, info, err));
  CHECK(err == "manifest is not a msgpack map");
  CHECK_FALSE(DecodeManifest(AsBytes(Packer(false).Map(1).Str("version").Int(3).Take()), Generation::kBorg1, info, err));
  CHECK(err == "Invalid manifest version");
  const std::string bad_entry =
      Packer(false).Map(2).Str("version").Int(1).Str("archives").Map(1).Raw("x").Map(1).Str("id").Raw("short").Take();
  CHECK_FALSE(DecodeManifest(AsBytes(bad_entry), Generation::kBorg1, info, err));
  CHECK(err == "manifest entry of archive x is not {id, time}");
  CHECK_FALSE(DecodeManifest(AsBytes(Manifest1x(false) + "x"), Generation::kBorg1, info, err));
  CHECK(err == "manifest is not valid msgpack: extra bytes after the msgpack value");
  CHECK_FALSE(DecodeManifest(AsBytes(Manifest1x(false).substr(0, 40)), Generation::kBorg1, info, err));
  CHECK(err.rfind("manifest is not valid msgpack: ", 0) == 0);
}

TEST_CASE("archive objects: 1.x items, borg 2 item_ptrs, versions and TAM presence") {
  ArchiveInfo a;
  std::string err;
  const std::string v1 = Packer(false)
                             .Map(6)
                             .Str("items").Array(2).Id(TestId(10)).Id(TestId(11))
                             .Str("name").Raw("a1")
                             .Str("nfiles").Int(3)
                             .Str("tam").Map(0)
                             .Str("time").Raw("2026-12-01T13:29:45.564588")
                             .Str("version").Int(1)
                             .Take();
  REQUIRE(DecodeArchive(AsBytes(v1), Generation::kBorg1, a, err));
  CHECK(a.name == "a1");
  CHECK(a.items == std::vector<ChunkId>{TestId(10), TestId(11)});
  CHECK(a.item_ptrs.empty());
  CHECK(a.has_tam);
  CHECK(a.nfiles == 3u);
  CHECK_FALSE(DecodeArchive(AsBytes(v1), Generation::kBorg2b5, a, err));
  CHECK(err == "Unknown archive metadata version 1");

  const std::string v2 = Packer(true)
                             .Map(4)
                             .Str("item_ptrs").Array(1).Id(TestId(20))
                             .Str("name").Str("b")
                             .Str("time").Str("2026-12-01T13:29:56.816587+00:00")
                             .Str("version").Int(2)
                             .Take();
  REQUIRE(DecodeArchive(AsBytes(v2), Generation::kBorg2Master, a, err));
  CHECK(a.item_ptrs == std::vector<ChunkId>{TestId(20)});
  CHECK_FALSE(a.has_tam);
  CHECK_FALSE(DecodeArchive(AsBytes(v2), Generation::kBorg1, a, err));
  CHECK(err == "Unknown archive metadata version 2");

  const std::string both = Packer(true)
                               .Map(4).Str("items").Array(0).Str("item_ptrs").Array(0)
                               .Str("name").Str("c").Str("version").Int(2).Take();
  CHECK_FALSE(DecodeArchive(AsBytes(both), Generation::kBorg2b5, a, err));
  CHECK(err == "archive metadata of version 2 has items");
  const std::string bad_id = Packer(false).Map(3).Str("items").Array(1).Raw("abc").Str("name").Raw("d")
                                 .Str("version").Int(1).Take();
  CHECK_FALSE(DecodeArchive(AsBytes(bad_id), Generation::kBorg1, a, err));
  CHECK(err == "items entry 0 is not a 32-byte id");
  const std::string no_name = Packer(false).Map(2).Str("items").Array(0).Str("version").Int(1).Take();
  CHECK_FALSE(DecodeArchive(AsBytes(no_name), Generation::kBorg1, a, err));
  CHECK(err == "archive metadata has no name");
}

TEST_CASE("item_ptrs chunks are lists of ids") {
  std::vector<ChunkId> ids{TestId(1)};
  std::string err;
  REQUIRE(DecodeItemPtrs(AsBytes(Packer(true).Array(2).Id(TestId(2)).Id(TestId(3)).Take()), ids, err));
  CHECK(ids == std::vector<ChunkId>{TestId(1), TestId(2), TestId(3)});
  CHECK_FALSE(DecodeItemPtrs(AsBytes(Packer(true).Map(0).Take()), ids, err));
  CHECK(err == "archive chunk-id list is not a list");
  CHECK_FALSE(DecodeItemPtrs(AsBytes(Packer(true).Array(1).Int(5).Take()), ids, err));
  CHECK(err == "archive chunk-id list entry 0 is not a 32-byte id");
}

TEST_CASE("archives/ entry names: 64 hex, optionally soft-deleted") {
  ChunkId id;
  bool del = true;
  const std::string hex = testing::HexOf(TestId(5));
  REQUIRE(ParseArchiveEntryName(hex, id, del));
  CHECK(id == TestId(5));
  CHECK_FALSE(del);
  REQUIRE(ParseArchiveEntryName(hex + ".del", id, del));
  CHECK(del);
  CHECK_FALSE(ParseArchiveEntryName(hex + ".tmp", id, del));
  CHECK_FALSE(ParseArchiveEntryName(hex.substr(1), id, del));
  CHECK_FALSE(ParseArchiveEntryName(std::string(64, 'g'), id, del));
}

}  // namespace
}  // namespace borgcheck::archive
