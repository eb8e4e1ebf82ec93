// borgstore layout, blob headers and pack walks (spec borg2-format.md §B.1, §B.4): the real
// fixture repositories of borg master first, then one small case per kind of damage.
#include "checker/repo/borg2/borg2_repo_obj.h"
#include "checker/repo/borgstore/borgstore_layout.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <msgpack.hpp>

#include "checker/repo/borgstore/borgstore_index.h"
#include "checker/io/env.h"
#include "checker/io/fault_env.h"

namespace borgcheck::repo {
namespace {
namespace fs = std::filesystem;

std::string Fixtures() { return std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg2master"; }
std::string Repo(const std::string& name) { return Fixtures() + "/repos/" + name; }

std::string ReadFile(const std::string& path) {
  Result<std::string> r = io::Env::Default().ReadWholeFile(path, 1ull << 30);
  REQUIRE(r.ok());
  return *r;
}

const char* const kRepos[] = {"aes256-ocb_sha256_repokey", "chacha20-poly1305_sha256_repokey", "aes256-ocb_blake3_repokey",
                              "aes256-ocb_sha256_keyfile", "authenticated-sha256",             "none-sha256",
                              "chacha20-poly1305_blake3_repokey", "authenticated-blake3",     "none-blake3"};

// A blob with the given fields and envelope bytes.
std::string MakeBlob(uint8_t version, uint8_t id_byte, const std::string& meta, const std::string& data) {
  std::string b(kObjMagic);
  b.push_back(char(version));
  b.append(32, char(id_byte));
  uint8_t u32[4];
  StoreLE32(u32, uint32_t(meta.size()));
  b.append(reinterpret_cast<char*>(u32), 4);
  StoreLE32(u32, uint32_t(data.size()));
  b.append(reinterpret_cast<char*>(u32), 4);
  return b + meta + data;
}

TEST_CASE("borgstore: the layout of every fixture repository", "[borgstore]") {
  for (const char* name : kRepos) {
    INFO(name);
    Result<BorgstoreLayout> l = ReadBorgstoreLayout(io::Env::Default(), Repo(name), {});
    REQUIRE(l.ok());
    CHECK(l->id_hex.size() == 64);
    CHECK(l->packs.size() == 10);
    CHECK(l->index_fragments.size() == 6);
    CHECK(l->archives.size() == 5);
    CHECK(l->deleted_archives == 0);
    CHECK(l->manifest_present);
    CHECK_FALSE(l->chunkindex_invalid);
    CHECK(l->findings.empty());
    CHECK(l->notes.empty());  // borg's readme text, no locks
    bool repokey = std::string(name).find("repokey") != std::string::npos || std::string(name).rfind("authenticated", 0) == 0;
    CHECK(l->keys.size() == (repokey ? 1u : 0u));
    for (const PackFile& p : l->packs) {
      ChunkId digest;
      Sha256(AsBytes(ReadFile(p.path)), digest.data());
      CHECK(digest == p.id);  // packs are named by the SHA-256 of their content
    }
  }
}

TEST_CASE("borgstore: every pack walks cleanly, blob by blob, and holds exactly the indexed objects", "[borgstore][B.8]") {
  for (const char* name : kRepos) {
    INFO(name);
    Result<BorgstoreLayout> l = ReadBorgstoreLayout(io::Env::Default(), Repo(name), {});
    REQUIRE(l.ok());
    LoadedChunkIndex idx = LoadChunkIndex(io::Env::Default(), *l);
    CHECK(idx.findings.empty());
    CHECK(idx.size() == 73);  // B.8 item 10: 73 index entries = borg's "verified 73 chunks"
    size_t blobs = 0;
    for (const PackFile& p : l->packs) {
      std::string content = ReadFile(p.path);
      PackWalk w = WalkPack(AsBytes(content));
      CHECK(w.end == WalkEnd::kClean);
      CHECK(w.end_offset == content.size());
      blobs += w.blobs.size();
      for (const WalkedBlob& b : w.blobs) {
        CHECK(b.header.version == kObjVersionMaster);  // B.8 item 4: master writes version 2 everywhere
        CHECK_FALSE(CheckBlobStructure(AsBytes(content).subspan(b.offset, b.header.blob_size()), nullptr));
      }
      // B.8 item 12: no gap objects: every blob is indexed at its place.
      std::vector<IndexedChunk> entries = idx.EntriesOfPack(p.id);
      REQUIRE_FALSE(entries.empty());
      PackCrossCheck cc = CrossCheckPack(entries, w);
      CHECK(cc.matched.size() == w.blobs.size());
      CHECK(cc.unmatched.empty());
      CHECK(cc.orphans.empty());
    }
    CHECK(blobs == 73);
    // B.8 item 1: the manifest is a version-2 blob with chunk id 00*32, outside the packs.
    std::string m = ReadFile(l->manifest_path);
    BlobHeader h;
    CHECK_FALSE(CheckBlobStructure(AsBytes(m), &h));
    CHECK(h.version == kObjVersionMaster);
    CHECK(h.chunk_id == ChunkId{});
  }
}

TEST_CASE("borgstore: blob structure errors use borg's words", "[borgstore]") {
  std::string good = MakeBlob(2, 0xab, "meta", "data!");
  BlobHeader h;
  CHECK_FALSE(CheckBlobStructure(AsBytes(good), &h));
  CHECK(h.meta_size == 4);
  CHECK(h.data_size == 5);
  CHECK(h.blob_size() == good.size());
  CHECK(CheckBlobStructure(AsBytes(good).first(10), nullptr)->message == "object too small: expected at least 49 header bytes, got 10");
  CHECK(CheckBlobStructure(Bytes(), nullptr)->message == "object too small: expected at least 49 header bytes, got 0");
  CHECK(CheckBlobStructure(AsBytes(good).first(good.size() - 3), nullptr)->message ==
        "object size inconsistent: expected 58 bytes, got 55");
  std::string bad = good;
  bad[0] = 'X';
  CHECK(CheckBlobStructure(AsBytes(bad), nullptr)->message == "invalid object magic");
  bad = good;
  bad[8] = 3;
  CHECK(CheckBlobStructure(AsBytes(bad), nullptr)->message == "unsupported object version: 3");
  CHECK_FALSE(CheckBlobStructure(AsBytes(MakeBlob(1, 1, "", "")), nullptr));  // version 1 is read too
}

TEST_CASE("borgstore: the AAD binds header and slot for version 2 only", "[borgstore]") {
  std::string v2 = MakeBlob(2, 0x11, "m", "d");
  uint8_t aad[42];
  REQUIRE(BuildObjectAad(AsBytes(v2), kSlotMeta, aad) == 42);
  CHECK(std::memcmp(aad, v2.data(), 41) == 0);
  CHECK(aad[41] == 'M');
  REQUIRE(BuildObjectAad(AsBytes(v2), kSlotData, aad) == 42);
  CHECK(aad[41] == 'D');
  CHECK(BuildObjectAad(AsBytes(MakeBlob(1, 0x11, "m", "d")), kSlotMeta, aad) == 0);
}

TEST_CASE("borgstore: pack walk damage", "[borgstore]") {
  std::string a = MakeBlob(2, 1, "mm", "ddd"), b = MakeBlob(2, 2, "m", "dddd");
  std::string pack = a + b;
  SECTION("clean") {
    PackWalk w = WalkPack(AsBytes(pack));
    CHECK(w.end == WalkEnd::kClean);
    REQUIRE(w.blobs.size() == 2);
    CHECK(w.blobs[1].offset == a.size());
    CHECK(w.blobs[1].header.chunk_id[0] == 2);
  }
  SECTION("empty pack is clean") { CHECK(WalkPack(Bytes()).end == WalkEnd::kClean); }
  SECTION("trailing bytes") {
    std::string p = pack + "xyz";
    PackWalk w = WalkPack(AsBytes(p));
    CHECK(w.end == WalkEnd::kTrailingBytes);
    CHECK(w.end_offset == pack.size());
    CHECK(w.blobs.size() == 2);
  }
  SECTION("a damaged magic stops the walk") {
    std::string p = pack;
    p[a.size() + 3] ^= 1;
    PackWalk w = WalkPack(AsBytes(p));
    CHECK(w.end == WalkEnd::kNoHeader);
    CHECK(w.end_offset == a.size());
    CHECK(w.blobs.size() == 1);
    CHECK(w.message.rfind("no object header at offset 54", 0) == 0);
  }
  SECTION("truncation inside the last blob") {
    PackWalk w = WalkPack(AsBytes(pack).first(pack.size() - 1));
    CHECK(w.end == WalkEnd::kPastEof);
    CHECK(w.end_offset == a.size());
    REQUIRE(w.broken_header);
    CHECK(w.broken_header->chunk_id[0] == 2);
  }
  SECTION("a forged huge size is past EOF, not an allocation") {
    std::string p = pack;
    StoreLE32(reinterpret_cast<uint8_t*>(p.data()) + 45, 0xffffffffu);
    PackWalk w = WalkPack(AsBytes(p));
    CHECK(w.end == WalkEnd::kPastEof);
    CHECK(w.end_offset == 0);
  }
}

TEST_CASE("borgstore: meta maps", "[borgstore]") {
  auto pack = [](auto fill) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    fill(pk);
    return std::string(buf.data(), buf.size());
  };
  std::string m = pack([](auto& pk) {
    pk.pack_map(6);
    pk.pack(std::string("type")); pk.pack(std::string("F"));
    pk.pack(std::string("size")); pk.pack(100);
    pk.pack(std::string("ctype")); pk.pack(1);
    pk.pack(std::string("clevel")); pk.pack(255);
    pk.pack(std::string("csize")); pk.pack(40);
    pk.pack(std::string("future")); pk.pack(std::string("ignored"));
  });
  // Version 4 meta maps go through the parser b5 uses (repo/borg2/borg2_repo_obj.h).
  std::string why;
  ObjMeta meta;
  REQUIRE(ParseObjMeta(AsBytes(m), meta, &why));
  CHECK(meta.type == std::optional<std::string>("F"));
  CHECK(meta.size == std::optional<uint64_t>(100));
  CHECK(meta.ctype == 1);
  CHECK(meta.csize == 40);
  CHECK_FALSE(meta.psize);
  CHECK_FALSE(ParseObjMeta(AsBytes(std::string("\x93\x01\x02\x03")), meta, &why));
  CHECK(why == "object metadata: not a msgpack map");
  CHECK_FALSE(ParseObjMeta(AsBytes(m + "x"), meta, &why));
  std::string neg = pack([](auto& pk) {
    pk.pack_map(3);
    pk.pack(std::string("ctype")); pk.pack(0);
    pk.pack(std::string("clevel")); pk.pack(0);
    pk.pack(std::string("csize")); pk.pack(-1);
  });
  CHECK_FALSE(ParseObjMeta(AsBytes(neg), meta, &why));
  CHECK(why == "object metadata: `csize` is not a non-negative integer");
}

TEST_CASE("borgstore: layout problems are findings, live locks refuse", "[borgstore][B.8]") {
  std::string tmp = (fs::temp_directory_path() / "borgstore-layout-XXXXXX").string();
  REQUIRE(mkdtemp(tmp.data()));
  fs::copy(Repo("none-blake3"), tmp + "/r", fs::copy_options::recursive);
  std::string r = tmp + "/r";
  for (const auto& e : fs::recursive_directory_iterator(r)) fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  fs::permissions(r, fs::perms::owner_write, fs::perm_options::add);
  auto write = [&](const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(r + "/" + rel).parent_path());
    std::ofstream(r + "/" + rel) << text;
  };
  SECTION("odd names") {
    write("packs/ab/notapack", "x");
    write("packs/ab/cd" + std::string(62, '0'), "x");  // right name, wrong directory
    write("packs/ab/x.tmp", "x");                       // borgstore temporary: skipped silently
    write("archives/" + std::string(64, 'a') + ".del", "");
    Result<BorgstoreLayout> l = ReadBorgstoreLayout(io::Env::Default(), r, {});
    REQUIRE(l.ok());
    CHECK(l->packs.size() == 10);
    CHECK(l->deleted_archives == 1);
    REQUIRE(l->findings.size() == 2);
    CHECK(l->findings[0].location == "packs/ab/cd" + std::string(62, '0'));
    CHECK(l->findings[1].location == "packs/ab/notapack");
  }
  SECTION("a listed entry whose size cannot be read stops the layout; one gone since the listing is left out") {
    // Regression: archives/, index/ and keys/ dropped an entry on any stat error, so an
    // archive that could not be stat'ed was never walked and nothing said so.
    const std::string archive = "archives/522d7daa9ff64b863352623e4e25a185ccf217c6097cdb0e27c90d4a2a4efc64";
    const std::string fragment = "index/02687a0c2a816516a239129cb3046130a294f9007343f72765dc63ea52df0d1c";
    Result<BorgstoreLayout> clean = ReadBorgstoreLayout(io::Env::Default(), r, {});
    REQUIRE(clean.ok());
    REQUIRE(clean->archives.size() == 5);
    REQUIRE(clean->index_fragments.size() == 6);
    for (const std::string& item : {archive, fragment}) {
      INFO(item);
      io::FaultEnv env;
      env.FailStat(item);
      Result<BorgstoreLayout> l = ReadBorgstoreLayout(env, r, {});
      CHECK(l.status().code() == StatusCode::kIoError);
      CHECK(l.status().message() == r + "/" + item + ": Input/output error");
    }
    io::FaultEnv gone;
    gone.FailStat(archive, StatusCode::kNotFound, "No such file or directory");
    Result<BorgstoreLayout> l = ReadBorgstoreLayout(gone, r, {});
    REQUIRE(l.ok());
    CHECK(l->archives.size() == 4);
  }
  // Lock owners are judged against this host's borg host id; BORG_HOST_ID sets it, as for borg.
  const char* saved_host_id = std::getenv("BORG_HOST_ID");
  const std::string restore_host_id = saved_host_id ? saved_host_id : "";
  setenv("BORG_HOST_ID", "here@2", 1);
  SECTION("B.8 item 7: a live exclusive lock refuses the run, a stale one is a warning") {
    const std::string key(64, 'b');
    write("locks/" + key,
          R"({"exclusive": true, "hostid": "vm@1", "processid": 1, "threadid": 1, "time": "2026-11-29T20:00:00.000000"})");
    int64_t t = 1795982400;  // 2026-11-29T20:00:00Z
    Result<BorgstoreLayout> live = ReadBorgstoreLayout(io::Env::Default(), r, {false, t + 60});
    CHECK(live.status().code() == StatusCode::kLockHeld);
    CHECK(live.status().message() ==
          "repository " + r + " is locked by borg (locks/" + key + ": process 1 on host vm@1, not "
          "this one (this host is here@2)): a backup, prune or compact may be writing. Wait for it "
          "to finish, or pass --bypass-lock to check anyway (results may then report changes in progress)");
    CHECK(ReadBorgstoreLayout(io::Env::Default(), r, {true, t + 60}).ok());
    Result<BorgstoreLayout> stale = ReadBorgstoreLayout(io::Env::Default(), r, {false, t + 31 * 60});
    REQUIRE(stale.ok());
    CHECK(stale->notes.empty());
    REQUIRE(stale->findings.size() == 1);
    CHECK(stale->findings[0].severity == report::Severity::kWarning);
    CHECK(stale->findings[0].stage == report::Stage::kLock);
    CHECK(stale->findings[0].location == "locks/" + key);
    CHECK(stale->findings[0].message ==
          "stale lock: locks/" + key + " is an exclusive lock of process 1 on host vm@1, not this "
          "one (this host is here@2), older than 30 minutes (a borg process was killed or crashed "
          "while it held the lock). The repository was checked anyway. borg deletes a stale lock "
          "itself on its next command, or `borg break-lock " + r + "` removes it now; borgcheck "
          "never writes to a repository");
  }
  SECTION("issue 13 item 4: a lock of a dead process of this host is stale at once (borg master's rule)") {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) _exit(0);
    REQUIRE(waitpid(child, nullptr, 0) == child);
    const std::string key(64, 'c'), pid = std::to_string(child);
    write("locks/" + key, R"({"exclusive": true, "hostid": "here@2", "processid": )" + pid +
                              R"(, "threadid": 0, "time": "2026-11-29T20:00:00.000+00:00"})");
    int64_t t = 1795982400;
    Result<BorgstoreLayout> stale = ReadBorgstoreLayout(io::Env::Default(), r, {false, t + 60});
    REQUIRE(stale.ok());
    REQUIRE(stale->findings.size() == 1);
    CHECK(stale->findings[0].message ==
          "stale lock: locks/" + key + " is an exclusive lock of process " + pid + " on this host "
          "(here@2), which is not running (a borg process was killed "
          "or crashed while it held the lock). The repository was checked anyway. borg deletes a "
          "stale lock itself on its next command, or `borg break-lock " + r + "` removes it now; "
          "borgcheck never writes to a repository");
    // The same lock of a live process of this host (ours) refuses; of another host it refuses too.
    write("locks/" + key, R"({"exclusive": true, "hostid": "here@2", "processid": )" +
                              std::to_string(getpid()) + R"(, "threadid": 0, "time": "2026-11-29T20:00:00.000+00:00"})");
    CHECK(ReadBorgstoreLayout(io::Env::Default(), r, {false, t + 60}).status().code() == StatusCode::kLockHeld);
    setenv("BORG_HOST_ID", "elsewhere@3", 1);
    CHECK(ReadBorgstoreLayout(io::Env::Default(), r, {false, t + 60}).status().code() == StatusCode::kLockHeld);
    setenv("BORG_HOST_ID", "here@2", 1);
    // A shared lock never refuses: a stale one stays a note.
    write("locks/" + key, R"({"exclusive": false, "hostid": "here@2", "processid": )" + pid +
                              R"(, "threadid": 0, "time": "2026-11-29T20:00:00.000+00:00"})");
    Result<BorgstoreLayout> shared = ReadBorgstoreLayout(io::Env::Default(), r, {false, t + 60});
    REQUIRE(shared.ok());
    CHECK(shared->findings.empty());
    REQUIRE(shared->notes.size() == 1);
    CHECK(shared->notes[0] == "shared lock locks/" + key + " held by here@2 is stale (its process is not running)");
  }
  SECTION("B.8 item 7: a non-JSON entry in locks/ (borg crashes on it) is a warning") {
    write("locks/.keep", "");
    Result<BorgstoreLayout> l = ReadBorgstoreLayout(io::Env::Default(), r, {});
    REQUIRE(l.ok());
    REQUIRE(l->findings.size() == 1);
    CHECK(l->findings[0].severity == report::Severity::kWarning);
    CHECK(l->findings[0].location == "locks/.keep");
  }
  SECTION("version and id") {
    write("config/version", "3");
    CHECK(ReadBorgstoreLayout(io::Env::Default(), r, {}).status().code() == StatusCode::kUnsupported);
    write("config/version", "4");
    write("config/id", "xyz");
    CHECK(ReadBorgstoreLayout(io::Env::Default(), r, {}).status().code() == StatusCode::kInvalidRepositoryConfig);
  }
  if (saved_host_id) setenv("BORG_HOST_ID", restore_host_id.c_str(), 1);
  else unsetenv("BORG_HOST_ID");
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace borgcheck::repo
