// The second-read outcomes of one damaged segment entry, for the segment-log generations (borg
// 1.x: tests/borg1_damage_test.cc, 2.0.0b5: tests/borg2b5/borg2b5_fixtures_test.cc), written
// once: a byte of the entry flipped by io::FaultEnv on the first read only (a warning, reread
// "passed", the object counted as verified), on every read (an error, "agreed") and differently
// on the two reads (an error, "differed"), at 1, 2 and 8 threads, each with exactly one finding
// of stage entry-crc at the entry's segment and offset, naming its chunk id.
//
// Thread contract: test-only; called from the Catch2 main thread.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "checker/io/fault_env.h"
#include "checker/report/finding.h"
#include "checker/run/check_run.h"
#include "tests/test_support.h"

namespace borgcheck::testing {

struct RereadEntry {
  std::string repo;           // the fixture
  std::string segment_file;   // "/data/0/26": the FaultEnv path suffix of the entry's segment
  uint32_t segment = 0;
  uint64_t offset = 0;        // the entry's offset in the segment
  std::string chunk_hex;      // its chunk id
  uint64_t byte = 0;          // the file offset flipped (inside the entry's data)
  std::string mismatch;       // the checksum finding's message ("Segment entry checksum mismatch")
  uint64_t objects = 0;       // objects a clean --verify-data run verifies
};

// The one finding a damaged-entry run must have.
inline void CheckEntryFinding(const run::CheckOutcome& o, const RereadEntry& e, report::Severity severity,
                              const std::string& message, report::Reread reread) {
  INFO(o.status.message());
  std::string all;  // every finding, should there be others
  for (const report::Finding& x : o.findings) {
    all += report::LocationSuffix(x) + " " + x.message + " (" + std::string(report::RereadName(x.reread)) + ")\n";
  }
  INFO(all);
  REQUIRE(o.status.ok());
  REQUIRE(o.findings.size() == 1);
  const report::Finding& f = o.findings[0];
  CHECK(f.severity == severity);
  CHECK(f.stage == report::Stage::kEntryCrc);
  CHECK(f.segment == e.segment);
  CHECK(f.offset == e.offset);
  CHECK(f.location.empty());
  REQUIRE(f.chunk_id);
  CHECK(report::ChunkIdHex(*f.chunk_id) == e.chunk_hex);
  CHECK(f.message == message);
  CHECK(f.reread == reread);
}

// A clean run, then the three outcomes at 1, 2 and 8 threads (--verify-data, the repository
// pass alone so that the reads of the entry's segment can be counted: the walk's window, then
// the entry once more). Returns the clean run's reads of the segment.
inline unsigned CheckRereadOutcomes(const RereadEntry& e) {
  io::FaultEnv clean_env;
  run::CheckOutcome clean = CheckRepositoryPass(e.repo, true, 2, clean_env);
  REQUIRE(clean.status.ok());
  REQUIRE(clean.findings.empty());
  REQUIRE(clean.summary.objects_verified == e.objects);
  const unsigned clean_reads = clean_env.Reads(e.segment_file);
  for (unsigned threads : {1u, 2u, 8u}) {
    INFO("threads " << threads);
    {  // first read only: a warning, and the object counts as verified
      io::FaultEnv faults;
      faults.FlipOnRead(e.segment_file, e.byte, 1);
      run::CheckOutcome o = CheckRepositoryPass(e.repo, true, threads, faults);
      CheckEntryFinding(o, e, report::Severity::kWarning,
                        e.mismatch + "; the second read verified (a transient read error?)",
                        report::Reread::kPassed);
      CHECK(faults.Reads(e.segment_file) == clean_reads + 1);
      CHECK(o.summary.objects_verified == clean.summary.objects_verified);
      CHECK(o.summary.stored_bytes == clean.summary.stored_bytes);
      CHECK(o.summary.plaintext_bytes == clean.summary.plaintext_bytes);
      CHECK(o.summary.errors == 0);
      CHECK(o.summary.warnings == 1);
    }
    {  // every read: the damage is on disk
      io::FaultEnv faults;
      faults.FlipOnRead(e.segment_file, e.byte, 0);
      run::CheckOutcome o = CheckRepositoryPass(e.repo, true, threads, faults);
      CheckEntryFinding(o, e, report::Severity::kError, e.mismatch, report::Reread::kAgreed);
      CHECK(faults.Reads(e.segment_file) == clean_reads + 1);
      CHECK(o.summary.objects_verified == e.objects - 1);
      CHECK(o.summary.errors == 1);
    }
    {  // other bad bytes the second time: unstable storage
      io::FaultEnv faults;
      faults.FlipOnRead(e.segment_file, e.byte, 1, 0x01);
      faults.FlipOnRead(e.segment_file, e.byte, 2, 0x02);
      run::CheckOutcome o = CheckRepositoryPass(e.repo, true, threads, faults);
      CheckEntryFinding(o, e, report::Severity::kError, e.mismatch, report::Reread::kDiffered);
      CHECK(faults.Reads(e.segment_file) == clean_reads + 1);
      CHECK(o.summary.objects_verified == e.objects - 1);
    }
  }
  return clean_reads;
}

}  // namespace borgcheck::testing
