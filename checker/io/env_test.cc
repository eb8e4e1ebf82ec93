// Env::EntrySize: the listing's size where it has one (no stat: over sftp a round trip per
// segment or pack), stat's otherwise, with stat's errors. Env::LeaveCacheAsFound: the page
// cache holds after a read what it held before (page by page), Default keeps what it read.
#include "checker/io/env.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace borgcheck::io {
namespace {

namespace fs = std::filesystem;

// Stat fails for every path: EntrySize may only use it when the listing has no size.
class NoStatEnv final : public Env {
 public:
  Result<std::unique_ptr<File>> Open(const std::string& path) const override { return Env::Default().Open(path); }
  Result<std::vector<DirEntry>> List(const std::string& dir) const override { return Env::Default().List(dir); }
  Result<FileStat> Stat(const std::string& path) const override {
    return Status(StatusCode::kIoError, path + ": stat called (injected)");
  }
  Result<FileStat> Lstat(const std::string& path) const override { return Stat(path); }
};

TEST_CASE("Env::EntrySize: the listing's size, else stat's", "[io]") {
  const fs::path dir = fs::temp_directory_path() / std::string("borgcheck-env-test-").append(std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "f").string();
  std::ofstream(path, std::ios::binary) << std::string(1234, 'x');

  DirEntry listed{"f", EntryType::kRegular, 99};  // what a listing said (it wins: no stat)
  Result<uint64_t> a = NoStatEnv().EntrySize(path, listed);
  REQUIRE(a.ok());
  CHECK(*a == 99);

  DirEntry unsized{"f", EntryType::kRegular, std::nullopt};
  Result<uint64_t> b = Env::Default().EntrySize(path, unsized);
  REQUIRE(b.ok());
  CHECK(*b == 1234);
  Result<uint64_t> c = NoStatEnv().EntrySize(path, unsized);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message() == path + ": stat called (injected)");

  fs::remove(path);  // gone since the listing
  Result<uint64_t> d = Env::Default().EntrySize(path, unsized);
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == StatusCode::kNotFound);
  fs::remove_all(dir);
}

// ---- The page cache ----

const size_t kPage = size_t(::sysconf(_SC_PAGESIZE));

// Which pages of `path` are in the page cache now (mincore on a read-only mapping).
std::vector<bool> Resident(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const size_t size = size_t(::lseek(fd, 0, SEEK_END));
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  REQUIRE(map != MAP_FAILED);
  std::vector<unsigned char> vec((size + kPage - 1) / kPage);
  REQUIRE(::mincore(map, size, vec.data()) == 0);
  ::munmap(map, size);
  ::close(fd);
  std::vector<bool> out(vec.size());
  for (size_t i = 0; i < vec.size(); ++i) out[i] = vec[i] & 1;
  return out;
}

size_t Count(const std::vector<bool>& v) { return size_t(std::count(v.begin(), v.end(), true)); }

// Pages that must stay cached are checked as "most of them" (at least 3 in 4): the kernel may
// take any page back at any time (memory pressure; on the test machines DAMON pages out
// memory it finds cold within seconds: a page or two of a cached file went during a run). A
// page that must be gone is checked exactly: nothing brings back a page we dropped.
bool MostOf(size_t kept, size_t of) { return kept * 4 >= of * 3; }

// Whether every page resident in `after` was resident in `before`.
bool NoneAdded(const std::vector<bool>& before, const std::vector<bool>& after) {
  if (before.size() != after.size()) return false;
  for (size_t i = 0; i < after.size(); ++i) {
    if (after[i] && !before[i]) return false;
  }
  return true;
}

// A file of `pages` pages and a bit, written and synced, then dropped from the cache. Under
// the build folder, not /tmp: tmpfs keeps every page whatever fadvise says. The tests below
// need a file system that lets pages go, and fail where it does not (as cli.page_cache does).
void MakeColdFile(const std::string& path, size_t pages) {
  std::string data(pages * kPage + 123, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char((i * 2654435761u) >> 13);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::fdatasync(fd) == 0);
  REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
  ::close(fd);
  INFO("this file system keeps pages after POSIX_FADV_DONTNEED (tmpfs?): the tests need one that lets them go");
  REQUIRE(Count(Resident(path)) == 0);
}

