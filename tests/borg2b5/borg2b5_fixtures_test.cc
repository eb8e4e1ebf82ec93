// Every repository in ../shared/fixtures/borg2b5 (EXPECTED.tsv) gives its expected verdict with
// the exact bad chunk ids, and each damaged copy its exact stage and location; the keyless tier,
// key lookup (BORG_KEY_FILE, keys directories with b5's BORG_BASE_DIR quirk, wrong passphrase),
// thread-count independence, read errors through the fault seam, and further damage made on
// copies (payload flips with checksums repaired, truncation, a deleted segment, no index).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "checker/io/fault_env.h"
#include "checker/repo/borg2b5/borg2b5_segments.h"
#include "checker/io/env.h"
#include "tests/reread_outcomes.h"
#include "tests/test_support.h"

namespace borgcheck::testing {
namespace {
namespace fs = std::filesystem;
using report::Finding;
using report::Severity;
using report::Stage;

std::string B5() { return SharedDir() + "/fixtures/borg2b5"; }

struct Row {
  std::string repo, outcome, ids, notes;
};

std::vector<Row> ReadExpected() {
  std::ifstream in(B5() + "/EXPECTED.tsv");
  REQUIRE(in.good());
  std::vector<Row> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    Row r;
    std::getline(ss, r.repo, '\t');
    std::getline(ss, r.outcome, '\t');
    std::getline(ss, r.ids, '\t');
    std::getline(ss, r.notes, '\t');
    rows.push_back(r);
  }
  REQUIRE(rows.size() == 23);
  return rows;
}

std::optional<std::string> KeyFileOf(const Row& r) {
  static const std::regex kKey("^key file ([^;]+\\.key);");
  std::smatch m;
  if (std::regex_search(r.notes, m, kKey)) return B5() + "/" + m[1].str();
  return std::nullopt;
}

// Objects borg2 verifies in each clean fixture ("verified N chunks", README).
const std::map<std::string, uint64_t> kObjects = {
    {"none", 145}, {"authenticated", 121}, {"authenticated-blake2", 152}, {"repokey-aes-ocb", 154},
    {"repokey-chacha20-poly1305", 146}, {"keyfile-aes-ocb", 138}, {"keyfile-chacha20-poly1305", 133},
    {"repokey-blake2-aes-ocb", 123}, {"repokey-blake2-chacha20-poly1305", 156},
    {"keyfile-blake2-aes-ocb", 145}, {"keyfile-blake2-chacha20-poly1305", 152}, {"compression-mix", 560}};

struct Expected {
  Stage stage;
  uint32_t segment;
  uint64_t offset;  // entry offset
};
// Where each damaged copy must be reported (README: "entry offset" of each damage record).
const std::map<std::string, Expected> kDamage = {
    {"corrupt/aesocb-meta-authfail", {Stage::kAuthentication, 2, 10833}},
    {"corrupt/auth-data-idfail", {Stage::kIdHash, 2, 4614}},
    {"corrupt/authb2-data-zlibfail", {Stage::kDecompression, 2, 9675}},
    {"corrupt/b2chpo-data-authfail", {Stage::kAuthentication, 2, 6613}},
    {"corrupt/chpo-data-authfail", {Stage::kAuthentication, 2, 8171}},
    {"corrupt/chpo-data-stale-xxh64", {Stage::kEntryCrc, 2, 8171}},
    {"corrupt/chpo-entry-header-crc", {Stage::kEntryCrc, 2, 8171}},
    {"corrupt/chpo-manifest-authfail", {Stage::kAuthentication, 4, 8}},
    {"corrupt/chpo-type-invalid", {Stage::kEnvelope, 2, 8171}},
    {"corrupt/none-data-idfail", {Stage::kIdHash, 2, 15078}},
    {"corrupt/none-meta-csize", {Stage::kEnvelope, 2, 15078}},
};

std::set<std::string> IdsOf(const std::string& list) {
  std::set<std::string> out;
  std::stringstream ss(list);
  for (std::string id; std::getline(ss, id, ',');) out.insert(id);
  return out;
}

bool HasNote(const run::CheckOutcome& o, const std::string& needle) {
  for (const std::string& n : o.summary.notes) if (n.find(needle) != std::string::npos) return true;
  return false;
}

TEST_CASE("every borg2b5 fixture gives the verdict of EXPECTED.tsv, exactly", "[borg2b5]") {
  for (const Row& row : ReadExpected()) {
    DYNAMIC_SECTION(row.repo) {
      ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_PASSCOMMAND", std::nullopt},
                     {"BORG_PASSPHRASE_FD", std::nullopt}, {"BORG_KEY_FILE", KeyFileOf(row)},
                     {"BORG_KEYS_DIR", "/nonexistent-borgcheck-keys"}});
      run::CheckOutcome o = Check(B5() + "/" + row.repo, /*verify_data=*/true);
      INFO(o.status.message());
      REQUIRE(o.status.ok());
      CHECK(o.summary.format == "borg2-b5");
      if (row.outcome == "clean") {
        CHECK(o.findings.empty());
        CHECK(o.summary.objects_total == kObjects.at(row.repo));
        CHECK(o.summary.objects_verified == o.summary.objects_total);
        if (row.repo != "none" && row.repo.rfind("authenticated", 0) != 0) {
          CHECK(HasNote(o, "with HKDF-SHA512 (borg 2.0.0b5..b7)"));
          CHECK_FALSE(HasNote(o, "SHA-256 (borg 2.0.0b8"));
        }
        continue;
      }
      REQUIRE(row.outcome == "integrity-errors");
      const std::set<std::string> want = IdsOf(row.ids);
      CHECK(ErrorChunkIds(o) == want);
      REQUIRE(CountErrors(o) == 1);
      CHECK(CountWarnings(o) == 0);
      const Finding& f = o.findings.front();
      const Expected& e = kDamage.at(row.repo);
      CHECK(f.stage == e.stage);
      CHECK(f.segment == e.segment);
      CHECK(f.offset == e.offset);
      // Checksum and crypto findings come from a worker that read the entry twice; the header
      // damage is found while planning, before anything is read in full.
      CHECK(f.reread == (row.repo == "corrupt/chpo-entry-header-crc" ? report::Reread::kNotReread
                                                                     : report::Reread::kAgreed));
      CHECK(o.summary.objects_verified == o.summary.objects_total - 1);
    }
  }
}

