// Could not check versus damage (issue 13), through the fault seam (io::FaultEnv: the tests run as
// root, so chmod would not stop a read) and with real FIFOs and directories in copies of the
// fixtures: a file that exists and cannot be read (EACCES, EIO) is stage "io" (exit 2 when nothing
// else is wrong), never "missing"; something that is not a regular file where a segment or pack
// should be is damage ("missing", naming what it is), and it is never opened in a way that blocks;
// a file gone since planning is "repository changed". For borg 1.x (v1.2.4/repos/repokey: 102
// objects, transaction 29, segment 2 holds 16), 2.0.0b5 and borg 2 master (version 4).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checker/io/env.h"
#include "checker/io/fault_env.h"
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

const std::string kBorg1 = Borg1Fixtures() + "/v1.2.4/repos/repokey";
std::string B5() { return SharedDir() + "/fixtures/borg2b5/repokey-chacha20-poly1305"; }
std::string Master() { return SharedDir() + "/fixtures/borg2master/repos/aes256-ocb_sha256_repokey"; }

int ExitCode(const run::CheckOutcome& o) {
  return o.status.ok() ? report::ExitCodeForSummary(o.summary) : report::ExitCodeForStatus(o.status);
}

std::vector<const Finding*> Where(const run::CheckOutcome& o, Stage stage) {
  std::vector<const Finding*> out;
  for (const Finding& f : o.findings) {
    if (f.stage == stage) out.push_back(&f);
  }
  return out;
}

size_t Borg1LiveIn(uint32_t segment) {
  Result<std::string> bytes = io::Env::Default().ReadWholeFile(kBorg1 + "/index.29", 1 << 20);
  REQUIRE(bytes.ok());
  Result<repo::HashIndexContents> idx = repo::ParseHashIndex(AsBytes(*bytes));
  REQUIRE(idx.ok());
  return std::count_if(idx->entries.begin(), idx->entries.end(), [&](const auto& e) { return e.segment == segment; });
}

std::vector<repo::Borg2IndexEntry> B5IndexIn(const std::string& repo, uint32_t segment) {
  std::string name;
  for (const auto& e : fs::directory_iterator(repo)) {
    if (e.path().filename().string().rfind("index.", 0) == 0) name = e.path().string();
  }
  Result<std::string> bytes = io::Env::Default().ReadWholeFile(name, 1 << 24);
  REQUIRE(bytes.ok());
  Result<std::vector<repo::Borg2IndexEntry>> idx = repo::ParseBorg2Index(AsBytes(*bytes));
  REQUIRE(idx.ok());
  std::vector<repo::Borg2IndexEntry> out;
  for (const auto& e : *idx) {
    if (e.segment == segment) out.push_back(e);
  }
  return out;
}

void ReplaceWithFifo(RepoCopy& c, const std::string& rel) {
  c.Remove(rel);
  REQUIRE(::mkfifo((c.path() + "/" + rel).c_str(), 0600) == 0);
}

// ---- borg 1.x ---------------------------------------------------------------------------------

TEST_CASE("io: borg 1.x: a segment that cannot be opened is not checked (io), never missing", "[io]") {
  const size_t n = Borg1LiveIn(2);
  REQUIRE(n == 16);
  for (const char* why : {"Permission denied", "Input/output error"}) {
    INFO(why);
    io::FaultEnv faults;
    faults.FailOpen("/data/0/2", StatusCode::kIoError, why);
    run::CheckOutcome o = Check(kBorg1, false, 2, faults);
    REQUIRE(o.status.ok());
    CHECK(Where(o, Stage::kMissing).empty());
    std::vector<const Finding*> io = Where(o, Stage::kIo);
    REQUIRE(io.size() == n + 1);
    const Finding& seg = *io.back();  // sorted: the segment-level one (no offset) after its objects
    CHECK(seg.segment == 2u);
    CHECK(!seg.chunk_id);
    CHECK(seg.message == "cannot read segment file: " + kBorg1 + "/data/0/2: " + why +
                             "; its 16 live object(s) are not checked");
    for (size_t i = 0; i + 1 < io.size(); ++i) {
      CHECK(io[i]->chunk_id);
      CHECK(io[i]->message == "the segment cannot be read (" + kBorg1 + "/data/0/2: " + why + "): not checked");
    }
    CHECK(o.summary.io_errors == n + 1);
    CHECK(o.summary.errors == n + 1);
    CHECK(o.summary.objects_total == 102);
    CHECK(o.summary.objects_verified == 102 - n);
    CHECK(ExitCode(o) == 2);
  }
}