// Reads the whole file through `env` in reads of `step` bytes, as the segment walk does.
void ReadAll(const Env& env, const std::string& path, size_t step) {
  Result<std::unique_ptr<File>> f = env.Open(path);
  REQUIRE(f.ok());
  std::vector<uint8_t> buf(step);
  for (uint64_t pos = 0; pos < (*f)->size(); pos += step) {
    const size_t n = size_t(std::min<uint64_t>(step, (*f)->size() - pos));
    REQUIRE((*f)->ReadAt(pos, n, buf.data()).ok());
  }
}

struct CacheDir {
  CacheDir() : dir(fs::current_path() / ("borgcheck-cache-test-" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~CacheDir() { fs::remove_all(dir); }
  fs::path dir;
};

TEST_CASE("LeaveCacheAsFound: a file that was not cached is not cached after it was read", "[io][cache]") {
  CacheDir d;
  const std::string path = (d.dir / "cold").string();
  const size_t pages = size_t((kCacheDropLagBytes * 3) / kPage);  // 48 MiB
  MakeColdFile(path, pages);
  {
    const std::unique_ptr<Env> leave = Env::MakeLeaveCacheAsFound();
    Result<std::unique_ptr<File>> f = leave->Open(path);
    REQUIRE(f.ok());
    // Windows of an odd size, each starting where the last one ended less a tail (the walk
    // reads an entry a window cut in two again): the tail must still be cached then.
    constexpr size_t kStep = (1u << 20) + 7;
    constexpr size_t kTail = 5000;
    std::vector<uint8_t> buf(kStep);
    uint64_t pos = 0;
    size_t tail_pages = 0, tail_cached = 0;
    while (pos < 2 * kCacheDropLagBytes) {
      REQUIRE((*f)->ReadAt(pos, kStep, buf.data()).ok());
      const uint64_t tail = pos + kStep - kTail;
      const std::vector<bool> now = Resident(path);
      for (uint64_t p = tail / kPage; p < (pos + kStep) / kPage; ++p, ++tail_pages) tail_cached += now[p];
      pos = tail;
    }
    CHECK(MostOf(tail_cached, tail_pages));
    // Behind the reads, beyond the lag and the largest folio the kernel may have built (2 MiB):
    // nothing. (Ahead, the kernel's read-ahead.)
    const std::vector<bool> mid = Resident(path);
    const uint64_t gone = (pos - kCacheDropLagBytes - (2u << 20)) / kPage;
    CHECK(Count(std::vector<bool>(mid.begin(), mid.begin() + long(gone))) == 0);
    CHECK(Count(mid) > 0);
    for (; pos < (*f)->size(); pos += kStep) {
      const size_t n = size_t(std::min<uint64_t>(kStep, (*f)->size() - pos));
      REQUIRE((*f)->ReadAt(pos, n, buf.data()).ok());
    }
  }  // closed: the rest goes
  CHECK(Count(Resident(path)) == 0);
}

TEST_CASE("LeaveCacheAsFound: pages cached before the read stay cached, page by page", "[io][cache]") {
  CacheDir d;
  const std::string path = (d.dir / "partly").string();
  MakeColdFile(path, 96);
  {
    // Another reader caches every third page (no read-ahead: POSIX_FADV_RANDOM).
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) == 0);
    char c;
    for (size_t p = 0; p < 96; p += 3) REQUIRE(::pread(fd, &c, 1, off_t(p * kPage)) == 1);
    ::close(fd);
  }
  const std::vector<bool> before = Resident(path);
  REQUIRE(Count(before) >= 32);
  REQUIRE(Count(before) < before.size());
  const std::unique_ptr<Env> leave = Env::MakeLeaveCacheAsFound();
  ReadAll(*leave, path, 65536);
  const std::vector<bool> after = Resident(path);
  CHECK(NoneAdded(before, after));
  CHECK(MostOf(Count(after), Count(before)));
  ReadAll(*leave, path, 777);  // reads inside one page, across two pages
  const std::vector<bool> after2 = Resident(path);
  CHECK(NoneAdded(after, after2));
  CHECK(MostOf(Count(after2), Count(before)));
}

