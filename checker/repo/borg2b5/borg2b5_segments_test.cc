// Repository version 2 segments and planning: every fixture segment entry parses and its CRC
// and xxh64 match; index.T parses and verifies against integrity.T; the plan of every clean
// fixture has borg's object count and no finding; damaged copies (header CRC, truncated,
// deleted segment, no index, uncommitted leftovers, stray bytes) give the exact findings.
#include "checker/repo/borg2b5/borg2b5_segments.h"

#include <catch2/catch.hpp>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "checker/io/env.h"

namespace borgcheck::repo {
namespace {
namespace fs = std::filesystem;
using report::Finding;
using report::Severity;
using report::Stage;

std::string B5() { return std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg2b5"; }

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string Hex(const std::array<uint8_t, 32>& id) { return ToHex(Bytes(id.data(), id.size())); }

// A writable copy of a fixture repository, removed afterwards.
class Copy {
 public:
  explicit Copy(const std::string& repo) {
    root_ = fs::temp_directory_path() / fs::path("borg2seg-" + std::to_string(::getpid()) + "-" +
                                                 std::to_string(counter_++));
    fs::remove_all(root_);
    fs::create_directories(root_);
    path_ = (root_ / "r").string();
    fs::copy(B5() + "/" + repo, path_, fs::copy_options::recursive);
    for (auto& e : fs::recursive_directory_iterator(path_)) {
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
    }
    fs::permissions(path_, fs::perms::owner_write, fs::perm_options::add);
  }
  ~Copy() { fs::remove_all(root_); }
  const std::string& path() const { return path_; }
  std::string File(const std::string& rel) const { return path_ + "/" + rel; }
  void Truncate(const std::string& rel, uint64_t size) { fs::resize_file(File(rel), size); }
  void Remove(const std::string& rel) { fs::remove(File(rel)); }
  void Write(const std::string& rel, const std::string& bytes) {
    std::ofstream(File(rel), std::ios::binary) << bytes;
  }
  void Patch(const std::string& rel, uint64_t pos, uint8_t xor_mask) {
    std::string s = Slurp(File(rel));
    REQUIRE(pos < s.size());
    s[pos] = char(uint8_t(s[pos]) ^ xor_mask);
    Write(rel, s);
  }

 private:
  static inline int counter_ = 0;
  fs::path root_;
  std::string path_;
};

Borg2Plan PlanOf(const std::string& path) {
  Result<Borg2Config> cfg = IdentifyBorg2Repository(io::Env::Default(), path, false);
  REQUIRE(cfg.ok());
  Result<Borg2Plan> plan =
      PlanBorg2Repository(io::Env::Default(), path, *cfg, ListRepoFolder(io::Env::Default(), path));
  INFO(plan.status().message());
  REQUIRE(plan.ok());
  return std::move(plan).value();
}

std::vector<const Finding*> Errors(const Borg2Plan& p) {
  std::vector<const Finding*> out;
  for (const Finding& f : p.findings) if (f.severity == Severity::kError) out.push_back(&f);
  return out;
}

TEST_CASE("b5 entries: every entry of every fixture segment parses, CRC and xxh64 match", "[borg2seg]") {
  size_t put2 = 0, del = 0, commit = 0;
  for (const char* repo : {"none", "repokey-aes-ocb", "compression-mix"}) {
    for (const auto& d : fs::directory_iterator(B5() + "/" + repo + "/data")) {
      for (const auto& f : fs::directory_iterator(d.path())) {
        std::string seg = Slurp(f.path());
        Bytes b = AsBytes(seg);
        REQUIRE(b.size() >= 8);
        CHECK(std::memcmp(b.data(), "BORG_SEG", 8) == 0);
        size_t off = 8;
        while (off < b.size()) {
          Borg2EntryHeader h;
          std::string why;
          REQUIRE(ParseBorg2EntryHeader(b.subspan(off), b.size() - off, h, &why) == HeaderParse::kOk);
          Bytes entry = b.subspan(off, h.size);
          CHECK(Borg2EntryCrcMatches(entry, h));
          if (h.tag == kB2TagPut2) {
            ++put2;
            CHECK(Put2EntryHashMatches(entry));
            CHECK(Borg2EntryPayload(entry, h.tag).size() == h.size - 49);
          } else if (h.tag == kB2TagDelete) {
            ++del;
          } else {
            REQUIRE(h.tag == kB2TagCommit);
            ++commit;
            CHECK(std::memcmp(entry.data(), kCommitEntry, 9) == 0);
          }
          off += h.size;
        }
      }
    }
  }
  CHECK(put2 > 800);
  CHECK(del >= 2);
  CHECK(commit >= 4);
}

TEST_CASE("b5 entries: damage to each covered byte is seen by the check that covers it", "[borg2seg]") {
  std::string seg = Slurp(B5() + "/none/data/0/2");
  Bytes b = AsBytes(seg);
  Borg2EntryHeader h;
  REQUIRE(ParseBorg2EntryHeader(b.subspan(8), b.size() - 8, h, nullptr) == HeaderParse::kOk);
  REQUIRE(h.tag == kB2TagPut2);
  std::string entry = seg.substr(8, h.size);
  for (size_t pos : {size_t(0), size_t(4), size_t(9), size_t(40), size_t(41), size_t(48)}) {
    std::string bad = entry;
    bad[pos] ^= 0x10;
    Borg2EntryHeader hb;
    if (ParseBorg2EntryHeader(AsBytes(bad), bad.size(), hb, nullptr) == HeaderParse::kOk) {
      CHECK_FALSE(Borg2EntryCrcMatches(AsBytes(bad), hb));
    }
  }
  std::string bad = entry;
  bad[entry.size() - 1] ^= 1;  // payload: covered by xxh64 only
  CHECK(Borg2EntryCrcMatches(AsBytes(bad), h));
  CHECK_FALSE(Put2EntryHashMatches(AsBytes(bad)));
  bad = entry;
  bad[45] ^= 1;  // the stored digest itself
  CHECK_FALSE(Put2EntryHashMatches(AsBytes(bad)));
  // the digest is XXH64 over entry[4:41] || payload, stored big-endian
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  XXH64_update(st, entry.data() + 4, 37);
  XXH64_update(st, entry.data() + 49, entry.size() - 49);
  XXH64_canonical_t canon;
  XXH64_canonicalFromHash(&canon, XXH64_digest(st));
  XXH64_freeState(st);
  CHECK(std::memcmp(canon.digest, entry.data() + 41, 8) == 0);
}

TEST_CASE("b5 entries: impossible headers are refused with borg's words", "[borg2seg]") {
  uint8_t hdr[49] = {};
  Borg2EntryHeader h;
  std::string why;
  hdr[8] = 4;
  StoreLE32(hdr + 4, 49);
  CHECK(ParseBorg2EntryHeader(Bytes(hdr, 49), 100, h, &why) == HeaderParse::kInvalid);
  CHECK(why == "invalid segment entry header, did not get acceptable tag 4");
  hdr[8] = kB2TagPut2;
  StoreLE32(hdr + 4, uint32_t(kB2MaxObjectSize + 1));
  CHECK(ParseBorg2EntryHeader(Bytes(hdr, 49), uint64_t(1) << 30, h, &why) == HeaderParse::kInvalid);
  CHECK(why.find("too big") != std::string::npos);
  StoreLE32(hdr + 4, 48);
  CHECK(ParseBorg2EntryHeader(Bytes(hdr, 49), 100, h, &why) == HeaderParse::kInvalid);
  CHECK(why.find("too small") != std::string::npos);
  StoreLE32(hdr + 4, 200);
  CHECK(ParseBorg2EntryHeader(Bytes(hdr, 49), 100, h, &why) == HeaderParse::kInvalid);
  CHECK(why.find("truncated") != std::string::npos);
  CHECK(ParseBorg2EntryHeader(Bytes(hdr, 20), 300, h, &why) == HeaderParse::kNeedMore);
  hdr[8] = kB2TagDelete;
  StoreLE32(hdr + 4, 42);
  CHECK(ParseBorg2EntryHeader(Bytes(hdr, 49), 100, h, &why) == HeaderParse::kInvalid);
  CHECK(ParseBorg2EntryHeader(Bytes(hdr, 5), 5, h, &why) == HeaderParse::kInvalid);
}

TEST_CASE("b5 config: version 2 only", "[borg2seg]") {
  Result<Borg2Config> c = ParseBorg2Config(Slurp(B5() + "/repokey-aes-ocb/config"));
  REQUIRE(c.ok());
  CHECK(c->segments_per_dir == 1000);
  CHECK(c->id_hex.size() == 64);
  CHECK(c->key_base64.size() > 100);
  Result<Borg2Config> none = ParseBorg2Config(Slurp(B5() + "/none/config"));
  REQUIRE(none.ok());
  CHECK(none->key_base64.empty());
  CHECK(ParseBorg2Config("[repository]\nversion = 1\nid = " + std::string(64, 'a') + "\n").status().code() ==
        StatusCode::kUnsupported);
  CHECK(ParseBorg2Config("[repository]\nversion = 2\nid = xyz\n").status().code() == StatusCode::kInvalidRepositoryConfig);
  CHECK(ParseBorg2Config("[other]\n").status().code() == StatusCode::kNotARepository);
}

TEST_CASE("b5 index: every fixture index.T parses and verifies against integrity.T", "[borg2seg]") {
  struct Case { const char* repo; uint32_t txn; size_t entries; } cases[] = {
      {"none", 5, 145}, {"repokey-aes-ocb", 5, 154}, {"compression-mix", 65, 560}};
  for (const Case& c : cases) {
    INFO(c.repo);
    std::string name = "index." + std::to_string(c.txn);
    std::string idx = Slurp(B5() + "/" + c.repo + "/" + name);
    std::string integ = Slurp(B5() + "/" + c.repo + "/integrity." + std::to_string(c.txn));
    std::string why;
    CHECK(CheckIndexIntegrity(AsBytes(idx), name, kB2IndexHeaderSize, AsBytes(integ), &why) == IntegrityOutcome::kVerified);
    INFO(why);
    Result<std::vector<Borg2IndexEntry>> entries = ParseBorg2Index(AsBytes(idx));
    REQUIRE(entries.ok());
    CHECK(entries->size() == c.entries);
    std::string bad = idx;
    bad[2000] ^= 1;
    CHECK(CheckIndexIntegrity(AsBytes(bad), name, kB2IndexHeaderSize, AsBytes(integ), &why) == IntegrityOutcome::kMismatch);
    CHECK(CheckIndexIntegrity(AsBytes(idx), "index.4", kB2IndexHeaderSize, AsBytes(integ), &why) == IntegrityOutcome::kMismatch);
    CHECK(ParseBorg2Index(AsBytes(idx).first(idx.size() - 1)).status().code() == StatusCode::kCorruptMetadata);
  }
  // a forged msgpack length (array32 of 2^32-1 elements) is malformed, not an allocation
  const uint8_t forged[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0x00};
  std::string idx = Slurp(B5() + "/none/index.5");
  std::string why;
  CHECK(CheckIndexIntegrity(AsBytes(idx), "index.5", kB2IndexHeaderSize, Bytes(forged, sizeof forged), &why) ==
        IntegrityOutcome::kMalformed);
}

TEST_CASE("b5 plan: every clean fixture replays to borg's object count with no finding", "[borg2seg]") {
  struct Case { const char* repo; uint64_t objects; size_t segments; uint32_t txn; } cases[] = {
      {"none", 145, 6, 5}, {"authenticated", 121, 6, 5}, {"authenticated-blake2", 152, 6, 5},
      {"repokey-aes-ocb", 154, 6, 5}, {"repokey-chacha20-poly1305", 146, 6, 5},
      {"keyfile-aes-ocb", 138, 6, 5}, {"keyfile-chacha20-poly1305", 133, 6, 5},
      {"repokey-blake2-aes-ocb", 123, 6, 5}, {"repokey-blake2-chacha20-poly1305", 156, 6, 5},
      {"keyfile-blake2-aes-ocb", 145, 6, 5}, {"keyfile-blake2-chacha20-poly1305", 152, 6, 5},
      {"compression-mix", 560, 15, 65}};
  for (const Case& c : cases) {
    INFO(c.repo);
    Borg2Plan p = PlanOf(B5() + "/" + c.repo);
    CHECK(p.findings.empty());
    CHECK(p.live_objects == c.objects);
    CHECK(p.segments.size() == c.segments);
    CHECK(p.transaction == c.txn);
    CHECK(p.index_checked);
    if (c.segments == 6) CHECK(p.superseded_puts == 1);  // the first manifest
    uint64_t live = 0;
    for (const Borg2Segment& s : p.segments) for (const Borg2Entry& e : s.entries) live += e.live;
    CHECK(live == c.objects);
  }
}

TEST_CASE("b5 plan: a damaged entry header spoils only its entry, the walk resynchronises", "[borg2seg]") {
  Borg2Plan p = PlanOf(B5() + "/corrupt/chpo-entry-header-crc");
  std::vector<const Finding*> errors = Errors(p);
  REQUIRE(errors.size() == 1);
  const Finding& f = *errors[0];
  CHECK(f.stage == Stage::kEntryCrc);
  CHECK(f.segment == 2u);
  CHECK(f.offset == 8171u);
  REQUIRE(f.chunk_id);
  CHECK(Hex(*f.chunk_id) == "20d3151918fa7ad402e16c01d707c5cede2e8528f63942aab1bdead085fa1b82");
  CHECK(f.message.find("Segment entry header checksum mismatch") != std::string::npos);
  CHECK(f.message.find("the walk resumes at offset") != std::string::npos);
  CHECK(p.findings.size() == 1);  // the other 144 objects of segment 2 match the index
  CHECK(p.live_objects == 145);
  CHECK(p.lost_objects == 1);
}

TEST_CASE("b5 plan: a truncated segment names every object after the cut", "[borg2seg]") {
  Copy c("none");
  Borg2Plan intact = PlanOf(c.path());
  const Borg2Segment& s2 = intact.segments.at(2);
  REQUIRE(s2.number == 2);
  REQUIRE(s2.entries.size() > 10);
  const Borg2Entry& cut = s2.entries[10];
  c.Truncate("data/0/2", cut.offset + 100);
  Borg2Plan p = PlanOf(c.path());
  std::set<std::string> want, got;
  for (size_t i = 10; i < s2.entries.size(); ++i) want.insert(Hex(s2.entries[i].id));
  for (const Finding* f : Errors(p)) {
    CHECK(f->stage == Stage::kTruncated);
    CHECK(f->segment == 2u);
    REQUIRE(f->chunk_id);
    got.insert(Hex(*f->chunk_id));
  }
  CHECK(got == want);
  CHECK(p.live_objects == intact.live_objects - want.size());
  CHECK(p.lost_objects == want.size());
}

TEST_CASE("b5 plan: a segment cut at an entry boundary loses the rest by the index", "[borg2seg]") {
  Copy c("none");
  Borg2Plan intact = PlanOf(c.path());
  const Borg2Segment& s2 = intact.segments.at(2);
  c.Truncate("data/0/2", s2.entries[5].offset);
  Borg2Plan p = PlanOf(c.path());
  std::vector<const Finding*> errors = Errors(p);
  CHECK(errors.size() == s2.entries.size() - 5);
  for (const Finding* f : errors) {
    CHECK(f->stage == Stage::kTruncated);
    CHECK(f->message.find("beyond the end of the segment") != std::string::npos);
  }
}

TEST_CASE("b5 plan: a deleted segment names every object it held", "[borg2seg]") {
  Copy c("none");
  Borg2Plan intact = PlanOf(c.path());
  size_t in_seg2 = intact.segments.at(2).entries.size();
  c.Remove("data/0/2");
  Borg2Plan p = PlanOf(c.path());
  std::vector<const Finding*> errors = Errors(p);
  REQUIRE(errors.size() == in_seg2 + 1);  // one per object and one for the file
  size_t with_id = 0;
  for (const Finding* f : errors) {
    CHECK(f->stage == Stage::kMissing);
    with_id += f->chunk_id.has_value();
  }
  CHECK(with_id == in_seg2);
  CHECK(p.lost_objects == in_seg2);
}

TEST_CASE("b5 plan: without index.T the log alone is used, and a note says so", "[borg2seg]") {
  Copy c("none");
  c.Remove("index.5");
  Borg2Plan p = PlanOf(c.path());
  CHECK(p.findings.empty());
  CHECK_FALSE(p.index_checked);
  CHECK(p.live_objects == 145);
  REQUIRE(p.notes.size() == 1);
  CHECK(p.notes[0].find("no index.T") != std::string::npos);
}

TEST_CASE("b5 plan: a damaged index.T is a warning and is not used", "[borg2seg]") {
  Copy c("none");
  c.Patch("index.5", 3000, 0x01);
  Borg2Plan p = PlanOf(c.path());
  REQUIRE(p.findings.size() == 1);
  CHECK(p.findings[0].severity == Severity::kWarning);
  CHECK(p.findings[0].stage == Stage::kIndex);
  CHECK_FALSE(p.index_checked);
  CHECK(p.live_objects == 145);
}

TEST_CASE("b5 plan: uncommitted leftovers are ignored with a warning", "[borg2seg]") {
  Copy c("none");
  std::string put = Slurp(c.File("data/0/4"));  // the manifest PUT2, no COMMIT
  c.Write("data/0/6", put);
  Borg2Plan p = PlanOf(c.path());
  REQUIRE(p.findings.size() == 1);
  CHECK(p.findings[0].severity == Severity::kWarning);
  CHECK(p.findings[0].stage == Stage::kSegment);
  CHECK(p.findings[0].message.find("1 uncommitted segment file(s) after transaction 5") != std::string::npos);
  CHECK(p.transaction == 5);
}

TEST_CASE("b5 plan: stray bytes after the final COMMIT keep the transaction the index records",
          "[borg2seg]") {
  Copy c("none");
  std::string s5 = Slurp(c.File("data/0/5"));
  c.Write("data/0/5", s5 + "garbage");
  Borg2Plan p = PlanOf(c.path());
  REQUIRE(p.findings.size() == 1);
  CHECK(p.findings[0].severity == Severity::kWarning);
  CHECK(p.findings[0].message.find("7 stray bytes after the final COMMIT of transaction 5") != std::string::npos);
  CHECK(p.transaction == 5);
  CHECK(p.live_objects == 145);
  CHECK(p.segments.back().read_limit == s5.size());
}

TEST_CASE("b5 plan: a lock held by borg refuses the check unless bypassed", "[borg2seg]") {
  Copy c("none");
  fs::create_directory(c.File("lock.exclusive"));
  // Empty (borg stopped while releasing it): stale, a warning that reaches the plan.
  Result<Borg2Config> stale = IdentifyBorg2Repository(io::Env::Default(), c.path(), false);
  REQUIRE(stale.ok());
  REQUIRE(stale->lock_findings.size() == 1);
  CHECK(stale->lock_findings[0].location == "lock.exclusive");
  Result<Borg2Plan> plan = PlanBorg2Repository(io::Env::Default(), c.path(), *stale,
                                               ListRepoFolder(io::Env::Default(), c.path()));
  REQUIRE(plan.ok());
  REQUIRE_FALSE(plan->findings.empty());
  CHECK(plan->findings[0].message.rfind("stale lock: lock.exclusive is empty", 0) == 0);
  // Another host's entry: held (borg_lock_test.cc has every state).
  std::ofstream(c.File("lock.exclusive") + "/otherhost@1.1-0").flush();
  CHECK(IdentifyBorg2Repository(io::Env::Default(), c.path(), false).status().code() == StatusCode::kLockHeld);
  CHECK(IdentifyBorg2Repository(io::Env::Default(), c.path(), true).ok());
}

}  // namespace
}  // namespace borgcheck::repo
