// Every record of what should exist in a segment log (issue 13; segment_log/segment_records.h),
// on copies of the borg 1.2.4 and 2.0.0b5 fixtures: with index.T deleted or failing its
// integrity check, a deleted, emptied or truncated committed segment is an error naming what
// hints.T and the damaged index know (the segment and the count, the ids); a recorded
// transaction whose COMMIT segment is gone is an error; a damaged index never produces false
// losses, and on every intact fixture hints.T agrees with the log (no finding at all).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "checker/io/env.h"
#include "checker/report/exit_codes.h"
#include "checker/repo/borg1/borg1_hashindex.h"
#include "checker/repo/borg2b5/borg2b5_segments.h"
#include "tests/test_support.h"

namespace borgcheck::testing {
namespace {

namespace fs = std::filesystem;
using report::Finding;
using report::Severity;
using report::Stage;

const std::string kBorg1 = Borg1Fixtures() + "/v1.2.4/repos/repokey";  // transaction 29, 102 objects
std::string B5() { return SharedDir() + "/fixtures/borg2b5/repokey-chacha20-poly1305"; }  // 5, 146

int ExitCode(const run::CheckOutcome& o) {
  return o.status.ok() ? report::ExitCodeForSummary(o.summary) : report::ExitCodeForStatus(o.status);
}

std::set<std::string> Borg1IdsIn(uint32_t segment) {
  Result<std::string> bytes = io::Env::Default().ReadWholeFile(kBorg1 + "/index.29", 1 << 20);
  REQUIRE(bytes.ok());
  Result<repo::HashIndexContents> idx = repo::ParseHashIndex(AsBytes(*bytes));
  REQUIRE(idx.ok());
  std::set<std::string> out;
  for (const auto& e : idx->entries) {
    if (e.segment == segment) out.insert(ToHex(Bytes(e.id.data(), 32)));
  }
  return out;
}

std::set<std::string> B5IdsIn(uint32_t segment) {
  Result<std::string> bytes = io::Env::Default().ReadWholeFile(B5() + "/index.5", 1 << 24);
  REQUIRE(bytes.ok());
  Result<std::vector<repo::Borg2IndexEntry>> idx = repo::ParseBorg2Index(AsBytes(*bytes));
  REQUIRE(idx.ok());
  std::set<std::string> out;
  for (const auto& e : *idx) {
    if (e.segment == segment) out.insert(ToHex(Bytes(e.id.data(), 32)));
  }
  return out;
}

std::vector<std::string> Messages(const run::CheckOutcome& o, bool with_id) {
  std::vector<std::string> out;
  for (const Finding& f : o.findings) {
    if (bool(f.chunk_id) == with_id) out.push_back(report::StageName(f.stage).data() + std::string(": ") + f.message);
  }
  return out;
}

// Damages the index so that it fails its integrity check but still parses: one byte of its last
// bucket.
void DamageIndex(RepoCopy& c, const std::string& name) {
  const uint64_t size = fs::file_size(c.path() + "/" + name);
  c.FlipByte(name, size - 1, 0x40);
}

// ---- borg 1.x ---------------------------------------------------------------------------------

TEST_CASE("records: borg 1.x without index.29: a deleted or emptied segment is an error from hints.29",
          "[records]") {
  for (bool empty : {false, true}) {
    INFO((empty ? "truncated to 0 bytes" : "deleted"));
    RepoCopy c(kBorg1);
    c.Remove("index.29");
    if (empty) c.Truncate(c.Segment(2), 0);
    else c.Remove(c.Segment(2));
    run::CheckOutcome o = Check(c.path(), false, 2);
    REQUIRE(o.status.ok());
    REQUIRE(o.findings.size() == 1);
    const Finding& f = o.findings[0];
    CHECK(f.severity == Severity::kError);
    CHECK(f.stage == Stage::kMissing);
    CHECK(f.segment == 2u);
    CHECK(f.message == "committed segment file " + c.path() + "/data/0/2 " +
                           (empty ? "is empty (0 bytes)" : "is missing") +
                           "; hints.29 records 16 live objects in it: 16 objects lost (their ids are not known: no "
                           "usable index names them)");
    CHECK(o.summary.objects_total == 102);
    CHECK(o.summary.objects_verified == 86);
    CHECK(ExitCode(o) == 90);
  }
}

TEST_CASE("records: borg 1.x with an index that fails its integrity check: the lost ids are named", "[records]") {
  RepoCopy c(kBorg1);
  DamageIndex(c, "index.29");
  c.Remove(c.Segment(2));
  run::CheckOutcome o = Check(c.path(), false, 2);
  REQUIRE(o.status.ok());
  CHECK(ErrorChunkIds(o) == Borg1IdsIn(2));
  for (const Finding& f : o.findings) {
    if (!f.chunk_id) continue;
    CHECK(f.stage == Stage::kMissing);
    CHECK(f.message == "lost with segment 2 (named by index.29, which fails its integrity check)");
  }
  std::vector<std::string> plain = Messages(o, false);
  std::sort(plain.begin(), plain.end());
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].find("index: index.29 cannot be used (index digest ") == 0);
  CHECK(plain[1] == "missing: committed segment file " + c.path() +
                        "/data/0/2 is missing; hints.29 records 16 live objects in it; index.29, which fails its "
                        "integrity check, names 16 of them: 16 objects lost");
  CHECK(o.summary.objects_total == 102);
  CHECK(ExitCode(o) == 90);
}