TEST_CASE("borg2b5: the messages name what failed, in borg's words where it has some", "[borg2b5]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt}});
  auto message = [](const std::string& repo) {
    run::CheckOutcome o = Check(B5() + "/corrupt/" + repo, true);
    REQUIRE(o.status.ok());
    REQUIRE(!o.findings.empty());
    return o.findings.front().message;
  };
  CHECK(message("chpo-data-authfail") == "Authentication / EVP_DecryptFinal_ex failed (data envelope)");
  CHECK(message("aesocb-meta-authfail") == "Authentication / EVP_DecryptFinal_ex failed (meta envelope)");
  CHECK(message("chpo-data-stale-xxh64") == "Segment entry hash mismatch");
  CHECK(message("none-data-idfail") == "id verification failed");
  CHECK(message("none-meta-csize") == "object metadata does not fit the data: csize 3512 != len(data) 3513");
  CHECK(message("authb2-data-zlibfail").rfind("Decompression error: zlib: ", 0) == 0);
  CHECK(message("chpo-type-invalid").rfind("Invalid encryption envelope: the data envelope has type byte 0x02", 0) == 0);
  CHECK(message("chpo-entry-header-crc") ==
        "Segment entry header checksum mismatch; the walk resumes at offset 14136 (5965 bytes skipped)");
}

