// The flags of partial runs (docs/nightly.md): --subset, --sample, --sample-seed,
// --max-duration, --max-age, --min-interval, --state-dir, and the test-only hooks. Pure parsers
// plus ApplyPartialArgs, which ValidateArgs calls to fill CheckOptions.
//
// Test-only hooks (environment; documented in docs/nightly.md "Test hooks"): honoured only when
// BORGCHECK_TEST_HOOKS is exactly kTestHooksConsent; any other BORGCHECK_TEST_* variable without
// it is refused (exit 2), so none can take effect by accident. Each one in effect is announced
// on stderr and in the summary's notes.
//   BORGCHECK_TEST_TODAY=YYYY-MM-DD   the local date of daily/week and daily/month, and "now"
//                                     (noon of that day) for the state
//   BORGCHECK_TEST_READ_DELAY_US=N    every read of the repository sleeps N microseconds first
//   BORGCHECK_TEST_CHECKPOINT_S=X     seconds between state checkpoints (default 60)
//   BORGCHECK_TEST_BUDGET_S_PER_UNIT=X  the time budget's clock: X seconds per unit started
//
// Thread contract: pure functions and reads of the environment; main thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/run/check_options.h"

namespace borgcheck::cli {

inline constexpr const char* kTestHooksConsent = "only-for-borgcheck-tests";

struct LocalDate {
  int year = 1970, month = 1, day = 1;  // month 1..12, day 1..31
};

struct SubsetChoice {
  uint32_t k = 0, t = 0;
  std::string label;  // "3/7", "3/7 (daily/week, 2026-12-02, Wednesday)"
};

// "k/t" (1 <= k <= t <= 1000000), "daily/week" (ISO weekday: Monday 1/7 .. Sunday 7/7),
// "daily/month" (day d of a month of D days: d/D, so every month covers every object once).
Result<SubsetChoice> ParseSubset(const std::string& s, const LocalDate& today);

struct SampleChoice {
  double fraction = 0;  // "5%": 0.05
  uint64_t bytes = 0;   // "50G": 50 GiB
};
// "P%" (0 < P <= 100) or a size: N with K, M, G, T, P (powers of 1024; KiB.. also) or KB, MB,
// GB, TB, PB (powers of 1000), or plain bytes.
Result<SampleChoice> ParseSample(const std::string& s);

// Seconds: N with s, m, h, d or w (fractions allowed: 1.5h), or plain seconds.
Result<double> ParseDuration(const std::string& s, const std::string& flag);
// A duration written as two words (`--max-duration 2 hours`, `--max-age=30 days`): CLI11 would
// take the unit word as the repository. Checked on the arguments before they are parsed; Ok
// when there is none, else kInvalidArgument saying how to write it.
Status CheckSplitDurations(const std::vector<std::string>& args);

int DaysInMonth(int year, int month);
int IsoWeekday(const LocalDate& d);  // Monday 1 .. Sunday 7

struct PartialRaw {
  std::string subset, sample, sample_seed, max_duration, max_age, min_interval, state_dir;
};

// Fills the partial-run fields of `o` (and the hooks' notes); kInvalidArgument with a message.
// `read_delay_us`: BORGCHECK_TEST_READ_DELAY_US (0 none), for main to wrap the Env.
Status ApplyPartialArgs(const PartialRaw& raw, run::CheckOptions& o, std::vector<std::string>& hook_notes,
                        uint64_t& read_delay_us);

}  // namespace borgcheck::cli