TEST_CASE("io: borg 1.x: index, integrity and hints files that cannot be read", "[io]") {
  SECTION("index.29: the log is replayed, and the run could not check everything") {
    io::FaultEnv faults;
    faults.FailOpen("/index.29");
    run::CheckOutcome o = Check(kBorg1, false, 2, faults);
    REQUIRE(o.status.ok());
    REQUIRE(o.findings.size() == 1);
    CHECK(o.findings[0].stage == Stage::kIo);
    CHECK(o.findings[0].severity == Severity::kError);
    CHECK(o.findings[0].message == "index.29 cannot be read (" + kBorg1 +
                                       "/index.29: Permission denied): the live objects are taken from the log; "
                                       "losses only the index could name are not checked");
    CHECK(o.summary.live_list_source == "log-replay");
    CHECK(o.summary.objects_verified == 102);
    CHECK(ExitCode(o) == 2);
  }
  SECTION("integrity.29: the index cannot be verified, so the log is replayed; hints.29 is not used") {
    io::FaultEnv faults;
    faults.FailOpen("/integrity.29", StatusCode::kIoError, "Input/output error");
    run::CheckOutcome o = Check(kBorg1, false, 2, faults);
    REQUIRE(o.status.ok());
    std::vector<const Finding*> io = Where(o, Stage::kIo);
    REQUIRE(io.size() == 2);
    CHECK(o.findings.size() == 2);
    std::set<std::string> got;
    for (const Finding* f : io) got.insert(f->message);
    const std::string cause = "integrity.29 cannot be read (" + kBorg1 + "/integrity.29: Input/output error): ";
    CHECK(got == std::set<std::string>{
                     cause + "index.29 cannot be verified; the live objects are taken from the log",
                     cause + "hints.29 is not verified and not used to find lost segments"});
    CHECK(o.summary.live_list_source == "log-replay");
    CHECK(ExitCode(o) == 2);
  }
  SECTION("hints.29") {
    io::FaultEnv faults;
    faults.FailOpen("/hints.29");
    run::CheckOutcome o = Check(kBorg1, false, 2, faults);
    REQUIRE(o.status.ok());
    REQUIRE(o.findings.size() == 1);
    CHECK(o.findings[0].stage == Stage::kIo);
    CHECK(o.findings[0].message == "hints.29 cannot be read (" + kBorg1 +
                                       "/hints.29: Permission denied): the segments and live counts it records are "
                                       "not cross-checked with the log");
    CHECK(o.summary.live_list_source == "index");
    CHECK(ExitCode(o) == 2);
  }
}

TEST_CASE("io: borg 1.x without an index: hints.29 counts what an unreadable segment holds", "[io]") {
  RepoCopy c(kBorg1);
  c.Remove("index.29");
  io::FaultEnv faults;
  faults.FailOpen("/data/0/2");
  run::CheckOutcome o = Check(c.path(), false, 2, faults);
  REQUIRE(o.status.ok());
  CHECK(o.summary.live_list_source == "log-replay");
  CHECK(Where(o, Stage::kMissing).empty());
  std::vector<const Finding*> io = Where(o, Stage::kIo);
  REQUIRE(io.size() == 2);
  std::vector<std::string> messages;
  for (const Finding* f : io) messages.push_back(f->message);
  std::sort(messages.begin(), messages.end());
  CHECK(messages == std::vector<std::string>{
                        "cannot read segment file: " + c.path() + "/data/0/2: Permission denied",
                        "hints.29 records 16 live objects in segment 2, which cannot be read: they are not checked"});
  CHECK(o.summary.objects_total == 102);  // the 16 hints.29 places there count, unchecked
  CHECK(o.summary.objects_verified == 86);
  CHECK(ExitCode(o) == 2);
}

