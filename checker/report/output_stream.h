// A checked writer on a file descriptor: the reporters' only way to stdout and stderr.
//
// Why not stdio or fmt::print(FILE*): a failed write there either goes unnoticed (fflush's
// result dropped) or throws std::system_error, and an exception escaping main() or the
// progress thread ends in std::terminate (abort, exit 134, a core file) -- what
// `borgcheck ... | head -1` and `>/dev/full` did. Here every write(2) is checked: the first
// failure is remembered (its errno), later writes are dropped, and the caller (main) turns it
// into a documented exit code (docs/exit-codes.md: EPIPE 141, anything else 2).
//
// Text is buffered and written at Flush() or when the buffer passes 64 KiB, so a report of a
// million findings is a few hundred write(2) calls, and stops at the first failing one.
//
// Thread contract: safe for concurrent use (guarded by mu_); the progress thread and the
// main thread may share the stderr stream.
#pragma once

#include <mutex>
#include <string>
#include <string_view>

namespace borgcheck::report {

class OutputStream {
 public:
  // `fd` stays owned by the caller and must outlive the stream.
  explicit OutputStream(int fd) : fd_(fd) {}
  OutputStream(const OutputStream&) = delete;
  OutputStream& operator=(const OutputStream&) = delete;
  ~OutputStream() { Flush(); }

  // Appends to the buffer (writes it out once it is large). A no-op once the stream broke.
  void Write(std::string_view text);
  // Writes the buffer out. Returns false when the stream is broken (now or before).
  bool Flush();
  // The errno of the first failed write, or 0 while every write succeeded.
  int error() const;
  bool broken() const { return error() != 0; }
  int fd() const { return fd_; }

 private:
  void FlushLocked();  // requires mu_

  const int fd_;
  mutable std::mutex mu_;
  std::string buf_;  // guarded by mu_
  int error_ = 0;    // guarded by mu_
};

// The exit code for a broken stdout: 141 (128 + SIGPIPE, what a shell shows for a program
// killed by SIGPIPE) for EPIPE, else 2 (could not finish: ENOSPC, EIO, ...).
int ExitCodeForOutputError(int error);

}  // namespace borgcheck::report
