#include "checker/cli/partial_args.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <utility>

#include <fmt/format.h>

extern char** environ;

namespace borgcheck::cli {
namespace {

Status Invalid(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }

bool ParseUint(const std::string& s, uint64_t& v) {
  if (s.empty() || s.size() > 20) return false;
  v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = uint64_t(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  return true;
}

// A non-negative decimal number and the rest of the string.
bool ParseNumber(const std::string& s, double& v, std::string& rest) {
  if (s.empty() || !((s[0] >= '0' && s[0] <= '9') || s[0] == '.')) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || !std::isfinite(v) || v < 0) return false;
  rest = std::string(end);
  return true;
}

const char* const kWeekdays[] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};

std::optional<LocalDate> ParseDate(const std::string& s) {
  int y, m, d;
  char tail;
  if (s.size() != 10 || std::sscanf(s.c_str(), "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3) return std::nullopt;
  if (s[4] != '-' || s[7] != '-' || y < 1970 || m < 1 || m > 12 || d < 1 || d > DaysInMonth(y, m)) return std::nullopt;
  return LocalDate{y, m, d};
}

LocalDate Today() {
  time_t t = time(nullptr);
  struct tm tm {};
  localtime_r(&t, &tm);
  return LocalDate{tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday};
}

double NoonOf(const LocalDate& d) {
  struct tm tm {};
  tm.tm_year = d.year - 1900;
  tm.tm_mon = d.month - 1;
  tm.tm_mday = d.day;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  return double(mktime(&tm));
}

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace

int DaysInMonth(int year, int month) {
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

int IsoWeekday(const LocalDate& d) {
  // Sakamoto's method: 0 = Sunday.
  static const int kOffsets[] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
  int y = d.year - (d.month < 3 ? 1 : 0);
  int w = (y + y / 4 - y / 100 + y / 400 + kOffsets[d.month - 1] + d.day) % 7;
  return w == 0 ? 7 : w;
}

Result<SubsetChoice> ParseSubset(const std::string& s, const LocalDate& today) {
  SubsetChoice c;
  const std::string date = fmt::format("{:04}-{:02}-{:02}", today.year, today.month, today.day);
  if (s == "daily/week") {
    int w = IsoWeekday(today);
    c.k = uint32_t(w);
    c.t = 7;
    c.label = fmt::format("{}/7 (daily/week, {}, {})", w, date, kWeekdays[w - 1]);
    return c;
  }
  if (s == "daily/month") {
    c.k = uint32_t(today.day);
    c.t = uint32_t(DaysInMonth(today.year, today.month));
    c.label = fmt::format("{}/{} (daily/month, {})", c.k, c.t, date);
    return c;
  }
  size_t slash = s.find('/');
  uint64_t k = 0, t = 0;
  if (slash == std::string::npos || !ParseUint(s.substr(0, slash), k) || !ParseUint(s.substr(slash + 1), t) || t < 1 ||
      t > 1000000 || k < 1 || k > t) {
    return Invalid("--subset takes n/t (1 <= n <= t <= 1000000), daily/week or daily/month, not '" + s + "'");
  }
  c.k = uint32_t(k);
  c.t = uint32_t(t);
  c.label = fmt::format("{}/{}", k, t);
  return c;
}

Result<SampleChoice> ParseSample(const std::string& s) {
  double v;
  std::string rest;
  const Status bad = Invalid("--sample takes a share (5%, 0 < P <= 100) or a size (50G, 500M, 2T), not '" + s + "'");
  if (!ParseNumber(s, v, rest)) return bad;
  SampleChoice c;
  if (rest == "%") {
    if (!(v > 0 && v <= 100)) return bad;
    c.fraction = v / 100;
    return c;
  }
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},         {"B", 1},        {"K", 1024.0},   {"KiB", 1024.0}, {"KB", 1e3},
      {"M", 1048576.0}, {"MiB", 1048576.0}, {"MB", 1e6},  {"G", 1073741824.0}, {"GiB", 1073741824.0},
      {"GB", 1e9},     {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12},
      {"P", 1125899906842624.0}, {"PiB", 1125899906842624.0}, {"PB", 1e15}};
  for (const auto& [unit, mul] : kUnits) {
    if (rest == unit) {
      double bytes = v * mul;
      if (!(bytes >= 1 && bytes < 1.8e19)) return bad;
      c.bytes = uint64_t(bytes);
      return c;
    }
  }
  return bad;
}

Result<double> ParseDuration(const std::string& s, const std::string& flag) {
  double v;
  std::string rest;
  const Status bad = Invalid(flag + " takes a duration: a number with s, m, h, d or w (90m, 2h, 30d), not '" + s + "'");
  if (!ParseNumber(s, v, rest)) return bad;
  double mul = rest.empty() || rest == "s" ? 1 : rest == "m" ? 60 : rest == "h" ? 3600 : rest == "d" ? 86400
               : rest == "w" ? 7 * 86400 : -1;
  if (mul < 0 || !(v > 0) || v * mul > 100.0 * 365 * 86400) return bad;
  return v * mul;
}

Status CheckSplitDurations(const std::vector<std::string>& args) {
  static const char* const kDurationFlags[] = {"--max-duration", "--max-age", "--min-interval"};
  static const std::pair<const char*, char> kUnitWords[] = {
      {"s", 's'}, {"sec", 's'}, {"secs", 's'}, {"second", 's'}, {"seconds", 's'}, {"m", 'm'}, {"min", 'm'},
      {"mins", 'm'}, {"minute", 'm'}, {"minutes", 'm'}, {"h", 'h'}, {"hr", 'h'}, {"hrs", 'h'}, {"hour", 'h'},
      {"hours", 'h'}, {"d", 'd'}, {"day", 'd'}, {"days", 'd'}, {"w", 'w'}, {"week", 'w'}, {"weeks", 'w'}};
  // The value is a bare number (ParseDuration's parser, nothing after it): "2" of "2 hours".
  const auto number = [](const std::string& s) {
    double v;
    std::string rest;
    return ParseNumber(s, v, rest) && rest.empty();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    for (const char* flag : kDurationFlags) {
      std::string value;
      size_t unit_at;
      if (args[i] == flag && i + 2 < args.size()) {
        value = args[i + 1];
        unit_at = i + 2;
      } else if (args[i].rfind(std::string(flag) + "=", 0) == 0 && i + 1 < args.size()) {
        value = args[i].substr(std::strlen(flag) + 1);
        unit_at = i + 1;
      } else {
        continue;
      }
      if (!number(value)) continue;
      std::string word = args[unit_at];
      for (char& c : word) c = char(std::tolower(uint8_t(c)));
      for (const auto& [name, unit] : kUnitWords) {
        if (word != name) continue;
        return Invalid(std::string(flag) + " takes one word: write '" + value + " " + args[unit_at] + "' as " + value +
                       unit + " (a number and s, m, h, d or w, without a space)");
      }
    }
  }
  return Status::Ok();
}

Status ApplyPartialArgs(const PartialRaw& raw, run::CheckOptions& o, std::vector<std::string>& hook_notes,
                        uint64_t& read_delay_us) {
  read_delay_us = 0;
  // Test hooks first: they change what "today" is.
  const char* consent = std::getenv("BORGCHECK_TEST_HOOKS");
  const bool hooks = consent && std::string(consent) == kTestHooksConsent;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("BORGCHECK_TEST_", 0) != 0 || kv.rfind("BORGCHECK_TEST_HOOKS=", 0) == 0) continue;
    if (!hooks) {
      return Invalid(kv.substr(0, kv.find('=')) + " is a test-only hook of borgcheck's test suite and is refused "
                     "here (it needs BORGCHECK_TEST_HOOKS, see docs/nightly.md); unset it");
    }
  }
  LocalDate today = Today();
  if (const char* t = hooks ? Env("BORGCHECK_TEST_TODAY") : nullptr) {
    std::optional<LocalDate> d = ParseDate(t);
    if (!d) return Invalid(std::string("BORGCHECK_TEST_TODAY must be YYYY-MM-DD, not '") + t + "'");
    today = *d;
    o.now_unix = NoonOf(today);
    hook_notes.push_back(std::string("TEST hook BORGCHECK_TEST_TODAY=") + t + " in effect (the date and clock of this run)");
  }
  if (const char* t = hooks ? Env("BORGCHECK_TEST_READ_DELAY_US") : nullptr) {
    uint64_t us;
    if (!ParseUint(t, us) || us > 10000000) return Invalid("BORGCHECK_TEST_READ_DELAY_US must be 0..10000000");
    read_delay_us = us;
    hook_notes.push_back(std::string("TEST hook BORGCHECK_TEST_READ_DELAY_US=") + t + " in effect (every read is slowed)");
  }
  if (const char* t = hooks ? Env("BORGCHECK_TEST_CHECKPOINT_S") : nullptr) {
    char* end = nullptr;
    double s = std::strtod(t, &end);
    if (*end != '\0' || !(s > 0 && s <= 3600)) return Invalid("BORGCHECK_TEST_CHECKPOINT_S must be 0..3600 seconds");
    o.checkpoint_interval_s = s;
    hook_notes.push_back(std::string("TEST hook BORGCHECK_TEST_CHECKPOINT_S=") + t + " in effect");
  }
  if (const char* t = hooks ? Env("BORGCHECK_TEST_BUDGET_S_PER_UNIT") : nullptr) {
    char* end = nullptr;
    double s = std::strtod(t, &end);
    if (*end != '\0' || !(s > 0 && s <= 86400)) {
      return Invalid("BORGCHECK_TEST_BUDGET_S_PER_UNIT must be 0..86400 seconds");
    }
    o.test_budget_s_per_unit = s;
    hook_notes.push_back(std::string("TEST hook BORGCHECK_TEST_BUDGET_S_PER_UNIT=") + t +
                         " in effect (the time budget counts units, not time)");
  }

