#include "checker/engine/object_verdict.h"

#include <catch2/catch.hpp>

namespace borgcheck::engine {
namespace {

using report::Finding;
using report::Severity;
using report::Stage;

ChunkId Id(uint8_t b) {
  ChunkId id{};
  id[0] = b;
  return id;
}

Finding Make(Severity sev, Stage stage, std::optional<ChunkId> id) {
  Finding f;
  f.severity = sev;
  f.stage = stage;
  f.chunk_id = id;
  return f;
}

TEST_CASE("object verdicts: each stage's meaning for the archives, decided once", "[engine]") {
  const ChunkId a = Id(1);
  struct Case {
    Stage stage;
    std::optional<ObjectVerdict> verdict;
  } cases[] = {
      {Stage::kEntryCrc, ObjectVerdict::kDamaged},    {Stage::kEnvelope, ObjectVerdict::kDamaged},
      {Stage::kAuthentication, ObjectVerdict::kDamaged}, {Stage::kDecompression, ObjectVerdict::kDamaged},
      {Stage::kIdHash, ObjectVerdict::kDamaged},      {Stage::kTruncated, ObjectVerdict::kDamaged},
      {Stage::kMissing, ObjectVerdict::kMissing},     {Stage::kIo, ObjectVerdict::kUnreadable},
      {Stage::kIndex, std::nullopt},                  {Stage::kSegment, std::nullopt},
      {Stage::kReference, std::nullopt},              {Stage::kArchive, std::nullopt},
      {Stage::kKey, std::nullopt},                    {Stage::kLock, std::nullopt},
  };
  STATIC_REQUIRE(sizeof(cases) / sizeof(cases[0]) == report::kStageCount);
  for (const Case& c : cases) {
    INFO(report::StageName(c.stage));
    CHECK(VerdictOf(Make(Severity::kError, c.stage, a)) == c.verdict);
    CHECK_FALSE(VerdictOf(Make(Severity::kWarning, c.stage, a)));  // a warning judges no object
    CHECK_FALSE(VerdictOf(Make(Severity::kError, c.stage, std::nullopt)));
  }
}

TEST_CASE("object verdicts: one per chunk id, missing wins, the first finding is the one named", "[engine]") {
  const ChunkId a = Id(1), b = Id(2), c = Id(3);
  const std::vector<Finding> findings = {
      Make(Severity::kError, Stage::kAuthentication, a),  // 0
      Make(Severity::kWarning, Stage::kIdHash, b),        // 1: a warning, no verdict
      Make(Severity::kError, Stage::kIo, b),              // 2
      Make(Severity::kError, Stage::kMissing, a),         // 3: a is missing after all
      Make(Severity::kError, Stage::kIndex, c),           // 4: records, not c's bytes
  };
  const ObjectVerdicts v = ObjectVerdicts::Of(findings);
  REQUIRE(v.by_id.size() == 2);
  REQUIRE(v.Find(a));
  CHECK(v.Find(a)->verdict == ObjectVerdict::kMissing);
  CHECK(v.Find(a)->finding == 0);
  REQUIRE(v.Find(b));
  CHECK(v.Find(b)->verdict == ObjectVerdict::kUnreadable);
  CHECK(v.Find(b)->finding == 2);
  CHECK_FALSE(v.Find(c));
}

}  // namespace
}  // namespace borgcheck::engine