TEST_CASE("borg2b5: the keyless check sees checksum damage only, without any key", "[borg2b5]") {
  ScopedEnv env({{"BORG_PASSPHRASE", std::nullopt}, {"BORG_PASSCOMMAND", std::nullopt},
                 {"BORG_KEY_FILE", std::nullopt}, {"BORG_KEYS_DIR", "/nonexistent-borgcheck-keys"}});
  const std::string id = "20d3151918fa7ad402e16c01d707c5cede2e8528f63942aab1bdead085fa1b82";
  for (const char* repo : {"corrupt/chpo-data-stale-xxh64", "corrupt/chpo-entry-header-crc"}) {
    run::CheckOutcome o = Check(B5() + "/" + repo, false);
    REQUIRE(o.status.ok());
    CHECK(ErrorChunkIds(o) == std::set<std::string>{id});
    CHECK(o.summary.objects_verified == 145);
    CHECK(o.summary.objects_total == 146);
    CHECK(o.summary.mode.empty());
    CHECK_FALSE(o.summary.verify_data);
  }
  for (const char* repo : {"corrupt/chpo-data-authfail", "corrupt/none-meta-csize", "keyfile-aes-ocb"}) {
    run::CheckOutcome o = Check(B5() + "/" + repo, false);
    REQUIRE(o.status.ok());
    CHECK(o.findings.empty());  // checksums were repaired: only --verify-data can see it
  }
}

TEST_CASE("borg2b5: the report is identical for every thread count", "[borg2b5]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt}});
  for (const char* repo : {"compression-mix", "corrupt/chpo-entry-header-crc", "corrupt/none-meta-csize"}) {
    run::CheckOutcome one = Check(B5() + "/" + repo, true, 1);
    REQUIRE(one.status.ok());
    for (unsigned t : {2u, 7u, 32u}) {
      run::CheckOutcome many = Check(B5() + "/" + repo, true, t);
      REQUIRE(many.status.ok());
      REQUIRE(many.findings.size() == one.findings.size());
      for (size_t i = 0; i < one.findings.size(); ++i) {
        CHECK(many.findings[i].message == one.findings[i].message);
        CHECK(many.findings[i].chunk_id == one.findings[i].chunk_id);
        CHECK(many.findings[i].offset == one.findings[i].offset);
        CHECK(many.findings[i].reread == one.findings[i].reread);
      }
      CHECK(many.summary.objects_verified == one.summary.objects_verified);
      CHECK(many.summary.plaintext_bytes == one.summary.plaintext_bytes);
      CHECK(many.summary.notes == one.summary.notes);
    }
  }
}

// ---- key lookup -----------------------------------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "borgcheck-b5keys-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST_CASE("borg2b5 keys: key files are found where b5 puts them, and by id", "[borg2b5]") {
  const std::string repo = B5() + "/keyfile-chacha20-poly1305";
  const std::string key = B5() + "/keyfile-chacha20-poly1305.key";
  TempDir home;
  SECTION("BORG_KEYS_DIR, among other keys") {
    fs::create_directories(home.path() + "/keys");
    fs::copy_file(B5() + "/keyfile-aes-ocb.key", home.path() + "/keys/a_other");
    fs::copy_file(key, home.path() + "/keys/z_mine");
    ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt},
                   {"BORG_KEYS_DIR", home.path() + "/keys"}});
    run::CheckOutcome o = Check(repo, true);
    REQUIRE(o.status.ok());
    CHECK(o.findings.empty());
    CHECK(HasNote(o, "key: " + home.path() + "/keys/z_mine"));
  }
  SECTION("b5's BORG_BASE_DIR quirk: $BORG_BASE_DIR/.config/keys") {
    fs::create_directories(home.path() + "/.config/keys");
    fs::copy_file(key, home.path() + "/.config/keys/some_name");
    ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt}, {"BORG_KEYS_DIR", std::nullopt},
                   {"BORG_CONFIG_DIR", std::nullopt}, {"BORG_BASE_DIR", home.path()}});
    run::CheckOutcome o = Check(repo, true);
    REQUIRE(o.status.ok());
    CHECK(o.findings.empty());
  }
  SECTION("and where borg 1.x / master look: $BORG_BASE_DIR/.config/borg/keys") {
    fs::create_directories(home.path() + "/.config/borg/keys");
    fs::copy_file(key, home.path() + "/.config/borg/keys/k");
    ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt}, {"BORG_KEYS_DIR", std::nullopt},
                   {"BORG_CONFIG_DIR", std::nullopt}, {"BORG_BASE_DIR", home.path()}});
    CHECK(Check(repo, true).status.ok());
  }
  SECTION("no key file: kKeyNotFound naming the directories searched") {
    ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt}, {"BORG_KEYS_DIR", std::nullopt},
                   {"BORG_CONFIG_DIR", std::nullopt}, {"BORG_BASE_DIR", home.path()}});
    run::CheckOutcome o = Check(repo, true);
    CHECK(o.status.code() == StatusCode::kKeyNotFound);
    CHECK(o.status.message().find(home.path() + "/.config/keys") != std::string::npos);
    // the keyless check needs no key at all
    CHECK(Check(repo, false).status.ok());
  }
  SECTION("BORG_KEY_FILE of another repository") {
    ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", B5() + "/keyfile-aes-ocb.key"}});
    CHECK(Check(repo, true).status.code() == StatusCode::kKeyFileMismatch);
  }
  SECTION("BORG_KEY_FILE that does not exist") {
    ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", home.path() + "/nope.key"}});
    CHECK(Check(repo, true).status.code() == StatusCode::kKeyNotFound);
  }
}

