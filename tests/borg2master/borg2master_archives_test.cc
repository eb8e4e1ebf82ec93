// The archive pass on borg 2 master (repository version 4) through the whole run, in-process,
// on copies of fixtures/borg2master:
//   * every clean fixture: five archives walked, every reference resolves, nothing found;
//   * the bit-flip fixture: the bad chunk's finding names it in all five archives with its path
//     and byte range (and gives no advice: master's repair does not patch chunk lists);
//   * a pack removed together with its index entries, and an archive's pack removed: exactly the
//     uses the fixture's own plaintexts say are lost (decoded with the archive library, not
//     through the engine), each on one finding per chunk; the repository is not written.
#include <catch2/catch.hpp>

#include <compare>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "checker/archive/master_fixture_plaintexts.h"
#include "checker/archive/metadata_decode.h"
#include "checker/archive/item_stream.h"
#include "checker/io/env.h"
#include "checker/repo/borgstore/borgstore_index.h"
#include "checker/repo/borgstore/borgstore_layout.h"
#include "checker/report/exit_codes.h"
#include "tests/test_support.h"

namespace borgcheck::testing {
namespace {
namespace fs = std::filesystem;
using archive::ChunkId;
using report::Finding;
using report::Severity;
using report::Stage;

std::string Master() { return SharedDir() + "/fixtures/borg2master"; }
std::string Hex(const ChunkId& id) { return ToHex(Bytes(id.data(), id.size())); }

struct FixtureEnv {
  ScopedEnv env{{"BORG_PASSPHRASE", std::string("test")},
                {"BORG_PASSCOMMAND", std::nullopt},
                {"BORG_PASSPHRASE_FD", std::nullopt},
                {"BORG_KEY_FILE", std::nullopt},
                {"BORG_KEYS_DIR", Master() + "/keys"}};
};

// The ground truth of a fixture, from its plaintexts: per archive its name, item_ptrs, stream
// and every file chunk use.
struct Use {
  std::string archive, path;
  uint64_t begin = 0, end = 0;
  auto operator<=>(const Use&) const = default;
};
struct Truth {
  archive::testing::MasterPlaintexts p;
  std::map<ChunkId, std::string> name_of;            // archive id -> name
  std::map<ChunkId, std::vector<ChunkId>> ptrs_of;   // archive id -> item_ptrs ids
  std::map<ChunkId, std::vector<ChunkId>> stream_of; // archive id -> item-stream ids
  std::map<ChunkId, std::vector<std::pair<ChunkId, Use>>> uses_of;  // archive id -> (chunk, use)
};

const Truth& Load(const std::string& rel) {
  static std::map<std::string, Truth> cache;  // argon2 runs once per repository
  auto it = cache.find(rel);
  if (it != cache.end()) return it->second;
  Truth t;
  const std::string key_file = rel.find("keyfile") != std::string::npos ? Master() + "/keys/aes256-ocb_sha256_keyfile.key" : "";
  Result<archive::testing::MasterPlaintexts> r = archive::testing::LoadMasterPlaintexts(Master() + "/" + rel, key_file);
  INFO(rel << ": " << r.status().message());
  REQUIRE(r.ok());
  t.p = std::move(*r);
  const archive::ItemKeySet keys(archive::Generation::kBorg2Master);
  for (const ChunkId& aid : t.p.archives) {
    archive::ArchiveInfo info;
    std::string err;
    REQUIRE(archive::DecodeArchive(AsBytes(t.p.objects.at(aid)), archive::Generation::kBorg2Master, info, err));
    t.name_of[aid] = info.name;
    t.ptrs_of[aid] = info.item_ptrs;
    std::vector<ChunkId> stream;
    for (const ChunkId& ptr : info.item_ptrs) REQUIRE(archive::DecodeItemPtrs(AsBytes(t.p.objects.at(ptr)), stream, err));
    t.stream_of[aid] = stream;
    archive::StreamOptions o;
    o.item.generation = archive::Generation::kBorg2Master;
    o.item.item_keys = &keys;
    archive::ItemStreamDecoder d(o);
    struct Sink : archive::ItemSink {
      std::string name;
      std::vector<std::pair<ChunkId, Use>> uses;
      void OnItem(const archive::ItemRecord& item, const archive::ItemPlace&) override {
        const std::string path(reinterpret_cast<const char*>(item.path.data()), item.path.size());
        for (const archive::ChunkRef& c : item.chunks) uses.push_back({c.id, Use{name, path, c.offset, c.offset + c.size}});
      }
      void OnIssue(const archive::StepIssue& i) override { FAIL("issue: " << i.reason); }
    } sink;
    sink.name = info.name;
    for (const ChunkId& id : stream) d.Feed(AsBytes(t.p.objects.at(id)), sink);
    t.uses_of[aid] = std::move(sink.uses);
  }
  return cache.emplace(rel, std::move(t)).first->second;
}

std::set<std::tuple<std::string, Use>> UsesIn(const run::CheckOutcome& o) {
  std::set<std::tuple<std::string, Use>> out;
  for (const Finding& f : o.findings) {
    if (!f.affected) continue;
    for (const report::AffectedUse& u : f.affected->uses) {
      if (u.use == "chunks") out.insert({report::ChunkIdHex(*f.chunk_id), Use{u.archive, *u.path, *u.begin, *u.end}});
    }
  }
  return out;
}

std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> Snapshot(const std::string& root) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> s;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    s[e.path().string()] = {e.is_regular_file() ? e.file_size() : 0, e.last_write_time()};
  }
  return s;
}

