// EscapeText: one case per class of character (text_escape.h states the rule).
#include "checker/base/text_escape.h"

#include <catch2/catch.hpp>

#include <string>

namespace borgcheck {
namespace {

using namespace std::string_literals;

TEST_CASE("EscapeText: printable ASCII and valid multi-byte UTF-8 pass unchanged", "[text_escape]") {
  CHECK(EscapeText("") == "");
  CHECK(EscapeText("host-1/home/u: ok, 12 of 12 objects (a?b*c) ~'\"") ==
        "host-1/home/u: ok, 12 of 12 objects (a?b*c) ~'\"");
  CHECK(EscapeText("K\xc3\xa4se") == "K\xc3\xa4se");                // U+00E4, two bytes
  CHECK(EscapeText("\xe2\x82\xac \xe6\x97\xa5") == "\xe2\x82\xac \xe6\x97\xa5");  // U+20AC, U+65E5
  CHECK(EscapeText("\xf0\x9f\x98\x80") == "\xf0\x9f\x98\x80");      // U+1F600, four bytes
  CHECK(EscapeText("\xc2\xa0\xef\xbf\xbd") == "\xc2\xa0\xef\xbf\xbd");  // U+00A0, U+FFFD
  CHECK(EscapeText("\xf4\x8f\xbf\xbf") == "\xf4\x8f\xbf\xbf");      // U+10FFFF, the last
  CHECK(EscapeText("\xe2\x80\x8b") == "\xe2\x80\x8b");              // U+200B is not a control
}

TEST_CASE("EscapeText: backslash, newline, CR and tab have their short escapes", "[text_escape]") {
  CHECK(EscapeText("a\\b") == "a\\\\b");
  CHECK(EscapeText("x\n/srv/borg/main: ok: 1 of 1") == "x\\n/srv/borg/main: ok: 1 of 1");
  CHECK(EscapeText("a\rb\tc") == "a\\rb\\tc");
  // A literal backslash-n and a newline stay apart.
  CHECK(EscapeText("\\n") == "\\\\n");
  CHECK(EscapeText("\n") == "\\n");
}

TEST_CASE("EscapeText: every other C0 control and DEL as a backslash-x escape", "[text_escape]") {
  CHECK(EscapeText("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m");
  CHECK(EscapeText("bell\a") == "bell\\x07");
  CHECK(EscapeText("a\0b"s) == "a\\x00b");
  CHECK(EscapeText("\x0b\x0c\x1f\x7f") == "\\x0b\\x0c\\x1f\\x7f");
  for (int c = 0; c < 0x20; ++c) {
    const std::string out = EscapeText(std::string(1, char(c)));
    INFO(c);
    CHECK(out.size() >= 2);
    CHECK(out[0] == '\\');
    for (char o : out) CHECK((o >= 0x20 && o < 0x7f));
  }
}

TEST_CASE("EscapeText: C1 controls, bidi controls and line separators as backslash-u escapes", "[text_escape]") {
  CHECK(EscapeText("\xc2\x80") == "\\u0080");
  CHECK(EscapeText("a\xc2\x85z") == "a\\u0085z");  // NEL
  CHECK(EscapeText("\xc2\x9b" "2J") == "\\u009b2J");  // CSI, the one-character ESC [
  CHECK(EscapeText("\xc2\x9f") == "\\u009f");
  CHECK(EscapeText("\xd8\x9c") == "\\u061c");
  CHECK(EscapeText("\xe2\x80\x8e\xe2\x80\x8f") == "\\u200e\\u200f");
  CHECK(EscapeText("evil\xe2\x80\xaetxt.exe") == "evil\\u202etxt.exe");  // RIGHT-TO-LEFT OVERRIDE
  CHECK(EscapeText("\xe2\x80\xaa\xe2\x80\xac") == "\\u202a\\u202c");
  CHECK(EscapeText("\xe2\x81\xa6\xe2\x81\xa9") == "\\u2066\\u2069");
  CHECK(EscapeText("\xe2\x80\xa8\xe2\x80\xa9") == "\\u2028\\u2029");
}

TEST_CASE("EscapeText: bytes that are not valid UTF-8 as backslash-x escapes, one per byte", "[text_escape]") {
  CHECK(EscapeText("latin1 K\xe4se") == "latin1 K\\xe4se");
  CHECK(EscapeText("\xff\xfe") == "\\xff\\xfe");
  CHECK(EscapeText("\x80x") == "\\x80x");                  // a stray continuation byte
  CHECK(EscapeText("\xc3") == "\\xc3");                    // truncated at the end
  CHECK(EscapeText("\xe2\x82z") == "\\xe2\\x82z");         // truncated before an ASCII byte
  CHECK(EscapeText("\xc0\xaf") == "\\xc0\\xaf");           // overlong "/"
  CHECK(EscapeText("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");  // overlong, three bytes
  CHECK(EscapeText("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a UTF-16 surrogate (U+D800)
  CHECK(EscapeText("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  CHECK(EscapeText("\xc2\xc3\xa4") == "\\xc2\xc3\xa4");   // a bad lead, then a valid "ä"
}

TEST_CASE("MessageExcerpt: the first bytes, raw, and \"...\" when cut", "[text_escape]") {
  CHECK(MessageExcerpt("sha256", 32) == "sha256");
  CHECK(MessageExcerpt("0123456789", 10) == "0123456789");
  CHECK(MessageExcerpt("0123456789x", 10) == "0123456789...");
  CHECK(MessageExcerpt("a\x1b[2J\xff", 32) == "a\x1b[2J\xff");  // escaped when printed, not here
  CHECK(EscapeText(MessageExcerpt("\xc3\xa4\xc3\xa4", 3)) == "\xc3\xa4\\xc3...");  // a cut sequence
}

}  // namespace
}  // namespace borgcheck