  if (const char* t = hooks ? Env("BORGCHECK_TEST_AFTER_READING_S") : nullptr) {
    char* end = nullptr;
    double s = std::strtod(t, &end);
    if (*end != '\0' || !(s >= 0 && s <= 86400) || o.test_budget_s_per_unit <= 0) {
      return Invalid("BORGCHECK_TEST_AFTER_READING_S must be 0..86400 seconds, with BORGCHECK_TEST_BUDGET_S_PER_UNIT");
    }
    o.test_after_reading_s = s;
    hook_notes.push_back(std::string("TEST hook BORGCHECK_TEST_AFTER_READING_S=") + t +
                         " in effect (the time after the reading is recorded as this)");
  }

  if (const char* t = hooks ? Env("BORGCHECK_TEST_SERVED_BATCH_OBJECTS") : nullptr) {
    uint64_t n = 0;
    if (!ParseUint(t, n) || n < 1 || n > 1000000) {
      return Invalid("BORGCHECK_TEST_SERVED_BATCH_OBJECTS must be 1..1000000 objects");
    }
    o.test_served_batch_objects = size_t(n);
    hook_notes.push_back(std::string("TEST hook BORGCHECK_TEST_SERVED_BATCH_OBJECTS=") + t +
                         " in effect (an ssh:// repository's batches are this small on average)");
  }

