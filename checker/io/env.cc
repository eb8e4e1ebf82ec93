#include "checker/io/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace borgcheck::io {
namespace {

const char* TypeName(mode_t m) {
  if (S_ISREG(m)) return "regular file";
  if (S_ISDIR(m)) return "directory";
  if (S_ISFIFO(m)) return "FIFO";
  if (S_ISSOCK(m)) return "socket";
  if (S_ISBLK(m)) return "block device";
  if (S_ISCHR(m)) return "character device";
  if (S_ISLNK(m)) return "symlink";
  return "special file";
}

Status ErrnoStatus(const std::string& path, int e) {
  return Status(e == ENOENT || e == ENOTDIR ? StatusCode::kNotFound : StatusCode::kIoError,
                path + ": " + std::strerror(e));
}

class PosixFile final : public File {
 public:
  PosixFile(int fd, uint64_t size) : fd_(fd), size_(size) {}
  ~PosixFile() override { ::close(fd_); }
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  uint64_t size() const override { return size_; }

  Status ReadAt(uint64_t offset, size_t n, uint8_t* dst) const override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, dst + done, n - done, off_t(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return Status(StatusCode::kIoError, std::string("read error: ") + std::strerror(errno));
      }
      if (r == 0) {
        return Status(StatusCode::kIoError, "short read: file ended at " + std::to_string(offset + done));
      }
      done += size_t(r);
    }
    return Status::Ok();
  }

 private:
  const int fd_;
  const uint64_t size_;
};

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<File>> Open(const std::string& path) const override {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
    constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
    int fd = ::open(path.c_str(), kFlags | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = ::open(path.c_str(), kFlags);  // O_NOATIME: not the owner
    if (fd < 0) return ErrnoStatus(path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      return Status(StatusCode::kIoError, path + ": " + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status(StatusCode::kCorruptMetadata,
                    path + ": is a " + TypeName(st.st_mode) + ", not a regular file");
    }
    // Reads are plain preads; clear O_NONBLOCK so no read ever returns EAGAIN.
    int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return std::unique_ptr<File>(new PosixFile(fd, uint64_t(st.st_size)));
  }

  Result<std::vector<DirEntry>> List(const std::string& dir) const override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY | O_NONBLOCK);
    if (fd < 0) {
      int e = errno;
      if (e == ENOTDIR) return Status(StatusCode::kCorruptMetadata, dir + ": not a directory");
      return ErrnoStatus(dir, e);
    }
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      int e = errno;
      ::close(fd);
      return ErrnoStatus(dir, e);
    }
    std::vector<DirEntry> out;
    errno = 0;
    while (struct dirent* de = ::readdir(d)) {
      if (std::strcmp(de->d_name, ".") == 0 || std::strcmp(de->d_name, "..") == 0) continue;
      DirEntry e;
      e.name = de->d_name;
      unsigned char t = de->d_type;
      if (t == DT_UNKNOWN || t == DT_LNK) {  // follow symlinks, as stat does
        struct stat st;
        if (::fstatat(fd, de->d_name, &st, 0) == 0) {
          t = S_ISREG(st.st_mode) ? DT_REG : S_ISDIR(st.st_mode) ? DT_DIR : DT_UNKNOWN;
        }
      }
      e.type = t == DT_REG ? EntryType::kRegular : t == DT_DIR ? EntryType::kDirectory : EntryType::kOther;
      out.push_back(std::move(e));
      errno = 0;
    }
    int e = errno;
    ::closedir(d);
    if (e != 0) return Status(StatusCode::kIoError, dir + ": " + std::strerror(e));
    return out;
  }

  Result<FileStat> Stat(const std::string& path) const override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(path, errno);
    return ToFileStat(st);
  }

  Result<FileStat> Lstat(const std::string& path) const override {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus(path, errno);
    return ToFileStat(st);
  }

 private:
  static FileStat ToFileStat(const struct stat& st) {
    FileStat s;
    s.type = S_ISREG(st.st_mode) ? EntryType::kRegular : S_ISDIR(st.st_mode) ? EntryType::kDirectory : EntryType::kOther;
    s.size = uint64_t(st.st_size);
    s.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    s.inode = uint64_t(st.st_ino);
    s.ctime_ns = int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
    s.type_name = TypeName(st.st_mode);
    return s;
  }
};

}  // namespace

const Env& Env::Default() {
  static const PosixEnv env;
  return env;
}

Result<uint64_t> Env::EntrySize(const std::string& path, const DirEntry& e) const {
  if (e.size) return *e.size;
  Result<FileStat> st = Stat(path);
  if (!st.ok()) return st.status();
  return st->size;
}

Result<std::string> Env::ReadWholeFile(const std::string& path, uint64_t max_size) const {
  Result<std::unique_ptr<File>> f = Open(path);
  if (!f.ok()) return f.status();
  const uint64_t size = (*f)->size();
  if (size > max_size) {
    return Status(StatusCode::kCorruptMetadata, path + ": " + std::to_string(size) +
                                                    " bytes is larger than the " + std::to_string(max_size) +
                                                    " bytes such a file can have");
  }
  std::string out(size, '\0');
  Status s = (*f)->ReadAt(0, out.size(), reinterpret_cast<uint8_t*>(out.data()));
  if (!s.ok()) return Status(s.code(), path + ": " + s.message());
  return out;
}

std::string ErrorReason(const Status& s, const std::string& path) {
  const std::string& m = s.message();
  const std::string prefix = path + ": ";
  return m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
}

SecondRead ReadAgain(const Env& env, const std::string& path, uint64_t offset, Bytes first,
                     ByteBuffer& scratch) {
  Result<std::unique_ptr<File>> f = env.Open(path);
  if (!f.ok()) return SecondRead::kUnreadable;
  scratch.Resize(first.size());
  if (!(*f)->ReadAt(offset, first.size(), scratch.data()).ok()) return SecondRead::kUnreadable;
  return first.empty() || std::memcmp(scratch.data(), first.data(), first.size()) == 0 ? SecondRead::kSame
                                                                                     : SecondRead::kDifferent;
}

}  // namespace borgcheck::io
