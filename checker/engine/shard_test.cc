#include "checker/engine/shard.h"

#include <catch2/catch.hpp>

namespace borgcheck::engine {
namespace {

ShardResult FullShard() {
  ShardResult r;
  r.k = 2;
  r.n = 7;
  r.repository = "/srv/borg/main repo";
  r.repository_id = std::string(64, 'a');
  r.format = "borg1";
  r.transaction = 4294967295u;
  r.plan = "0123456789abcdef";
  r.verify_data = true;
  r.repository_only = false;
  r.units = {"segment 3", "segment 12", "pack " + std::string(64, 'f')};
  r.objects_verified = 1ull << 40;
  r.stored_bytes = 123;
  r.plaintext_bytes = 456;
  r.bytes_read = 789;
  report::ChunkId id{};
  id[0] = 0x97;
  report::Finding f = report::MakeFinding(report::Severity::kError, report::Stage::kIdHash,
                                          report::Location::Segment(2, 8), &id, "id verification failed \"x\"\n");
  f.reread = report::Reread::kAgreed;
  r.findings.push_back(f);
  r.findings.push_back(report::MakeFinding(report::Severity::kWarning, report::Stage::kIndex,
                                           report::Location::Item("pack " + std::string(64, 'f'), 16), nullptr, "é"));
  r.evidence = {{"index_events", {{3, {{"put", std::string(64, 'b'), 8}}}}}, {"misplaced", nlohmann::json::array()}};
  return r;
}

TEST_CASE("a shard record reads back as it was printed", "[shard]") {
  for (const ShardResult& r : {FullShard(), ShardResult{1, 1, "/r", "", "borgstore-v4", 0, "fedcba9876543210", false, true, {}, 0, 0, 0,
                                                        0, {}, nlohmann::json::object()}}) {
    const std::string line = ShardRecordJson(r).dump();
    Result<ShardResult> back = ParseShardRecord(nlohmann::json::parse(line));
    REQUIRE(back.ok());
    REQUIRE(*back == r);
    REQUIRE(ShardRecordJson(*back).dump() == line);
  }
}

TEST_CASE("a shard record that does not parse is refused, naming the field", "[shard]") {
  const nlohmann::json good = ShardRecordJson(FullShard());
  for (const auto& item : good.items()) {
    if (item.key() == "shard") continue;  // derived from k and n: not read
    INFO(item.key());
    nlohmann::json missing = good;
    missing.erase(item.key());
    REQUIRE_FALSE(ParseShardRecord(missing).ok());
    nlohmann::json wrong = good;
    wrong[item.key()] = item.value().is_string() ? nlohmann::json(-1) : nlohmann::json("x");
    REQUIRE_FALSE(ParseShardRecord(wrong).ok());
  }
  auto refused = [&](const char* field, nlohmann::json value, const std::string& needle) {
    nlohmann::json j = good;
    j[field] = std::move(value);
    Result<ShardResult> r = ParseShardRecord(j);
    REQUIRE_FALSE(r.ok());
    REQUIRE_THAT(r.status().message(), Catch::Contains(needle));
  };
  refused("k", 0, "`k`");
  refused("k", 8, "`n`");  // k > n
  refused("n", 100001, "`n`");
  refused("version", 2, "version 2");
  refused("transaction", 4294967296ull, "`transaction`");
  refused("findings", nlohmann::json::array({{{"type", "finding"}, {"severity", "bad"}}}), "findings");
  refused("evidence", nlohmann::json::array(), "`evidence`");
  refused("plan", "0123456789ABCDEF", "`plan`");
  refused("plan", "0123", "`plan`");
  REQUIRE_FALSE(ParseShardRecord(nlohmann::json::array()).ok());
  REQUIRE_FALSE(ParseShardRecord(nlohmann::json("shard")).ok());
}

}  // namespace
}  // namespace borgcheck::engine
