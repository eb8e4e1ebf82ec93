#include <catch2/catch.hpp>

#include "checker/repo/borg1/borg1_config.h"
#include "checker/io/env.h"

namespace borgcheck::repo {
namespace {

TEST_CASE("config: continuation lines are joined, keys are case-insensitive", "[config]") {
  Result<IniFile> ini = ParseIni("[Repository]\nVersion = 1\nkey = abc\n\tdef\n\tghi\n# comment\n; other\nx=1\n");
  REQUIRE(ini.ok());
  CHECK(ini->at("repository").at("version") == "1");
  CHECK(ini->at("repository").at("key") == "abc\ndef\nghi");
  CHECK(ini->at("repository").at("x") == "1");
}

TEST_CASE("config: malformed INI is corrupt metadata", "[config]") {
  CHECK(ParseIni("\tcontinuation first\n").status().code() == StatusCode::kCorruptMetadata);
  CHECK(ParseIni("[repository\nversion = 1\n").status().code() == StatusCode::kCorruptMetadata);
  CHECK(ParseIni("version = 1\n").status().code() == StatusCode::kCorruptMetadata);  // no section
  CHECK(ParseIni("[repository]\nnovalue\n").status().code() == StatusCode::kCorruptMetadata);
}

TEST_CASE("config: the repokey fixture's config parses with its wrapped key", "[config]") {
  Result<std::string> text = io::Env::Default().ReadWholeFile(std::string(BORGCHECK_SHARED_DIR) +
                                               "/fixtures/borg1/v1.2.4/repos/repokey/config", 1 << 20);
  REQUIRE(text.ok());
  Result<RepoConfig> c = ParseRepoConfig(*text);
  REQUIRE(c.ok());
  CHECK(c->version == 1);
  CHECK(c->segments_per_dir == 1000);
  CHECK(c->max_segment_size == 524288000);
  CHECK(c->id_hex == "3fe7c6920071c3b2774afd0fa2e02cb7b944f5a76949691292b39610eff9a16a");
  CHECK(c->id.size() == 32);
  CHECK(c->key_base64.size() > 300);
  CHECK(c->key_base64.find_first_of(" \t\n") == std::string::npos);
  CHECK(!c->append_only);
}

TEST_CASE("config: versions and values are validated", "[config]") {
  const std::string id = "id = " + std::string(64, 'a') + "\n";
  CHECK(ParseRepoConfig("[repository]\nversion = 2\n" + id).status().code() == StatusCode::kUnsupported);
  CHECK(ParseRepoConfig("[repository]\nversion = 2\n" + id).status().message().find("version 2") != std::string::npos);
  CHECK(ParseRepoConfig("[other]\nversion = 1\n").status().code() == StatusCode::kNotARepository);
  CHECK(ParseRepoConfig("[repository]\n" + id).status().code() == StatusCode::kNotARepository);
  CHECK(ParseRepoConfig("[repository]\nversion = 1\nid = xyz\n").status().code() == StatusCode::kInvalidRepositoryConfig);
  CHECK(ParseRepoConfig("[repository]\nversion = 1\nsegments_per_dir = 0\n" + id).status().code() == StatusCode::kInvalidRepositoryConfig);
  Result<RepoConfig> c = ParseRepoConfig("[repository]\nversion = 1\nmax_segment_size = 5M\nappend_only = 1\n" + id);
  REQUIRE(c.ok());
  CHECK(c->max_segment_size == 5000000);
  CHECK(c->append_only);
}

TEST_CASE("config: sizes with suffixes", "[config]") {
  uint64_t v = 0;
  CHECK((ParseSize("500M", v) && v == 500000000));
  CHECK((ParseSize("7", v) && v == 7));
  CHECK((ParseSize(" 2G ", v) && v == 2000000000));
  CHECK(!ParseSize("", v));
  CHECK(!ParseSize("12X", v));
  CHECK(!ParseSize("99999999999999999999P", v));
}

}  // namespace
}  // namespace borgcheck::repo
