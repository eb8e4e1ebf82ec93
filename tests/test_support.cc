#include "tests/test_support.h"

#include <fstream>
#include <stdexcept>

#include "checker/base/bytes.h"
#include "checker/repo/segment_log/segment_entry.h"

namespace borgcheck::testing {
namespace fs = std::filesystem;

std::string SharedDir() {
  if (const char* s = std::getenv("BORGCHECK_SHARED_DIR")) return s;
  return BORGCHECK_SHARED_DIR;
}
std::string Borg1Fixtures() { return SharedDir() + "/fixtures/borg1"; }

ScopedEnv::ScopedEnv(std::initializer_list<std::pair<const char*, std::optional<std::string>>> vars) {
  for (const auto& [name, value] : vars) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
}

ScopedEnv::~ScopedEnv() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
    else unsetenv(it->first.c_str());
  }
}

RepoCopy::RepoCopy(const std::string& source) {
  std::string tmpl = (fs::temp_directory_path() / "borgcheck-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  root_ = tmpl;
  path_ = root_ + "/repo";
  fs::copy(source, path_, fs::copy_options::recursive);
  for (const auto& e : fs::recursive_directory_iterator(path_)) {
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  fs::permissions(path_, fs::perms::owner_write, fs::perm_options::add);
}

RepoCopy::~RepoCopy() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

std::string RepoCopy::Segment(uint32_t n) const {
  return "data/" + std::to_string(n / 1000) + "/" + std::to_string(n);
}

void RepoCopy::FlipByte(const std::string& rel, uint64_t pos, uint8_t xor_mask) {
  std::fstream f(path_ + "/" + rel, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(pos));
  char c = 0;
  f.read(&c, 1);
  c = char(uint8_t(c) ^ xor_mask);
  f.seekp(std::streamoff(pos));
  f.write(&c, 1);
}

void RepoCopy::Truncate(const std::string& rel, uint64_t size) { fs::resize_file(path_ + "/" + rel, size); }

void RepoCopy::Append(const std::string& rel, const std::string& bytes) {
  std::ofstream f(path_ + "/" + rel, std::ios::app | std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

void RepoCopy::Remove(const std::string& rel) { fs::remove(path_ + "/" + rel); }

void RepoCopy::FixEntryCrc(const std::string& rel, uint64_t offset) {
  std::fstream f(path_ + "/" + rel, std::ios::in | std::ios::out | std::ios::binary);
  uint8_t hdr[8];
  f.seekg(std::streamoff(offset));
  f.read(reinterpret_cast<char*>(hdr), 8);
  uint32_t size = LoadLE32(hdr + 4);
  std::string entry(size, '\0');
  f.seekg(std::streamoff(offset));
  f.read(entry.data(), size);
  uint32_t crc = repo::Crc32(AsBytes(entry).subspan(4));
  uint8_t out[4];
  StoreLE32(out, crc);
  f.seekp(std::streamoff(offset));
  f.write(reinterpret_cast<const char*>(out), 4);
}

run::CheckOutcome Check(const std::string& repo, bool verify_data, unsigned threads, const io::Env& env) {
  run::CheckOptions o;
  o.repository = repo;
  o.verify_data = verify_data;
  o.threads = threads;
  o.progress = run::ProgressMode::kNever;
  return run::RunCheck(o, nullptr, env);
}

run::CheckOutcome CheckRepositoryPass(const std::string& repo, bool verify_data, unsigned threads,
                                      const io::Env& env) {
  run::CheckOptions o;
  o.repository = repo;
  o.verify_data = verify_data;
  o.threads = threads;
  o.progress = run::ProgressMode::kNever;
  o.repository_only = true;
  return run::RunCheck(o, nullptr, env);
}

std::set<std::string> ErrorChunkIds(const run::CheckOutcome& o) {
  std::set<std::string> ids;
  for (const report::Finding& f : o.findings) {
    if (f.severity == report::Severity::kError && f.chunk_id) ids.insert(report::ChunkIdHex(*f.chunk_id));
  }
  return ids;
}

size_t CountErrors(const run::CheckOutcome& o) {
  size_t n = 0;
  for (const report::Finding& f : o.findings) n += f.severity == report::Severity::kError;
  return n;
}

size_t CountWarnings(const run::CheckOutcome& o) {
  size_t n = 0;
  for (const report::Finding& f : o.findings) n += f.severity == report::Severity::kWarning;
  return n;
}

}  // namespace borgcheck::testing
