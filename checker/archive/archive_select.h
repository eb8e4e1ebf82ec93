// Which archives a check walks, chosen as borg's check chooses them: every archive, or those
// that match -a/--match-archives (borg 1.x: --glob-archives) patterns, then sorted by time and
// cut to --first N / --last N; or the one archive of borg 1.x's REPO::ARCHIVE.
//
// Patterns (borg 2's `get_regex_from_pattern`, master's `_matching_info_tuples`):
//   sh:GLOB    shell glob: `*` any characters but `/`, `?` one such character, `[...]` a class
//              (`[!...]` negated), `**/` zero or more directory levels (borg's shellpattern)
//   re:REGEX   a regular expression, anchored at the start and followed by end-of-string (as
//              Python's re.match(REGEX + r"\Z"); ECMAScript syntax, which agrees with Python's
//              for the usual constructs)
//   id:NAME    the name exactly; name: is accepted before any of these (master)
//   aid:HEX    master: the archive id starts with HEX; must select exactly one archive
//   no prefix  borg 1.x repositories: sh: (1.x's --glob-archives is a glob); borg 2: id:
// Several patterns: an archive must match every one (master; borg 1.x and 2.0.0b5 take one).
// borg sorts by archive time ("ts" / "timestamp"), stably; so do we (the manifest's time for
// borg 1.x and 2.0.0b5, the archive object's for master).
//
// Thread contract: pure functions of their arguments; safe for concurrent use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/archive/archive_types.h"
#include "checker/archive/metadata_decode.h"

namespace borgcheck::archive {

struct ArchiveSelection {
  std::vector<std::string> patterns;  // all must match
  unsigned first = 0;                 // exclusive with last
  unsigned last = 0;
  std::string name;                   // REPO::ARCHIVE; exclusive with the rest (the CLI checks)

  bool selects() const { return !patterns.empty() || first || last || !name.empty(); }
};

// "" when `pattern` is one of the forms above and (re:) compiles, else why not (for the CLI:
// a usage error before anything is read).
std::string CheckArchivePattern(std::string_view pattern);

struct SelectedArchives {
  std::vector<size_t> chosen;         // indices into the input, in check order (by time)
  std::vector<std::string> warnings;  // "-a X matches no archive", "archive X not found", ...
};

// `all`: the repository's archives (names and times may be empty: an unreadable master archive
// object; it matches no pattern and sorts first).
SelectedArchives SelectArchives(const std::vector<ManifestArchive>& all, const ArchiveSelection& selection,
                                Generation generation);

// borg's archive time ("2026-12-01T13:34:57.123456", optionally with "Z" or "+HH:MM"; no zone
// means UTC, as borg writes it) in microseconds since the epoch; nullopt if it is not one.
std::optional<int64_t> ParseArchiveTime(std::string_view text);

}  // namespace borgcheck::archive
