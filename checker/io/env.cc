#include "checker/io/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

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

// Which pages of a file were in the page cache when it was opened, as sorted runs of resident
// pages. Read-only after construction but for last_drop_ (atomic): safe for concurrent use.
//
// "Leave the cache as found" (env.h): a page we read that was not cached before is dropped
// again (posix_fadvise DONTNEED) behind the reads and on close; a page that was cached stays.
// mincore(2) answers for a mapping, so the file is mapped read-only for the question and
// unmapped at once (no page of it is touched). Taken once at open, not before each read: the
// kernel's read-ahead for our own earlier reads would make the next window look cached.
//
// Memory: at most 2 * kMaxRuns runs (16 bytes each) per file, whatever its size. A per-page bitmap
// was 16 KiB per 500 MiB segment, and a run keeps one record per file it will read again
// (2.0.0b5 walks every segment before its data pass): 160 MiB for a 5 TB repository whose
// segments were each partly cached. A file whose cached pages form more runs than that has
// its runs joined across the smallest gaps: the pages of a joined gap count as cached, so some
// pages we read stay cached (never the other way: a page cached before the run is never dropped).
class ResidencyAtOpen {
 public:
  static constexpr size_t kMaxRuns = 64;

  // Where the question cannot be asked (mmap or mincore refused, a file larger than the
  // address space), any_cold() is false: nothing is dropped, as with --keep-cache.
  ResidencyAtOpen(int fd, uint64_t size) {
    page_ = uint64_t(::sysconf(_SC_PAGESIZE));
    if (page_ == 0 || (page_ & (page_ - 1)) != 0) page_ = 4096;
    if (size == 0 || size > uint64_t(SIZE_MAX / 2)) return;
    pages_ = (size + page_ - 1) / page_;
    void* map = ::mmap(nullptr, size_t(size), PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      pages_ = 0;
      return;
    }
    // mincore in slices of 64 Ki pages: a bounded scratch vector, whatever the file's size.
    constexpr uint64_t kSlice = 64 * 1024;
    std::vector<unsigned char> vec(size_t(std::min(pages_, kSlice)));
    bool ok = true;
    for (uint64_t first = 0; first < pages_ && ok; first += kSlice) {
      const uint64_t n = std::min(kSlice, pages_ - first);
      ok = ::mincore(static_cast<char*>(map) + first * page_, size_t(n * page_), vec.data()) == 0;
      for (uint64_t i = 0; ok && i < n; ++i) {
        if (vec[size_t(i)] & 1) {
          AddResident(first + i);
        } else {
          any_cold_ = true;
        }
      }
    }
    ::munmap(map, size_t(size));
    if (!ok) {
      any_cold_ = false;
      runs_.clear();
    }
    runs_.shrink_to_fit();
  }

  bool any_cold() const { return any_cold_; }

  // Drops the pages of [first, end) that were not resident at open.
  void Drop(int fd, uint64_t first, uint64_t end) const {
    end = std::min(end, pages_);
    // The first run that ends after `first`; the gaps between runs are the pages to drop.
    auto it = std::upper_bound(runs_.begin(), runs_.end(), first, [](uint64_t p, const Run& r) { return p < r.end; });
    uint64_t p = first;
    while (p < end) {
      const uint64_t gap_end = it == runs_.end() ? end : std::min(end, it->begin);
      if (gap_end > p) {
        (void)::posix_fadvise(fd, off_t(p * page_), off_t((gap_end - p) * page_), POSIX_FADV_DONTNEED);
      }
      if (it == runs_.end()) break;
      p = std::max(p, it->end);
      ++it;
    }
  }
  // A read at `offset`: the pages of the kCacheDropLagBytes before it (env.h says why behind,
  // not the read's own). Only whole pages of that range, and the kernel drops a large folio
  // only when the range holds all of it: one that straddles the range's start goes with the
  // next read's range, or on close. At most once per kDropStepBytes that the reads moved
  // forward (a walk of entry headers reads a few bytes per entry: one posix_fadvise each
  // would be a system call per object); a read that moved back drops at once.
  void DropBehind(int fd, uint64_t offset) const {
    if (!any_cold_) return;
    uint64_t last = last_drop_.load(std::memory_order_relaxed);
    if (offset >= last && offset - last < kDropStepBytes) return;
    // Concurrent readers of one file: one of them drops for this step.
    if (!last_drop_.compare_exchange_strong(last, offset, std::memory_order_relaxed)) return;
    const uint64_t lo = offset - std::min(offset, kCacheDropLagBytes);
    Drop(fd, (lo + page_ - 1) / page_, offset / page_);
  }
  void DropAll(int fd) const {
    if (any_cold_) Drop(fd, 0, pages_);
  }