TEST_CASE("borg2b5 keys: a wrong passphrase is kWrongPassphrase, from every source", "[borg2b5]") {
  SECTION("BORG_PASSPHRASE") {
    ScopedEnv env({{"BORG_PASSPHRASE", "wrong"}, {"BORG_KEY_FILE", std::nullopt}});
    run::CheckOutcome o = Check(B5() + "/repokey-aes-ocb", true);
    CHECK(o.status.code() == StatusCode::kWrongPassphrase);
    CHECK(o.status.message().find("BORG_PASSPHRASE") != std::string::npos);
  }
  SECTION("BORG_PASSCOMMAND") {
    ScopedEnv env({{"BORG_PASSPHRASE", std::nullopt}, {"BORG_PASSCOMMAND", "echo test"}, {"BORG_KEY_FILE", std::nullopt}});
    CHECK(Check(B5() + "/repokey-aes-ocb", true).status.ok());
  }
  SECTION("BORG_PASSCOMMAND, wrong") {
    ScopedEnv env({{"BORG_PASSPHRASE", std::nullopt}, {"BORG_PASSCOMMAND", "echo nope"}, {"BORG_KEY_FILE", std::nullopt}});
    CHECK(Check(B5() + "/authenticated", true).status.code() == StatusCode::kWrongPassphrase);
  }
  SECTION("mode none needs no passphrase at all") {
    ScopedEnv env({{"BORG_PASSPHRASE", std::nullopt}, {"BORG_PASSCOMMAND", std::nullopt}});
    run::CheckOutcome o = Check(B5() + "/none", true);
    REQUIRE(o.status.ok());
    CHECK(o.summary.mode == "none");
    CHECK(o.findings.empty());
  }
}

// ---- damage on copies -------------------------------------------------------------------------------

// Re-computes the xxh64 and the header CRC of the PUT2 entry at `offset` after a flip.
void FixPut2(const RepoCopy& c, const std::string& rel, uint64_t offset) {
  std::fstream f(c.path() + "/" + rel, std::ios::in | std::ios::out | std::ios::binary);
  uint8_t hdr[8];
  f.seekg(std::streamoff(offset));
  f.read(reinterpret_cast<char*>(hdr), 8);
  uint32_t size = LoadLE32(hdr + 4);
  std::string entry(size, '\0');
  f.seekg(std::streamoff(offset));
  f.read(entry.data(), size);
  uint64_t h = repo::Put2EntryHash(AsBytes(entry));
  for (int i = 0; i < 8; ++i) entry[41 + i] = char(uint8_t(h >> (56 - 8 * i)));
  StoreLE32(reinterpret_cast<uint8_t*>(entry.data()), repo::Crc32(AsBytes(entry).subspan(4, 45)));
  f.seekp(std::streamoff(offset));
  f.write(entry.data(), 49);
}

