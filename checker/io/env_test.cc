// Env::EntrySize: the listing's size where it has one (no stat: over sftp a round trip per
// segment or pack), stat's otherwise, with stat's errors.
#include "checker/io/env.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

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

}  // namespace
}  // namespace borgcheck::io
