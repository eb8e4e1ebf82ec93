#include "checker/archive/archive_select.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <regex>

#include "checker/base/bytes.h"

namespace borgcheck::archive {
namespace {

// libstdc++'s std::regex recurses per input character: a name from an untrusted repository is
// matched by a regex only up to this length (borg's own names are far shorter).
constexpr size_t kMaxRegexNameBytes = 4096;

enum class Style { kShell, kRegex, kIdentical, kArchiveId };

struct Parsed {
  Style style = Style::kIdentical;
  std::string body;
};

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

Parsed Parse(std::string_view pattern, Style fallback) {
  if (StartsWith(pattern, "aid:")) return {Style::kArchiveId, std::string(pattern.substr(4))};
  if (StartsWith(pattern, "name:")) pattern.remove_prefix(5);
  if (pattern.size() > 2 && pattern[2] == ':') {
    const std::string_view p = pattern.substr(0, 2);
    if (p == "sh") return {Style::kShell, std::string(pattern.substr(3))};
    if (p == "re") return {Style::kRegex, std::string(pattern.substr(3))};
    if (p == "id") return {Style::kIdentical, std::string(pattern.substr(3))};
  }
  return {fallback, std::string(pattern)};
}

std::string EscapeChar(char c) {
  static const std::string_view kSpecial = "\\^$.|?*+()[]{}/-";
  if (kSpecial.find(c) != std::string_view::npos) return std::string("\\") + c;
  return std::string(1, c);
}

// borg's shellpattern.translate (sep "/"), without the trailing match_end.
std::string TranslateShell(std::string_view pat) {
  std::string res;
  const size_t n = pat.size();
  size_t i = 0;
  while (i < n) {
    const char c = pat[i++];
    if (c == '*') {
      if (i + 1 < n && pat[i] == '*' && pat[i + 1] == '/') {
        res += "(?:[^/]*/)*";
        i += 2;
      } else {
        res += "[^/]*";
      }
    } else if (c == '?') {
      res += "[^/]";
    } else if (c == '[') {
      size_t j = i;
      if (j < n && pat[j] == '!') ++j;
      if (j < n && pat[j] == ']') ++j;
      while (j < n && pat[j] != ']') ++j;
      if (j >= n) {
        res += "\\[";
      } else {
        std::string stuff;
        for (size_t k = i; k < j; ++k) stuff += pat[k] == '\\' ? std::string("\\\\") : std::string(1, pat[k]);
        i = j + 1;
        if (stuff[0] == '!') {
          stuff[0] = '^';
        } else if (stuff[0] == '^') {
          stuff = "\\" + stuff;
        }
        res += "[" + stuff + "]";
      }
    } else {
      res += EscapeChar(c);
    }
  }
  return res;
}

// A compiled name pattern: anchored at the start, followed by end of input (re.match + \Z).
class Matcher {
 public:
  static std::optional<Matcher> Make(const Parsed& p, std::string* why) {
    Matcher m;
    m.style_ = p.style;
    m.body_ = p.body;
    if (p.style == Style::kShell || p.style == Style::kRegex) {
      // re: is used as written, as borg appends \Z to it: "re:a|ab" is "a" or "ab\Z" there too.
      const std::string text = (p.style == Style::kShell ? TranslateShell(p.body) : p.body) + "$";
      try {
        m.re_.emplace(text, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        if (why) *why = std::string("not a valid regular expression (") + e.what() + ")";
        return std::nullopt;
      }
    }
    if (p.style == Style::kArchiveId) {
      for (char c : p.body) {
        if (!std::isxdigit(static_cast<unsigned char>(c))) {
          if (why) *why = "aid: takes hexadecimal digits of an archive id";
          return std::nullopt;
        }
      }
    }
    return m;
  }

  bool Matches(const ManifestArchive& a) const {
    switch (style_) {
      case Style::kIdentical:
        return a.name == body_;
      case Style::kArchiveId: {
        std::string hex = ToHex(Bytes(a.id.data(), a.id.size()));
        std::string want = body_;
        std::transform(want.begin(), want.end(), want.begin(), [](char c) { return char(std::tolower(c)); });
        return StartsWith(hex, want);
      }
      case Style::kShell:
      case Style::kRegex:
        if (a.name.size() > kMaxRegexNameBytes) return false;
        return std::regex_search(a.name, *re_, std::regex_constants::match_continuous);
    }
    return false;
  }
  Style style() const { return style_; }

 private:
  Style style_ = Style::kIdentical;
  std::string body_;
  std::optional<std::regex> re_;
};

}  // namespace

std::string CheckArchivePattern(std::string_view pattern) {
  std::string why;
  if (!Matcher::Make(Parse(pattern, Style::kIdentical), &why)) return why;
  for (std::string_view unsupported : {"tags:", "user:", "host:", "date:"}) {
    if (StartsWith(pattern, unsupported)) {
      return "borg master's " + std::string(unsupported) + " patterns are not supported (sh:, re:, id:, name:, aid:)";
    }
  }
  return "";
}

std::optional<int64_t> ParseArchiveTime(std::string_view t) {
  auto digits = [&](size_t pos, size_t n, int64_t& out) {
    if (pos + n > t.size()) return false;
    out = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (t[i] < '0' || t[i] > '9') return false;
      out = out * 10 + (t[i] - '0');
    }
    return true;
  };
  int64_t y, mo, d, h, mi, s;
  if (!digits(0, 4, y) || t.size() < 19 || t[4] != '-' || !digits(5, 2, mo) || t[7] != '-' || !digits(8, 2, d) ||
      (t[10] != 'T' && t[10] != ' ') || !digits(11, 2, h) || t[13] != ':' || !digits(14, 2, mi) || t[16] != ':' ||
      !digits(17, 2, s)) {
    return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return std::nullopt;
  size_t pos = 19;
  int64_t micros = 0;
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    int n = 0;
    while (pos < t.size() && t[pos] >= '0' && t[pos] <= '9') {
      if (n < 6) micros = micros * 10 + (t[pos] - '0');
      ++n;
      ++pos;
    }
    if (n == 0) return std::nullopt;
    for (; n < 6; ++n) micros *= 10;
  }
  int64_t offset_s = 0;
  if (pos < t.size()) {
    if (t[pos] == 'Z' && pos + 1 == t.size()) {
      pos++;
    } else if ((t[pos] == '+' || t[pos] == '-') && t.size() == pos + 6 && t[pos + 3] == ':') {
      int64_t oh, om;
      if (!digits(pos + 1, 2, oh) || !digits(pos + 4, 2, om)) return std::nullopt;
      offset_s = (oh * 3600 + om * 60) * (t[pos] == '+' ? 1 : -1);
      pos = t.size();
    } else {
      return std::nullopt;
    }
  }
  // Days from the civil date (Howard Hinnant's algorithm).
  const int64_t yy = y - (mo <= 2);
  const int64_t era = (yy >= 0 ? yy : yy - 399) / 400;
  const int64_t yoe = yy - era * 400;
  const int64_t doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const int64_t days = era * 146097 + doe - 719468;
  return ((days * 86400 + h * 3600 + mi * 60 + s) - offset_s) * 1000000 + micros;
}

SelectedArchives SelectArchives(const std::vector<ManifestArchive>& all, const ArchiveSelection& sel,
                                Generation generation) {
  SelectedArchives out;
  std::vector<size_t> idx;
  if (!sel.name.empty()) {
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].name == sel.name) idx.push_back(i);
    }
    if (idx.empty()) out.warnings.push_back("archive '" + sel.name + "' not found: no archive was checked");
    out.chosen = idx;
    return out;
  }
  const Style fallback = generation == Generation::kBorg1 ? Style::kShell : Style::kIdentical;
  for (size_t i = 0; i < all.size(); ++i) idx.push_back(i);
  for (size_t n = 0; n < sel.patterns.size(); ++n) {
    const std::string& p = sel.patterns[n];
    const Parsed parsed = Parse(p, fallback);
    std::optional<Matcher> m = Matcher::Make(parsed, nullptr);
    if (!m) {
      out.warnings.push_back("-a '" + p + "' is not a valid pattern: no archive was checked");
      idx.clear();
      break;
    }
    std::vector<size_t> kept;
    for (size_t i : idx) {
      if (m->Matches(all[i])) kept.push_back(i);
    }
    if (m->style() == Style::kArchiveId && kept.size() != 1) {
      out.warnings.push_back("-a '" + p + "' matches " + std::to_string(kept.size()) +
                             " archive ids (it must match exactly one, as in borg): no archive was checked");
      kept.clear();
    } else if (kept.empty()) {
      // Why, where a borg habit explains it: patterns given together must all match (borg 2's
      // rule; borg 1.x's --glob-archives takes one), and borg 2 reads a pattern without a prefix
      // as the exact name, where borg 1.x read it as a shell pattern.
      std::string why;
      if (n > 0 && idx.size() < all.size()) {
        bool alone = false;
        for (const ManifestArchive& a : all) alone |= m->Matches(a);
        if (alone) why = " of those the -a before it kept (an archive must match every -a given)";
      }
      const bool glob = p.find_first_of("*?[") != std::string::npos;
      if (why.empty() && generation != Generation::kBorg1 && parsed.body == p && parsed.style == Style::kIdentical &&
          glob) {
        why = " (borg 2 matches a pattern without a prefix as the exact name: write sh:" + p +
              " for a shell pattern)";
      }
      out.warnings.push_back("-a '" + p + "' matches no archive" + why + ": no archive was checked");
    }
    idx = std::move(kept);
  }
  // borg sorts by time, stably (an archive without a readable time sorts first).
  std::vector<std::optional<int64_t>> ts(all.size());
  for (size_t i : idx) ts[i] = ParseArchiveTime(all[i].time);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return ts[a].value_or(INT64_MIN) < ts[b].value_or(INT64_MIN);
  });
  if (sel.first && idx.size() > sel.first) idx.resize(sel.first);
  if (sel.last && idx.size() > sel.last) idx.erase(idx.begin(), idx.end() - sel.last);
  const bool warned = !out.warnings.empty();
  if (sel.first && idx.size() < sel.first && !warned) {
    out.warnings.push_back("--first " + std::to_string(sel.first) + ": only " + std::to_string(idx.size()) +
                           " archive(s) found");
  }
  if (sel.last && idx.size() < sel.last && !warned) {
    out.warnings.push_back("--last " + std::to_string(sel.last) + ": only " + std::to_string(idx.size()) +
                           " archive(s) found");
  }
  out.chosen = std::move(idx);
  return out;
}

}  // namespace borgcheck::archive
