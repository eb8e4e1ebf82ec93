// Files kept open for a reader that comes back to the same few files again and again: the
// archive pass fetches one metadata object after another, most of them from the same segment or
// pack. Each open costs an open(2) and an fstat(2) locally, and three round trips over sftp (STAT,
// OPEN, FSTAT: 0.3 s at 100 ms; the archive pass of bench/RESULTS.md's remote repository opened
// its one 62.7 MB segment for each of its 13 metadata reads). A kept file also keeps the remote
// File's read-ahead block, so neighbouring small objects need no round trip at all.
//
// What a kept file reads is what the file held when it was first opened (as a file the engine
// holds open while it reads a unit; opened at an OpenAhead hint, where the Env took one); a
// failed open is not kept, so the next Open tries again.
//
// Thread contract: safe for concurrent use. The cache owns its Files (shared with the callers
// that hold one); a File's ReadAt is safe for concurrent use (env.h), which is what sharing one
// between threads needs. The Env must outlive the cache and every File it handed out.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "checker/base/status.h"
#include "checker/io/env.h"

namespace borgcheck::io {

class FileCache {
 public:
  static constexpr size_t kDefaultCapacity = 8;

  explicit FileCache(const Env& env, size_t capacity = kDefaultCapacity) : env_(env), capacity_(capacity) {}
  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;

  // The file at `path`: kept from an earlier Open, or opened now (Env::Open's errors) and kept,
  // the least recently used one closed when more than `capacity` are kept.
  Result<std::shared_ptr<const File>> Open(const std::string& path) const;
  // Env::OpenAhead (kParts, the first read at `from`) for a path not kept (a kept one needs no
  // open).
  void OpenAhead(const std::string& path, uint64_t from) const;

 private:
  // The kept file at `path`, moved to the front; nullptr when none. Requires mu_.
  std::shared_ptr<const File> KeptLocked(const std::string& path) const;

  const Env& env_;
  const size_t capacity_;
  mutable std::mutex mu_;
  // Most recently used first; guarded by mu_.
  mutable std::list<std::pair<std::string, std::shared_ptr<const File>>> kept_;
};

}  // namespace borgcheck::io
