// Fuzz target: the repository `config` file (repo::ParseIni, repo::ParseRepoConfig).
//
// Input: the bytes of a config file.
// Invariant: parsing never crashes, never hangs and is deterministic. A failure is one of
// kNotARepository / kUnsupported / kCorruptMetadata / kInvalidRepositoryConfig (a value no
// repository can have: exit 16) with a message. A success describes a
// version 1 repository whose id is 32 bytes with id_hex its lowercase hex, segments_per_dir
// at least 1, and a key with all whitespace removed; and the INI layer accepted the text too.
#include <cctype>
#include <cstdint>
#include <string_view>

#include "checker/repo/borg1/borg1_config.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<repo::RepoConfig> r = repo::ParseRepoConfig(text);
  Result<repo::RepoConfig> again = repo::ParseRepoConfig(text);
  FUZZ_CHECK(r.ok() == again.ok());
  if (!r.ok()) {
    const StatusCode c = r.status().code();
    FUZZ_CHECK(c == StatusCode::kNotARepository || c == StatusCode::kUnsupported ||
               c == StatusCode::kCorruptMetadata || c == StatusCode::kInvalidRepositoryConfig);
    FUZZ_CHECK(!r.status().message().empty());
    FUZZ_CHECK(again.status().code() == c && again.status().message() == r.status().message());
    return 0;
  }
  const repo::RepoConfig& c = *r;
  FUZZ_CHECK(repo::ParseIni(text).ok());
  FUZZ_CHECK(c.version == 1);
  FUZZ_CHECK(c.segments_per_dir >= 1);
  FUZZ_CHECK(c.id.size() == 32);
  FUZZ_CHECK(c.id_hex == ToHex(AsBytes(c.id)));
  for (char ch : c.key_base64) FUZZ_CHECK(!std::isspace(static_cast<unsigned char>(ch)));
  FUZZ_CHECK(again->id == c.id && again->key_base64 == c.key_base64 &&
             again->max_segment_size == c.max_segment_size &&
             again->segments_per_dir == c.segments_per_dir && again->append_only == c.append_only);
  return 0;
}
