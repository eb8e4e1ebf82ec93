#include "checker/report/progress_line.h"

#include <atomic>
#include <sys/ioctl.h>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include "checker/report/output.h"
#include "checker/report/text_report.h"

namespace borgcheck::report {
namespace {

std::atomic<bool> g_resized{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

double Percent(const Progress& p) {
  return p.bytes_total ? 100.0 * double(std::min(p.bytes_done, p.bytes_total)) / double(p.bytes_total) : 100.0;
}

std::string Eta(const Progress& p, std::optional<double> rate) {
  std::optional<double> eta = EtaSeconds(p, rate);
  return eta ? FormatClock(uint64_t(*eta + 0.5)) : "-";
}

std::string RateText(std::optional<double> rate) { return rate ? FormatBytes(uint64_t(*rate)) + "/s" : "-/s"; }

}  // namespace

void RateWindow::Add(double t, uint64_t bytes) {
  samples_.push_back({t, bytes});
  // A stall at the start of the window (planning before the first byte, or any pause that is
  // now its oldest part) says nothing about the current rate: keep only its last sample.
  while (samples_.size() >= 2 && samples_[0].bytes == samples_[1].bytes) samples_.pop_front();
  while (samples_.size() >= 2 && t - samples_[1].t >= kRateWindowSeconds) samples_.pop_front();
}

std::optional<double> RateWindow::Rate() const {
  if (samples_.size() < 2) return std::nullopt;
  const Sample& a = samples_.front();
  const Sample& b = samples_.back();
  double dt = b.t - a.t;
  if (dt < 0.5 || b.bytes <= a.bytes) return std::nullopt;
  return double(b.bytes - a.bytes) / dt;
}

std::optional<double> EtaSeconds(const Progress& p, std::optional<double> rate) {
  if (!rate || *rate <= 0 || p.bytes_total < p.bytes_done) return std::nullopt;
  return double(p.bytes_total - p.bytes_done) / *rate;
}

std::string TerminalProgressLine(const Progress& p, std::optional<double> rate, size_t columns) {
  const size_t fit = columns > 1 ? columns - 1 : 1;  // the last column would wrap on some terminals
  std::string pct = fmt::format("{:.1f}%", Percent(p));
  std::string done = FormatBytes(p.bytes_done), total = FormatBytes(p.bytes_total);
  std::string objects = fmt::format("{} of {} objects", FormatCount(p.objects_done), FormatCount(p.objects_total));
  std::string elapsed = FormatClock(uint64_t(p.elapsed_s));
  std::string eta = Eta(p, rate);
  if (std::string_view(p.phase) == "archives") {
    const std::vector<std::string> walking = {
        fmt::format("borgcheck: {} of {} objects done; walking the archives, elapsed {}", FormatCount(p.objects_done),
                    FormatCount(p.objects_total), elapsed),
        fmt::format("walking the archives, elapsed {}", elapsed),
        fmt::format("archives, {}", elapsed),
    };
    for (const std::string& l : walking) {
      if (l.size() <= fit) return l;
    }
    return walking.back().substr(0, fit);
  }
  const std::vector<std::string> layouts = {
      fmt::format("borgcheck: {} {} of {}, {}, {}, elapsed {}, ETA {}", pct, done, total, objects, RateText(rate),
                  elapsed, eta),
      fmt::format("{} {} of {}, {}, elapsed {}, ETA {}", pct, done, total, RateText(rate), elapsed, eta),
      fmt::format("{} {} of {}, ETA {}", pct, done, total, eta),
      fmt::format("{} {}/{} ETA {}", pct, done, total, eta),
      fmt::format("{} ETA {}", pct, eta),
  };
  for (const std::string& l : layouts) {
    if (l.size() <= fit) return l;
  }
  return layouts.back().substr(0, fit);
}

std::string PlainProgressLine(const Progress& p, std::optional<double> rate) {
  if (std::string_view(p.phase) == "archives") {
    return fmt::format("borgcheck: progress {} of {} objects done; walking the archives, elapsed {}",
                       FormatCount(p.objects_done), FormatCount(p.objects_total), FormatClock(uint64_t(p.elapsed_s)));
  }
  return fmt::format("borgcheck: progress {:.1f}% {} of {}, {} of {} objects, {}, elapsed {}, ETA {}", Percent(p),
                     FormatBytes(p.bytes_done), FormatBytes(p.bytes_total), FormatCount(p.objects_done),
                     FormatCount(p.objects_total), RateText(rate), FormatClock(uint64_t(p.elapsed_s)), Eta(p, rate));
}

std::optional<size_t> TerminalColumns(int fd) {
  struct winsize ws {};
  if (!isatty(fd) || ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return std::nullopt;
  return size_t(ws.ws_col);
}

void NoteTerminalResized() { g_resized.store(true, std::memory_order_relaxed); }
bool TakeTerminalResized() { return g_resized.exchange(false, std::memory_order_relaxed); }

}  // namespace borgcheck::report
