// borg 2 master (repository version 4) through the whole run, in-process:
//   * every row of fixtures/borg2master/EXPECTED.tsv gives its verdict with the exact bad
//     chunk ids (verify-data), and the keyless tier gives its own verdict;
//   * the README's two recipes (truncated pack, byte flip in none-sha256) and further damage
//     made on copies: index fragments lost / corrupted / marked invalid, a missing pack,
//     trailing bytes, a duplicate blob, a swapped header id, object version 1 blobs, damaged
//     and multiple keys, passphrase and key-file errors;
//   * the open questions of spec §B.8 whose answers the fixtures show are pinned here (see the
//     test names) and the report is the same for every --threads; nothing is written.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <msgpack.hpp>
#include <sstream>

#include "checker/io/fault_env.h"
#include "checker/crypto/borg2_key.h"
#include "checker/crypto/borg2master_crypto.h"
#include "checker/crypto/key_blob.h"
#include "checker/crypto/tagged_envelope.h"
#include "checker/repo/borgstore/borgstore_index.h"
#include "checker/repo/borgstore/borgstore_layout.h"
#include "checker/io/env.h"
#include "checker/repo/borgstore/borgstore_verifier.h"
#include "tests/test_support.h"

namespace borgcheck::testing {
namespace {
namespace fs = std::filesystem;
using report::Finding;
using report::Reread;
using report::Severity;
using report::Stage;
using repo::ChunkId;

std::string Master() { return SharedDir() + "/fixtures/borg2master"; }
std::string Hex(const ChunkId& id) { return ToHex(Bytes(id.data(), id.size())); }

std::string ReadFile(const std::string& path) {
  Result<std::string> r = io::Env::Default().ReadWholeFile(path, 1ull << 30);
  REQUIRE(r.ok());
  return *r;
}
void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}
std::string Sha256Hex(const std::string& bytes) {
  ChunkId d;
  repo::Sha256(AsBytes(bytes), d.data());
  return Hex(d);
}

// Every environment variable that steers key lookup, set for the fixtures.
struct FixtureEnv {
  ScopedEnv env{{"BORG_PASSPHRASE", std::string("test")},
                {"BORG_PASSCOMMAND", std::nullopt},
                {"BORG_PASSPHRASE_FD", std::nullopt},
                {"BORG_KEY_FILE", std::nullopt},
                {"BORG_KEYS_DIR", Master() + "/keys"}};
};

struct Row {
  std::string repo, outcome;
  std::set<std::string> bad_ids;
};

std::vector<Row> ExpectedRows() {
  std::istringstream in(ReadFile(Master() + "/EXPECTED.tsv"));
  std::string line;
  std::vector<Row> rows;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, '\t')) cols.push_back(c);
    REQUIRE(cols.size() >= 3);
    Row r{cols[0], cols[1], {}};
    if (cols[2] != "-") {
      std::stringstream ids(cols[2]);
      while (std::getline(ids, c, ',')) r.bad_ids.insert(c);
    }
    rows.push_back(r);
  }
  return rows;
}

// What main() would exit with.
int ExitCode(const run::CheckOutcome& o) {
  if (!o.status.ok()) return -1;
  return CountErrors(o) ? 90 : CountWarnings(o) ? 1 : 0;
}

std::string Describe(const run::CheckOutcome& o) {
  std::string s = o.status.ok() ? "" : "status: " + o.status.message() + "\n";
  for (const Finding& f : o.findings) {
    s += fmt::format("{} {} {} {} {} {}\n", report::SeverityName(f.severity), report::StageName(f.stage),
                     f.chunk_id ? report::ChunkIdHex(*f.chunk_id) : "-", report::LocationSuffix(f), f.message,
                     report::RereadName(f.reread));
  }
  return s;
}

// A writable copy with helpers that keep the content addressing consistent: a pack rewritten
// gets its new SHA-256 name and every index fragment naming it is rewritten (and renamed) too.
class MasterCopy : public RepoCopy {
 public:
  using RepoCopy::RepoCopy;

  repo::BorgstoreLayout Layout() const {
    Result<repo::BorgstoreLayout> l = repo::ReadBorgstoreLayout(io::Env::Default(), path(), {});
    REQUIRE(l.ok());
    return *l;
  }
  static std::string PackRel(const std::string& hex) { return "packs/" + hex.substr(0, 2) + "/" + hex; }

  // Replaces pack `old_hex` by `bytes`; `moves` maps (old offset -> new offset, new size) for
  // index entries of this pack whose place changes. Returns the new pack name.
  std::string RewritePack(const std::string& old_hex, const std::string& bytes,
                          const std::map<uint32_t, std::pair<uint32_t, uint32_t>>& moves = {}) {
    std::string new_hex = Sha256Hex(bytes);
    fs::remove(path() + "/" + PackRel(old_hex));
    fs::create_directories(path() + "/packs/" + new_hex.substr(0, 2));
    WriteFile(path() + "/" + PackRel(new_hex), bytes);
    ChunkId old_id, new_id;
    REQUIRE(repo::ParseHexName(old_hex, &old_id));
    REQUIRE(repo::ParseHexName(new_hex, &new_id));
    RewriteIndex([&](repo::IndexRecord& r) {
      if (r.entry.pack_id != old_id) return;
      r.entry.pack_id = new_id;
      if (auto it = moves.find(r.entry.offset); it != moves.end()) {
        r.entry.offset = it->second.first;
        r.entry.size = it->second.second;
      }
    });
    return new_hex;
  }

