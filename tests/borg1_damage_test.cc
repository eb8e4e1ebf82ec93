// One small named case per kind of damage to a borg 1.x repository (after leveldb's
// log_test.cc): build a copy of a real fixture, damage it, assert the exact findings.
// The fixture is v1.2.4/repos/repokey: 102 live objects, transaction 29, segment 2 holds 16.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "checker/repo/file.h"
#include "checker/repo/hashindex.h"
#include "tests/test_support.h"

namespace borgcheck::testing {
namespace {

using report::Severity;
using report::Stage;

const std::string kRepo = Borg1Fixtures() + "/v1.2.4/repos/repokey";

// The live objects of `segment` in offset order, from the fixture's index.29.
std::vector<repo::IndexEntry> LiveIn(uint32_t segment) {
  Result<std::string> bytes = repo::ReadWholeFile(kRepo + "/index.29", 1 << 20);
  REQUIRE(bytes.ok());
  Result<repo::HashIndexContents> idx = repo::ParseHashIndex(AsBytes(*bytes));
  REQUIRE(idx.ok());
  std::vector<repo::IndexEntry> out;
  for (const auto& e : idx->entries) if (e.segment == segment) out.push_back(e);
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
  return out;
}

std::string Hex(const repo::IndexEntry& e) { return ToHex(Bytes(e.id.data(), 32)); }

const report::Finding* FindingFor(const run::CheckOutcome& o, const std::string& id) {
  for (const auto& f : o.findings) if (f.chunk_id && report::ChunkIdHex(*f.chunk_id) == id) return &f;
  return nullptr;
}

TEST_CASE("damage: a segment truncated inside an entry", "[damage]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy copy(kRepo);
  auto live = LiveIn(2);
  REQUIRE(live.size() == 16);
  copy.Truncate(copy.Segment(2), live[4].offset + 100);
  run::CheckOutcome o = Check(copy.path(), true);
  REQUIRE(o.status.ok());
  std::set<std::string> want;
  for (size_t i = 4; i < live.size(); ++i) want.insert(Hex(live[i]));
  CHECK(ErrorChunkIds(o) == want);
  for (size_t i = 4; i < live.size(); ++i) {
    const report::Finding* f = FindingFor(o, Hex(live[i]));
    REQUIRE(f);
    CHECK(f->stage == Stage::kTruncated);
    CHECK(f->segment == 2u);
    CHECK(f->offset == live[i].offset);
  }
  CHECK(o.summary.objects_verified == 102 - 12);
}

TEST_CASE("damage: a deleted committed segment names every object it held", "[damage]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy copy(kRepo);
  copy.Remove(copy.Segment(2));
  run::CheckOutcome o = Check(copy.path(), true);
  REQUIRE(o.status.ok());
  std::set<std::string> want;
  for (const auto& e : LiveIn(2)) want.insert(Hex(e));
  CHECK(ErrorChunkIds(o) == want);
  for (const auto& e : LiveIn(2)) {
    const report::Finding* f = FindingFor(o, Hex(e));
    REQUIRE(f);
    CHECK(f->stage == Stage::kMissing);
    CHECK(f->offset == e.offset);
  }
  CHECK(o.summary.objects_verified == 86);
}

TEST_CASE("damage: a broken entry header spoils only its own object", "[damage]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy copy(kRepo);
  auto live = LiveIn(2);
  copy.FlipByte(copy.Segment(2), live[2].offset + 8, 0x07);  // tag 0 (PUT) -> 7
  run::CheckOutcome o = Check(copy.path(), true);
  REQUIRE(o.status.ok());
  CHECK(ErrorChunkIds(o) == std::set<std::string>{Hex(live[2])});
  CHECK(FindingFor(o, Hex(live[2]))->offset == live[2].offset);
  CHECK(o.summary.objects_verified == 101);  // the 13 objects after it are read via the index
}

TEST_CASE("damage: a corrupted size field: the walk loses sync, the rest is still verified", "[damage]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy copy(kRepo);
  auto live = LiveIn(2);
  copy.FlipByte(copy.Segment(2), live[3].offset + 4, 0x10);  // size field, CRC now stale
  run::CheckOutcome o = Check(copy.path(), true);
  REQUIRE(o.status.ok());
  CHECK(ErrorChunkIds(o) == std::set<std::string>{Hex(live[3])});
  CHECK(CountWarnings(o) == 0);  // no garbage "entries" reported after the damage
  CHECK(o.summary.objects_verified == 101);
}

TEST_CASE("damage: stray bytes after the final COMMIT keep the transaction", "[damage]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy copy(kRepo);
  copy.Append(copy.Segment(29), std::string(100, '\x5a'));
  run::CheckOutcome o = Check(copy.path(), true);
  REQUIRE(o.status.ok());
  CHECK(CountErrors(o) == 0);
  REQUIRE(CountWarnings(o) == 1);
  CHECK(o.findings[0].stage == Stage::kSegment);
  CHECK(o.findings[0].segment == 29u);
  CHECK(o.findings[0].message.find("100 stray bytes after the final COMMIT") != std::string::npos);
  CHECK(o.summary.transaction == 29);
  CHECK(o.summary.objects_verified == 102);  // borg would drop the whole newest transaction
}

TEST_CASE("damage: an index that fails its integrity file is replaced by log replay", "[damage]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy copy(kRepo);
  copy.FlipByte("index.29", 100);
  run::CheckOutcome o = Check(copy.path(), true);
  REQUIRE(o.status.ok());
  CHECK(CountErrors(o) == 0);
  REQUIRE(CountWarnings(o) == 1);
  CHECK(o.findings[0].stage == Stage::kIndex);
  CHECK(o.summary.live_list_source == "log-replay");
  CHECK(o.summary.objects_verified == 102);
}

TEST_CASE("damage: a stale CRC with no index: log replay still names the one object", "[damage]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy copy(kRepo);
  // Without an index the walk has nothing to lose sync against; flipping a data byte of a
  // live object with a stale CRC must give exactly one entry-crc error.
  auto live = LiveIn(2);
  copy.FlipByte(copy.Segment(2), live[5].offset + 60);
  copy.Remove("index.29");
  run::CheckOutcome o = Check(copy.path(), true);
  REQUIRE(o.status.ok());
  CHECK(o.summary.live_list_source == "log-replay");
  CHECK(ErrorChunkIds(o) == std::set<std::string>{Hex(live[5])});
  CHECK(FindingFor(o, Hex(live[5]))->stage == Stage::kEntryCrc);
}

TEST_CASE("damage: a read error on one object: that object only, read once more", "[damage]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy copy(kRepo);
  auto live = LiveIn(2);
  repo::TEST_InjectReadError("/data/0/2", int64_t(live[7].offset) + 50);
  run::CheckOutcome o = Check(copy.path(), true);
  repo::TEST_InjectReadError("", -1);
  REQUIRE(o.status.ok());
  CHECK(ErrorChunkIds(o) == std::set<std::string>{Hex(live[7])});
  CHECK(FindingFor(o, Hex(live[7]))->stage == Stage::kMissing);
  CHECK(o.summary.objects_verified == 101);
}

TEST_CASE("lock: borg's exclusive lock refuses the run unless bypassed", "[damage]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy copy(kRepo);
  std::filesystem::create_directory(copy.path() + "/lock.exclusive");
  run::CheckOutcome o = Check(copy.path(), true);
  CHECK(o.status.code() == StatusCode::kLockHeld);
  run::CheckOptions opts;
  opts.repository = copy.path();
  opts.verify_data = true;
  opts.threads = 2;
  opts.bypass_lock = true;
  run::CheckOutcome b = run::RunCheck(opts, nullptr);
  CHECK(b.status.ok());
  CHECK(b.summary.objects_verified == 102);
}

TEST_CASE("keys: wrong passphrase and missing key file stop the run with their codes", "[damage]") {
  {
    ScopedEnv env({{"BORG_PASSPHRASE", "wrong"}});
    run::CheckOutcome o = Check(kRepo, true);
    CHECK(o.status.code() == StatusCode::kWrongPassphrase);
    CHECK(o.status.message().find("BORG_PASSPHRASE") != std::string::npos);
  }
  {
    ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEY_FILE", std::nullopt},
                   {"BORG_KEYS_DIR", "/nonexistent-borgcheck-keys"}});
    run::CheckOutcome o = Check(Borg1Fixtures() + "/v1.2.4/repos/keyfile", true);
    CHECK(o.status.code() == StatusCode::kKeyNotFound);
    CHECK(o.status.message().find("BORG_KEY_FILE") != std::string::npos);
  }
}

}  // namespace
}  // namespace borgcheck::testing