// The live PUT2 entries of segment 2 of a fixture, from the plan.
std::vector<repo::Borg2Entry> Segment2Entries(const std::string& path) {
  Result<repo::Borg2Config> cfg = repo::IdentifyBorg2Repository(io::Env::Default(), path, false);
  REQUIRE(cfg.ok());
  Result<repo::Borg2Plan> plan =
      repo::PlanBorg2Repository(io::Env::Default(), path, *cfg, repo::ListRepoFolder(io::Env::Default(), path));
  REQUIRE(plan.ok());
  for (const repo::Borg2Segment& s : plan->segments) {
    if (s.number == 2) return s.entries;
  }
  FAIL("no segment 2");
  return {};
}

std::string Hex(const std::array<uint8_t, 32>& id) { return ToHex(Bytes(id.data(), id.size())); }

TEST_CASE("borg2b5 damage: one flipped payload byte with checksums repaired, per mode", "[borg2b5]") {
  struct Case {
    const char* repo;
    Stage stage;
  } cases[] = {{"repokey-aes-ocb", Stage::kAuthentication},
               {"repokey-blake2-chacha20-poly1305", Stage::kAuthentication},
               {"authenticated", Stage::kIdHash},  // zstd data: the frame check may fire first
               {"none", Stage::kIdHash}};
  for (const Case& cs : cases) {
    INFO(cs.repo);
    RepoCopy c(B5() + "/" + cs.repo);
    std::vector<repo::Borg2Entry> entries = Segment2Entries(c.path());
    // a large entry: its last payload byte is compressed data (or ciphertext)
    const repo::Borg2Entry* e = nullptr;
    for (const repo::Borg2Entry& x : entries) if (!e || x.size > e->size) e = &x;
    REQUIRE(e);
    c.FlipByte("data/0/2", e->offset + e->size - 10, 0x04);
    FixPut2(c, "data/0/2", e->offset);
    ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt}});
    run::CheckOutcome o = Check(c.path(), true, 3);
    REQUIRE(o.status.ok());
    CHECK(ErrorChunkIds(o) == std::set<std::string>{Hex(e->id)});
    REQUIRE(o.findings.size() == 1);
    if (cs.stage == Stage::kIdHash) {
      CHECK((o.findings[0].stage == Stage::kIdHash || o.findings[0].stage == Stage::kDecompression));
    } else {
      CHECK(o.findings[0].stage == cs.stage);
    }
    CHECK(o.findings[0].offset == e->offset);
    CHECK(Check(c.path(), false).findings.empty());  // invisible without --verify-data
  }
}

TEST_CASE("borg2b5 damage: a truncated segment names each lost object, the rest verifies", "[borg2b5]") {
  RepoCopy c(B5() + "/repokey-chacha20-poly1305");
  std::vector<repo::Borg2Entry> entries = Segment2Entries(c.path());
  REQUIRE(entries.size() > 100);
  c.Truncate("data/0/2", entries[100].offset + 60);
  std::set<std::string> want;
  for (size_t i = 100; i < entries.size(); ++i) want.insert(Hex(entries[i].id));
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt}});
  run::CheckOutcome o = Check(c.path(), true);
  REQUIRE(o.status.ok());
  CHECK(ErrorChunkIds(o) == want);
  size_t warnings = 0;
  for (const Finding& f : o.findings) {
    if (f.severity == Severity::kError) {
      CHECK(f.stage == Stage::kTruncated);
      continue;
    }
    // The archive pass: the only archive's object is among the lost entries, so what it
    // referenced is stored but referenced by nothing now (and no advice to delete it).
    ++warnings;
    CHECK(f.stage == Stage::kReference);
    CHECK(!f.chunk_id);
    CHECK(f.message.rfind("100 orphaned objects found: stored, but no archive references them", 0) == 0);
    CHECK(f.advice.empty());
  }
  CHECK(warnings == 1);
  // The lost archive object's finding says which archive cannot be read.
  size_t with_uses = 0;
  for (const Finding& f : o.findings) {
    if (!f.affected || f.affected->uses.empty()) continue;
    ++with_uses;
    CHECK(f.affected->uses[0].use == "archive");
    CHECK(f.affected->uses[0].archive == "arch1");
    CHECK(f.advice == "borg check --repair removes this archive from the manifest");
  }
  CHECK(with_uses == 1);
  CHECK(o.summary.objects_total == 146);
  CHECK(o.summary.objects_verified == 146 - want.size());
}

