// Archive selection as borg's check does it (archive_select.h): patterns, time order, --first
// and --last, REPO::ARCHIVE, the warnings, and borg's time format.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "checker/archive/archive_select.h"

namespace borgcheck::archive {
namespace {

ManifestArchive A(std::string name, std::string time, uint8_t id0 = 0) {
  ManifestArchive a;
  a.name = std::move(name);
  a.time = std::move(time);
  a.id[0] = id0;
  a.id[1] = 0xab;
  return a;
}

std::vector<std::string> Names(const std::vector<ManifestArchive>& all, const SelectedArchives& s) {
  std::vector<std::string> out;
  for (size_t i : s.chosen) out.push_back(all[i].name);
  return out;
}

// Manifest order is not time order: the check order is by time, as borg sorts.
const std::vector<ManifestArchive> kAll = {
    A("host-2026-12-03", "2026-12-03T01:00:00.000000", 0x30), A("host-2026-12-01", "2026-12-01T01:00:00", 0x10),
    A("other/x", "2026-12-02T01:00:00.5", 0x20), A("host-2026-12-02", "2026-12-02T01:00:00.25", 0x21),
    A("a|b", "2026-11-30T00:00:00", 0x05)};

SelectedArchives Select(std::vector<std::string> patterns, unsigned first = 0, unsigned last = 0,
                        Generation g = Generation::kBorg2b5, std::string name = "") {
  ArchiveSelection s;
  s.patterns = std::move(patterns);
  s.first = first;
  s.last = last;
  s.name = std::move(name);
  return SelectArchives(kAll, s, g);
}

TEST_CASE("archive selection: every archive in time order, stable for equal times") {
  const SelectedArchives s = Select({});
  CHECK(Names(kAll, s) ==
        std::vector<std::string>{"a|b", "host-2026-12-01", "host-2026-12-02", "other/x", "host-2026-12-03"});
  CHECK(s.warnings.empty());
  std::vector<ManifestArchive> same = {A("b", "2026-01-01T00:00:00"), A("a", "2026-01-01T00:00:00"),
                                       A("unreadable", "")};
  ArchiveSelection none;
  const SelectedArchives t = SelectArchives(same, none, Generation::kBorg2Master);
  CHECK(Names(same, t) == std::vector<std::string>{"unreadable", "b", "a"});  // no time sorts first
}

TEST_CASE("archive selection: sh:, re:, id:, name: and aid: patterns") {
  CHECK(Names(kAll, Select({"sh:host-*"})) ==
        std::vector<std::string>{"host-2026-12-01", "host-2026-12-02", "host-2026-12-03"});
  CHECK(Names(kAll, Select({"sh:*"})) == std::vector<std::string>{"a|b", "host-2026-12-01", "host-2026-12-02",
                                                                  "host-2026-12-03"});  // * never crosses /
  CHECK(Names(kAll, Select({"sh:**/x"})) == std::vector<std::string>{"other/x"});
  CHECK(Names(kAll, Select({"sh:host-2026-12-0[!2]"})) ==
        std::vector<std::string>{"host-2026-12-01", "host-2026-12-03"});
  CHECK(Names(kAll, Select({"sh:host-2026-12-0?"})).size() == 3);
  CHECK(Names(kAll, Select({"sh:a|b"})) == std::vector<std::string>{"a|b"});  // | is no operator in a glob
  // re: is anchored at the start and followed by end-of-string, as re.match(REGEX + "\Z").
  CHECK(Names(kAll, Select({"re:host-2026-12-0[23]"})) ==
        std::vector<std::string>{"host-2026-12-02", "host-2026-12-03"});
  CHECK(Names(kAll, Select({"re:2026"})).empty());
  CHECK(Names(kAll, Select({"re:.*12-01"})) == std::vector<std::string>{"host-2026-12-01"});
  // Python's precedence: "host.*|other/x" + \Z is "host.*" or "other/x\Z".
  CHECK(Names(kAll, Select({"re:host-2026-12-01|other/x"})) ==
        std::vector<std::string>{"host-2026-12-01", "other/x"});
  CHECK(Names(kAll, Select({"id:a|b"})) == std::vector<std::string>{"a|b"});
  CHECK(Names(kAll, Select({"name:sh:other/*"})) == std::vector<std::string>{"other/x"});
  CHECK(Names(kAll, Select({"aid:21AB"})) == std::vector<std::string>{"host-2026-12-02"});
  // Several patterns: every one must match (borg master).
  CHECK(Names(kAll, Select({"sh:host-*", "re:.*-0[12]"})) ==
        std::vector<std::string>{"host-2026-12-01", "host-2026-12-02"});
}

TEST_CASE("archive selection: a pattern without a prefix is a glob for borg 1.x, the name for borg 2") {
  CHECK(Names(kAll, Select({"host-*"}, 0, 0, Generation::kBorg1)).size() == 3);
  CHECK(Names(kAll, Select({"host-*"}, 0, 0, Generation::kBorg2b5)).empty());
  CHECK(Names(kAll, Select({"host-*"}, 0, 0, Generation::kBorg2Master)).empty());
  CHECK(Names(kAll, Select({"other/x"}, 0, 0, Generation::kBorg2Master)) == std::vector<std::string>{"other/x"});
}

TEST_CASE("archive selection: --first and --last count after the patterns, by time") {
  CHECK(Names(kAll, Select({}, 2)) == std::vector<std::string>{"a|b", "host-2026-12-01"});
  CHECK(Names(kAll, Select({}, 0, 2)) == std::vector<std::string>{"other/x", "host-2026-12-03"});
  CHECK(Names(kAll, Select({"sh:host-*"}, 0, 1)) == std::vector<std::string>{"host-2026-12-03"});
  const SelectedArchives s = Select({"sh:host-*"}, 5);
  CHECK(s.chosen.size() == 3);
  CHECK(s.warnings == std::vector<std::string>{"--first 5: only 3 archive(s) found"});
}

TEST_CASE("archive selection: what matches nothing is said, and selects nothing") {
  CHECK(Select({"sh:nope-*"}).warnings == std::vector<std::string>{"-a 'sh:nope-*' matches no archive: no archive "
                                                                   "was checked"});
  // borg 2 reads an unprefixed pattern as the name (borg 1.x as a shell pattern): a glob says so.
  CHECK(Select({"host-*"}).warnings ==
        std::vector<std::string>{"-a 'host-*' matches no archive (borg 2 matches a pattern without a prefix as the "
                                 "exact name: write sh:host-* for a shell pattern): no archive was checked"});
  CHECK(Select({"host-*"}, 0, 0, Generation::kBorg1).warnings.empty());
  CHECK(Select({"nope"}).warnings == std::vector<std::string>{"-a 'nope' matches no archive: no archive was checked"});
  // Patterns given together must all match: one that matches alone says so.
  CHECK(Select({"sh:host-*", "sh:other/*"}).warnings ==
        std::vector<std::string>{"-a 'sh:other/*' matches no archive of those the -a before it kept (an archive must "
                                 "match every -a given): no archive was checked"});
  CHECK(Select({"sh:host-*", "sh:nope"}).warnings ==
        std::vector<std::string>{"-a 'sh:nope' matches no archive: no archive was checked"});
  const SelectedArchives aid = Select({"aid:2"});  // 0x20 and 0x21: two archives
  CHECK(aid.chosen.empty());
  CHECK(aid.warnings == std::vector<std::string>{"-a 'aid:2' matches 2 archive ids (it must match exactly one, as "
                                                 "in borg): no archive was checked"});
  const SelectedArchives named = Select({}, 0, 0, Generation::kBorg1, "host-2026-12-02");
  CHECK(Names(kAll, named) == std::vector<std::string>{"host-2026-12-02"});
  const SelectedArchives missing = Select({}, 0, 0, Generation::kBorg1, "host-*");  // REPO::ARCHIVE is no pattern
  CHECK(missing.chosen.empty());
  CHECK(missing.warnings == std::vector<std::string>{"archive 'host-*' not found: no archive was checked"});
}

TEST_CASE("archive selection: the CLI's pattern check") {
  CHECK(CheckArchivePattern("sh:x*").empty());
  CHECK(CheckArchivePattern("re:^a.*b$").empty());
  CHECK(CheckArchivePattern("plain").empty());
  CHECK(CheckArchivePattern("re:(").rfind("not a valid regular expression (", 0) == 0);
  CHECK(CheckArchivePattern("aid:xyz") == "aid: takes hexadecimal digits of an archive id");
  CHECK(CheckArchivePattern("tags:daily") ==
        "borg master's tags: patterns are not supported (sh:, re:, id:, name:, aid:)");
}

TEST_CASE("archive selection: a name too long for a regex is matched by no sh:/re: pattern") {
  std::vector<ManifestArchive> all = {A(std::string(5000, 'a'), "2026-01-01T00:00:00")};
  ArchiveSelection s;
  s.patterns = {"re:a*"};
  CHECK(SelectArchives(all, s, Generation::kBorg1).chosen.empty());
  s.patterns = {"id:" + std::string(5000, 'a')};
  CHECK(SelectArchives(all, s, Generation::kBorg1).chosen.size() == 1);
}

TEST_CASE("borg's archive times") {
  CHECK(ParseArchiveTime("1970-01-01T00:00:00") == 0);
  CHECK(ParseArchiveTime("1970-01-01T00:00:01.5") == 1500000);
  CHECK(ParseArchiveTime("2026-12-01T13:34:57.123456") == int64_t(1796132097) * 1000000 + 123456);
  CHECK(ParseArchiveTime("2026-12-01T14:34:57.123456+01:00") == int64_t(1796132097) * 1000000 + 123456);
  CHECK(ParseArchiveTime("2026-12-01T13:34:57Z") == int64_t(1796132097) * 1000000);
  CHECK(ParseArchiveTime("1969-12-31T23:59:59") == -1000000);
  CHECK_FALSE(ParseArchiveTime(""));
  CHECK_FALSE(ParseArchiveTime("2026-13-01T00:00:00"));
  CHECK_FALSE(ParseArchiveTime("2026-12-01T00:00:00."));
  CHECK_FALSE(ParseArchiveTime("2026-12-01T00:00:00+0100"));
  CHECK_FALSE(ParseArchiveTime("yesterday"));
}

}  // namespace
}  // namespace borgcheck::archive
