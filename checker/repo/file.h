// Read-only file access for repository files: open(O_RDONLY) and pread, nothing else. Every
// byte borgcheck reads from a repository comes through here, so "never modify a repository"
// is checkable in one place, and tests can inject faults at one seam.
//
// Thread contract: a ReadOnlyFile is owned by one thread; pread on it is thread-compatible
// but we never share one. Functions are safe for concurrent use.
#pragma once

#include <cstdint>
#include <string>

#include "checker/base/bytes.h"
#include "checker/base/status.h"

namespace borgcheck::repo {

class ReadOnlyFile {
 public:
  ReadOnlyFile() = default;
  ~ReadOnlyFile();
  ReadOnlyFile(ReadOnlyFile&& o) noexcept
      : fd_(o.fd_), size_(o.size_), fault_armed_(o.fault_armed_), fault_offset_(o.fault_offset_) {
    o.fd_ = -1;
  }
  ReadOnlyFile& operator=(ReadOnlyFile&& o) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  // kNotFound if the path does not exist, kIoError otherwise.
  static Result<ReadOnlyFile> Open(const std::string& path);

  uint64_t size() const { return size_; }
  // Reads exactly n bytes at offset into dst; kIoError on a short read or error.
  Status ReadAt(uint64_t offset, size_t n, uint8_t* dst) const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  bool fault_armed_ = false;    // test seam, see TEST_InjectReadError
  int64_t fault_offset_ = -1;
};

// Whole small file (config, index, key file) into a string; kNotFound / kIoError.
// Refuses files larger than max_size (untrusted sizes are checked before allocation).
Result<std::string> ReadWholeFile(const std::string& path, uint64_t max_size);

// Test-only fault injection: when set, ReadAt() on files whose path ends with `suffix`
// fails with EIO for reads covering byte `offset` (-1: every read). Never set outside tests.
void TEST_InjectReadError(const std::string& suffix, int64_t offset);

}  // namespace borgcheck::repo