TEST_CASE("io: borg 1.x: the COMMIT segment cannot be read", "[io]") {
  io::FaultEnv faults;
  faults.FailOpen("/data/0/29");
  run::CheckOutcome o = Check(kBorg1, false, 2, faults);
  REQUIRE(o.status.ok());
  CHECK(o.summary.transaction == 29);  // index.29 records it
  CHECK(Where(o, Stage::kTruncated).empty());
  CHECK(Where(o, Stage::kMissing).empty());
  std::vector<const Finding*> io = Where(o, Stage::kIo);
  REQUIRE(!io.empty());
  bool commit = false;
  for (const Finding* f : io) {
    commit |= f->message == "segment 29 should hold the COMMIT of transaction 29 (recorded by index.29, hints.29 "
                            "and integrity.29) and cannot be read (" + kBorg1 + "/data/0/29: Permission denied): not checked";
  }
  CHECK(commit);
  CHECK(o.summary.errors == o.summary.io_errors);
  CHECK(ExitCode(o) == 2);
}

TEST_CASE("io: borg 1.x: a read error in the middle of a segment: those objects only, as io", "[io]") {
  io::FaultEnv faults;
  faults.FailRead("/data/0/2");  // every read of the segment
  run::CheckOutcome o = Check(kBorg1, false, 2, faults);
  REQUIRE(o.status.ok());
  CHECK(Where(o, Stage::kMissing).empty());
  std::vector<const Finding*> io = Where(o, Stage::kIo);
  REQUIRE(io.size() == 17);  // the magic's warning and each of the 16 live objects
  CHECK(io[0]->severity == Severity::kWarning);
  CHECK(io[0]->message == "cannot read the segment magic (read error: Input/output error (injected)); the live "
                          "objects of this segment were read one by one");
  for (size_t i = 1; i < io.size(); ++i) {
    CHECK(io[i]->severity == Severity::kError);
    CHECK(io[i]->message ==
          "cannot read the entry at the indexed offset (read error: Input/output error (injected)): not checked");
  }
  CHECK(o.summary.io_errors == 16);
  CHECK(ExitCode(o) == 2);
}

// Regression (issue 18): the archive pass fetches metadata objects again; a read that fails
// there (a disk or a connection dying after the reading phase) was reported as a "missing" chunk,
// damage. It is "could not check" (stage io), as in the reading phase. Every segment or pack
// gives the reads the repository pass makes of it, then fails every later one.
TEST_CASE("io: a read error in the archive pass is could not check, never missing (every generation)", "[io]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}, {"BORG_KEYS_DIR", SharedDir() + "/fixtures/borg2master/keys"}});
  for (const auto& [repo, units] : std::vector<std::pair<std::string, std::string>>{
           {kBorg1, "data"}, {B5(), "data"}, {Master(), "packs"}}) {
    INFO(repo);
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(repo + "/" + units)) {
      if (e.is_regular_file()) files.push_back(e.path().string());
    }
    REQUIRE(!files.empty());
    io::FaultEnv counting;
    run::CheckOutcome first = CheckRepositoryPass(repo, true, 1, counting);
    REQUIRE(first.status.ok());
    REQUIRE(first.findings.empty());
    io::FaultEnv faults;
    for (const std::string& f : files) faults.FailReadsAfter(f, counting.Reads(f));
    run::CheckOutcome o = Check(repo, true, 1, faults);
    REQUIRE(o.status.ok());
    CHECK(Where(o, Stage::kMissing).empty());
    // (The orphan count is a warning that says some archive metadata could not be read.)
    for (const Finding* f : Where(o, Stage::kReference)) CHECK(f->severity == Severity::kWarning);
    std::vector<const Finding*> io = Where(o, Stage::kIo);
    REQUIRE(!io.empty());
    bool archive_read = false;
    for (const Finding* f : io) {
      archive_read |= f->message.find(" could not be read: cannot read " + repo) != std::string::npos &&
                      f->message.find("read error: Input/output error (injected)") != std::string::npos;
      CHECK(f->message.find("corrupted") == std::string::npos);
      CHECK(f->advice.empty());  // nothing is known to be damaged: no repair advice
    }
    // (Version 4 reads more of its packs before the reading phase than its repository pass does:
    // there the failures begin in the reading phase, and the archive pass finds them known.)
    if (repo != Master()) CHECK(archive_read);
    CHECK(o.summary.errors == o.summary.io_errors);
    CHECK(ExitCode(o) == 2);
  }
}

