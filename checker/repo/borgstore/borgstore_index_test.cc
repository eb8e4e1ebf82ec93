// Chunk index fragments (spec borg2-format.md §B.1.3) and the pack cross-check (§B.1.5): the
// real fragments of borg master pin what §B.8 item 2 answers, then one case per kind of damage.
#include "checker/repo/borgstore/borgstore_index.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "checker/io/env.h"

namespace borgcheck::repo {
namespace {
namespace fs = std::filesystem;

std::string Repo(const std::string& name) {
  return std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg2master/repos/" + name;
}

std::string ReadFile(const std::string& path) {
  Result<std::string> r = io::Env::Default().ReadWholeFile(path, 1ull << 30);
  REQUIRE(r.ok());
  return *r;
}

ChunkId Id(uint8_t b) {
  ChunkId id;
  id.fill(b);
  return id;
}

TEST_CASE("borghash: B.8 item 2, the real fragments are borghash 0.2.0, flags 0x01000000, unsorted", "[borghash][B.8]") {
  Result<BorgstoreLayout> l = ReadBorgstoreLayout(io::Env::Default(), Repo("aes256-ocb_sha256_repokey"), {});
  REQUIRE(l.ok());
  bool some_unsorted = false;
  size_t empty = 0;
  for (const StoreItem& item : l->index_fragments) {
    INFO(item.name);
    std::string bytes = ReadFile(item.path);
    Result<IndexFragment> f = ParseIndexFragment(AsBytes(bytes));
    REQUIRE(f.ok());
    CHECK(f->layout == BorghashLayout::kV020);
    CHECK(bytes[16] == '{');  // JSON right after the 16-byte header, not padded
    // Every stored record carries flags = 0x01000000 (borg's F_NEW) and size 0.
    uint32_t meta_size = LoadLE32(reinterpret_cast<const uint8_t*>(bytes.data()) + 12);
    for (size_t i = 0; i < f->records.size(); ++i) {
      const uint8_t* r = reinterpret_cast<const uint8_t*>(bytes.data()) + 16 + meta_size + 80 * i;
      CHECK(LoadLE32(r + 32) == 0x01000000u);
      CHECK(LoadLE32(r + 36) == 0u);
    }
    if (!std::is_sorted(f->records.begin(), f->records.end(),
                        [](const IndexRecord& a, const IndexRecord& b) { return a.chunk_id < b.chunk_id; })) {
      some_unsorted = true;
    }
    // Serializing the records in file order with capacity 2 * used (1000 for the empty one)
    // reproduces the file byte for byte: the format is understood completely.
    uint64_t capacity = f->records.empty() ? 1000 : 2 * f->records.size();
    CHECK(f->capacity == capacity);
    CHECK(TEST_SerializeIndexFragment(f->records, capacity) == bytes);
    empty += f->records.empty();
  }
  CHECK(some_unsorted);  // records are in hash-table order, so a reader must not rely on order
  CHECK(empty == 1);     // repo-create's empty fragment
  CHECK(l->index_fragments.back().name == "f7c384a63afe086bcfe913397d9d8b6e2b2feccee3119398abcaab92ba32e802");
}

TEST_CASE("borghash: malformed fragments are refused with the reason", "[borghash]") {
  std::vector<IndexRecord> recs = {{Id(1), {Id(9), 0, 100}}, {Id(2), {Id(9), 100, 50}}};
  std::string good = TEST_SerializeIndexFragment(recs, 4);
  REQUIRE(ParseIndexFragment(AsBytes(good)).ok());
  REQUIRE(ParseIndexFragment(AsBytes(good))->records.size() == 2);
  auto reason = [](const std::string& b) { return ParseIndexFragment(AsBytes(b)).status().message(); };
  CHECK(reason(good.substr(0, 10)).find("too short") != std::string::npos);
  std::string bad = good;
  bad[0] = 'X';
  CHECK(reason(bad) == "no BORGHASH magic");
  bad = good;
  bad[8] = 2;
  CHECK(reason(bad) == "unsupported borghash version 2");
  CHECK(reason(good + "x").find("is not header + meta + 80 * used") != std::string::npos);
  CHECK(reason(good.substr(0, good.size() - 80)).find("is not header + meta + 80 * used") != std::string::npos);
  bad = good;
  size_t at = bad.find("\"32s\"");
  bad.replace(at, 5, "\"31s\"");
  CHECK(reason(bad).find("value_format") != std::string::npos);
  bad = good;
  bad[17] = '!';
  CHECK(reason(bad) == "the meta is not valid JSON");
}

TEST_CASE("borghash: the unmerged mmap-branch layout (28-byte header, padded JSON) is read too", "[borghash]") {
  std::vector<IndexRecord> recs = {{Id(3), {Id(8), 0, 77}}};
  std::string json = R"({"key_size": 32, "value_size": 48, "byte_order": "little", "value_format": ["I", "I", "32s", "I", "I"]})";
  size_t padded = ((28 + json.size() + 63) / 64) * 64 - 28;
  std::string b = "BORGHASH";
  auto u32 = [&](uint32_t v) {
    uint8_t x[4];
    StoreLE32(x, v);
    b.append(reinterpret_cast<char*>(x), 4);
  };
  u32(1);
  u32(uint32_t(padded));
  u32(2);  // capacity
  u32(1);  // used
  u32(1);  // kv_used
  b += json;
  b.append(padded - json.size(), '\0');
  std::string v020 = TEST_SerializeIndexFragment(recs, 2);
  b += v020.substr(v020.size() - 80);
  Result<IndexFragment> f = ParseIndexFragment(AsBytes(b));
  REQUIRE(f.ok());
  CHECK(f->layout == BorghashLayout::kMmapBranch);
  REQUIRE(f->records.size() == 1);
  CHECK(f->records[0].entry.size == 77);
  CHECK(f->records[0].entry.pack_id == Id(8));
}

// A walk of blobs at the given (offset, chunk byte, size).
PackWalk Walk(std::initializer_list<std::tuple<uint64_t, uint8_t, uint32_t>> blobs, WalkEnd end = WalkEnd::kClean,
              uint64_t end_offset = 0) {
  PackWalk w;
  for (auto [off, id, size] : blobs) {
    WalkedBlob b;
    b.offset = off;
    b.header.version = 2;
    b.header.chunk_id = Id(id);
    b.header.meta_size = 0;
    b.header.data_size = size - 49;
    w.blobs.push_back(b);
  }
  w.end = end;
  w.end_offset = end_offset;
  return w;
}

IndexedChunk Entry(uint8_t id, uint32_t off, uint32_t size) { return {Id(id), {Id(0xee), off, size}, 0}; }

TEST_CASE("borghash: cross-check of index entries against a pack walk", "[borghash]") {
  SECTION("every entry matched") {
    std::vector<IndexedChunk> e = {Entry(1, 0, 100), Entry(2, 100, 60)};
    PackWalk w = Walk({{0, 1, 100}, {100, 2, 60}}, WalkEnd::kClean, 160);
    PackCrossCheck c = CrossCheckPack(e, w);
    CHECK(c.matched.size() == 2);
    CHECK(c.unmatched.empty());
    CHECK(c.orphans.empty());
  }
  SECTION("an unindexed blob is an orphan") {
    std::vector<IndexedChunk> e = {Entry(1, 0, 100)};
    PackWalk w = Walk({{0, 1, 100}, {100, 2, 60}});  // results point into the walk: keep it alive
    PackCrossCheck c = CrossCheckPack(e, w);
    REQUIRE(c.orphans.size() == 1);
    CHECK(c.orphans[0]->header.chunk_id == Id(2));
  }
  SECTION("the indexed offset holds another chunk") {
    std::vector<IndexedChunk> e = {Entry(1, 100, 60)};
    PackWalk w = Walk({{0, 1, 100}, {100, 2, 60}});
    PackCrossCheck c = CrossCheckPack(e, w);
    REQUIRE(c.unmatched.size() == 1);
    CHECK(c.unmatched[0].why == "the object at the indexed offset is chunk " + ToHex(Bytes(Id(2).data(), 32)));
    REQUIRE(c.orphans.size() == 1);  // the claimed blob is reported through the entry, not as an orphan
    CHECK(c.orphans[0]->offset == 0);
  }
  SECTION("sizes disagree") {
    PackCrossCheck c = CrossCheckPack({Entry(1, 0, 99)}, Walk({{0, 1, 100}}));
    REQUIRE(c.unmatched.size() == 1);
    CHECK(c.unmatched[0].why == "the index says the object is 99 bytes, its header says 100");
  }
  SECTION("an offset inside a blob") {
    PackCrossCheck c = CrossCheckPack({Entry(1, 50, 100)}, Walk({{0, 1, 100}}, WalkEnd::kClean, 100));
    REQUIRE(c.unmatched.size() == 1);
    CHECK(c.unmatched[0].why == "the indexed offset is not the start of an object in the pack");
  }
  SECTION("entries beyond where the walk stopped are left to the reads at their offsets") {
    PackCrossCheck c = CrossCheckPack({Entry(1, 0, 100), Entry(2, 100, 60), Entry(3, 160, 60)},
                                      Walk({{0, 1, 100}}, WalkEnd::kPastEof, 100));
    CHECK(c.matched.size() == 1);
    REQUIRE(c.unmatched.size() == 2);
    CHECK(c.unmatched[0].why.empty());
    CHECK(c.unmatched[1].why.empty());
  }
}

TEST_CASE("borghash: LoadChunkIndex reports fragments that do not match their names", "[borghash][B.8]") {
  std::string tmp = (fs::temp_directory_path() / "borghash-load-XXXXXX").string();
  REQUIRE(mkdtemp(tmp.data()));
  BorgstoreLayout l;
  auto add = [&](const std::string& name, const std::string& bytes) {
    std::string p = tmp + "/" + name;
    FILE* f = std::fopen(p.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
    l.index_fragments.push_back({name, p, bytes.size()});
  };
  std::string a = TEST_SerializeIndexFragment({{Id(1), {Id(9), 0, 100}}}, 2);
  std::string b = TEST_SerializeIndexFragment({{Id(2), {Id(9), 100, 50}}, {Id(1), {Id(8), 0, 100}}}, 4);
  ChunkId ha, hb;
  Sha256(AsBytes(a), ha.data());
  Sha256(AsBytes(b), hb.data());
  std::string name_a = ToHex(Bytes(ha.data(), 32)), name_b = ToHex(Bytes(hb.data(), 32));
  add(name_a, a);
  SECTION("intact") {
    LoadedChunkIndex idx = LoadChunkIndex(io::Env::Default(), l);
    CHECK(idx.findings.empty());
    CHECK(idx.size() == 1);
    CHECK(idx.EntriesOfPack(Id(9)).size() == 1);
    REQUIRE(idx.Find(Id(1)));
    CHECK(idx.Find(Id(1))->entry.size == 100);
    CHECK_FALSE(idx.Find(Id(2)));
  }
  SECTION("content changed: an error, the records are still cross-checked") {
    std::string damaged = b;
    damaged[damaged.size() - 1] ^= 1;
    add(name_b, damaged);
    LoadedChunkIndex idx = LoadChunkIndex(io::Env::Default(), l);
    CHECK(idx.fragments_bad == 1);
    REQUIRE(idx.findings.size() >= 1);
    const report::Finding& f = idx.findings[0];
    CHECK(f.severity == report::Severity::kError);
    CHECK(f.stage == report::Stage::kIndex);
    CHECK(f.location == "index/" + name_b);
    CHECK(f.message.rfind("is corrupted: content does not match its name (sha256); borg would rebuild", 0) == 0);
    CHECK(f.reread == report::Reread::kAgreed);  // the field, not the message, says it (review §3.3)
    CHECK(idx.size() == 2);
  }
  SECTION("two fragments place one chunk differently: a warning, the later name wins") {
    add(name_b, b);
    LoadedChunkIndex idx = LoadChunkIndex(io::Env::Default(), l);
    REQUIRE(idx.findings.size() == 1);
    CHECK(idx.findings[0].severity == report::Severity::kWarning);
    CHECK(idx.findings[0].chunk_id == Id(1));
    // Fragments are read in the order given (the layout sorts them by name): the later one wins.
    CHECK(idx.Find(Id(1))->entry.pack_id == Id(8));
    CHECK(idx.findings[0].location == "index/" + name_b);
  }
  SECTION("unparseable") {
    add(std::string(64, 'c'), "BORGHASH garbage");
    LoadedChunkIndex idx = LoadChunkIndex(io::Env::Default(), l);
    CHECK(idx.fragments_bad == 1);
    CHECK(idx.findings.size() == 2);  // name mismatch, and unreadable
  }
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace borgcheck::repo
