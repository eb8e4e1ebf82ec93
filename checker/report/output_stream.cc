#include "checker/report/output_stream.h"

#include <cerrno>
#include <csignal>
#include <unistd.h>

#include "checker/report/exit_codes.h"

namespace borgcheck::report {
namespace {

constexpr size_t kFlushAt = 64 * 1024;

}  // namespace

void OutputStream::Write(std::string_view text) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) return;
  buf_.append(text);
  if (buf_.size() >= kFlushAt) FlushLocked();
}

bool OutputStream::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked();
  return error_ == 0;
}

int OutputStream::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void OutputStream::FlushLocked() {
  size_t done = 0;
  while (!error_ && done < buf_.size()) {
    ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n > 0) {
      done += size_t(n);
    } else if (n < 0 && errno == EINTR) {
      continue;  // a signal (SIGINT...) arrived: the error message still has to go out
    } else {
      error_ = n < 0 ? errno : EIO;  // write(2) returning 0 for a non-empty buffer: no progress
    }
  }
  buf_.clear();
}

int ExitCodeForOutputError(int error) {
  return error == EPIPE ? kExitSignalBase + SIGPIPE : kExitCouldNotRun;
}

}  // namespace borgcheck::report