  // Applies `edit` to every record of every fragment; changed fragments get their new names.
  template <typename F>
  void RewriteIndex(F edit) {
    for (const repo::StoreItem& item : Layout().index_fragments) {
      std::string bytes = ReadFile(item.path);
      Result<repo::IndexFragment> frag = repo::ParseIndexFragment(AsBytes(bytes));
      REQUIRE(frag.ok());
      for (repo::IndexRecord& r : frag->records) edit(r);
      std::string out = repo::TEST_SerializeIndexFragment(frag->records, frag->capacity);
      if (out == bytes) continue;
      fs::remove(item.path);
      WriteFile(path() + "/index/" + Sha256Hex(out), out);
    }
  }

  // (path, size, mtime) of every file: "nothing is written" is checked by comparing these.
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> Snapshot() const {
    std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> s;
    for (const auto& e : fs::recursive_directory_iterator(path())) {
      s[e.path().string()] = {e.is_regular_file() ? e.file_size() : 0, e.last_write_time()};
    }
    return s;
  }
};

// The pack holding `chunk` per the index, with the entry.
struct Located {
  std::string pack_hex;
  repo::ChunkIndexEntry entry;
};
Located Locate(const repo::BorgstoreLayout& l, const std::string& chunk_hex) {
  repo::LoadedChunkIndex idx = repo::LoadChunkIndex(io::Env::Default(), l);
  ChunkId id;
  REQUIRE(repo::ParseHexName(chunk_hex, &id));
  const repo::IndexedChunk* c = idx.Find(id);
  REQUIRE(c);
  return {Hex(c->entry.pack_id), c->entry};
}

// The smallest pack with exactly one object (an archive's "A" object).
Located SmallPack(const repo::BorgstoreLayout& l) {
  repo::LoadedChunkIndex idx = repo::LoadChunkIndex(io::Env::Default(), l);
  std::optional<Located> best;
  for (const repo::PackFile& p : l.packs) {
    std::vector<repo::IndexedChunk> entries = idx.EntriesOfPack(p.id);
    if (entries.size() != 1) continue;
    if (!best || p.size < best->entry.size) {
      best = Located{p.name, entries[0].entry};
    }
  }
  REQUIRE(best);
  return *best;
}
ChunkId OnlyChunkOf(const repo::BorgstoreLayout& l, const std::string& pack_hex) {
  repo::LoadedChunkIndex idx = repo::LoadChunkIndex(io::Env::Default(), l);
  ChunkId pid;
  REQUIRE(repo::ParseHexName(pack_hex, &pid));
  std::vector<repo::IndexedChunk> entries = idx.EntriesOfPack(pid);
  REQUIRE(entries.size() == 1);
  return entries[0].chunk_id;
}