TEST_CASE("records: borg 1.x: a damaged index and an intact log give no false loss", "[records]") {
  RepoCopy c(kBorg1);
  // Every used bucket's segment field points at segment 5000 (nothing there): all garbage, and
  // every id is live in the log, so nothing is lost.
  Result<std::string> bytes = io::Env::Default().ReadWholeFile(c.path() + "/index.29", 1 << 20);
  REQUIRE(bytes.ok());
  for (uint64_t at = 18; at + 40 <= bytes->size(); at += 40) {
    const uint32_t seg = LoadLE32(reinterpret_cast<const uint8_t*>(bytes->data()) + at + 32);
    if (seg < 0xfffffffe) c.FlipByte("index.29", at + 33, 0x13);  // seg + 0x1300 * 256
  }
  run::CheckOutcome o = Check(c.path(), false, 2);
  REQUIRE(o.status.ok());
  CHECK(CountErrors(o) == 0);
  REQUIRE(o.findings.size() == 1);
  CHECK(o.findings[0].stage == Stage::kIndex);
  CHECK(o.summary.objects_verified == 102);
  CHECK(ExitCode(o) == 1);
}

TEST_CASE("records: borg 1.x without index.29: a truncated segment: hints.29 counts the lost objects",
          "[records]") {
  RepoCopy c(kBorg1);
  c.Remove("index.29");
  const uint64_t size = fs::file_size(c.path() + "/" + c.Segment(2));
  c.Truncate(c.Segment(2), size / 2);
  run::CheckOutcome o = Check(c.path(), false, 2);
  REQUIRE(o.status.ok());
  std::vector<std::string> plain = Messages(o, false);
  REQUIRE(plain.size() == 2);
  const uint64_t lost = 102 - o.summary.objects_verified;
  REQUIRE(lost > 0);
  bool counted = false;
  for (const std::string& m : plain) {
    counted |= m == "missing: hints.29 records 16 live objects in segment 2; the log gives " + std::to_string(16 - lost) +
                        ": " + std::to_string(lost) + (lost == 1 ? " object is" : " objects are") +
                        " lost (in a damaged or truncated part of the segment; their ids are not known)";
  }
  CHECK(counted);
  CHECK(o.summary.objects_total == 102);
  CHECK(ExitCode(o) == 90);
}

TEST_CASE("records: borg 1.x: the COMMIT segment of a recorded transaction is gone or empty", "[records]") {
  for (bool empty : {false, true}) {
    INFO((empty ? "truncated to 0 bytes" : "deleted"));
    RepoCopy c(kBorg1);
    c.Remove("index.29");
    if (empty) c.Truncate(c.Segment(29), 0);
    else c.Remove(c.Segment(29));
    run::CheckOutcome o = Check(c.path(), false, 2);
    REQUIRE(o.status.ok());
    CHECK(o.summary.transaction == 29);
    REQUIRE(o.findings.size() == 1);
    CHECK(o.findings[0].stage == Stage::kMissing);  // an empty segment is a deleted one, as elsewhere
    CHECK(o.findings[0].segment == 29u);
    CHECK(o.findings[0].message ==
          std::string("segment 29 holding the COMMIT of transaction 29 (recorded by hints.29 and integrity.29) ") +
              (empty ? "is empty (0 bytes)" : "is missing"));
    CHECK(o.summary.objects_verified == 102);
    CHECK(ExitCode(o) == 90);
  }
}

