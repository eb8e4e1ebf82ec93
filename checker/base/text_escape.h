// The one escaping of untrusted strings for text output (docs/cli.md, "Escaping").
//
// Every string that came from the repository (archive, file and user names, hostnames, lock
// owners, key fields) or from the command line and environment (the repository path, archive
// patterns, key file paths) goes through EscapeText before it reaches a terminal, a log or a
// cron mail: a file named "x\n/srv/borg: ok: ..." must not print a second line, and ESC [
// must not reach a terminal that would act on it. The text reporters call it where they print
// such a string (a message is escaped as a whole at print time, so messages and JSON keep the
// raw bytes); JSON output never uses it (its own escaping is exact).
//
// The rule, one escape per character, so the output is unambiguous and every escape stands for
// exactly the bytes it replaced:
//   - printable UTF-8 passes through unchanged, except the backslash, which is written "\\";
//   - "\n", "\r", "\t" for newline, carriage return and tab;
//   - every other C0 control (U+0000-U+001F) and DEL (U+007F) as "\xNN" (ESC: "\x1b");
//   - C1 controls (U+0080-U+009F), the Unicode bidirectional controls (U+061C, U+200E, U+200F,
//     U+202A-U+202E, U+2066-U+2069) and the line and paragraph separators (U+2028, U+2029) as
//     "\uNNNN": a terminal acts on C1, a bidi override reorders what follows on the line;
//   - every byte that is not part of valid UTF-8 as "\xNN" (borg 1.x keeps such bytes of a file
//     name as surrogate escapes and prints "?"; a "?" would hide which byte it was and could
//     not be told from a real "?").
// Hex digits are lowercase and always two ("\xNN") or four ("\uNNNN"): these are bash's
// $'...' escapes, so an escaped name pasted into $'...' is the original name again (a "'" in
// it must be written "\'" there).
//
// Thread contract: pure functions; safe for concurrent use.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace borgcheck {

// `s` escaped for text output as described above; `s` itself when nothing needs escaping.
std::string EscapeText(std::string_view s);

// Whether `s` is valid UTF-8 throughout (no stray or truncated sequence, overlong form,
// surrogate or code point above U+10FFFF).
bool IsValidUtf8(std::string_view s);

// An untrusted field quoted in a message (a key file's algorithm name): its first `max_bytes`
// bytes, then "..." when it is longer. The bytes stay raw: the message is escaped when it is
// printed as text, and JSON carries it as it is.
std::string MessageExcerpt(std::string_view s, size_t max_bytes);

}  // namespace borgcheck
