// FileCache: a path opened once is kept and handed out again (one open, however many readers);
// a failed open is not kept; the least recently used file is closed past the capacity; threads
// that open the same few paths at once all read the right bytes.
#include "checker/io/file_cache.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace borgcheck::io {
namespace {

namespace fs = std::filesystem;

// Counts the opens that reach the file system; a path listed in `failing` fails once.
class CountingEnv final : public Env {
 public:
  Result<std::unique_ptr<File>> Open(const std::string& path) const override {
    std::lock_guard<std::mutex> lock(mu_);
    ++opens_[path];
    if (fail_next_ == path) {
      fail_next_.clear();
      return Status(StatusCode::kIoError, path + ": Input/output error (injected)");
    }
    return Env::Default().Open(path);
  }
  Result<std::vector<DirEntry>> List(const std::string& dir) const override { return Env::Default().List(dir); }
  Result<FileStat> Stat(const std::string& path) const override { return Env::Default().Stat(path); }
  Result<FileStat> Lstat(const std::string& path) const override { return Env::Default().Lstat(path); }

  unsigned Opens(const std::string& path) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = opens_.find(path);
    return it == opens_.end() ? 0 : it->second;
  }
  void FailNextOpen(const std::string& path) { fail_next_ = path; }

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, unsigned> opens_;  // guarded by mu_
  mutable std::string fail_next_;                  // guarded by mu_
};

struct Files {
  fs::path dir = fs::temp_directory_path() / std::string("borgcheck-file-cache-").append(std::to_string(::getpid()));
  Files() {
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (int i = 0; i < 12; ++i) {
      std::ofstream(Path(i), std::ios::binary) << std::string(1000 + i, char('a' + i));
    }
  }
  ~Files() { fs::remove_all(dir); }
  std::string Path(int i) const { return (dir / std::string("f").append(std::to_string(i))).string(); }
};

std::string ReadAll(const File& f) {
  std::string s(f.size(), '\0');
  REQUIRE(f.ReadAt(0, s.size(), reinterpret_cast<uint8_t*>(s.data())).ok());
  return s;
}

TEST_CASE("FileCache: one open per path while it is kept, the same bytes every time", "[io]") {
  Files files;
  CountingEnv env;
  FileCache cache(env, 4);
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 4; ++i) {
      Result<std::shared_ptr<const File>> f = cache.Open(files.Path(i));
      REQUIRE(f.ok());
      CHECK(ReadAll(**f) == std::string(1000 + i, char('a' + i)));
    }
  }
  for (int i = 0; i < 4; ++i) CHECK(env.Opens(files.Path(i)) == 1);
}

TEST_CASE("FileCache: past its capacity the least recently used file is closed and opened again", "[io]") {
  Files files;
  CountingEnv env;
  FileCache cache(env, 2);
  for (int i : {0, 1, 0, 2, 0, 1}) REQUIRE(cache.Open(files.Path(i)).ok());
  // 0 stays (used most recently each time); 1 is dropped when 2 comes and opened again.
  CHECK(env.Opens(files.Path(0)) == 1);
  CHECK(env.Opens(files.Path(1)) == 2);
  CHECK(env.Opens(files.Path(2)) == 1);
}

TEST_CASE("FileCache: a failed open is not kept, a missing file says so every time", "[io]") {
  Files files;
  CountingEnv env;
  FileCache cache(env);
  env.FailNextOpen(files.Path(3));
  Result<std::shared_ptr<const File>> first = cache.Open(files.Path(3));
  REQUIRE_FALSE(first.ok());
  CHECK(first.status().code() == StatusCode::kIoError);
  Result<std::shared_ptr<const File>> second = cache.Open(files.Path(3));
  REQUIRE(second.ok());
  CHECK(ReadAll(**second) == std::string(1003, 'd'));
  CHECK(env.Opens(files.Path(3)) == 2);
  for (int round = 0; round < 2; ++round) {
    Result<std::shared_ptr<const File>> gone = cache.Open(files.Path(99));
    REQUIRE_FALSE(gone.ok());
    CHECK(gone.status().code() == StatusCode::kNotFound);
  }
  CHECK(env.Opens(files.Path(99)) == 2);
}

TEST_CASE("FileCache: threads open and read the same few files at once", "[io][concurrency]") {
  Files files;
  CountingEnv env;
  FileCache cache(env, 3);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 200; ++k) {
        const int i = (t + k) % 6;
        Result<std::shared_ptr<const File>> f = cache.Open(files.Path(i));
        if (!f.ok()) {
          wrong.fetch_add(1);
          continue;
        }
        std::string s((*f)->size(), '\0');
        if (!(*f)->ReadAt(0, s.size(), reinterpret_cast<uint8_t*>(s.data())).ok() ||
            s != std::string(1000 + i, char('a' + i))) {
          wrong.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(wrong.load() == 0);
}

}  // namespace
}  // namespace borgcheck::io