 private:
  struct Run {
    uint64_t begin;
    uint64_t end;
  };

  // Page p (in increasing order) was resident.
  void AddResident(uint64_t p) {
    if (!runs_.empty() && runs_.back().end == p) {
      runs_.back().end = p + 1;
      return;
    }
    if (runs_.size() == kMaxRuns * 2) JoinRuns();
    runs_.push_back(Run{p, p + 1});
  }
  // Joins runs across all but the kMaxRuns - 1 largest gaps (of equal gaps, the first ones
  // stay): what is left is at most kMaxRuns runs.
  void JoinRuns() {
    std::vector<uint64_t> gaps;
    gaps.reserve(runs_.size() - 1);
    for (size_t i = 1; i < runs_.size(); ++i) {
      gaps.push_back(runs_[i].begin - runs_[i - 1].end);
    }
    const size_t nth = gaps.size() - (kMaxRuns - 1);
    std::nth_element(gaps.begin(), gaps.begin() + ptrdiff_t(nth), gaps.end());
    const uint64_t least = gaps[nth];  // the smallest of the gaps that stay
    const size_t above = size_t(std::count_if(gaps.begin(), gaps.end(), [&](uint64_t g) { return g > least; }));
    size_t equal_left = (kMaxRuns - 1) - above;  // of the gaps equal to `least`, how many stay
    std::vector<Run> joined;
    joined.reserve(kMaxRuns * 2);
    joined.push_back(runs_[0]);
    for (size_t i = 1; i < runs_.size(); ++i) {
      const uint64_t gap = runs_[i].begin - runs_[i - 1].end;
      if (gap > least || (gap == least && equal_left > 0)) {
        if (gap == least) --equal_left;
        joined.push_back(runs_[i]);
      } else {
        joined.back().end = runs_[i].end;
      }
    }
    runs_ = std::move(joined);
  }

  static constexpr uint64_t kDropStepBytes = 1 << 20;

  uint64_t page_ = 4096;
  uint64_t pages_ = 0;
  std::vector<Run> runs_;  // sorted, disjoint, not adjacent
  bool any_cold_ = false;
  // The offset of the read that last dropped (DropBehind); the one field written after open.
  mutable std::atomic<uint64_t> last_drop_{0};
};

// The files a LeaveCacheAsFound Env opened with OpenToReadAgain: path -> what was resident when
// it was first opened. Every later opening of the path drops by this record (not by what it
// finds then: that would take our own pages for the server's), and what is left (pages read
// after the last streaming pass, through a file the archive pass keeps open) goes when the Env
// does. Thread contract: safe for concurrent use (mu_).
class ReadAgainRecord {
 public:
  // The record of `path`: the one already made, else `make()`'s, kept.
  template <typename Make>
  std::shared_ptr<const ResidencyAtOpen> FindOrPut(const std::string& path, Make make) {
    if (std::shared_ptr<const ResidencyAtOpen> r = Find(path)) return r;
    std::shared_ptr<const ResidencyAtOpen> made = make();
    std::lock_guard<std::mutex> lock(mu_);
    return paths_.emplace(path, std::move(made)).first->second;  // a racing first one stays
  }
  std::shared_ptr<const ResidencyAtOpen> Find(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = paths_.find(path);
    return it == paths_.end() ? nullptr : it->second;
  }
  // Drops what is left of every recorded path: opened again by path, read nothing.
  void DropAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [path, r] : paths_) {
      if (!r || !r->any_cold()) continue;
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
      if (fd < 0) continue;  // gone since: nothing of it to drop
      r->DropAll(fd);
      ::close(fd);
    }
    paths_.clear();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const ResidencyAtOpen>> paths_;
};

