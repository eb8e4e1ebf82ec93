#include "checker/io/fault_env.h"

#include <algorithm>
#include <thread>

namespace borgcheck::io {

class FaultEnv::FaultFile final : public File {
 public:
  FaultFile(const FaultEnv& env, std::string path, std::unique_ptr<File> base)
      : env_(env), path_(std::move(path)), base_(std::move(base)) {}
  uint64_t size() const override { return base_->size(); }
  Status ReadAt(uint64_t offset, size_t n, uint8_t* dst) const override {
    if (env_.delay_.count() > 0) std::this_thread::sleep_for(env_.delay_);
    if (Status s = base_->ReadAt(offset, n, dst); !s.ok()) return s;
    return env_.AfterRead(path_, offset, n, dst);
  }

 private:
  const FaultEnv& env_;
  const std::string path_;
  const std::unique_ptr<File> base_;
};

bool FaultEnv::EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

FaultEnv::Rule FaultEnv::MakeRule(Kind kind, std::string suffix, unsigned nth) {
  Rule r;
  r.kind = kind;
  r.suffix = std::move(suffix);
  r.nth = nth;
  return r;
}

void FaultEnv::FailOpen(std::string suffix, StatusCode code, std::string message) {
  Rule r = MakeRule(Kind::kFailOpen, std::move(suffix));
  r.code = code;
  r.message = std::move(message);
  rules_.push_back(std::move(r));
}

void FaultEnv::FailStat(std::string suffix, StatusCode code, std::string message) {
  Rule r = MakeRule(Kind::kFailStat, std::move(suffix));
  r.code = code;
  r.message = std::move(message);
  rules_.push_back(std::move(r));
}

void FaultEnv::FailRead(std::string suffix, int64_t offset) {
  Rule r = MakeRule(Kind::kFailRead, std::move(suffix));
  r.offset = offset;
  rules_.push_back(std::move(r));
}

void FaultEnv::FailReadsAfter(std::string suffix, unsigned reads) {
  rules_.push_back(MakeRule(Kind::kFailAfter, std::move(suffix), reads));
}

void FaultEnv::LoseConnectionAfter(std::string suffix, unsigned reads) {
  rules_.push_back(MakeRule(Kind::kLose, std::move(suffix), reads));
}

namespace {
Status LostStatus() { return Status(StatusCode::kIoError, "connection to the test store lost (injected)"); }
}  // namespace

Status FaultEnv::Lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_ ? LostStatus() : Status::Ok();
}

void FaultEnv::FlipOnRead(std::string suffix, uint64_t offset, unsigned nth, uint8_t mask) {
  Rule r = MakeRule(Kind::kFlip, std::move(suffix), nth);
  r.offset = int64_t(offset);
  r.mask = mask;
  rules_.push_back(std::move(r));
}

void FaultEnv::VanishAfterOpens(std::string suffix, unsigned opens) {
  rules_.push_back(MakeRule(Kind::kVanish, std::move(suffix), opens));
}

std::vector<std::string> FaultEnv::OpenAheads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_aheads_;
}

void FaultEnv::OpenAhead(const std::string& path, ReadAhead how, uint64_t from) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_aheads_.push_back(path);
  }
  base_.OpenAhead(path, how, from);
}

unsigned FaultEnv::Reads(const std::string& suffix) const {
  std::lock_guard<std::mutex> lock(mu_);
  unsigned n = 0;
  for (const auto& [path, count] : reads_) {
    if (EndsWith(path, suffix)) n += count;
  }
  return n;
}

bool FaultEnv::Vanished(const std::string& path) const {
  for (const Rule& r : rules_) {
    if (r.kind == Kind::kVanish && EndsWith(path, r.suffix) && r.count >= r.nth) return true;
  }
  return false;
}

Result<std::unique_ptr<File>> FaultEnv::Open(const std::string& path) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_) return LostStatus();
    if (Vanished(path)) return Status(StatusCode::kNotFound, path + ": No such file or directory");
    for (const Rule& r : rules_) {
      if (r.kind == Kind::kFailOpen && EndsWith(path, r.suffix)) return Status(r.code, path + ": " + r.message);
    }
  }
  Result<std::unique_ptr<File>> f = base_.Open(path);
  if (!f.ok()) return f.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Rule& r : rules_) {
      if (r.kind == Kind::kVanish && EndsWith(path, r.suffix)) r.count++;
    }
  }
  return std::unique_ptr<File>(new FaultFile(*this, path, std::move(f).value()));
}

Result<std::vector<DirEntry>> FaultEnv::List(const std::string& dir) const {
  if (Status lost = Lost(); !lost.ok()) return lost;
  Result<std::vector<DirEntry>> entries = base_.List(dir);
  if (!entries.ok()) return entries;
  std::lock_guard<std::mutex> lock(mu_);
  std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  std::erase_if(*entries, [&](const DirEntry& e) { return Vanished(prefix + e.name); });
  return entries;
}

Status FaultEnv::StatFault(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (lost_) return LostStatus();
  if (Vanished(path)) return Status(StatusCode::kNotFound, path + ": No such file or directory");
  for (const Rule& r : rules_) {
    if (r.kind == Kind::kFailStat && EndsWith(path, r.suffix)) return Status(r.code, path + ": " + r.message);
  }
  return Status::Ok();
}

Result<FileStat> FaultEnv::Stat(const std::string& path) const {
  if (Status s = StatFault(path); !s.ok()) return s;
  return base_.Stat(path);
}

Result<FileStat> FaultEnv::Lstat(const std::string& path) const {
  if (Status s = StatFault(path); !s.ok()) return s;
  return base_.Lstat(path);
}

Status FaultEnv::AfterRead(const std::string& path, uint64_t offset, size_t n, uint8_t* dst) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (lost_) return LostStatus();
  auto it = std::find_if(reads_.begin(), reads_.end(), [&](const auto& p) { return p.first == path; });
  if (it == reads_.end()) reads_.emplace_back(path, 1);
  else it->second++;
  for (Rule& r : rules_) {
    if (!EndsWith(path, r.suffix)) continue;
    const bool covers = r.offset < 0 || (uint64_t(r.offset) >= offset && uint64_t(r.offset) < offset + n);
    if ((r.kind == Kind::kFailRead && covers) || (r.kind == Kind::kFailAfter && ++r.count > r.nth)) {
      return Status(StatusCode::kIoError, "read error: Input/output error (injected)");
    }
    if (r.kind == Kind::kLose && ++r.count > r.nth) {
      lost_ = true;
      return LostStatus();
    }
    if (r.kind == Kind::kFlip && covers) {
      r.count++;
      if (r.nth == 0 || r.count == r.nth) dst[uint64_t(r.offset) - offset] ^= r.mask;
    }
  }
  return Status::Ok();
}

}  // namespace borgcheck::io
