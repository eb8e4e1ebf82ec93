// The text progress display (docs/cli.md, "Progress"): what one progress line says, how it
// fits a terminal, and the recent-window rate its ETA comes from.
//
// On a terminal the line is redrawn in place ("\r" + line + "\033[K"), never wider than the
// terminal's width minus one column, so it can never wrap and leave stale lines behind; the
// width is read with TIOCGWINSZ at the start and again after each SIGWINCH. Off a terminal
// (--progress=always into a log) one plain line is written every N seconds, with no control
// characters.
//
// The ETA divides the bytes left by the rate over the last kRateWindowSeconds of progress
// samples, not since the process started: planning (key, index, passphrase prompt) would
// otherwise drag the first estimates far off, and a rate that changes (cache warm, slower
// disk region) shows within the window.
//
// Thread contract: RateWindow and ProgressLine require external synchronisation (the
// reporter calls them from one thread at a time). NoteTerminalResized is async-signal-safe;
// TakeTerminalResized is safe for concurrent use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

namespace borgcheck::report {

struct Progress;

inline constexpr double kRateWindowSeconds = 20;

// Bytes-per-second over the recent samples.
class RateWindow {
 public:
  void Add(double elapsed_s, uint64_t bytes_done);
  // The rate over the window, or nullopt while it spans less than half a second or no byte
  // moved in it.
  std::optional<double> Rate() const;

 private:
  struct Sample {
    double t;
    uint64_t bytes;
  };
  std::deque<Sample> samples_;
};

// Seconds left at `rate`, or nullopt without a rate.
std::optional<double> EtaSeconds(const Progress& p, std::optional<double> rate);

// The progress line for a terminal of `columns` columns: the longest of a few layouts (all
// fields, then fewer) that fits in columns - 1; cut to that length if even the shortest does
// not. Printable ASCII only.
std::string TerminalProgressLine(const Progress& p, std::optional<double> rate, size_t columns);

// The plain line for logs: "borgcheck: progress <pct>% <done> of <total>, <n> of <m>
// objects, <rate>/s, elapsed h:mm:ss, ETA h:mm:ss" (no newline).
std::string PlainProgressLine(const Progress& p, std::optional<double> rate);

// The width of the terminal on `fd`, or nullopt when it is not one or reports 0 columns.
std::optional<size_t> TerminalColumns(int fd);

// SIGWINCH: main's handler calls NoteTerminalResized; the reporter re-reads the width when
// TakeTerminalResized returns true (it clears the flag).
void NoteTerminalResized();
bool TakeTerminalResized();

}  // namespace borgcheck::report