TEST_CASE("LeaveCacheAsFound: a file cached in many small pieces keeps them all, and its large cold part is dropped",
          "[io][cache]") {
  // 200 cached pieces (every third page of the first and the last 300 pages) are more than the
  // record keeps apart (io/env.cc, kMaxRuns): it joins pieces across the smallest gaps, whose
  // pages then count as cached (some of ours stay); the 600 cold pages between stay a gap.
  CacheDir d;
  const std::string path = (d.dir / "pieces").string();
  constexpr size_t kPages = 1200;
  MakeColdFile(path, kPages);
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) == 0);
    char c;
    for (size_t p = 0; p < kPages; p += 3) {
      if (p < 300 || p >= 900) REQUIRE(::pread(fd, &c, 1, off_t(p * kPage)) == 1);
    }
    ::close(fd);
  }
  const std::vector<bool> before = Resident(path);
  REQUIRE(Count(before) >= 150);
  {
    const std::unique_ptr<Env> leave = Env::MakeLeaveCacheAsFound();
    ReadAll(*leave, path, 65536);
  }
  const std::vector<bool> after = Resident(path);
  size_t kept = 0;
  for (size_t p = 0; p < kPages; ++p)
    kept += before[p] && after[p];
  CHECK(MostOf(kept, Count(before)));
  size_t middle = 0;
  for (size_t p = 300; p < 900; ++p)
    middle += after[p];
  CHECK(middle == 0);
}

TEST_CASE("LeaveCacheAsFound: a file opened to be read again keeps its pages for that read", "[io][cache]") {
  CacheDir d;
  const std::string path = (d.dir / "again").string();
  const std::string other = (d.dir / "walked-only").string();
  MakeColdFile(path, 64);
  MakeColdFile(other, 64);
  constexpr size_t all = 65;  // 64 pages and 123 bytes
  {
    const std::unique_ptr<Env> leave = Env::MakeLeaveCacheAsFound();
    // A walk of small reads (2.0.0b5's entry headers): what it brought in stays...
    for (const std::string& p : {path, other}) {
      Result<std::unique_ptr<File>> walk = leave->OpenToReadAgain(p);
      REQUIRE(walk.ok());
      uint8_t hdr[49];
      for (uint64_t pos = 0; pos + sizeof hdr <= (*walk)->size(); pos += 3000) {
        REQUIRE((*walk)->ReadAt(pos, sizeof hdr, hdr).ok());
      }
    }
    CHECK(MostOf(Count(Resident(path)), all));
    // ...for the pass that reads it again, which drops it (the record of the walk's first
    // opening, before which nothing was cached, not what the walk left).
    Result<std::unique_ptr<File>> again = leave->OpenToReadAgain(path);  // a second walk
    REQUIRE(again.ok());
    again->reset();
    ReadAll(*leave, path, 65536);
    CHECK(Count(Resident(path)) == 0);
    CHECK(MostOf(Count(Resident(other)), all));
  }  // the Env goes: what no pass read again goes too
  CHECK(Count(Resident(other)) == 0);
  CHECK(Count(Resident(path)) == 0);
}

TEST_CASE("Default (--keep-cache) leaves what it read in the page cache", "[io][cache]") {
  CacheDir d;
  const std::string path = (d.dir / "kept").string();
  MakeColdFile(path, 64);
  ReadAll(Env::Default(), path, 65536);
  CHECK(MostOf(Count(Resident(path)), 65));
}

}  // namespace
}  // namespace borgcheck::io