std::vector<const Finding*> Errors(const run::CheckOutcome& o) {
  std::vector<const Finding*> v;
  for (const Finding& f : o.findings) {
    if (f.severity == Severity::kError) v.push_back(&f);
  }
  return v;
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("borg2master: every EXPECTED.tsv row gives its verdict with the exact bad chunk ids", "[borg2master][fixtures]") {
  FixtureEnv env;
  std::vector<Row> rows = ExpectedRows();
  REQUIRE(rows.size() == 10);
  for (const Row& row : rows) {
    INFO(row.repo);
    run::CheckOutcome o = Check(Master() + "/" + row.repo, /*verify_data=*/true, 2);
    INFO(Describe(o));
    REQUIRE(o.status.ok());
    CHECK(o.summary.format == "borgstore-v4");
    CHECK(o.summary.objects_total == 73);  // B.8 item 10: the index entries, as borg counts them
    if (row.outcome == "clean") {
      CHECK(o.findings.empty());
      CHECK(ExitCode(o) == 0);
      CHECK(o.summary.objects_verified == 73);
      CHECK(ErrorChunkIds(o).empty());
    } else {
      REQUIRE(row.outcome == "integrity-errors");
      CHECK(ExitCode(o) == 90);
      CHECK(ErrorChunkIds(o) == row.bad_ids);
      CHECK(o.summary.objects_verified == 73 - row.bad_ids.size());
    }
  }
}

TEST_CASE("borg2master: the bit flip fixture, finding by finding", "[borg2master][fixtures]") {
  FixtureEnv env;
  const std::string pack = "f4f4b0ae3ad6328c47e99e87c6df4d5842d72677c5d33ebf69a9d619233c0096";
  run::CheckOutcome o = Check(Master() + "/corrupt/aes256-ocb_sha256_repokey__bitflip", true, 3);
  INFO(Describe(o));
  REQUIRE(o.status.ok());
  REQUIRE(o.findings.size() == 2);
  const Finding& chunk = o.findings[0];
  CHECK(chunk.severity == Severity::kError);
  CHECK(chunk.stage == Stage::kAuthentication);
  CHECK(report::ChunkIdHex(*chunk.chunk_id) == "3dae7f7548fbac67caf1bc6d3214f147f0552fb79d3a4c3e9f032ba18546290d");
  CHECK(report::LocationSuffix(chunk) == "[pack " + pack + ", offset 1295867]");
  CHECK(chunk.message == "Could not decrypt [Authentication / EVP_DecryptFinal_ex failed]");
  CHECK(chunk.reread == Reread::kAgreed);
  const Finding& p = o.findings[1];
  CHECK(p.severity == Severity::kError);
  CHECK(p.stage == Stage::kSegment);
  CHECK_FALSE(p.chunk_id);
  CHECK(report::LocationSuffix(p) == "[pack " + pack + "]");
  CHECK(p.message == "pack is corrupted: content does not match its name (sha256)");
  CHECK(p.reread == Reread::kAgreed);
}

TEST_CASE("borg2master: the keyless tier hashes packs and walks them without a key", "[borg2master][fixtures]") {
  ScopedEnv env{{"BORG_PASSPHRASE", std::nullopt}, {"BORG_KEYS_DIR", std::string("/nonexistent")}};
  for (const Row& row : ExpectedRows()) {
    INFO(row.repo);
    run::CheckOutcome o = Check(Master() + "/" + row.repo, /*verify_data=*/false, 2);
    INFO(Describe(o));
    REQUIRE(o.status.ok());
    CHECK(o.summary.mode.empty());  // no key is used, so no mode is named (docs/json.md)
    CHECK(o.summary.objects_verified == 73);
    if (row.outcome == "clean") {
      CHECK(o.findings.empty());
    } else {
      // The byte is inside an encrypted payload: only the pack's name gives it away.
      REQUIRE(o.findings.size() == 1);
      CHECK(o.findings[0].stage == Stage::kSegment);
      CHECK(o.findings[0].message == "pack is corrupted: content does not match its name (sha256)");
    }
  }
}

TEST_CASE("borg2master: B.8 item 5, the report does not depend on --threads", "[borg2master][fixtures][B.8]") {
  FixtureEnv env;
  MasterCopy copy(Master() + "/repos/none-sha256");
  // Many findings in one pack: cut it short and drop an index fragment.
  repo::BorgstoreLayout l = copy.Layout();
  const repo::PackFile& big = *std::max_element(l.packs.begin(), l.packs.end(), [](auto& a, auto& b) { return a.size < b.size; });
  copy.Truncate(MasterCopy::PackRel(big.name), big.size - 300000);
  fs::remove(l.index_fragments[1].path);
  std::string first;
  for (unsigned threads : {1u, 2u, 4u, 8u}) {
    run::CheckOutcome o = Check(copy.path(), true, threads);
    REQUIRE(o.status.ok());
    std::string d = Describe(o);
    if (first.empty()) first = d;
    CHECK(d == first);
  }
  CHECK(first.find("error") != std::string::npos);
}

TEST_CASE("borg2master: README recipe 1, a truncated pack (the two chunks borg names)", "[borg2master][fixtures]") {
  FixtureEnv env;
  MasterCopy copy(Master() + "/repos/aes256-ocb_sha256_repokey");
  const std::string pack = "f4f4b0ae3ad6328c47e99e87c6df4d5842d72677c5d33ebf69a9d619233c0096";
  copy.Truncate(MasterCopy::PackRel(pack), 1563437);
  run::CheckOutcome o = Check(copy.path(), true, 2);
  INFO(Describe(o));
  REQUIRE(o.status.ok());
  CHECK(ErrorChunkIds(o) == std::set<std::string>{"0131ed46535e7754410f0e611082752e1f7439bbcd6d45b2452182c16857b8f6",
                                                  "a2ad1a354aa784e397599bf48f5d98465bca552ca20e50eae1d06d56974f7c56"});
  std::map<std::string, std::string> by_id;
  for (const Finding* f : Errors(o)) {
    if (f->chunk_id) by_id[report::ChunkIdHex(*f->chunk_id)] = f->message;
  }
  CHECK(by_id["0131ed46535e7754410f0e611082752e1f7439bbcd6d45b2452182c16857b8f6"] ==
        "object size inconsistent: expected 4818 bytes, got 939");
  CHECK(by_id["a2ad1a354aa784e397599bf48f5d98465bca552ca20e50eae1d06d56974f7c56"] ==
        "object too small: expected at least 49 header bytes, got 0");
  // Plus the pack's name mismatch and where its walk broke.
  std::vector<const Finding*> errs = Errors(o);
  CHECK(errs.size() == 4);
  CHECK(std::any_of(errs.begin(), errs.end(), [](const Finding* f) {
    return f->stage == Stage::kTruncated && !f->chunk_id && f->offset == 1562498u;
  }));
  CHECK(o.summary.objects_verified == 71);
}

TEST_CASE("borg2master: README recipe 2, a byte flip in a none-sha256 pack", "[borg2master][fixtures]") {
  FixtureEnv env;
  MasterCopy copy(Master() + "/repos/none-sha256");
  const std::string pack = "1311464748940e71565caab9d2d30f32b4954200fc02a3a6d9cd5476be9c3b5e";
  copy.FlipByte(MasterCopy::PackRel(pack), 1593356);
  run::CheckOutcome o = Check(copy.path(), true, 2);
  INFO(Describe(o));
  REQUIRE(o.status.ok());
  const std::string id = "b1df71cdb524ebac76be3d4b1ff980c1e2eb75b0f2bcf47fae91b70058e76af9";
  CHECK(ErrorChunkIds(o) == std::set<std::string>{id});
  REQUIRE(o.findings.size() == 2);
  CHECK(o.findings[0].stage == Stage::kAuthentication);
  CHECK(o.findings[0].message == "envelope tag verification failed");
  CHECK(o.findings[1].message == "pack is corrupted: content does not match its name (sha256)");
}

TEST_CASE("borg2master: B.8 item 6, a deleted index fragment hides nothing from this check", "[borg2master][fixtures][B.8]") {
  FixtureEnv env;
  MasterCopy copy(Master() + "/repos/chacha20-poly1305_sha256_repokey");
  repo::BorgstoreLayout l = copy.Layout();
  // A fragment of a later archive: its objects and its archive's metadata object.
  std::optional<repo::IndexFragment> lost;
  for (const repo::StoreItem& item : l.index_fragments) {
    Result<repo::IndexFragment> f = repo::ParseIndexFragment(AsBytes(ReadFile(item.path)));
    REQUIRE(f.ok());
    if (f->records.size() == 5) {
      lost = *f;
      fs::remove(item.path);
      break;
    }
  }
  REQUIRE(lost);
  std::set<std::string> lost_ids;
  for (const repo::IndexRecord& r : lost->records) lost_ids.insert(Hex(r.chunk_id));
  run::CheckOutcome o = Check(copy.path(), true, 2);
  INFO(Describe(o));
  REQUIRE(o.status.ok());
  CHECK(ExitCode(o) == 1);  // warnings only: the data is intact
  CHECK(o.summary.objects_total == 73);
  CHECK(o.summary.objects_verified == 73);  // borg would verify 68
  std::set<std::string> orphan_ids, archive_ids;
  bool summary_warning = false;
  for (const Finding& f : o.findings) {
    CHECK(f.severity == Severity::kWarning);
    if (f.message.find("in no chunk index fragment") != std::string::npos) orphan_ids.insert(report::ChunkIdHex(*f.chunk_id));
    if (f.location.rfind("archives/", 0) == 0) archive_ids.insert(report::ChunkIdHex(*f.chunk_id));
    if (f.location == "index") summary_warning = f.message.rfind("5 object(s) in the packs", 0) == 0;
  }
  CHECK(orphan_ids == lost_ids);
  CHECK(archive_ids.size() == 1);  // the lost archive metadata object, which borg reports as missing
  CHECK(lost_ids.count(*archive_ids.begin()));
  CHECK(summary_warning);
}

TEST_CASE("borg2master: B.8 item 6, a corrupt index fragment is reported and everything is still verified",
          "[borg2master][fixtures][B.8]") {
  FixtureEnv env;
  MasterCopy copy(Master() + "/repos/authenticated-blake3");
  repo::BorgstoreLayout l = copy.Layout();
  const repo::StoreItem& frag = l.index_fragments[0];
  std::string bytes = ReadFile(frag.path);
  uint32_t meta_size = LoadLE32(reinterpret_cast<const uint8_t*>(bytes.data()) + 12);
  copy.FlipByte("index/" + frag.name, 16 + meta_size + 32);  // a record's flags: ignored by readers
  run::CheckOutcome o = Check(copy.path(), true, 2);
  INFO(Describe(o));
  REQUIRE(o.status.ok());
  REQUIRE(o.findings.size() == 1);
  CHECK(o.findings[0].severity == Severity::kError);
  CHECK(o.findings[0].stage == Stage::kIndex);
  CHECK(o.findings[0].location == "index/" + frag.name);
  CHECK(o.findings[0].message.rfind("is corrupted: content does not match its name (sha256); borg would", 0) == 0);
  CHECK(o.findings[0].reread == Reread::kAgreed);
  CHECK(o.summary.objects_verified == 73);
}

TEST_CASE("borg2master: B.8 item 6, cache/chunkindex-invalid is a warning", "[borg2master][fixtures][B.8]") {
  FixtureEnv env;
  MasterCopy copy(Master() + "/repos/none-blake3");
  fs::create_directories(copy.path() + "/cache");
  WriteFile(copy.path() + "/cache/chunkindex-invalid", "");
  run::CheckOutcome o = Check(copy.path(), true, 2);
  REQUIRE(o.status.ok());
  REQUIRE(o.findings.size() == 1);
  CHECK(o.findings[0].severity == Severity::kWarning);
  CHECK(o.findings[0].location == "cache/chunkindex-invalid");
  CHECK(o.summary.objects_verified == 73);
}

TEST_CASE("borg2master: a missing pack loses exactly its chunks", "[borg2master][fixtures]") {
  FixtureEnv env;
  MasterCopy copy(Master() + "/repos/aes256-ocb_blake3_repokey");
  repo::BorgstoreLayout l = copy.Layout();
  Located small = SmallPack(l);
  ChunkId archive = OnlyChunkOf(l, small.pack_hex);
  copy.Remove(MasterCopy::PackRel(small.pack_hex));
  run::CheckOutcome o = Check(copy.path(), true, 2);
  INFO(Describe(o));
  REQUIRE(o.status.ok());
  CHECK(ErrorChunkIds(o) == std::set<std::string>{Hex(archive)});
  std::vector<const Finding*> errs = Errors(o);
  REQUIRE(errs.size() == 2);  // the chunk, and the pack
  for (const Finding* f : errs) {
    CHECK(f->stage == Stage::kMissing);
    CHECK(f->location == "pack " + small.pack_hex);
  }
  CHECK(o.summary.objects_total == 73);
  CHECK(o.summary.objects_verified == 72);
}

TEST_CASE("borg2master: a pack that cannot be read (EIO through io::FaultEnv)", "[borg2master][fixtures]") {
  FixtureEnv env;
  const std::string dir = Master() + "/repos/none-blake3";
  repo::BorgstoreLayout l = *repo::ReadBorgstoreLayout(io::Env::Default(), dir, {});
  Located small = SmallPack(l);
  ChunkId archive = OnlyChunkOf(l, small.pack_hex);
  io::FaultEnv faults;
  faults.FailRead(small.pack_hex, 10);
  run::CheckOutcome o = Check(dir, true, 2, faults);
  INFO(Describe(o));
  REQUIRE(o.status.ok());
  CHECK(ErrorChunkIds(o) == std::set<std::string>{Hex(archive)});
  std::vector<const Finding*> errs = Errors(o);
  // Could not check, not damaged: stage io for the chunk and the pack, exit 2 (docs/exit-codes.md);
  // the archive pass names the archive object's use on the chunk's io finding, with no repair
  // advice, and adds no "cannot be read as archive metadata" finding of its own.
  REQUIRE(errs.size() == 2);
  CHECK(errs[0]->stage == Stage::kIo);
  CHECK(errs[0]->message == "the pack holding this chunk cannot be read (read error: Input/output error (injected)): "
                            "not checked");
  CHECK(errs[0]->advice.empty());
  REQUIRE(errs[0]->affected);
  REQUIRE(errs[0]->affected->uses.size() == 1);
  CHECK(errs[0]->affected->uses[0].use == "archive");
  CHECK(errs[1]->stage == Stage::kIo);
  CHECK(errs[1]->message.rfind("cannot read packs/", 0) == 0);
  CHECK(o.summary.io_errors == 2);
  CHECK(o.summary.objects_verified == 72);
}

TEST_CASE("borg2master: stray bytes and a second copy of a blob", "[borg2master][fixtures]") {
  FixtureEnv env;
  MasterCopy copy(Master() + "/repos/none-sha256");
  repo::BorgstoreLayout l = copy.Layout();
  Located small = SmallPack(l);
  std::string bytes = ReadFile(copy.path() + "/" + MasterCopy::PackRel(small.pack_hex));
  SECTION("trailing bytes after the last blob: an error borg does not report") {
    std::string new_hex = copy.RewritePack(small.pack_hex, bytes + "0123456789");
    run::CheckOutcome o = Check(copy.path(), true, 2);
    INFO(Describe(o));
    REQUIRE(o.findings.size() == 1);
    CHECK(o.findings[0].severity == Severity::kError);
    CHECK(o.findings[0].stage == Stage::kSegment);
    CHECK(report::LocationSuffix(o.findings[0]) == fmt::format("[pack {}, offset {}]", new_hex, bytes.size()));
    CHECK(o.summary.objects_verified == 73);
  }
  SECTION("a gap object (a second copy no index entry names) is a warning, and verified") {
    std::string new_hex = copy.RewritePack(small.pack_hex, bytes + bytes);
    run::CheckOutcome o = Check(copy.path(), true, 2);
    INFO(Describe(o));
    REQUIRE(o.findings.size() == 1);
    CHECK(o.findings[0].severity == Severity::kWarning);
    CHECK(o.findings[0].stage == Stage::kIndex);
    CHECK(o.findings[0].offset == bytes.size());
    CHECK(o.findings[0].message.find("another copy of this chunk") != std::string::npos);
    CHECK(o.summary.objects_total == 74);
    CHECK(o.summary.objects_verified == 74);
    CHECK(ExitCode(o) == 1);
  }
  SECTION("the header names another chunk: the indexed chunk fails") {
    std::string swapped = bytes;
    swapped[9] ^= 0x01;
    copy.RewritePack(small.pack_hex, swapped);
    ChunkId archive = OnlyChunkOf(copy.Layout(), Sha256Hex(swapped));
    run::CheckOutcome o = Check(copy.path(), true, 2);
    INFO(Describe(o));
    CHECK(ErrorChunkIds(o) == std::set<std::string>{Hex(archive)});
  }
}

// Re-seals every blob of pack `hex` as object version 1 (AAD "", as borg 2.0.0b22 wrote) or
// just flips the version byte (`reseal` false).
void MakeVersion1Pack(MasterCopy& copy, const std::string& hex, crypto::TaggedMac mac, Bytes crypt_key, bool reseal) {
  std::string bytes = ReadFile(copy.path() + "/" + MasterCopy::PackRel(hex));
  repo::PackWalk w = repo::WalkPack(AsBytes(bytes));
  REQUIRE(w.end == repo::WalkEnd::kClean);
  crypto::TaggedEnvelope env(mac, crypt_key);
  REQUIRE(env.status().ok());
  std::string out;
  for (const repo::WalkedBlob& b : w.blobs) {
    std::string blob = bytes.substr(b.offset, b.header.blob_size());
    blob[8] = 1;
    if (reseal) {
      Bytes meta = AsBytes(blob).subspan(repo::kObjHeaderSize + crypto::kTaggedHeaderSize,
                                          b.header.meta_size - crypto::kTaggedHeaderSize);
      Bytes data = AsBytes(blob).subspan(repo::kObjHeaderSize + b.header.meta_size + crypto::kTaggedHeaderSize,
                                          b.header.data_size - crypto::kTaggedHeaderSize);
      std::vector<uint8_t> m = env.Seal(meta, Bytes(), b.header.chunk_id.data());
      std::vector<uint8_t> d = env.Seal(data, Bytes(), b.header.chunk_id.data());
      blob = blob.substr(0, repo::kObjHeaderSize) + std::string(m.begin(), m.end()) + std::string(d.begin(), d.end());
    }
    out += blob;
  }
  REQUIRE(out.size() == bytes.size());  // same sizes: the index offsets stay valid
  copy.RewritePack(hex, out);
}

crypto::Borg2KeyMaterial FixtureKey(const std::string& repo_dir) {
  repo::BorgstoreLayout l = *repo::ReadBorgstoreLayout(io::Env::Default(), repo_dir, {});
  REQUIRE(l.keys.size() == 1);
  Result<crypto::KeyFileContents> kf = crypto::ParseKeyFile(ReadFile(l.keys[0].path));
  REQUIRE(kf.ok());
  Result<crypto::Borg2KeyMaterial> k = crypto::DecryptBorg2KeyBlob(kf->base64, "test");
  REQUIRE(k.ok());
  return std::move(k).value();
}

TEST_CASE("borg2master: B.8 item 4, object version 1 blobs are read with the b22 AAD rule", "[borg2master][fixtures][B.8]") {
  FixtureEnv env;
  SECTION("none-sha256") {
    MasterCopy copy(Master() + "/repos/none-sha256");
    repo::BorgstoreLayout l = copy.Layout();
    Located big = Locate(l, "b1df71cdb524ebac76be3d4b1ff980c1e2eb75b0f2bcf47fae91b70058e76af9");
    SECTION("re-sealed as version 1: verifies") {
      MakeVersion1Pack(copy, big.pack_hex, crypto::TaggedMac::kSha256, Bytes(), true);
      run::CheckOutcome o = Check(copy.path(), true, 2);
      INFO(Describe(o));
      CHECK(o.findings.empty());
      CHECK(o.summary.objects_verified == 73);
    }
    SECTION("version byte 1 on version-2 envelopes: every blob of the pack fails") {
      MakeVersion1Pack(copy, big.pack_hex, crypto::TaggedMac::kSha256, Bytes(), false);
      run::CheckOutcome o = Check(copy.path(), true, 2);
      INFO(Describe(o));
      REQUIRE_FALSE(Errors(o).empty());
      for (const Finding* f : Errors(o)) {
        CHECK(f->stage == Stage::kAuthentication);
        CHECK(f->message.find("envelope tag verification failed") != std::string::npos);
      }
      CHECK(o.summary.objects_verified < 73);
    }
  }
  SECTION("authenticated-sha256 (keyed)") {
    MasterCopy copy(Master() + "/repos/authenticated-sha256");
    crypto::Borg2KeyMaterial key = FixtureKey(copy.path());
    Located small = SmallPack(copy.Layout());
    MakeVersion1Pack(copy, small.pack_hex, crypto::TaggedMac::kHmacSha256, key.crypt_key.view(), true);
    run::CheckOutcome o = Check(copy.path(), true, 2);
    INFO(Describe(o));
    CHECK(o.findings.empty());
    CHECK(o.summary.objects_verified == 73);
  }
}

TEST_CASE("borg2master: B.8 items 3 and 9, what the objects of the fixtures carry", "[borg2master][fixtures][B.8]") {
  FixtureEnv env;
  const std::string dir = Master() + "/repos/aes256-ocb_sha256_repokey";
  crypto::Borg2KeyMaterial key = FixtureKey(dir);
  repo::BorgstoreLayout l = *repo::ReadBorgstoreLayout(io::Env::Default(), dir, {});
  repo::BorgstoreVerifier v(true, crypto::MasterKeyTypeFromByte(0x10), key.crypt_key.view(), key.id_key.view());
  REQUIRE(v.status().ok());
  std::map<std::string, int> types;
  for (const repo::PackFile& p : l.packs) {
    std::string bytes = ReadFile(p.path);
    for (const repo::WalkedBlob& b : repo::WalkPack(AsBytes(bytes)).blobs) {
      REQUIRE_FALSE(v.VerifyAs(AsBytes(bytes).subspan(b.offset, b.header.blob_size()), b.header.chunk_id));
      CHECK(v.meta().size);  // item 9: `size` is present (no `auto,...` compression was used)
      CHECK_FALSE(v.meta().psize);
      types[v.meta().type.value_or("")]++;
    }
  }
  CHECK(types == std::map<std::string, int>{{"A", 5}, {"C", 5}, {"F", 58}, {"S", 5}});
  // Item 1 and 3: the manifest is type "M" and its config holds only item_keys.
  std::string m = ReadFile(l.manifest_path);
  REQUIRE_FALSE(v.VerifyAs(AsBytes(m), ChunkId{}));
  CHECK(v.meta().type == "M");
  msgpack::object_handle oh = msgpack::unpack(reinterpret_cast<const char*>(v.plaintext().data()), v.plaintext().size());
  std::map<std::string, msgpack::object> top;
  oh.get().convert(top);
  CHECK(top.count("version"));
  CHECK(top.count("archives"));
  CHECK(top.count("timestamp"));
  std::map<std::string, msgpack::object> config;
  top.at("config").convert(config);
  REQUIRE(config.size() == 1);
  CHECK(config.count("item_keys"));
  CHECK(top.at("archives").via.map.size == 0);  // always empty in borg 2: archives/ lists them
}

TEST_CASE("borg2master: keys", "[borg2master][fixtures]") {
  SECTION("a wrong passphrase") {
    ScopedEnv env{{"BORG_PASSPHRASE", std::string("nope")}, {"BORG_PASSCOMMAND", std::nullopt}, {"BORG_PASSPHRASE_FD", std::nullopt}};
    run::CheckOutcome o = Check(Master() + "/repos/chacha20-poly1305_blake3_repokey", true, 1);
    CHECK(o.status.code() == StatusCode::kWrongPassphrase);
  }
  SECTION("the key file: found by BORG_KEY_FILE, missing without it") {
    const std::string repo = Master() + "/repos/aes256-ocb_sha256_keyfile";
    {
      ScopedEnv env{{"BORG_PASSPHRASE", std::string("test")},
                    {"BORG_KEYS_DIR", std::string("/nonexistent")},
                    {"BORG_KEY_FILE", Master() + "/keys/aes256-ocb_sha256_keyfile.key"}};
      run::CheckOutcome o = Check(repo, true, 1);
      REQUIRE(o.status.ok());
      CHECK(o.findings.empty());
    }
    ScopedEnv env{{"BORG_PASSPHRASE", std::string("test")}, {"BORG_KEYS_DIR", std::string("/nonexistent")}, {"BORG_KEY_FILE", std::nullopt}};
    run::CheckOutcome o = Check(repo, true, 1);
    CHECK(o.status.code() == StatusCode::kKeyNotFound);
  }
  SECTION("more than one passphrase variable is refused, as borg master does") {
    ScopedEnv env{{"BORG_PASSPHRASE", std::string("test")}, {"BORG_PASSCOMMAND", std::string("echo test")}};
    run::CheckOutcome o = Check(Master() + "/repos/authenticated-sha256", true, 1);
    CHECK(o.status.code() == StatusCode::kInvalidArgument);
  }
  SECTION("a damaged repokey is told apart from a wrong passphrase") {
    FixtureEnv env;
    MasterCopy copy(Master() + "/repos/aes256-ocb_sha256_repokey");
    repo::BorgstoreLayout l = copy.Layout();
    copy.FlipByte("keys/" + l.keys[0].name, 200);  // inside the base64 of the encrypted key
    run::CheckOutcome o = Check(copy.path(), true, 1);
    CHECK(o.status.code() == StatusCode::kCorruptMetadata);
    CHECK(o.status.message().find("is corrupted") != std::string::npos);
  }
  SECTION("several keys: the intact one unlocks, the damaged one is a finding") {
    FixtureEnv env;
    MasterCopy copy(Master() + "/repos/aes256-ocb_sha256_repokey");
    repo::BorgstoreLayout l = copy.Layout();
    std::string damaged = ReadFile(l.keys[0].path);
    damaged[200] = damaged[200] == 'A' ? 'B' : 'A';
    std::string name(64, '0');  // sorts before the intact key, so it is tried first
    WriteFile(copy.path() + "/keys/" + name, damaged);
    run::CheckOutcome o = Check(copy.path(), true, 1);
    INFO(Describe(o));
    REQUIRE(o.status.ok());
    REQUIRE(o.findings.size() == 1);
    CHECK(o.findings[0].location == "keys/" + name);
    CHECK(o.findings[0].message.find("content does not match its name") != std::string::npos);
    CHECK(o.summary.objects_verified == 73);
  }
}

TEST_CASE("borg2master: B.8 item 11, nothing is written into the repository", "[borg2master][fixtures][B.8]") {
  FixtureEnv env;
  MasterCopy copy(Master() + "/corrupt/aes256-ocb_sha256_repokey__bitflip");
  fs::remove(copy.Layout().index_fragments[2].path);  // even when borg would write a new index
  auto before = copy.Snapshot();
  run::CheckOutcome o = Check(copy.path(), true, 4);
  REQUIRE(o.status.ok());
  run::CheckOutcome k = Check(copy.path(), false, 4);
  REQUIRE(k.status.ok());
  CHECK(copy.Snapshot() == before);
  CHECK_FALSE(fs::exists(copy.path() + "/cache"));
  CHECK_FALSE(fs::exists(copy.path() + "/locks"));
}

// ---- the second read through io::FaultEnv (issue 8) -------------------------------------------
// aes256-ocb_sha256_repokey. The object is the largest chunk of the index (not the manifest,
// which is config/manifest; no pack is probed for the mode, the manifest tells it); the flipped
// byte is in the middle of its data envelope. Its pack is read whole once, read again whole when
// its SHA-256 does not match its name, and the object is read a third time by the engine's
// second read: read n of the pack is the nth read covering the byte.

struct MasterTarget {
  std::string pack_hex;
  ChunkId chunk{};
  repo::ChunkIndexEntry entry;
  uint64_t byte = 0;
};

MasterTarget PickMasterTarget(const std::string& dir) {
  repo::BorgstoreLayout l = *repo::ReadBorgstoreLayout(io::Env::Default(), dir, {});
  repo::LoadedChunkIndex idx = repo::LoadChunkIndex(io::Env::Default(), l);
  const repo::IndexedChunk* best = nullptr;
  for (const repo::IndexedChunk& c : idx.chunks) {
    if (!best || c.entry.size > best->entry.size) best = &c;
  }
  REQUIRE(best);
  REQUIRE(best->entry.size > 10000);
  return {Hex(best->entry.pack_id), best->chunk_id, best->entry, uint64_t(best->entry.offset) + best->entry.size / 2};
}

const std::string kPackBad = "pack is corrupted: content does not match its name (sha256)";
const std::string kDecryptBad = "Could not decrypt [Authentication / EVP_DecryptFinal_ex failed]";
const std::string kPassed = "; the second read verified (a transient read error?)";

// The pack's finding and the object's, field by field.
void CheckPackAndObject(const run::CheckOutcome& o, const MasterTarget& t, Severity pack_severity,
                        Reread pack_reread, Severity object_severity, Reread object_reread) {
  INFO(Describe(o));
  REQUIRE(o.status.ok());
  REQUIRE(o.findings.size() == 2);
  const Finding* pack = nullptr;
  const Finding* object = nullptr;
  for (const Finding& f : o.findings) (f.chunk_id ? object : pack) = &f;
  REQUIRE(pack);
  REQUIRE(object);
  CHECK(pack->severity == pack_severity);
  CHECK(pack->stage == Stage::kSegment);
  CHECK(report::LocationSuffix(*pack) == "[pack " + t.pack_hex + "]");
  CHECK(pack->message == kPackBad + (pack_reread == Reread::kPassed ? kPassed : ""));
  CHECK(pack->reread == pack_reread);
  CHECK(object->severity == object_severity);
  CHECK(object->stage == Stage::kAuthentication);
  CHECK_FALSE(object->segment);
  CHECK(object->location == "pack " + t.pack_hex);
  CHECK(object->offset == t.entry.offset);
  CHECK(report::ChunkIdHex(*object->chunk_id) == Hex(t.chunk));
  CHECK(object->message == kDecryptBad + (object_reread == Reread::kPassed ? kPassed : ""));
  CHECK(object->reread == object_reread);
}

TEST_CASE("borg2master reread: a byte flipped on the first read only, on every read, or differently",
          "[borg2master][fixtures][reread]") {
  FixtureEnv env;
  const std::string dir = Master() + "/repos/aes256-ocb_sha256_repokey";
  const MasterTarget t = PickMasterTarget(dir);
  io::FaultEnv clean_env;
  run::CheckOutcome clean = CheckRepositoryPass(dir, true, 2, clean_env);
  REQUIRE(clean.status.ok());
  REQUIRE(clean.findings.empty());
  REQUIRE(clean.summary.objects_verified == 73);
  const unsigned clean_reads = clean_env.Reads(t.pack_hex);
  REQUIRE(clean_reads == 1);
  for (unsigned threads : {1u, 2u, 8u}) {
    INFO("threads " << threads);
    {  // first read only: both second reads verify; two warnings, everything counted
      io::FaultEnv faults;
      faults.FlipOnRead(t.pack_hex, t.byte, 1);
      run::CheckOutcome o = CheckRepositoryPass(dir, true, threads, faults);
      CheckPackAndObject(o, t, Severity::kWarning, Reread::kPassed, Severity::kWarning, Reread::kPassed);
      CHECK(faults.Reads(t.pack_hex) == clean_reads + 2);  // the pack again, the object again
      CHECK(o.summary.objects_verified == clean.summary.objects_verified);
      CHECK(o.summary.stored_bytes == clean.summary.stored_bytes);
      CHECK(o.summary.plaintext_bytes == clean.summary.plaintext_bytes);
      CHECK(o.summary.errors == 0);
      CHECK(o.summary.warnings == 2);
    }
    {  // every read: the damage is on disk
      io::FaultEnv faults;
      faults.FlipOnRead(t.pack_hex, t.byte, 0);
      run::CheckOutcome o = CheckRepositoryPass(dir, true, threads, faults);
      CheckPackAndObject(o, t, Severity::kError, Reread::kAgreed, Severity::kError, Reread::kAgreed);
      CHECK(faults.Reads(t.pack_hex) == clean_reads + 2);
      CHECK(o.summary.objects_verified == 72);
    }
    {  // reads 1, 2 and 3 all differ: the pack and the object differed
      io::FaultEnv faults;
      faults.FlipOnRead(t.pack_hex, t.byte, 1, 0x01);
      faults.FlipOnRead(t.pack_hex, t.byte, 2, 0x02);
      faults.FlipOnRead(t.pack_hex, t.byte, 3, 0x04);
      run::CheckOutcome o = CheckRepositoryPass(dir, true, threads, faults);
      CheckPackAndObject(o, t, Severity::kError, Reread::kDiffered, Severity::kError, Reread::kDiffered);
      CHECK(o.summary.objects_verified == 72);
    }
    {  // reads 1 and 2 differ, read 3 is clean: the pack differed, the object passed
      io::FaultEnv faults;
      faults.FlipOnRead(t.pack_hex, t.byte, 1, 0x01);
      faults.FlipOnRead(t.pack_hex, t.byte, 2, 0x02);
      run::CheckOutcome o = CheckRepositoryPass(dir, true, threads, faults);
      CheckPackAndObject(o, t, Severity::kError, Reread::kDiffered, Severity::kWarning, Reread::kPassed);
      CHECK(o.summary.objects_verified == 73);
    }
    {  // reads 1 and 3 differ, read 2 is clean: the pack passed, the object differed
      io::FaultEnv faults;
      faults.FlipOnRead(t.pack_hex, t.byte, 1, 0x01);
      faults.FlipOnRead(t.pack_hex, t.byte, 3, 0x02);
      run::CheckOutcome o = CheckRepositoryPass(dir, true, threads, faults);
      CheckPackAndObject(o, t, Severity::kWarning, Reread::kPassed, Severity::kError, Reread::kDiffered);
      CHECK(o.summary.objects_verified == 72);
    }
    {  // the pack cannot be opened again: both not-reread, and the run finishes
      io::FaultEnv faults;
      faults.FlipOnRead(t.pack_hex, t.byte, 0);
      faults.VanishAfterOpens(t.pack_hex, 1);  // its reader's open is the only one that works
      run::CheckOutcome o = CheckRepositoryPass(dir, true, threads, faults);
      CheckPackAndObject(o, t, Severity::kError, Reread::kNotReread, Severity::kError, Reread::kNotReread);
      CHECK(faults.Reads(t.pack_hex) == clean_reads);
      CHECK(o.summary.objects_verified == 72);
    }
  }
}

// Removes a file of a repository copy the first time it is opened, as borg compact would
// between the listing and the read, then opens it (kNotFound). Packs are opened only by their
// reader, so FaultEnv::VanishAfterOpens (which counts opens; with 0 the pack is not even
// listed) cannot make one go between planning and reading.
class CompactOnOpenEnv final : public io::Env {
 public:
  explicit CompactOnOpenEnv(std::string suffix) : suffix_(std::move(suffix)) {}
  Result<std::unique_ptr<io::File>> Open(const std::string& path) const override {
    if (path.size() >= suffix_.size() && path.compare(path.size() - suffix_.size(), suffix_.size(), suffix_) == 0 &&
        !removed_.exchange(true)) {
      fs::remove(path);
    }
    return io::Env::Default().Open(path);
  }
  Result<std::vector<io::DirEntry>> List(const std::string& dir) const override { return io::Env::Default().List(dir); }
  Result<io::FileStat> Stat(const std::string& path) const override { return io::Env::Default().Stat(path); }
  Result<io::FileStat> Lstat(const std::string& path) const override { return io::Env::Default().Lstat(path); }
  bool removed() const { return removed_.load(); }

 private:
  const std::string suffix_;
  mutable std::atomic<bool> removed_{false};
};

TEST_CASE("borg2master reread: a pack that vanishes between planning and reading: repository changed",
          "[borg2master][fixtures][reread]") {
  FixtureEnv env;
  for (bool verify_data : {true, false}) {
    MasterCopy copy(Master() + "/repos/aes256-ocb_sha256_repokey");
    const MasterTarget t = PickMasterTarget(copy.path());
    CompactOnOpenEnv compact(t.pack_hex);
    run::CheckOutcome o = CheckRepositoryPass(copy.path(), verify_data, 4, compact);
    CHECK(compact.removed());
    CHECK(o.status.code() == StatusCode::kRepositoryChanged);
    CHECK(o.status.message() ==
          "repository changed during check (a pack vanished or a new transaction was committed): no verdict. "
          "Run again when borg is not writing to it");
    CHECK(o.findings.empty());
  }
}

}  // namespace
}  // namespace borgcheck::testing
