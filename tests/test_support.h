// Helpers shared by the repository-level tests: fixture paths, environment scoping, running
// a check in-process, and damaging copies of fixture repositories.
//
// Thread contract: test-only; called from the Catch2 main thread.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checker/io/env.h"
#include "checker/report/finding.h"
#include "checker/run/check_run.h"

namespace borgcheck::testing {

std::string SharedDir();
std::string Borg1Fixtures();  // <shared>/fixtures/borg1

// Sets environment variables for its lifetime and restores them afterwards.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, std::optional<std::string>>> vars);
  ~ScopedEnv();

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A writable copy of a fixture repository in a fresh temporary directory, removed on
// destruction.
class RepoCopy {
 public:
  explicit RepoCopy(const std::string& source);
  ~RepoCopy();
  const std::string& path() const { return path_; }
  std::string Segment(uint32_t n) const;  // data/<n/1000>/<n>
  void FlipByte(const std::string& rel, uint64_t pos, uint8_t xor_mask = 0x01);
  void Truncate(const std::string& rel, uint64_t size);
  void Append(const std::string& rel, const std::string& bytes);
  void Remove(const std::string& rel);
  // Recomputes the CRC of the segment entry at `offset` in segment file `rel`.
  void FixEntryCrc(const std::string& rel, uint64_t offset);

 private:
  std::string root_, path_;
};

// Runs a check in-process; `env` supplies the repository's bytes (io::FaultEnv injects faults).
run::CheckOutcome Check(const std::string& repo, bool verify_data, unsigned threads = 2,
                        const io::Env& env = io::Env::Default());
// The same with --repository-only: the repository pass alone (no archive pass reading archive
// metadata again), for cases that count reads or expect findings of that pass only.
run::CheckOutcome CheckRepositoryPass(const std::string& repo, bool verify_data, unsigned threads,
                                      const io::Env& env = io::Env::Default());

std::set<std::string> ErrorChunkIds(const run::CheckOutcome& o);
size_t CountErrors(const run::CheckOutcome& o);
size_t CountWarnings(const run::CheckOutcome& o);

}  // namespace borgcheck::testing
