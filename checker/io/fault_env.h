// A test-only Env that injects faults into another Env (restic's errorOnceBackend, leveldb's
// fault-injection env): failed opens, failed reads, a byte flipped on the Nth read only, a file
// that vanishes after it was listed, slow reads. Rules match paths by suffix and are set before
// the run; the Env then counts opens and reads per rule.
//
// Thread contract: rules are set on one thread before the Env is used; after that every method
// is safe for concurrent use (counters guarded by mu_). Never used outside tests and benchmarks;
// the borgcheck binary makes one only for the test-only read delay (BORGCHECK_TEST_READ_DELAY_US,
// behind BORGCHECK_TEST_HOOKS: checker/cli/partial_args.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "checker/io/env.h"

namespace borgcheck::io {

class FaultEnv final : public Env {
 public:
  explicit FaultEnv(const Env& base = Env::Default()) : base_(base) {}

  // Opens of paths ending with `suffix` fail with `code` and "<path>: <message>".
  void FailOpen(std::string suffix, StatusCode code = StatusCode::kIoError,
                std::string message = "Permission denied");
  // Reads of such files that cover byte `offset` (-1: every read) fail with EIO.
  void FailRead(std::string suffix, int64_t offset = -1);
  // The first `reads` reads of such files succeed, every later one fails with EIO (a disk or a
  // connection that dies mid-run).
  void FailReadsAfter(std::string suffix, unsigned reads);
  // As FailReadsAfter, and the first failed read loses the store's connection: from then on
  // Lost() says so and every open, list, stat and read fails (a remote store that went away).
  void LoseConnectionAfter(std::string suffix, unsigned reads);
  // Among the reads of such files that cover byte `offset`, the nth (1-based) returns that byte
  // XOR `mask`; the others are clean. nth = 0: every such read is flipped.
  void FlipOnRead(std::string suffix, uint64_t offset, unsigned nth, uint8_t mask = 0x01);
  // Stat and Lstat of such paths fail with `code` and "<path>: <message>" (the entry is still
  // listed and opens: a stat that fails on its own, e.g. EIO, or a server's STAT refused).
  void FailStat(std::string suffix, StatusCode code = StatusCode::kIoError,
                std::string message = "Input/output error");
  // After `opens` successful opens of such a file it is gone: Open and Stat say kNotFound and
  // List leaves it out.
  void VanishAfterOpens(std::string suffix, unsigned opens);
  // Every read sleeps `per_read` first (a slow disk).
  void DelayReads(std::chrono::microseconds per_read) { delay_ = per_read; }

  // How many reads of files ending with `suffix` were made.
  unsigned Reads(const std::string& suffix) const;
  // The paths OpenAhead was asked for, in order (forwarded to the base Env).
  std::vector<std::string> OpenAheads() const;

  Result<std::unique_ptr<File>> Open(const std::string& path) const override;
  void OpenAhead(const std::string& path, ReadAhead how, uint64_t from) const override;
  Result<std::vector<DirEntry>> List(const std::string& dir) const override;
  Result<FileStat> Stat(const std::string& path) const override;
  Result<FileStat> Lstat(const std::string& path) const override;
  unsigned Connections() const override { return connections_; }
  Status Lost() const override;
  // Pretend to be a store that allows n units to be read at once (engine tests).
  void SetConnections(unsigned n) { connections_ = n; }

 private:
  enum class Kind { kFailOpen, kFailStat, kFailRead, kFailAfter, kLose, kFlip, kVanish };
  struct Rule {
    Kind kind = Kind::kFailOpen;
    std::string suffix;
    StatusCode code = StatusCode::kIoError;
    std::string message;
    int64_t offset = -1;
    unsigned nth = 0;
    uint8_t mask = 0;
    unsigned count = 0;  // guarded by mu_: opens (kVanish), covering reads (kFlip), reads (kFailAfter, kLose)
  };
  static Rule MakeRule(Kind kind, std::string suffix, unsigned nth = 0);
  class FaultFile;
  friend class FaultFile;

  static bool EndsWith(const std::string& s, const std::string& suffix);
  bool Vanished(const std::string& path) const;  // requires mu_
  Status StatFault(const std::string& path) const;  // Stat's and Lstat's injected failure, or ok
  // Applies the read rules to one read of `path`: kIoError, or flips bytes of dst.
  Status AfterRead(const std::string& path, uint64_t offset, size_t n, uint8_t* dst) const;

  const Env& base_;
  std::chrono::microseconds delay_{0};  // const while in use
  unsigned connections_ = 0;            // const while in use
  mutable std::mutex mu_;
  mutable std::vector<Rule> rules_;  // the rules are const while in use; their counters guarded by mu_
  mutable std::vector<std::pair<std::string, unsigned>> reads_;  // guarded by mu_
  mutable bool lost_ = false;                                    // guarded by mu_
  mutable std::vector<std::string> open_aheads_;                 // guarded by mu_
};

}  // namespace borgcheck::io
