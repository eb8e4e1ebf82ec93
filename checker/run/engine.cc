#include "checker/run/engine.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "checker/repo/file.h"

namespace borgcheck::run {

ByteBuffer WindowRecycler::Take(uint64_t n) {
  ByteBuffer b;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // std::exchange, not a plain move: a moved-from ByteBuffer keeps its old capacity().
    if (n <= window_bytes_ && !windows_.empty()) {
      b = std::exchange(windows_.back(), ByteBuffer());
      windows_.pop_back();
    } else if (n > window_bytes_ && large_.capacity() >= n) {
      b = std::exchange(large_, ByteBuffer());
    }
  }
  if (b.capacity() == 0) b.Reserve(std::max<uint64_t>(n, window_bytes_));
  b.Resize(n);
  return b;
}

void WindowRecycler::Give(ByteBuffer&& b) {
  std::lock_guard<std::mutex> lock(mu_);
  if (b.capacity() == window_bytes_) {
    if (windows_.size() < kIdleWindows) windows_.push_back(std::move(b));
  } else if (b.capacity() > large_.capacity()) {
    large_ = std::move(b);  // keep the largest; the smaller one is freed
  }
}

WindowBlock::~WindowBlock() {
  const uint64_t n = data.size();
  if (recycler) recycler->Give(std::move(data));  // before Release: the reader may be waiting
  if (budget) budget->Release(n);
  if (bytes_done && counts_progress) bytes_done->fetch_add(n, std::memory_order_relaxed);
}

ProgressReporter::ProgressReporter(const ProgressCallback& progress,
                                   std::function<report::Progress()> snapshot)
    : progress_(progress), snapshot_(std::move(snapshot)) {
  if (!progress_) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return done_; })) {
      progress_(snapshot_(), false);
    }
  });
}

ProgressReporter::~ProgressReporter() { Stop(); }

void ProgressReporter::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ProgressReporter::Finish() {
  if (!thread_.joinable()) return;
  Stop();
  progress_(snapshot_(), true);  // the final record carries the totals
}

report::Reread ReadAgain(const std::string& path, uint64_t offset, Bytes first, ByteBuffer& scratch) {
  Result<repo::ReadOnlyFile> f = repo::ReadOnlyFile::Open(path);
  if (!f.ok()) return report::Reread::kNotReread;
  scratch.Resize(first.size());
  if (!f->ReadAt(offset, first.size(), scratch.data()).ok()) return report::Reread::kNotReread;
  return std::memcmp(scratch.data(), first.data(), first.size()) == 0 ? report::Reread::kAgreed
                                                                      : report::Reread::kDiffered;
}

Status FeedAndWait(pool::WorkStealingPool& pool, const std::function<void()>& feed) {
  try {
    feed();
    pool.Wait();
  } catch (const std::exception& e) {
    pool.RequestStop();
    try {
      pool.Wait();
    } catch (...) {
    }
    return Status(StatusCode::kInternal, std::string("internal error: ") + e.what());
  }
  return Status::Ok();
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void SetInterrupted(CheckOutcome& out, int signo) {
  out.stop_signal = signo;
  out.status = Status(StatusCode::kInterrupted,
                      fmt::format("stopped by signal {} before the check finished", signo));
}

void FinishSummary(const report::FindingSink& sink, uint64_t bytes_read,
                   std::chrono::steady_clock::time_point start, CheckOutcome& out) {
  report::RunSummary& sum = out.summary;
  out.findings = sink.Sorted();
  for (const report::Finding& f : out.findings) {
    sum.findings_by_stage[size_t(f.stage)]++;
    (f.severity == report::Severity::kError ? sum.errors : sum.warnings)++;
  }
  sum.bytes_read = bytes_read;
  sum.elapsed_s = SecondsSince(start);
}

}  // namespace borgcheck::run