// The opens a run announces to its store (io::Env::OpenAhead: over sftp each is opened in the
// background while the run goes on), in order: the config (format detection stats, then reads
// it); the index's files once the plan knows T
// (integrity.T twice: the index's check and the hints' read it); the manifest's segment twice
// (the key's probe and the archive list); each segment after the first, two ahead of its turn;
// then, with the units read,
// the manifest's segment (Finish reads it again) and the segments of the first archives'
// metadata (the archive pass). Local, they change nothing: the run is clean.
TEST_CASE("io: the opens a segment-log run announces to its store, in order", "[io]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  for (const std::string& repo : {kBorg1, B5()}) {
    INFO(repo);
    std::string t;
    std::map<uint32_t, std::string> segments;  // every segment is a unit here (all committed)
    for (const auto& e : fs::directory_iterator(repo)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("index.", 0) == 0) t = name.substr(6);
    }
    for (const auto& e : fs::recursive_directory_iterator(repo + "/data")) {
      if (e.is_regular_file()) segments[uint32_t(std::stoul(e.path().filename().string()))] = e.path().string();
    }
    REQUIRE(!t.empty());
    REQUIRE(segments.size() > 3);
    std::optional<uint32_t> manifest_segment;
    const std::array<uint8_t, 32> zero{};
    if (repo == kBorg1) {
      Result<std::string> bytes = io::Env::Default().ReadWholeFile(repo + "/index." + t, 1 << 20);
      REQUIRE(bytes.ok());
      Result<repo::HashIndexContents> idx = repo::ParseHashIndex(AsBytes(*bytes));
      REQUIRE(idx.ok());
      for (const auto& e : idx->entries) {
        if (e.id == zero) manifest_segment = e.segment;
      }
    } else {
      for (const auto& [n, path] : segments) {
        for (const repo::Borg2IndexEntry& e : B5IndexIn(repo, n)) {
          if (e.id == zero) manifest_segment = e.segment;
        }
      }
    }
    REQUIRE(manifest_segment);

    io::FaultEnv hints;
    run::CheckOutcome o = Check(repo, true, 2, hints);
    REQUIRE(o.status.ok());
    CHECK(o.findings.empty());
    REQUIRE(o.summary.archives_checked.value_or(0) > 0);
    std::vector<std::string> expected = {repo + "/config",  // format detection reads it
                                         repo + "/index." + t, repo + "/integrity." + t, repo + "/hints." + t,
                                         repo + "/integrity." + t};
    expected.push_back(segments.at(*manifest_segment));  // the key's probe
    expected.push_back(segments.at(*manifest_segment));  // the archive list
    std::vector<std::string> units;
    for (const auto& [n, path] : segments) units.push_back(path);
    for (size_t i = 1; i < units.size(); ++i) expected.push_back(units[i]);
    expected.push_back(segments.at(*manifest_segment));
    const std::vector<std::string> got = hints.OpenAheads();
    REQUIRE(got.size() > expected.size());
    CHECK(std::vector<std::string>(got.begin(), got.begin() + std::ptrdiff_t(expected.size())) == expected);
    // The rest: the segments of the archives walked first (at most four archives; a segment
    // once), each a segment of the repository.
    const size_t archives = got.size() - expected.size();
    CHECK(archives >= 1);
    CHECK(archives <= std::min<size_t>(4, *o.summary.archives_checked));
    CHECK(std::set<std::string>(got.begin() + std::ptrdiff_t(expected.size()), got.end()).size() == archives);
    for (size_t i = expected.size(); i < got.size(); ++i) {
      INFO(got[i]);
      CHECK(std::find(units.begin(), units.end(), got[i]) != units.end());
    }
  }
}

// Regression (issue 18): a run that lost its store's connection claimed every byte read
// (bytes_read = bytes_total): the unit being read when it went was counted whole. It counts only
// the units read before; segment 2 (46,005 bytes) is where the connection goes, on its first read.
TEST_CASE("io: a lost connection stops the run, and the unit it cut short is not counted as read", "[io]") {
  io::FaultEnv faults;
  faults.LoseConnectionAfter("/data/0/2", 0);
  run::CheckOutcome o = Check(kBorg1, true, 1, faults);
  CHECK(o.status.code() == StatusCode::kIoError);
  CHECK(o.status.message() ==
        "connection to the test store lost (injected); the run stopped there: what it had not read is not checked");
  CHECK(o.partial_report);
  CHECK(o.summary.stopped == "connection-lost");
  CHECK_FALSE(o.summary.complete);
  CHECK(o.summary.bytes_read == 530 + 17);  // segments 0 and 1, read before it
  CHECK(o.summary.bytes_skipped == o.summary.bytes_total - o.summary.bytes_read);
  CHECK(ExitCode(o) == 2);
}

