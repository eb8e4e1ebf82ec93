// The archive decoders and the walker on the borg 2 master fixtures (repository version 4,
// ../shared/fixtures/borg2master): every clean repository's five archives decode to the data
// set's listing and every reference resolves; the bit-flip fixture's bad chunk is named in
// every archive with its path and byte range; removed objects (an archive object, the pack
// holding an archive's item_ptrs, the big data pack) give exactly the expected findings.
// Plaintexts come from master_fixture_plaintexts.h (the one use of repository code).
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "checker/archive/archive_walker.h"
#include "checker/archive/item_stream.h"
#include "checker/archive/master_fixture_plaintexts.h"
#include "checker/archive/metadata_decode.h"

namespace borgcheck::archive {
namespace {

namespace fs = std::filesystem;

std::string Master() { return std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg2master"; }
std::string Hex(const ChunkId& id) { return ToHex(Bytes(id.data(), id.size())); }

const testing::MasterPlaintexts& Load(const std::string& rel) {
  static std::map<std::string, testing::MasterPlaintexts> cache;  // argon2 runs once per repo
  auto it = cache.find(rel);
  if (it == cache.end()) {
    const std::string key_file =
        rel.find("keyfile") != std::string::npos ? Master() + "/keys/aes256-ocb_sha256_keyfile.key" : "";
    Result<testing::MasterPlaintexts> r = testing::LoadMasterPlaintexts(Master() + "/" + rel, key_file);
    INFO(rel << ": " << r.status().message());
    REQUIRE(r.ok());
    it = cache.emplace(rel, std::move(*r)).first;
  }
  return it->second;
}

// The fixture objects as the walker's fetcher and chunk table; `gone` are absent, `bad` fail.
class FixtureRepo : public ObjectFetcher, public ReferenceTable {
 public:
  FixtureRepo(const testing::MasterPlaintexts& p, std::set<ChunkId> gone) : p_(p), gone_(std::move(gone)) {
    bad_.insert(p.failed.begin(), p.failed.end());
  }
  FetchStatus Fetch(const ChunkId& id, ObjectKind, ByteBuffer& out, FetchProblem& problem) override {
    if (gone_.count(id)) return FetchStatus::kMissing;
    if (bad_.count(id)) {
      problem.stage = report::Stage::kAuthentication;
      problem.message = "did not verify";
      return FetchStatus::kDamaged;
    }
    auto it = p_.objects.find(id);
    if (it == p_.objects.end()) return FetchStatus::kMissing;
    out.Assign(AsBytes(it->second));
    return FetchStatus::kOk;
  }
  RefState Reference(const ChunkId& id) override {
    marked_.insert(id);
    if (gone_.count(id) || (!p_.objects.count(id) && !bad_.count(id))) return RefState::kMissing;
    return bad_.count(id) ? RefState::kBad : RefState::kPresent;
  }
  size_t Orphans() const {
    size_t n = 0;
    for (auto& [id, body] : p_.objects) {
      if (id != ChunkId{} && !gone_.count(id) && !marked_.count(id)) ++n;
    }
    return n;
  }

 private:
  const testing::MasterPlaintexts& p_;
  std::set<ChunkId> gone_;
  std::set<ChunkId> bad_;
  std::set<ChunkId> marked_;
};

struct Entry {
  std::string type;  // "d", "f", "l" as in dataset/LISTING
  uint64_t size = 0;
  std::vector<ChunkRef> chunks;
};

// An archive's items by path, decoded straight from the plaintexts (no walker).
std::map<std::string, Entry> Items(const testing::MasterPlaintexts& p, const ChunkId& archive, std::string* name) {
  ArchiveInfo info;
  std::string err;
  REQUIRE(DecodeArchive(AsBytes(p.objects.at(archive)), Generation::kBorg2Master, info, err));
  *name = info.name;
  std::vector<ChunkId> stream;
  for (const ChunkId& ptr : info.item_ptrs) REQUIRE(DecodeItemPtrs(AsBytes(p.objects.at(ptr)), stream, err));
  const ItemKeySet keys(Generation::kBorg2Master);
  StreamOptions o;
  o.item.generation = Generation::kBorg2Master;
  o.item.item_keys = &keys;
  ItemStreamDecoder d(o);
  struct Sink : ItemSink {
    std::map<std::string, Entry> items;
    void OnItem(const ItemRecord& item, const ItemPlace&) override {
      Entry e;
      e.type = item.type == ItemType::kDirectory ? "d" : item.type == ItemType::kSymlink ? "l" : "f";
      e.size = item.ChunksSize();
      e.chunks = item.chunks;
      items[std::string(reinterpret_cast<const char*>(item.path.data()), item.path.size())] = e;
    }
    void OnIssue(const StepIssue& i) override { FAIL("issue: " << i.reason); }
  } sink;
  for (const ChunkId& id : stream) d.Feed(AsBytes(p.objects.at(id)), sink);
  CHECK_FALSE(d.EndsInsideItem());
  return sink.items;
}

// dataset/LISTING: "<type> <size> <path>" (a symlink's path is followed by its target).
std::map<std::string, std::pair<std::string, uint64_t>> Listing() {
  std::ifstream f(Master() + "/dataset/LISTING");
  std::map<std::string, std::pair<std::string, uint64_t>> out;
  std::string type, path;
  uint64_t size;
  while (f >> type >> size >> path) {
    if (type == "l") path = path.substr(0, path.find(".."));
    out[path] = {type, size};
  }
  return out;
}

const std::vector<std::string> kRepos = {
    "repos/aes256-ocb_sha256_repokey", "repos/chacha20-poly1305_sha256_repokey", "repos/aes256-ocb_blake3_repokey",
    "repos/aes256-ocb_sha256_keyfile", "repos/authenticated-sha256", "repos/none-sha256",
    "repos/chacha20-poly1305_blake3_repokey", "repos/authenticated-blake3", "repos/none-blake3"};

TEST_CASE("master fixtures: five archives decode to the data set and every reference resolves") {
  const auto listing = Listing();
  for (const std::string& rel : kRepos) {
    INFO(rel);
    const testing::MasterPlaintexts& p = Load(rel);
    REQUIRE(p.failed.empty());
    CHECK(p.objects.size() == 74);  // 73 chunks and the manifest
    ManifestInfo m;
    std::string err;
    REQUIRE(DecodeManifest(AsBytes(p.objects.at(ChunkId{})), Generation::kBorg2Master, m, err));
    CHECK(m.version == 2);
    CHECK(m.archives.empty());
    CHECK_FALSE(m.has_tam);
    REQUIRE(p.archives.size() == 5);

    FixtureRepo repo(p, {});
    WalkOptions wo;
    wo.generation = Generation::kBorg2Master;
    wo.item_keys = ItemKeysFor(Generation::kBorg2Master, m);
    ArchiveWalker w(repo, repo, wo);
    std::set<std::string> names;
    for (uint32_t i = 0; i < p.archives.size(); ++i) {
      const ArchiveResult r = w.WalkArchive(i, {"", p.archives[i], ""});
      names.insert(r.name);
      CHECK(r.failure == ArchiveFailure::kNone);
      CHECK(r.problems.empty());
      CHECK(r.bad_refs.empty());
      CHECK(r.item_ptrs == 1);
      std::string name;
      const std::map<std::string, Entry> items = Items(p, p.archives[i], &name);
      CHECK(name == r.name);
      CHECK(r.items == items.size());
      // The archive holds data/ and extra/<its name>/ of the data set, nothing else.
      std::map<std::string, std::pair<std::string, uint64_t>> want;
      for (auto& [path, ts] : listing) {
        if (path.rfind("data", 0) == 0 || path.rfind("extra/" + r.name, 0) == 0) want[path] = ts;
      }
      std::map<std::string, std::pair<std::string, uint64_t>> got;
      for (auto& [path, e] : items) {
        const auto l = listing.find(path);
        got[path] = {e.type, e.type == "f" ? e.size : (l != listing.end() ? l->second.second : 0)};
      }
      CHECK(got == want);
    }
    CHECK(names == std::set<std::string>{"lz4", "zstd-3", "zlib-6", "lzma-6", "none"});
    CHECK(repo.Orphans() == 0);
  }
}

TEST_CASE("master bit-flip fixture: the bad chunk is named in every archive with its path and range") {
  const testing::MasterPlaintexts& p = Load("corrupt/aes256-ocb_sha256_repokey__bitflip");
  ChunkId bad;
  std::string bin;
  REQUIRE(FromHex("3dae7f7548fbac67caf1bc6d3214f147f0552fb79d3a4c3e9f032ba18546290d", bin));
  std::memcpy(bad.data(), bin.data(), 32);
  REQUIRE(p.failed == std::vector<ChunkId>{bad});
  FixtureRepo repo(p, {});
  WalkOptions wo;
  wo.generation = Generation::kBorg2Master;
  ArchiveWalker w(repo, repo, wo);
  AffectedIndex affected(100);
  for (uint32_t i = 0; i < p.archives.size(); ++i) {
    const ArchiveResult r = w.WalkArchive(i, {"", p.archives[i], ""});
    REQUIRE(r.bad_refs.size() == 1);
    CHECK(r.bad_refs[0].chunk == bad);
    CHECK(r.bad_refs[0].state == RefState::kBad);
    CHECK(r.bad_refs[0].path == "data/random/rand-64KiB.bin");
    CHECK(r.bad_refs[0].begin == 0);
    CHECK(r.bad_refs[0].end == 65536);
    affected.Add(r);
  }
  REQUIRE(affected.by_chunk().size() == 1);
  CHECK(affected.by_chunk().at(bad).total == 5);
  CHECK(repo.Orphans() == 0);
}

TEST_CASE("master: a removed archive object, item_ptrs pack or data pack gives exactly the expected findings") {
  const testing::MasterPlaintexts& p = Load("repos/none-sha256");
  std::map<std::string, ChunkId> by_name;
  std::map<std::string, std::map<std::string, Entry>> items;
  std::map<std::string, ChunkId> ptrs_of;
  for (const ChunkId& id : p.archives) {
    std::string name;
    auto it = Items(p, id, &name);
    by_name[name] = id;
    items[name] = std::move(it);
    ArchiveInfo info;
    std::string err;
    REQUIRE(DecodeArchive(AsBytes(p.objects.at(id)), Generation::kBorg2Master, info, err));
    ptrs_of[name] = info.item_ptrs.at(0);
  }
  auto walk = [&](std::set<ChunkId> gone, std::map<std::string, ArchiveResult>& out) {
    FixtureRepo repo(p, std::move(gone));
    WalkOptions wo;
    wo.generation = Generation::kBorg2Master;
    ArchiveWalker w(repo, repo, wo);
    for (uint32_t i = 0; i < p.archives.size(); ++i) {
      ArchiveResult r = w.WalkArchive(i, {"", p.archives[i], ""});
      std::string name = r.name;
      if (r.failure != ArchiveFailure::kNone) {
        for (auto& [n, id] : by_name) {
          if (id == p.archives[i]) name = n;
        }
      }
      out[name] = std::move(r);
    }
    return repo.Orphans();
  };

  SECTION("the archive object of zstd-3") {
    std::map<std::string, ArchiveResult> r;
    const size_t orphans = walk({by_name["zstd-3"]}, r);
    CHECK(r["zstd-3"].failure == ArchiveFailure::kObjectMissing);
    CHECK(r["zstd-3"].message == "Archive metadata block " + Hex(by_name["zstd-3"]) + " is missing!");
    for (auto& [n, res] : r) {
      if (n != "zstd-3") CHECK(res.failure == ArchiveFailure::kNone);
    }
    // What only zstd-3 referenced: its item stream and item_ptrs objects and extra/zstd-3's chunks.
    std::set<ChunkId> only;
    for (auto& [path, e] : items["zstd-3"]) {
      if (path.rfind("extra/zstd-3", 0) == 0) {
        for (auto& c : e.chunks) only.insert(c.id);
      }
    }
    CHECK(orphans == only.size() + 2);
  }

  SECTION("the pack that holds lzma-6's item stream and item_ptrs") {
    const std::string pack = p.pack_of.at(ptrs_of["lzma-6"]);
    std::set<ChunkId> gone;
    for (auto& [id, pk] : p.pack_of) {
      if (pk == pack) gone.insert(id);
    }
    std::map<std::string, ArchiveResult> r;
    walk(gone, r);
    const ArchiveResult& a = r["lzma-6"];
    REQUIRE(a.problems.size() == 1);
    CHECK(a.problems[0].kind == StreamProblemKind::kItemPtrsMissing);
    CHECK(a.problems[0].chunk == ptrs_of["lzma-6"]);
    CHECK(a.items == 0);
    CHECK(a.bad_refs.empty());  // its file list is unknown, so are its references
    for (auto& [n, res] : r) {
      if (n != "lzma-6") CHECK((res.problems.empty() && res.bad_refs.empty()));
    }
  }

  SECTION("the big data pack of the first archive") {
    const ChunkId some_data = items["none"].at("data/random/rand-64KiB.bin").chunks.at(0).id;
    const std::string pack = p.pack_of.at(some_data);
    std::set<ChunkId> gone;
    for (auto& [id, pk] : p.pack_of) {
      if (pk == pack) gone.insert(id);
    }
    std::map<std::string, ArchiveResult> r;
    walk(gone, r);
    for (auto& [name, res] : r) {
      INFO(name);
      const bool stream_lost = gone.count(ptrs_of[name]) > 0;
      std::set<std::tuple<std::string, uint64_t, uint64_t, ChunkId>> want, got;
      if (!stream_lost) {
        for (auto& [path, e] : items[name]) {
          for (auto& c : e.chunks) {
            if (gone.count(c.id)) want.insert({path, c.offset, c.offset + c.size, c.id});
          }
        }
      }
      for (const BadReference& b : res.bad_refs) got.insert({b.path, b.begin, b.end, b.chunk});
      CHECK(got == want);
      if (stream_lost) {
        REQUIRE_FALSE(res.problems.empty());
        CHECK(res.problems[0].kind == StreamProblemKind::kItemPtrsMissing);
      } else {
        CHECK_FALSE(want.empty());
      }
    }
  }
}

}  // namespace
}  // namespace borgcheck::archive
