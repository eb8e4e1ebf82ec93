// One small named case per kind of damage to a borg 1.x repository (after leveldb's
// log_test.cc): build a copy of a real fixture, damage it, assert the exact findings.
// The fixture is v1.2.4/repos/repokey: 102 live objects, transaction 29, segment 2 holds 16.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "checker/io/fault_env.h"
#include "checker/io/env.h"
#include "checker/repo/borg1/borg1_hashindex.h"
#include "tests/reread_outcomes.h"
#include "tests/test_support.h"

namespace borgcheck::testing {
namespace {

using report::Severity;
using report::Stage;

const std::string kRepo = Borg1Fixtures() + "/v1.2.4/repos/repokey";

// The live objects of `segment` in offset order, from the fixture's index.29.
std::vector<repo::IndexEntry> LiveIn(uint32_t segment) {
  Result<std::string> bytes = io::Env::Default().ReadWholeFile(kRepo + "/index.29", 1 << 20);
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
  io::FaultEnv faults;
  faults.FailRead("/data/0/2", int64_t(live[7].offset) + 50);
  run::CheckOutcome o = Check(copy.path(), true, 2, faults);
  REQUIRE(o.status.ok());
  CHECK(ErrorChunkIds(o) == std::set<std::string>{Hex(live[7])});
  REQUIRE(FindingFor(o, Hex(live[7])));
  // A read error is "could not check" (stage io), never "missing" (issue 13).
  CHECK(FindingFor(o, Hex(live[7]))->stage == Stage::kIo);
  CHECK(FindingFor(o, Hex(live[7]))->message ==
        "cannot read the entry at the indexed offset (read error: Input/output error (injected)): not checked");
  CHECK(o.summary.io_errors == 1);
  CHECK(o.summary.objects_verified == 101);
}

TEST_CASE("lock: borg's exclusive lock refuses the run unless bypassed", "[damage]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  RepoCopy copy(kRepo);
  std::filesystem::create_directory(copy.path() + "/lock.exclusive");
  std::ofstream(copy.path() + "/lock.exclusive/otherhost@1.1-0").flush();  // held elsewhere
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

// ---- the second read through io::FaultEnv (issue 8) -------------------------------------------
// The object is the largest live entry of segment 26: not the manifest, and not among the first
// 16 live objects (all in segment 2) that the mode probe may read; the flipped byte is in the
// middle of its data, which only the segment walk and the engine's second read cover (the probe
// reads one TYPE byte at entry offset + 41, the manifest check reads only the manifest).

struct RereadTarget {
  repo::IndexEntry entry;
  uint32_t size = 0;
  uint64_t byte = 0;  // the file offset flipped
};

RereadTarget PickRereadTarget() {
  std::vector<repo::IndexEntry> live = LiveIn(26);
  REQUIRE(live.size() >= 2);
  Result<std::string> seg = io::Env::Default().ReadWholeFile(kRepo + "/data/0/26", 1 << 20);
  REQUIRE(seg.ok());
  RereadTarget t;
  for (const repo::IndexEntry& e : live) {
    uint32_t size = LoadLE32(reinterpret_cast<const uint8_t*>(seg->data()) + e.offset + 4);
    if (size > t.size) t = {e, size, 0};
  }
  REQUIRE(t.size > 200);
  t.byte = t.entry.offset + t.size / 2;
  return t;
}

const std::string kSegmentChanged =
    "repository changed during check (a segment vanished or a new transaction was committed): no verdict. "
    "Run again when borg is not writing to it";

TEST_CASE("reread: a byte flipped on the first read only, on every read, or differently twice", "[damage][reread]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  const RereadTarget t = PickRereadTarget();
  const RereadEntry e{kRepo, "/data/0/26", 26, t.entry.offset, Hex(t.entry), t.byte, "Segment entry checksum mismatch",
                      102};
  const unsigned clean_reads = CheckRereadOutcomes(e);  // passed, agreed, differed (tests/reread_outcomes.h)
  for (unsigned threads : {1u, 2u, 8u}) {
    INFO("threads " << threads);
    {  // the segment cannot be opened for the second read: not-reread, and the run finishes
      io::FaultEnv faults;
      faults.FlipOnRead("/data/0/26", t.byte, 0);
      faults.VanishAfterOpens("/data/0/26", 1);  // the walk's open is the last one that works
      run::CheckOutcome o = CheckRepositoryPass(kRepo, true, threads, faults);
      CheckEntryFinding(o, e, Severity::kError, "Segment entry checksum mismatch", report::Reread::kNotReread);
      CHECK(faults.Reads("/data/0/26") == clean_reads);
      CHECK(o.summary.objects_verified == 101);
    }
  }
}

TEST_CASE("reread: a segment that vanishes between planning and reading: repository changed", "[damage][reread]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  // Segment 29 (the final COMMIT) is opened once while planning (does it end in COMMIT?); gone
  // when its turn to be read comes, as after a borg compact.
  for (bool verify_data : {true, false}) {
    io::FaultEnv faults;
    faults.VanishAfterOpens("/data/0/29", 1);
    run::CheckOutcome o = CheckRepositoryPass(kRepo, verify_data, 2, faults);
    CHECK(o.status.code() == StatusCode::kRepositoryChanged);
    CHECK(o.status.message() == kSegmentChanged);
    CHECK(o.findings.empty());
  }
}

}  // namespace
}  // namespace borgcheck::testing