TEST_CASE("borg2b5 damage: a deleted segment names each lost object from index.T", "[borg2b5]") {
  RepoCopy c(B5() + "/none");
  std::vector<repo::Borg2Entry> entries = Segment2Entries(c.path());
  c.Remove("data/0/2");
  run::CheckOutcome o = Check(c.path(), true);
  REQUIRE(o.status.ok());
  std::set<std::string> want;
  for (const repo::Borg2Entry& e : entries) want.insert(Hex(e.id));
  CHECK(ErrorChunkIds(o) == want);
  CHECK(CountErrors(o) == want.size() + 1);  // and the segment file itself
  CHECK(o.summary.objects_verified == 1);    // the manifest
}

TEST_CASE("borg2b5 damage: a damaged header without index.T spoils only its entry", "[borg2b5]") {
  RepoCopy c(B5() + "/corrupt/chpo-entry-header-crc");
  c.Remove("index.5");
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt}});
  run::CheckOutcome o = Check(c.path(), true);
  REQUIRE(o.status.ok());
  REQUIRE(CountErrors(o) == 2);
  const Finding& f = o.findings.front();
  CHECK(f.stage == Stage::kEntryCrc);
  CHECK(!f.chunk_id);  // nothing trustworthy names it; the message quotes the damaged header's id
  CHECK(f.message.find("the damaged header names chunk 20d3151918fa7ad4") != std::string::npos);
  // The archive pass: that chunk is gone from the log, and the file that used it is named.
  const Finding& r = o.findings.back();
  CHECK(r.stage == Stage::kReference);
  REQUIRE(r.chunk_id);
  CHECK(report::ChunkIdHex(*r.chunk_id) == "20d3151918fa7ad402e16c01d707c5cede2e8528f63942aab1bdead085fa1b82");
  CHECK(r.message == "chunk is not in the repository: 1 use by a file in 1 archive cannot be restored (missing file chunk)");
  REQUIRE(r.affected);
  REQUIRE(r.affected->uses.size() == 1);
  CHECK(r.affected->total == 1);
  CHECK(r.affected->uses[0].archive == "arch1");
  CHECK(r.affected->uses[0].path == "sub/mixed.bin");
  CHECK(r.affected->uses[0].begin == 14705u);
  CHECK(r.affected->uses[0].end == 25562u);
  CHECK(o.summary.objects_verified == 145);
  CHECK(HasNote(o, "no index.T"));
}

TEST_CASE("borg2b5 damage: an unreadable sector spoils only the entry on it, nothing is written",
          "[borg2b5]") {
  RepoCopy c(B5() + "/repokey-aes-ocb");
  std::vector<repo::Borg2Entry> entries = Segment2Entries(c.path());
  size_t pick = 40;  // past the objects sampled for the key class; big enough that no header read covers it
  while (entries.at(pick).size < 1000) ++pick;
  const repo::Borg2Entry& e = entries.at(pick);
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> before;
  for (const auto& x : fs::recursive_directory_iterator(c.path())) {
    before[x.path().string()] = {x.is_regular_file() ? x.file_size() : 0, x.last_write_time()};
  }
  io::FaultEnv faults;
  faults.FailRead("/data/0/2", int64_t(e.offset) + 500);
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt}});
  run::CheckOutcome o = Check(c.path(), true, 2, faults);
  REQUIRE(o.status.ok());
  CHECK(ErrorChunkIds(o) == std::set<std::string>{Hex(e.id)});
  REQUIRE(o.findings.size() == 1);
  CHECK(o.findings[0].stage == Stage::kIo);  // could not check, not "missing" (issue 13)
  CHECK(o.findings[0].message == "cannot read the entry (read error: Input/output error (injected)): not checked");
  CHECK(o.summary.io_errors == 1);
  CHECK(o.summary.objects_verified == 153);
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> after;
  for (const auto& x : fs::recursive_directory_iterator(c.path())) {
    after[x.path().string()] = {x.is_regular_file() ? x.file_size() : 0, x.last_write_time()};
  }
  CHECK(after == before);
}