class PosixFile final : public File {
 public:
  // `residency`: what to drop as this file is read and when it is closed (null: nothing).
  PosixFile(int fd, uint64_t size, std::shared_ptr<const ResidencyAtOpen> residency)
      : fd_(fd), size_(size), residency_(std::move(residency)) {}
  ~PosixFile() override {
    // Read-ahead brought pages past the last read; a partly read page was kept: drop them now.
    if (residency_) residency_->DropAll(fd_);
    ::close(fd_);
  }
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
    if (residency_) residency_->DropBehind(fd_, offset);
    return Status::Ok();
  }

 private:
  const int fd_;
  const uint64_t size_;
  const std::shared_ptr<const ResidencyAtOpen> residency_;  // null: keep the cache
};

// The local file system. `read_again` null: the page cache is kept (Default); else it is
// left as found (MakeLeaveCacheAsFound), with this record of the files to read again.
class PosixEnv final : public Env {
 public:
  explicit PosixEnv(std::unique_ptr<ReadAgainRecord> read_again = nullptr) : read_again_(std::move(read_again)) {}
  ~PosixEnv() override {
    if (read_again_) read_again_->DropAll();
  }
  PosixEnv(const PosixEnv&) = delete;
  PosixEnv& operator=(const PosixEnv&) = delete;

  Result<std::unique_ptr<File>> Open(const std::string& path) const override { return OpenFile(path, false); }
  Result<std::unique_ptr<File>> OpenToReadAgain(const std::string& path) const override {
    return OpenFile(path, true);
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
  Result<std::unique_ptr<File>> OpenFile(const std::string& path, bool to_read_again) const {
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
    const uint64_t size = uint64_t(st.st_size);
    std::shared_ptr<const ResidencyAtOpen> drop;  // what this file drops (null: nothing)
    if (read_again_ && to_read_again) {
      // This file keeps what it reads: the later streaming Open of the path drops it, by the
      // record of the first opening; the rest goes with the Env.
      (void)read_again_->FindOrPut(path, [&] { return std::make_shared<const ResidencyAtOpen>(fd, size); });
    } else if (read_again_) {
      drop = read_again_->Find(path);
      if (!drop) drop = std::make_shared<const ResidencyAtOpen>(fd, size);
    }
    return std::unique_ptr<File>(new PosixFile(fd, size, std::move(drop)));
  }

  const std::unique_ptr<ReadAgainRecord> read_again_;  // null: the page cache is kept

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

std::unique_ptr<Env> Env::MakeLeaveCacheAsFound() {
  return std::make_unique<PosixEnv>(std::make_unique<ReadAgainRecord>());
}

Result<uint64_t> Env::EntrySize(const std::string& path, const DirEntry& e) const {
  if (e.size) return *e.size;
  Result<FileStat> st = Stat(path);
  if (!st.ok()) return st.status();
  return st->size;
}

Result<std::optional<uint64_t>> Env::SizeUnlessGone(const std::string& path, const DirEntry& e) const {
  Result<uint64_t> size = EntrySize(path, e);
  if (size.ok()) return std::optional<uint64_t>(*size);
  if (size.status().code() == StatusCode::kNotFound) return std::optional<uint64_t>();
  return size.status();
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
