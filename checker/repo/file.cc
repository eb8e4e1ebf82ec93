#include "checker/repo/file.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

namespace borgcheck::repo {
namespace {

// Fault-injection seam (tests only); guarded by its own mutex, read on every ReadAt only
// when armed (the atomic keeps the hot path free of locking).
std::mutex g_fault_mu;
std::string g_fault_suffix;   // guarded by g_fault_mu
int64_t g_fault_offset = -1;  // guarded by g_fault_mu
std::atomic<bool> g_fault_armed{false};


}  // namespace

void TEST_InjectReadError(const std::string& suffix, int64_t offset) {
  std::lock_guard<std::mutex> lock(g_fault_mu);
  g_fault_suffix = suffix;
  g_fault_offset = offset;
  g_fault_armed.store(!suffix.empty(), std::memory_order_release);
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    size_ = o.size_;
    fault_armed_ = o.fault_armed_;
    fault_offset_ = o.fault_offset_;
    o.fd_ = -1;
  }
  return *this;
}

Result<ReadOnlyFile> ReadOnlyFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // not owner
  if (fd < 0) {
    int e = errno;
    return Status(e == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                  path + ": " + std::strerror(e));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status(StatusCode::kIoError, path + ": " + std::strerror(e));
  }
  ReadOnlyFile f;
  f.fd_ = fd;
  f.size_ = uint64_t(st.st_size);
  if (g_fault_armed.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(g_fault_mu);
    if (path.size() >= g_fault_suffix.size() &&
        path.compare(path.size() - g_fault_suffix.size(), g_fault_suffix.size(), g_fault_suffix) == 0) {
      f.fault_offset_ = g_fault_offset;
      f.fault_armed_ = true;
    }
  }
  return f;
}

Status ReadOnlyFile::ReadAt(uint64_t offset, size_t n, uint8_t* dst) const {
  if (fault_armed_ && (fault_offset_ < 0 || (uint64_t(fault_offset_) >= offset &&
                                             uint64_t(fault_offset_) < offset + n))) {
    return Status(StatusCode::kIoError, "read error (injected): Input/output error");
  }
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, dst + done, n - done, off_t(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status(StatusCode::kIoError, std::string("read error: ") + std::strerror(errno));
    }
    if (r == 0) {
      return Status(StatusCode::kIoError,
                    "short read: file ended at " + std::to_string(offset + done));
    }
    done += size_t(r);
  }
  return Status::Ok();
}

Result<std::string> ReadWholeFile(const std::string& path, uint64_t max_size) {
  Result<ReadOnlyFile> f = ReadOnlyFile::Open(path);
  if (!f.ok()) return f.status();
  if (f->size() > max_size) {
    return Status(StatusCode::kCorruptMetadata,
                  path + ": " + std::to_string(f->size()) + " bytes is larger than the " +
                      std::to_string(max_size) + " bytes such a file can have");
  }
  std::string out(f->size(), '\0');
  Status s = f->ReadAt(0, out.size(), reinterpret_cast<uint8_t*>(out.data()));
  if (!s.ok()) return Status(s.code(), path + ": " + s.message());
  return out;
}

}  // namespace borgcheck::repo
