// Every repository in ../shared/fixtures/borg1 (EXPECTED.tsv) gives its expected verdict,
// with the exact bad chunk ids, and for each damaged copy the exact stage and location
// (segment, entry offset) of the one finding, taken from expected/<case>.corruption.txt.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "checker/report/exit_codes.h"
#include "tests/test_support.h"

namespace borgcheck::testing {
namespace {

struct Row {
  std::string repo, outcome, ids, notes;
};

std::vector<Row> ReadExpected() {
  std::ifstream in(Borg1Fixtures() + "/EXPECTED.tsv");
  REQUIRE(in.good());
  std::vector<Row> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    Row r;
    std::getline(ss, r.repo, '\t');
    std::getline(ss, r.outcome, '\t');
    std::getline(ss, r.ids, '\t');
    std::getline(ss, r.notes, '\t');
    rows.push_back(r);
  }
  return rows;
}

std::optional<std::string> KeyFileOf(const Row& r) {
  static const std::regex kKey("^key file ([^;]+\\.key);");
  std::smatch m;
  if (std::regex_search(r.notes, m, kKey)) return Borg1Fixtures() + "/" + m[1].str();
  return std::nullopt;
}

// Stage each damaged copy must be reported at (the damage records say where).
const std::map<std::string, report::Stage> kStageOfCase = {
    {"crc-repokey", report::Stage::kEntryCrc},
    {"mac-repokey", report::Stage::kAuthentication},
    {"mac-repokey-blake2", report::Stage::kAuthentication},
    {"mac-keyfile", report::Stage::kAuthentication},
    {"id-none", report::Stage::kIdHash},
    {"id-authenticated", report::Stage::kIdHash},
    {"id-authenticated-blake2", report::Stage::kIdHash},
    {"lz4-none", report::Stage::kDecompression},
    {"zlib-none", report::Stage::kDecompression},
    {"type-repokey", report::Stage::kEnvelope},
    {"manifest-mac-repokey", report::Stage::kAuthentication},
    {"manifest-tam-none", report::Stage::kAuthentication},
    {"obfpad-none", report::Stage::kDecompression},
};

std::pair<uint32_t, uint64_t> DamageLocation(const std::string& case_name) {
  std::ifstream in(Borg1Fixtures() + "/expected/" + case_name + ".corruption.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static const std::regex kLoc("segment=(\\d+) entry_offset=(\\d+)");
  std::smatch m;
  REQUIRE(std::regex_search(text, m, kLoc));
  return {uint32_t(std::stoul(m[1].str())), std::stoull(m[2].str())};
}

TEST_CASE("every borg1 fixture gives the verdict of EXPECTED.tsv, exactly", "[fixtures]") {
  for (const Row& row : ReadExpected()) {
    DYNAMIC_SECTION(row.repo) {
      std::optional<std::string> key_file = KeyFileOf(row);
      ScopedEnv env({{"BORG_PASSPHRASE", "test"},
                     {"BORG_PASSCOMMAND", std::nullopt},
                     {"BORG_KEY_FILE", key_file},
                     {"BORG_KEYS_DIR", "/nonexistent-borgcheck-keys"}});
      run::CheckOutcome o = Check(Borg1Fixtures() + "/" + row.repo, /*verify_data=*/true);
      INFO(o.status.message());
      REQUIRE(o.status.ok());
      CHECK(o.summary.format == "borg1");
      if (row.outcome == "clean") {
        CHECK(CountErrors(o) == 0);
        CHECK(o.summary.objects_verified == o.summary.objects_total);
        CHECK(o.summary.objects_total > 0);
      } else {
        REQUIRE(row.outcome == "integrity-errors");
        std::set<std::string> want;
        std::stringstream ss(row.ids);
        for (std::string id; std::getline(ss, id, ',');) want.insert(id);
        CHECK(ErrorChunkIds(o) == want);
        CHECK(o.summary.objects_verified == o.summary.objects_total - want.size());
        std::string case_name = row.repo.substr(row.repo.find('/') + 1);
        auto [segment, offset] = DamageLocation(case_name);
        REQUIRE(CountErrors(o) == 1);
        const report::Finding& f = o.findings.front().severity == report::Severity::kError
                                       ? o.findings.front() : o.findings.back();
        CHECK(f.stage == kStageOfCase.at(case_name));
        CHECK(f.segment == segment);
        CHECK(f.offset == offset);
        // The TAM is checked once, after the object itself verified: nothing to read again.
        CHECK(f.reread == (case_name == "manifest-tam-none" ? report::Reread::kNotReread
                                                            : report::Reread::kAgreed));
      }
    }
  }
}

TEST_CASE("uncommitted segments are a warning, not a finding against any chunk", "[fixtures]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  run::CheckOutcome o = Check(Borg1Fixtures() + "/corrupt/uncommitted-repokey-history", true);
  REQUIRE(o.status.ok());
  REQUIRE(o.findings.size() == 1);
  CHECK(o.findings[0].severity == report::Severity::kWarning);
  CHECK(o.findings[0].stage == report::Stage::kSegment);
  CHECK(!o.findings[0].chunk_id);
  CHECK(o.findings[0].message.find("2 uncommitted segment file(s) after transaction 26") != std::string::npos);
  CHECK(o.summary.objects_total == 17);
  CHECK(o.summary.objects_verified == 17);
}

TEST_CASE("the keyless check sees the CRC damage and nothing else, without a passphrase", "[fixtures]") {
  ScopedEnv env({{"BORG_PASSPHRASE", std::nullopt}, {"BORG_PASSCOMMAND", std::nullopt}});
  run::CheckOutcome crc = Check(Borg1Fixtures() + "/corrupt/crc-repokey", false);
  REQUIRE(crc.status.ok());
  CHECK(ErrorChunkIds(crc) == std::set<std::string>{"97f70ee6c177b4921d2b27bc0ed943c35d98338c1e9f0c6a566cf3d075bf69da"});
  CHECK(crc.summary.objects_verified == 101);
  run::CheckOutcome mac = Check(Borg1Fixtures() + "/corrupt/mac-repokey", false);
  REQUIRE(mac.status.ok());
  CHECK(mac.findings.empty());  // the CRC was repaired: only --verify-data can see it
}

TEST_CASE("the report is identical for every thread count", "[fixtures]") {
  ScopedEnv env({{"BORG_PASSPHRASE", "test"}});
  for (const char* repo : {"corrupt/crc-repokey", "corrupt/obfpad-none", "v1.4.4/repos/repokey-blake2"}) {
    run::CheckOutcome one = Check(Borg1Fixtures() + "/" + repo, true, 1);
    for (unsigned t : {2u, 8u, 64u}) {
      run::CheckOutcome many = Check(Borg1Fixtures() + "/" + repo, true, t);
      REQUIRE(many.findings.size() == one.findings.size());
      for (size_t i = 0; i < one.findings.size(); ++i) {
        CHECK(many.findings[i].message == one.findings[i].message);
        CHECK(many.findings[i].chunk_id == one.findings[i].chunk_id);
        CHECK(many.findings[i].offset == one.findings[i].offset);
      }
      CHECK(many.summary.objects_verified == one.summary.objects_verified);
      CHECK(many.summary.plaintext_bytes == one.summary.plaintext_bytes);
    }
  }
}

}  // namespace
}  // namespace borgcheck::testing