  if (!raw.subset.empty()) {
    Result<SubsetChoice> c = ParseSubset(raw.subset, today);
    if (!c.ok()) return c.status();
    o.subset_k = c->k;
    o.subset_t = c->t;
    o.subset_label = c->label;
  }
  if (!raw.sample.empty()) {
    Result<SampleChoice> c = ParseSample(raw.sample);
    if (!c.ok()) return c.status();
    o.sample_fraction = c->fraction;
    o.sample_bytes = c->bytes;
    if (!raw.sample_seed.empty()) {
      if (!ParseUint(raw.sample_seed, o.sample_seed)) {
        return Invalid("--sample-seed takes a number (0 to 18446744073709551615), not '" + raw.sample_seed + "'");
      }
    } else {
      o.sample_seed = (uint64_t(std::random_device()()) << 32) ^ std::random_device()();
    }
  } else if (!raw.sample_seed.empty()) {
    return Invalid("--sample-seed needs --sample");
  }
  struct {
    const std::string& text;
    const char* flag;
    double& out;
  } durations[] = {{raw.max_duration, "--max-duration", o.max_duration_s},
                   {raw.max_age, "--max-age", o.max_age_s},
                   {raw.min_interval, "--min-interval", o.min_interval_s}};
  bool wants_state = !raw.state_dir.empty();
  for (auto& d : durations) {
    if (d.text.empty()) continue;
    Result<double> v = ParseDuration(d.text, d.flag);
    if (!v.ok()) return v.status();
    d.out = *v;
    wants_state = true;
  }
  if (!wants_state) return Status::Ok();

  // Where the state lives: --state-dir, systemd's StateDirectory= ($STATE_DIRECTORY, its first
  // entry), $XDG_STATE_HOME/borgcheck, ~/.local/state/borgcheck.
  if (!raw.state_dir.empty()) {
    o.state_dir = raw.state_dir;
  } else if (const char* sd = Env("STATE_DIRECTORY")) {
    std::string first = sd;
    o.state_dir = first.substr(0, first.find(':'));
  } else if (const char* xdg = Env("XDG_STATE_HOME"); xdg && xdg[0] == '/') {
    o.state_dir = std::string(xdg) + "/borgcheck";
  } else if (const char* home = Env("HOME")) {
    o.state_dir = std::string(home) + "/.local/state/borgcheck";
  } else {
    return Invalid("no folder for the state of --max-duration, --max-age or --min-interval: pass --state-dir, or set "
                   "STATE_DIRECTORY, XDG_STATE_HOME or HOME");
  }
  while (o.state_dir.size() > 1 && o.state_dir.back() == '/') o.state_dir.pop_back();
  return Status::Ok();
}

}  // namespace borgcheck::cli