TEST_CASE("io: borg 1.x: a FIFO or a directory where a segment should be is damage, and never blocks", "[io]") {
  for (bool fifo : {true, false}) {
    INFO((fifo ? "FIFO" : "directory"));
    RepoCopy c(kBorg1);
    if (fifo) {
      ReplaceWithFifo(c, "data/0/2");
    } else {
      c.Remove("data/0/2");
      fs::create_directory(c.path() + "/data/0/2");
    }
    const std::string what = fifo ? "a FIFO" : "a directory";
    run::CheckOutcome o = Check(c.path(), false, 2);
    REQUIRE(o.status.ok());
    CHECK(Where(o, Stage::kIo).empty());
    std::vector<const Finding*> missing = Where(o, Stage::kMissing);
    REQUIRE(missing.size() == 17);
    CHECK(missing.back()->message == "committed segment file " + c.path() + "/data/0/2 is " + what +
                                         ", not a segment file; 16 live object(s) lost");
    for (size_t i = 0; i + 1 < missing.size(); ++i) {
      CHECK(missing[i]->message == "segment file is " + what + ", not a segment file: " + c.path() + "/data/0/2");
    }
    CHECK(ExitCode(o) == 90);
    // Without the index, hints.29 tells what stood there.
    c.Remove("index.29");
    o = Check(c.path(), false, 2);
    REQUIRE(o.status.ok());
    missing = Where(o, Stage::kMissing);
    REQUIRE(missing.size() == 1);
    CHECK(missing[0]->message == "committed segment file " + c.path() + "/data/0/2 is " + what +
                                     ", not a segment file; hints.29 records 16 live objects in it: 16 objects lost "
                                     "(their ids are not known: no usable index names them)");
    CHECK(o.summary.objects_total == 102);
    CHECK(ExitCode(o) == 90);
  }
}

TEST_CASE("io: borg 1.x: a segment replaced by a FIFO after it was listed is damage", "[io]") {
  io::FaultEnv faults;
  faults.FailOpen("/data/0/2", StatusCode::kCorruptMetadata, "is a FIFO, not a regular file");
  run::CheckOutcome o = Check(kBorg1, false, 2, faults);
  REQUIRE(o.status.ok());
  CHECK(Where(o, Stage::kIo).empty());
  std::vector<const Finding*> missing = Where(o, Stage::kMissing);
  REQUIRE(missing.size() == 17);
  CHECK(missing.back()->message == "cannot open segment: " + kBorg1 + "/data/0/2: is a FIFO, not a regular file");
  for (size_t i = 0; i + 1 < missing.size(); ++i) {
    CHECK(missing[i]->message == "the segment is not a readable segment file (" + kBorg1 +
                                     "/data/0/2: is a FIFO, not a regular file): lost");
  }
  CHECK(ExitCode(o) == 90);
}

// ---- 2.0.0b5 ----------------------------------------------------------------------------------

TEST_CASE("io: 2.0.0b5: a segment that cannot be opened is not checked (io)", "[io]") {
  const std::vector<repo::Borg2IndexEntry> in2 = B5IndexIn(B5(), 2);
  REQUIRE(in2.size() > 100);
  io::FaultEnv faults;
  faults.FailOpen("/data/0/2");
  run::CheckOutcome o = Check(B5(), false, 2, faults);
  REQUIRE(o.status.ok());
  CHECK(Where(o, Stage::kMissing).empty());
  std::vector<const Finding*> io = Where(o, Stage::kIo);
  REQUIRE(io.size() == in2.size() + 1);
  CHECK(io.back()->message == "cannot read segment file: " + B5() + "/data/0/2: Permission denied; its objects are "
                              "not checked");
  for (size_t i = 0; i + 1 < io.size(); ++i) {
    CHECK(io[i]->message.find("lists this chunk here; the segment cannot be read (" + B5() +
                              "/data/0/2: Permission denied): not checked") != std::string::npos);
  }
  CHECK(o.summary.objects_total == 146);
  CHECK(ExitCode(o) == 2);
}