// ---- 2.0.0b5 ----------------------------------------------------------------------------------

TEST_CASE("records: 2.0.0b5 without index.5: a deleted or emptied segment is an error from hints.5",
          "[records]") {
  const size_t n = B5IdsIn(2).size();
  for (bool empty : {false, true}) {
    INFO((empty ? "truncated to 0 bytes" : "deleted"));
    RepoCopy c(B5());
    c.Remove("index.5");
    if (empty) c.Truncate("data/0/2", 0);
    else c.Remove("data/0/2");
    run::CheckOutcome o = Check(c.path(), false, 2);
    REQUIRE(o.status.ok());
    REQUIRE(o.findings.size() == 1);
    CHECK(o.findings[0].message == "committed segment file " + c.path() + "/data/0/2 " +
                                       (empty ? "is empty (0 bytes)" : "is missing") + "; hints.5 records " +
                                       std::to_string(n) + " live objects in it: " + std::to_string(n) +
                                       " objects lost (their ids are not known: no usable index names them)");
    CHECK(o.summary.objects_total == 146);
    CHECK(ExitCode(o) == 90);
  }
}

TEST_CASE("records: 2.0.0b5 with an index that fails its integrity check: the lost ids are named", "[records]") {
  RepoCopy c(B5());
  DamageIndex(c, "index.5");
  c.Remove("data/0/2");
  run::CheckOutcome o = Check(c.path(), false, 2);
  REQUIRE(o.status.ok());
  CHECK(ErrorChunkIds(o) == B5IdsIn(2));
  for (const Finding& f : o.findings) {
    if (f.chunk_id) CHECK(f.message == "lost with segment 2 (named by index.5, which fails its integrity check)");
  }
  CHECK(o.summary.objects_total == 146);
  CHECK(ExitCode(o) == 90);
}

TEST_CASE("records: 2.0.0b5: the COMMIT segment of a recorded transaction is gone or empty", "[records]") {
  for (bool empty : {false, true}) {
    INFO((empty ? "truncated to 0 bytes" : "deleted"));
    RepoCopy c(B5());
    c.Remove("index.5");
    if (empty) c.Truncate("data/0/5", 0);
    else c.Remove("data/0/5");
    run::CheckOutcome o = Check(c.path(), false, 2);
    REQUIRE(o.status.ok());
    CHECK(o.summary.transaction == 5);
    REQUIRE(o.findings.size() == 1);
    CHECK(o.findings[0].stage == Stage::kMissing);
    CHECK(o.findings[0].message ==
          std::string("segment 5 holding the COMMIT of transaction 5 (recorded by hints.5 and integrity.5) ") +
              (empty ? "is empty (0 bytes)" : "is missing"));
    CHECK(ExitCode(o) == 90);
  }
}

// ---- no false losses: hints.T agrees with the log on every fixture ------------------------------

TEST_CASE("records: on every intact fixture, without its index, hints.T agrees with the log", "[records]") {
  std::vector<std::string> repos;
  for (const char* root : {"/fixtures/borg1/v1.2.4/repos", "/fixtures/borg1/v1.4.4/repos", "/fixtures/borg2b5"}) {
    for (const auto& e : fs::directory_iterator(SharedDir() + root)) {
      if (e.is_directory() && fs::exists(e.path() / "config") && fs::exists(e.path() / "data")) {
        repos.push_back(e.path().string());
      }
    }
  }
  REQUIRE(repos.size() >= 28);
  for (const std::string& r : repos) {
    INFO(r);
    RepoCopy c(r);
    for (const auto& e : fs::directory_iterator(c.path())) {
      if (e.path().filename().string().rfind("index.", 0) == 0) fs::remove(e.path());
    }
    run::CheckOutcome o = Check(c.path(), false, 2);
    REQUIRE(o.status.ok());
    CHECK(o.findings.empty());
    CHECK(o.summary.objects_verified == o.summary.objects_total);
  }
}

}  // namespace
}  // namespace borgcheck::testing
