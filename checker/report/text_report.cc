#include "checker/report/text_report.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "checker/base/text_escape.h"
#include "checker/report/exit_codes.h"
#include "checker/report/output.h"

namespace borgcheck::report {

std::string UnitNouns(const std::string& noun) {
  return noun.ends_with("ch") || noun.ends_with("sh") || noun.ends_with("s") ? noun + "es" : noun + "s";
}

namespace {


// What makes two findings "of one kind in one unit".
using GroupKey = std::tuple<std::string, Severity, Stage, std::string, Reread>;

GroupKey KeyOf(const Finding& f) {
  return {LocationUnit(LocationSuffix(f)), f.severity, f.stage, f.message, f.reread};
}

std::string Plural(uint64_t n, std::string_view one, std::string_view many) {
  return FormatCount(n) + " " + std::string(n == 1 ? one : many);
}

// One member line under a roll-up header: "  chunk <hex> [segment 2, offset 8]", and the first
// use the archive pass found for it: ": affects a1: big.bin [bytes 0-4096] (and 4 more)".
std::string MemberLine(const Finding& f) {
  std::string line = " ";
  if (f.chunk_id) line += " chunk " + ChunkIdHex(*f.chunk_id);
  std::string loc = LocationSuffix(f);
  if (!loc.empty()) line += fmt::format(" {}", EscapeText(loc));  // not " " + string: see RollUp
  if (f.affected && !f.affected->uses.empty()) {
    line += ": affects " + FormatAffectedUse(f.affected->uses.front());
    if (f.affected->total > 1) line += fmt::format(" (and {} more)", FormatCount(f.affected->total - 1));
  }
  return line + "\n";
}

std::string RollUp(const std::vector<const Finding*>& members) {
  const Finding& first = *members.front();
  bool all_objects = true;
  for (const Finding* f : members) all_objects &= f->chunk_id.has_value();
  std::string unit = LocationUnit(LocationSuffix(first));
  // fmt, not " " + string: g++ 12 at -O2 warns (-Wrestrict) on that operator+, falsely (GCC PR 105329).
  std::string out = fmt::format("{}: {}{}{}: {}: {}", SeverityName(first.severity), StageName(first.stage),
                                unit.empty() ? "" : " ", EscapeText(unit),
                                Plural(members.size(), all_objects ? "object" : "finding",
                                       all_objects ? "objects" : "findings"),
                                EscapeText(first.message));
  if (first.reread != Reread::kNotReread) out += fmt::format(" (second read: {})", RereadName(first.reread));
  out += "\n";
  // "and 1 more" would take the line the one left would need: then it is printed instead.
  const size_t listed = members.size() == kRollUpShown + 1 ? members.size() : kRollUpShown;
  for (size_t i = 0; i < members.size() && i < listed; ++i) out += MemberLine(*members[i]);
  if (members.size() > listed) {
    out += fmt::format("  and {} more (--json lists every one)\n", FormatCount(members.size() - listed));
  }
  // The advice of the archive pass depends on the kind of finding only: once per group.
  if (!first.advice.empty()) out += "  advice: " + EscapeText(first.advice) + "\n";
  return out;
}

// Where the items of a lost item metadata chunk lay: between the last item read before it and
// the first read after it (the archive's order: borg's traversal order).
std::string LostItemsPlace(const AffectedUse& u) {
  if (u.path_before && u.path_after) {
    return fmt::format(" (lost between {} and {})", EscapeText(*u.path_before), EscapeText(*u.path_after));
  }
  if (u.path_before) return fmt::format(" (lost after {}; no item after it could be read)", EscapeText(*u.path_before));
  if (u.path_after) {
    return fmt::format(" (lost before {}, the first item that could be read)", EscapeText(*u.path_after));
  }
  return "";
}

}  // namespace

std::string FormatAffectedUse(const AffectedUse& u) {
  // borg 2 master names an archive only in its archive object: without it, its id.
  const std::string name = u.archive.empty() ? ChunkIdHex(u.archive_id) : EscapeText(u.archive);
  if (u.use == "archive") {
    return fmt::format("archive {}: its archive object ({}): nothing of the archive can be read", name,
                       ChunkIdHex(u.archive_id));
  }
  if (u.use == "item_ptrs" || u.use == "items") {
    std::string what = u.use == "items" ? "an item metadata chunk" : "an item_ptrs chunk";
    std::string where = u.begin ? fmt::format(" at item stream byte {}", FormatCount(*u.begin)) : "";
    return fmt::format("archive {}: {}{}: read up to item {}, the items in it are lost", name, what, where,
                       FormatCount(u.items_read.value_or(0))) +
           LostItemsPlace(u);
  }
  std::string line = fmt::format("{}: {}", name, EscapeText(u.path.value_or("")));
  if (u.begin && u.end) line += fmt::format(" [bytes {}-{}]", *u.begin, *u.end);
  if (u.use == "chunks_healthy") line += " (chunks_healthy: already replaced by zeros by a borg check --repair)";
  if (u.use == "hardlink" && u.via) line += " (hard link to " + EscapeText(*u.via) + ")";
  return line;
}

std::string FormatAffectedLines(const Finding& f) {
  std::string out;
  if (f.affected) {
    const std::vector<AffectedUse>& uses = f.affected->uses;
    // As for roll-ups: one use left over is printed rather than counted.
    const size_t listed = f.affected->total == kAffectedShown + 1 ? kAffectedShown + 1 : kAffectedShown;
    for (size_t i = 0; i < uses.size() && i < listed; ++i) out += "  affects " + FormatAffectedUse(uses[i]) + "\n";
    const uint64_t shown = std::min<uint64_t>(uses.size(), listed);
    if (f.affected->total > shown) {
      out += fmt::format("  and {} more (--json lists {})\n", FormatCount(f.affected->total - shown),
                         f.affected->total > kMaxAffectedUses
                             ? "the first " + FormatCount(kMaxAffectedUses) + " of them"
                             : std::string("every one"));
    }
  }
  if (!f.advice.empty()) out += "  advice: " + EscapeText(f.advice) + "\n";
  return out;
}

std::string FormatFindingLine(const Finding& f) {
  std::string line = fmt::format("{}: {}", SeverityName(f.severity), StageName(f.stage));
  if (f.chunk_id) line += " chunk " + ChunkIdHex(*f.chunk_id);
  std::string loc = LocationSuffix(f);
  if (!loc.empty()) line += fmt::format(" {}", EscapeText(loc));  // not " " + string: see RollUp
  line += fmt::format(": {}", EscapeText(f.message));
  if (f.reread != Reread::kNotReread) line += fmt::format(" (second read: {})", RereadName(f.reread));
  return line + "\n";
}

std::string LocationUnit(std::string_view loc) {
  // borg's suffix is "[<unit>, offset N]"; LocationSuffix writes nothing after the offset.
  size_t at = loc.rfind(", offset ");
  if (at == std::string_view::npos || loc.empty() || loc.back() != ']') return std::string(loc);
  return std::string(loc.substr(0, at)) + "]";
}

std::string FormatFindings(const std::vector<Finding>& sorted) {
  std::map<GroupKey, std::vector<const Finding*>> groups;
  for (const Finding& f : sorted) groups[KeyOf(f)].push_back(&f);
  std::string out;
  for (const Finding& f : sorted) {
    std::vector<const Finding*>& g = groups[KeyOf(f)];
    if (g.size() < kRollUpAt) {
      out += FormatFindingLine(f) + FormatAffectedLines(f);
    } else if (g.front() == &f) {
      out += RollUp(g);
    }
  }
  return out;
}

std::string FormatSummaryLine(const RunSummary& s, int exit_code) {
  if (s.skipped) {
    return fmt::format("{}: skipped: a clean full verification completed {} (within --min-interval); nothing "
                       "checked\n",
                       EscapeText(s.repository),
                       s.coverage.full_verification_at > 0 ? FormatRfc3339(s.coverage.full_verification_at)
                                                           : std::string("earlier"));
  }
  // One vocabulary (docs/cli.md "The summary line"): an archive is "checked" when every chunk
  // it references was verified by this run; "walked" when its references were all followed but
  // only some of its chunks verified (a slice, a sample, a time budget, units left out by
  // --max-age).
  std::string archives;
  const bool some_objects = !s.subset_label.empty() || s.sample_fraction > 0 || !s.stopped.empty() ||
                            s.units_not_due > 0;
  if (s.archives_checked && s.archives_total) {
    archives = fmt::format(", {} of {} archive{} {}", FormatCount(*s.archives_checked),
                           FormatCount(*s.archives_total), *s.archives_total == 1 ? "" : "s",
                           some_objects ? "walked (their chunks verified only as far as this run went)" : "checked");
  } else if (!s.archives_not_checked.empty() && s.verify_data) {
    // (A keyless line says so in its parentheses already.)
    archives = ", archives not checked (" + EscapeText(s.archives_not_checked) + ")";
  }
  return fmt::format("{}: {}: {} of {} {}objects {} ({}{}){}, {}, {}, {}{}\n", EscapeText(s.repository),
                     VerdictName(s, exit_code), FormatCount(s.objects_verified), FormatCount(s.objects_total),
                     s.objects_selected ? "selected " : "", s.verify_data ? "verified" : "CRC-checked", FormatBytes(s.stored_bytes),
                     s.verify_data ? "" : ", keyless: contents and archives not verified", archives,
                     Plural(s.errors, "error", "errors") +
                         (s.io_errors ? fmt::format(" ({} could not be read)", FormatCount(s.io_errors)) : ""),
                     Plural(s.warnings, "warning", "warnings"),
                     FormatDuration(s.elapsed_s), FormatPartialSuffix(s));
}

std::string FormatPartialSuffix(const RunSummary& s) {
  if (s.complete) return "";
  const std::string nouns = UnitNouns(s.unit_noun);
  std::vector<std::string> parts;
  if (!s.subset_label.empty()) parts.push_back("slice " + EscapeText(s.subset_label));
  if (s.sample_fraction > 0) parts.push_back(fmt::format("sample {:.4g}% (seed {})", s.sample_fraction * 100, s.sample_seed));
  if (s.stopped == "time-budget") parts.push_back("stopped by the time budget (" + FormatDuration(s.max_duration_s) + ")");
  if (s.stopped == "signal") parts.push_back("stopped by a signal");
  if (s.stopped == "connection-lost") parts.push_back("stopped: the connection to the repository's server was lost");
  if (s.units_not_due) {
    parts.push_back(fmt::format("{} {} verified within --max-age left out", FormatCount(s.units_not_due),
                                s.units_not_due == 1 ? s.unit_noun : nouns));
  }
  // Bytes read, and the units they came from (a slice or a sample opens every unit and reads
  // only the selected objects' bytes of it).
  parts.push_back(fmt::format("{} of {} read, from {} of {} {}", FormatBytes(s.bytes_read), FormatBytes(s.bytes_total),
                              FormatCount(s.segments), FormatCount(s.units_total), nouns));
  std::string out = "; partial: ";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

std::string FormatAge(double s) {
  if (!(s >= 0)) s = 0;
  if (s < 86400) return FormatDuration(s);
  uint64_t t = uint64_t(s);
  if (t / 3600 % 24 == 0) return fmt::format("{}d", t / 86400);
  return fmt::format("{}d{:02}h", t / 86400, t / 3600 % 24);
}

std::string FormatCoverageLine(const RunSummary& s) {
  if (!s.has_coverage || s.coverage.state_file.empty() || s.skipped) return "";
  const RunSummary::Coverage& c = s.coverage;
  const std::string nouns = UnitNouns(s.unit_noun);
  // A served repository's coverage is a share of its objects (its batches' sizes are unknown).
  const std::string of = s.unit_noun == "batch" ? FormatCount(s.objects_total) + " objects" : FormatBytes(s.bytes_total);
  std::string out = fmt::format("coverage: {:.1f}% of {} verified{} ({} of {} {}{}{})", c.ratio * 100, of,
                                c.max_age_s > 0 ? " within " + FormatAge(c.max_age_s) : std::string(),
                                FormatCount(c.units_verified), FormatCount(s.units_total), nouns,
                                c.units_partly_verified ? fmt::format(", {} partly", FormatCount(c.units_partly_verified))
                                                        : std::string(),
                                c.units_never_verified ? fmt::format(", {} never", FormatCount(c.units_never_verified))
                                                       : std::string());
  // The open cycle: how far this full verification got.
  if (c.cycle_started_at > 0 && c.cycle_completed_at <= 0) {
    out += c.cycle_slices ? fmt::format("; rotation: {} of {} slices done since {}", c.cycle_slices_done,
                                        c.cycle_slices, FormatRfc3339(c.cycle_started_at))
                          : fmt::format("; this cycle: {} of {} {} verified since {}", FormatCount(c.cycle_units_done),
                                        FormatCount(c.cycle_units), nouns, FormatRfc3339(c.cycle_started_at));
  }
  out += c.full_verification_at > 0 ? "; full verification completed " + FormatRfc3339(c.full_verification_at)
                                    : std::string("; no full verification completed yet");
  if (c.oldest_verified_at > 0 && s.finished_at > 0) {
    out += "; oldest " + s.unit_noun + " verified " + FormatAge(s.finished_at - c.oldest_verified_at) + " ago";
  }
  return out + "; state " + EscapeText(c.state_file) + "\n";
}

std::string FormatVerboseLines(const RunSummary& s) {
  std::string out;
  for (const std::string& n : s.notes) out += "note: " + EscapeText(n) + "\n";
  // borg 2 master keeps objects in packs and has no transactions: `segments` counts packs.
  // A served repository (borg serve) is read in batches of objects and names no transaction.
  std::string where = s.format == "borgstore-v4"
                          ? fmt::format("{} ({})", Plural(s.segments, "pack", "packs"), s.live_list_source)
                      : s.unit_noun == "batch"
                          ? fmt::format("{} of objects ({})", Plural(s.segments, "batch", "batches"), s.live_list_source)
                          : fmt::format("{}, transaction {} ({})", Plural(s.segments, "segment", "segments"),
                                        s.transaction, s.live_list_source);
  std::string rate = s.elapsed_s > 0 ? FormatBytes(uint64_t(double(s.bytes_read) / s.elapsed_s)) + "/s" : "-";
  out += fmt::format("details: {}{}{}, {}, {} plaintext, {} read at {}, {} threads", s.format,
                     s.mode.empty() ? "" : " ", EscapeText(s.mode), where, FormatBytes(s.plaintext_bytes),
                     FormatBytes(s.bytes_read), rate, s.threads);
  if (!s.version.empty()) out += ", borgcheck " + s.version;
  if (!s.repository_id.empty()) out += ", repository id " + EscapeText(s.repository_id);
  out += "\n";
  for (const RunSummary::Phase& p : s.phases) out += fmt::format("phase {}: {:.2f}s\n", p.name, p.seconds);
  return out;
}

std::string FormatBytes(uint64_t n) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = double(n);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string FormatCount(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string FormatDuration(double s) {
  if (!(s >= 0)) s = 0;  // also NaN
  if (s < 60) return fmt::format("{:.2f}s", s);
  uint64_t t = uint64_t(s);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m{:02}s", t / 3600, t / 60 % 60, t % 60);
}

std::string FormatClock(uint64_t s) { return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60); }

std::string FormatRfc3339(double unix_s) {
  const long long total_ms = std::llround(unix_s * 1000);
  time_t t = time_t(total_ms / 1000);
  const int ms = int(total_ms % 1000);
  struct tm tm {};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

namespace {

// Days from 1970-01-01 to the proleptic Gregorian date y-m-d (H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = unsigned(y - era * 400);                          // [0, 399]
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
  return era * 146097 + int64_t(doe) - 719468;
}

unsigned DaysInMonth(int64_t y, unsigned m) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

// Reads exactly `n` decimal digits at `pos` into *out and moves past them.
bool Digits(std::string_view s, size_t& pos, size_t n, unsigned* out) {
  if (s.size() - pos < n) return false;
  unsigned v = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + unsigned(c - '0');
  }
  pos += n;
  *out = v;
  return true;
}

bool SkipChar(std::string_view s, size_t& pos, char c) {
  if (pos >= s.size() || s[pos] != c) return false;
  ++pos;
  return true;
}

}  // namespace

std::optional<double> ParseRfc3339(std::string_view s) {
  // date-time = YYYY-MM-DD "T" hh:mm:ss [ "." 1*DIGIT ] ( "Z" / ("+" / "-") hh:mm ), RFC 3339 §5.6.
  size_t pos = 0;
  unsigned year, month, day, hour, minute, second;
  if (!Digits(s, pos, 4, &year) || !SkipChar(s, pos, '-') || !Digits(s, pos, 2, &month) ||
      !SkipChar(s, pos, '-') || !Digits(s, pos, 2, &day)) {
    return std::nullopt;
  }
  if (!SkipChar(s, pos, 'T') && !SkipChar(s, pos, 't')) return std::nullopt;
  if (!Digits(s, pos, 2, &hour) || !SkipChar(s, pos, ':') || !Digits(s, pos, 2, &minute) ||
      !SkipChar(s, pos, ':') || !Digits(s, pos, 2, &second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month) || hour > 23 || minute > 59 ||
      second > 59) {
    return std::nullopt;
  }
  uint64_t nanos = 0;  // the fraction, in nanoseconds
  if (SkipChar(s, pos, '.')) {
    size_t digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (++digits > 9) return std::nullopt;
      nanos = nanos * 10 + uint64_t(s[pos++] - '0');
    }
    if (digits == 0) return std::nullopt;
    for (size_t i = digits; i < 9; ++i) nanos *= 10;
  }
  int64_t offset_min = 0;  // local time minus UTC
  if (!SkipChar(s, pos, 'Z') && !SkipChar(s, pos, 'z')) {
    if (pos >= s.size() || (s[pos] != '+' && s[pos] != '-')) return std::nullopt;
    const int sign = s[pos++] == '-' ? -1 : 1;
    unsigned off_h, off_m;
    if (!Digits(s, pos, 2, &off_h) || !SkipChar(s, pos, ':') || !Digits(s, pos, 2, &off_m) || off_h > 23 ||
        off_m > 59) {
      return std::nullopt;
    }
    offset_min = sign * int64_t(off_h * 60 + off_m);
  }
  if (pos != s.size()) return std::nullopt;
  const int64_t local_s = DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  const int64_t total_ms = (local_s - offset_min * 60) * 1000 + int64_t((nanos + 500000) / 1000000);
  // Whole milliseconds divided once: the double nearest to the decimal FormatRfc3339 wrote.
  return double(total_ms) / 1000;
}

}  // namespace borgcheck::report