TEST_CASE("io: 2.0.0b5: the COMMIT segment cannot be read", "[io]") {
  io::FaultEnv faults;
  faults.FailOpen("/data/0/5");
  run::CheckOutcome o = Check(B5(), false, 2, faults);
  REQUIRE(o.status.ok());
  CHECK(o.summary.transaction == 5);  // index.5 records it
  CHECK(Where(o, Stage::kTruncated).empty());
  CHECK(Where(o, Stage::kMissing).empty());
  bool commit = false;
  for (const Finding* f : Where(o, Stage::kIo)) {
    commit |= f->message == "segment 5 should hold the COMMIT of transaction 5 (recorded by index.5, hints.5 and "
                            "integrity.5) and cannot be read (" + B5() + "/data/0/5: Permission denied): not checked";
  }
  CHECK(commit);
  CHECK(o.summary.errors == o.summary.io_errors);
  CHECK(ExitCode(o) == 2);
}

TEST_CASE("io: 2.0.0b5: a FIFO where a segment should be is damage", "[io]") {
  RepoCopy c(B5());
  const size_t n = B5IndexIn(c.path(), 2).size();
  ReplaceWithFifo(c, "data/0/2");
  run::CheckOutcome o = Check(c.path(), false, 2);
  REQUIRE(o.status.ok());
  CHECK(Where(o, Stage::kIo).empty());
  std::vector<const Finding*> missing = Where(o, Stage::kMissing);
  REQUIRE(missing.size() == n + 1);
  CHECK(missing.back()->message == "committed segment file " + c.path() + "/data/0/2 is a FIFO, not a segment file");
  CHECK(missing[0]->message.find("segment file " + c.path() + "/data/0/2 is a FIFO, not a segment file: this chunk "
                                 "(listed by index.") == 0);
  CHECK(ExitCode(o) == 90);
}

// ---- borg 2 master (version 4) ------------------------------------------------------------------

TEST_CASE("io: version 4: a pack or the manifest that cannot be read is not checked (io)", "[io]") {
  std::string pack;
  for (const auto& e : fs::recursive_directory_iterator(Master() + "/packs")) {
    if (e.is_regular_file()) pack = e.path().filename().string();
  }
  REQUIRE(pack.size() == 64);
  SECTION("a pack") {
    io::FaultEnv faults;
    faults.FailOpen("/" + pack);
    run::CheckOutcome o = Check(Master(), false, 2, faults);
    REQUIRE(o.status.ok());
    CHECK(Where(o, Stage::kMissing).empty());
    std::vector<const Finding*> io = Where(o, Stage::kIo);
    REQUIRE(io.size() >= 2);
    for (const Finding* f : io) {
      CHECK((f->message.find("cannot open packs/") == 0 ||
             f->message.find("the pack holding this chunk cannot be read (") == 0));
    }
    CHECK(o.summary.errors == o.summary.io_errors);
    CHECK(ExitCode(o) == 2);
  }
  SECTION("config/manifest") {
    io::FaultEnv faults;
    faults.FailOpen("/config/manifest");
    run::CheckOutcome o = Check(Master(), false, 2, faults);
    REQUIRE(o.status.ok());
    REQUIRE(o.findings.size() == 1);
    CHECK(o.findings[0].stage == Stage::kIo);
    CHECK(o.findings[0].message ==
          "the manifest cannot be read (" + Master() + "/config/manifest: Permission denied): not checked");
    CHECK(ExitCode(o) == 2);
  }
  SECTION("a FIFO where a pack should be is damage") {
    RepoCopy c(Master());
    ReplaceWithFifo(c, "packs/" + pack.substr(0, 2) + "/" + pack);
    run::CheckOutcome o = Check(c.path(), false, 2);
    REQUIRE(o.status.ok());
    CHECK(Where(o, Stage::kIo).empty());
    std::vector<const Finding*> missing = Where(o, Stage::kMissing);
    REQUIRE(!missing.empty());
    bool pack_level = false;
    for (const Finding* f : missing) {
      pack_level |= f->message.find("pack referenced by the index is a FIFO, not a pack file (packs/") == 0;
      if (f->chunk_id) CHECK(f->message == "Object not found in the repository (its pack is a FIFO, not a pack file)");
    }
    CHECK(pack_level);
    CHECK(ExitCode(o) == 90);
  }
}

}  // namespace
}  // namespace borgcheck::testing