TEST_CASE("borg2b5 damage: a damaged superseded entry is a warning, borg's lock is respected", "[borg2b5]") {
  RepoCopy c(B5() + "/none");
  // segment 0 holds the first manifest, superseded by segment 4's
  c.FlipByte("data/0/0", 8 + 60, 0x01);
  run::CheckOutcome o = Check(c.path(), true);
  REQUIRE(o.status.ok());
  CHECK(CountErrors(o) == 0);
  REQUIRE(CountWarnings(o) == 1);
  CHECK(o.findings[0].stage == Stage::kEntryCrc);
  CHECK(o.findings[0].message.find("superseded") != std::string::npos);
  fs::create_directory(c.path() + "/lock.exclusive");
  std::ofstream(c.path() + "/lock.exclusive/otherhost@1.1-0").flush();  // held elsewhere
  CHECK(Check(c.path(), true).status.code() == StatusCode::kLockHeld);
}

// ---- the second read through io::FaultEnv (issue 8) -------------------------------------------
// repokey-aes-ocb: segment 2 holds every chunk, segment 4 the manifest. The object is the
// largest live PUT2 of segment 2 after the first 16 live entries (the key-class sample reads
// those whole); the flipped byte is in the middle of its payload, which planning (49-byte
// headers), the sample and the manifest's TAM check never read: only the window read and the
// engine's second read cover it.

struct B5Target {
  repo::Borg2Entry entry;
  uint64_t byte = 0;
};

B5Target PickB5Target(const std::string& repo) {
  std::vector<repo::Borg2Entry> entries = Segment2Entries(repo);
  std::optional<repo::Borg2Entry> best;
  size_t live = 0;
  for (const repo::Borg2Entry& e : entries) {
    if (!e.live) continue;
    if (++live <= 16 || e.tag != repo::kB2TagPut2) continue;
    if (!best || e.size > best->size) best = e;
  }
  REQUIRE(best);
  REQUIRE(best->size > 1000);
  return {*best, best->offset + best->size / 2};
}

TEST_CASE("borg2b5 reread: a byte flipped on the first read only, on every read, or differently twice",
          "[borg2b5][reread]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt}});
  const std::string repo = B5() + "/repokey-aes-ocb";
  const B5Target t = PickB5Target(repo);
  const RereadEntry e{repo, "/data/0/2", 2, t.entry.offset, Hex(t.entry.id), t.byte, "Segment entry hash mismatch",
                      154};
  CheckRereadOutcomes(e);  // passed, agreed, differed (tests/reread_outcomes.h)
  {  // keyless, and the segment cannot be opened for the second read: not-reread
    // Keyless, segment 2 is opened twice: by the planning walk and by its reader.
    io::FaultEnv faults;
    faults.FlipOnRead("/data/0/2", t.byte, 0);
    faults.VanishAfterOpens("/data/0/2", 2);
    run::CheckOutcome o = CheckRepositoryPass(repo, false, 2, faults);
    CheckEntryFinding(o, e, Severity::kError, "Segment entry hash mismatch", report::Reread::kNotReread);
    CHECK(o.summary.objects_verified == 153);
  }
}

TEST_CASE("borg2b5 reread: a segment that vanishes between planning and reading: repository changed",
          "[borg2b5][reread]") {
  ScopedEnv env({{"BORG_PASSPHRASE", std::nullopt}, {"BORG_KEY_FILE", std::nullopt}});
  // Keyless, segment 2 is opened once while planning (its headers are walked); gone when its
  // turn to be read comes, as after a borg2 compact.
  io::FaultEnv faults;
  faults.VanishAfterOpens("/data/0/2", 1);
  run::CheckOutcome o = Check(B5() + "/repokey-aes-ocb", false, 2, faults);
  CHECK(o.status.code() == StatusCode::kRepositoryChanged);
  CHECK(o.status.message() ==
        "repository changed during check (a segment vanished or a new transaction was committed): no verdict. "
        "Run again when borg is not writing to it");
  CHECK(o.findings.empty());
}

}  // namespace
}  // namespace borgcheck::testing