// Removes pack `pack_hex` and every index record of it (fragments rewritten under their new
// SHA-256 names, so that nothing else looks damaged): its objects are gone from the repository.
void RemovePackAndEntries(const std::string& repo, const std::string& pack_hex) {
  fs::remove(repo + "/packs/" + pack_hex.substr(0, 2) + "/" + pack_hex);
  Result<repo::BorgstoreLayout> l = repo::ReadBorgstoreLayout(io::Env::Default(), repo, {});
  REQUIRE(l.ok());
  for (const repo::StoreItem& item : l->index_fragments) {
    Result<std::string> bytes = io::Env::Default().ReadWholeFile(item.path, 1ull << 30);
    REQUIRE(bytes.ok());
    Result<repo::IndexFragment> frag = repo::ParseIndexFragment(AsBytes(*bytes));
    REQUIRE(frag.ok());
    std::vector<repo::IndexRecord> kept;
    for (const repo::IndexRecord& r : frag->records) {
      if (Hex(r.entry.pack_id) != pack_hex) kept.push_back(r);
    }
    if (kept.size() == frag->records.size()) continue;
    const std::string out = repo::TEST_SerializeIndexFragment(kept, frag->capacity);
    ChunkId d;
    repo::Sha256(AsBytes(out), d.data());
    fs::remove(item.path);
    std::ofstream(repo + "/index/" + Hex(d), std::ios::binary) << out;
  }
}

const std::vector<std::string> kClean = {
    "repos/aes256-ocb_sha256_repokey", "repos/chacha20-poly1305_sha256_repokey", "repos/aes256-ocb_blake3_repokey",
    "repos/aes256-ocb_sha256_keyfile", "repos/authenticated-sha256", "repos/none-sha256",
    "repos/chacha20-poly1305_blake3_repokey", "repos/authenticated-blake3", "repos/none-blake3"};

TEST_CASE("master archives: every clean fixture's five archives are walked and every reference resolves",
          "[borg2master][archives]") {
  FixtureEnv env;
  for (const std::string& rel : kClean) {
    INFO(rel);
    run::CheckOutcome o = Check(Master() + "/" + rel, true);
    REQUIRE(o.status.ok());
    CHECK(o.findings.empty());
    CHECK(o.summary.archives_total == 5u);
    CHECK(o.summary.archives_checked == 5u);
    CHECK(o.summary.objects_verified == 73);
  }
}

TEST_CASE("master archives: the bit-flip fixture's bad chunk is named in all five archives", "[borg2master][archives]") {
  FixtureEnv env;
  run::CheckOutcome o = Check(Master() + "/corrupt/aes256-ocb_sha256_repokey__bitflip", true);
  REQUIRE(o.status.ok());
  const std::string bad = "3dae7f7548fbac67caf1bc6d3214f147f0552fb79d3a4c3e9f032ba18546290d";
  CHECK(ErrorChunkIds(o) == std::set<std::string>{bad});
  const Finding* f = nullptr;
  for (const Finding& x : o.findings) {
    if (x.chunk_id && report::ChunkIdHex(*x.chunk_id) == bad) f = &x;
  }
  REQUIRE(f);
  CHECK(f->stage == Stage::kAuthentication);
  REQUIRE(f->affected);
  CHECK(f->affected->total == 5);
  std::vector<std::string> archives;
  for (const report::AffectedUse& u : f->affected->uses) {
    archives.push_back(u.archive);
    CHECK(u.use == "chunks");
    CHECK(u.path == "data/random/rand-64KiB.bin");
    CHECK(u.begin == 0u);
    CHECK(u.end == 65536u);
  }
  CHECK(archives == std::vector<std::string>{"lz4", "zstd-3", "zlib-6", "lzma-6", "none"});  // by time
  CHECK(f->advice.empty());  // master's check --repair does not patch chunk lists
  // The other finding is the pack's hash, which is no chunk an archive could use.
  for (const Finding& x : o.findings) {
    if (&x != f) CHECK(!x.affected);
  }
}

