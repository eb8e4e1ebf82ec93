#include "checker/io/file_cache.h"

namespace borgcheck::io {

std::shared_ptr<const File> FileCache::KeptLocked(const std::string& path) const {
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->first == path) {
      kept_.splice(kept_.begin(), kept_, it);  // now the most recently used
      return kept_.front().second;
    }
  }
  return nullptr;
}

void FileCache::OpenAhead(const std::string& path, uint64_t from) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [kept_path, file] : kept_) {
      if (kept_path == path) return;
    }
  }
  env_.OpenAhead(path, ReadAhead::kParts, from);
}

Result<std::shared_ptr<const File>> FileCache::Open(const std::string& path) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::shared_ptr<const File> kept = KeptLocked(path)) return kept;
  }
  // Opened without the lock (a remote open takes round trips): two threads may both open the
  // same path; the first one kept is used, the other closed.
  // Random reads of single objects, not a stream: the pages stay (a data pass may read them
  // again; an Env that leaves the page cache as found drops them when the run ends).
  Result<std::unique_ptr<File>> opened = env_.OpenToReadAgain(path);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<const File> file(std::move(opened).value());
  std::lock_guard<std::mutex> lock(mu_);
  if (std::shared_ptr<const File> kept = KeptLocked(path)) return kept;
  kept_.emplace_front(path, file);
  if (kept_.size() > capacity_) kept_.pop_back();
  return file;
}

}  // namespace borgcheck::io