TEST_CASE("master archives: a pack removed with its index entries loses exactly the uses its objects had",
          "[borg2master][archives]") {
  FixtureEnv env;
  const Truth& t = Load("repos/none-sha256");
  // The pack of one data chunk of "none", and the pack of lzma-6's item_ptrs.
  ChunkId lzma{}, none{};
  for (auto& [aid, name] : t.name_of) {
    if (name == "lzma-6") lzma = aid;
    if (name == "none") none = aid;
  }
  const ChunkId data = t.uses_of.at(none).front().first;
  for (const std::string& pack : {t.p.pack_of.at(data), t.p.pack_of.at(t.ptrs_of.at(lzma).at(0))}) {
    DYNAMIC_SECTION("pack " << pack) {
      RepoCopy copy(Master() + "/repos/none-sha256");
      RemovePackAndEntries(copy.path(), pack);
      std::set<ChunkId> gone;
      for (auto& [id, pk] : t.p.pack_of) {
        if (pk == pack) gone.insert(id);
      }
      // What is lost: the file uses of gone chunks in archives whose metadata is intact; the
      // metadata uses of gone metadata.
      std::set<std::tuple<std::string, Use>> want;
      std::map<std::string, std::vector<std::string>> meta_want;  // chunk -> "archive:use"
      for (auto& [aid, name] : t.name_of) {
        if (gone.count(aid)) {
          meta_want[Hex(aid)].push_back(name + ":archive");
          continue;
        }
        bool stream_lost = false;
        for (const ChunkId& ptr : t.ptrs_of.at(aid)) {
          if (gone.count(ptr)) {
            meta_want[Hex(ptr)].push_back(name + ":item_ptrs");
            stream_lost = true;
          }
        }
        for (const ChunkId& s : t.stream_of.at(aid)) {
          if (gone.count(s) && !stream_lost) {
            meta_want[Hex(s)].push_back(name + ":items");
            stream_lost = true;
          }
        }
        if (stream_lost) continue;
        for (auto& [chunk, use] : t.uses_of.at(aid)) {
          if (gone.count(chunk)) want.insert({Hex(chunk), use});
        }
      }
      REQUIRE((!want.empty() || !meta_want.empty()));
      const auto before = Snapshot(copy.path());
      run::CheckOutcome o = Check(copy.path(), true);
      REQUIRE(o.status.ok());
      CHECK(Snapshot(copy.path()) == before);
      CHECK(UsesIn(o) == want);
      std::map<std::string, std::vector<std::string>> meta_got;
      std::map<std::string, int> findings_per_chunk;
      for (const Finding& f : o.findings) {
        if (!f.affected || f.affected->uses.empty()) continue;
        const std::string id = report::ChunkIdHex(*f.chunk_id);
        ++findings_per_chunk[id];
        CHECK(f.severity == Severity::kError);
        CHECK(f.stage == Stage::kReference);  // the repository no longer has them at all
        CHECK(f.advice.empty());
        for (const report::AffectedUse& u : f.affected->uses) {
          if (u.use != "chunks") meta_got[id].push_back(u.archive + ":" + u.use);
        }
      }
      CHECK(meta_got == meta_want);
      for (auto& [id, n] : findings_per_chunk) CHECK(n == 1);  // one finding per chunk id
      CHECK(o.summary.archives_checked == 5u);
      CHECK(report::ExitCodeForSummary(o.summary) == report::kExitIntegrityErrors);  // exit 90
    }
  }
}

TEST_CASE("master archives: an archive whose archive object is gone is named by its id", "[borg2master][archives]") {
  FixtureEnv env;
  const Truth& t = Load("repos/none-sha256");
  ChunkId zstd{};
  for (auto& [aid, name] : t.name_of) {
    if (name == "zstd-3") zstd = aid;
  }
  RepoCopy copy(Master() + "/repos/none-sha256");
  RemovePackAndEntries(copy.path(), t.p.pack_of.at(zstd));
  // The archives/ entry stays: the archive is listed, and its object is nowhere.
  run::CheckOutcome o = Check(copy.path(), true);
  REQUIRE(o.status.ok());
  const Finding* f = nullptr;
  for (const Finding& x : o.findings) {
    if (x.chunk_id && *x.chunk_id == zstd && x.affected) f = &x;
  }
  REQUIRE(f);
  // The source's own finding for the archives/ entry carries the use.
  CHECK(f->location == "archives/" + Hex(zstd));
  CHECK(f->stage == Stage::kMissing);
  REQUIRE(f->affected->uses.size() == 1);
  CHECK(f->affected->uses[0].archive.empty());  // master names an archive in its object only
  CHECK(f->affected->uses[0].archive_id == zstd);
  CHECK(f->affected->uses[0].use == "archive");
  CHECK(f->advice == "borg check --repair deletes this archive (soft-deletes its archives/ entry)");
  CHECK(o.summary.archives_checked == 5u);
  CHECK(report::ExitCodeForSummary(o.summary) == report::kExitIntegrityErrors);
}

}  // namespace
}  // namespace borgcheck::testing
