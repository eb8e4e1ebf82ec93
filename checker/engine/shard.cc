#include "checker/engine/shard.h"

#include <fmt/format.h>

#include "checker/engine/object_source.h"
#include "checker/report/json_records.h"

namespace borgcheck::engine {

std::string PlanFingerprint(const Plan& plan) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto add = [&](std::string_view bytes) {
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
    h ^= 0xff;  // a separator no field ends with
    h *= 0x100000001b3ull;
  };
  add(plan.format);
  add(plan.repository_id);
  add(std::to_string(plan.transaction.value_or(0)));
  add(std::to_string(plan.objects_total));
  add(plan.live_list_source);
  for (const ReadUnit& u : plan.units) {
    add(UnitKey(u));
    add(std::to_string(u.bytes));
    add(u.on_disk ? "1" : "0");
  }
  return fmt::format("{:016x}", h);
}

nlohmann::json ShardRecordJson(const ShardResult& r) {
  nlohmann::json findings = nlohmann::json::array();
  for (const report::Finding& f : r.findings) findings.push_back(report::FindingJson(f));
  return {{"type", "shard"},
          {"version", uint64_t(kShardRecordVersion)},
          {"shard", fmt::format("{}/{}", r.k, r.n)},
          {"k", r.k},
          {"n", r.n},
          {"repository", r.repository},
          {"repository_id", r.repository_id},
          {"format", r.format},
          {"transaction", r.transaction},
          {"plan", r.plan},
          {"verify_data", r.verify_data},
          {"repository_only", r.repository_only},
          {"units", r.units},
          {"objects_verified", r.objects_verified},
          {"stored_bytes", r.stored_bytes},
          {"plaintext_bytes", r.plaintext_bytes},
          {"bytes_read", r.bytes_read},
          {"findings", std::move(findings)},
          {"evidence", r.evidence}};
}

Result<ShardResult> ParseShardRecord(const nlohmann::json& j) {
  auto bad = [](const std::string& field) {
    return Status(StatusCode::kInvalidArgument, "shard record: field `" + field + "` is missing or not valid");
  };
  if (!j.is_object()) return bad("type");
  auto str = [&](const char* k, std::string& v) {
    if (!j.contains(k) || !j[k].is_string()) return false;
    v = j[k].get<std::string>();
    return true;
  };
  auto u64 = [&](const char* k, uint64_t& v) {
    if (!j.contains(k)) return false;
    const nlohmann::json& x = j[k];
    // A parsed text has unsigned numbers; a value built in memory may hold a signed one.
    if (!x.is_number_unsigned() && !(x.is_number_integer() && x.get<int64_t>() >= 0)) return false;
    v = x.get<uint64_t>();
    return true;
  };
  auto flag = [&](const char* k, bool& v) {
    if (!j.contains(k) || !j[k].is_boolean()) return false;
    v = j[k].get<bool>();
    return true;
  };
  std::string type;
  if (!str("type", type) || type != "shard") return bad("type");
  uint64_t version = 0, k = 0, n = 0, txn = 0;
  if (!u64("version", version)) return bad("version");
  if (version != kShardRecordVersion) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("shard record of version {}, this borgcheck reads version {}: run the shards and the "
                              "merge with the same borgcheck",
                              version, kShardRecordVersion));
  }
  ShardResult r;
  if (!u64("k", k) || k < 1) return bad("k");
  if (!u64("n", n) || n < k || n > 100000) return bad("n");
  r.k = uint32_t(k);
  r.n = uint32_t(n);
  if (!str("repository", r.repository) || r.repository.empty()) return bad("repository");
  if (!str("repository_id", r.repository_id)) return bad("repository_id");
  if (!str("format", r.format)) return bad("format");
  if (!u64("transaction", txn) || txn > UINT32_MAX) return bad("transaction");
  r.transaction = uint32_t(txn);
  if (!str("plan", r.plan) || r.plan.size() != 16 ||
      r.plan.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return bad("plan");
  }
  if (!flag("verify_data", r.verify_data)) return bad("verify_data");
  if (!flag("repository_only", r.repository_only)) return bad("repository_only");
  if (!j.contains("units") || !j["units"].is_array()) return bad("units");
  for (const nlohmann::json& u : j["units"]) {
    if (!u.is_string()) return bad("units");
    r.units.push_back(u.get<std::string>());
  }
  if (!u64("objects_verified", r.objects_verified)) return bad("objects_verified");
  if (!u64("stored_bytes", r.stored_bytes)) return bad("stored_bytes");
  if (!u64("plaintext_bytes", r.plaintext_bytes)) return bad("plaintext_bytes");
  if (!u64("bytes_read", r.bytes_read)) return bad("bytes_read");
  if (!j.contains("findings") || !j["findings"].is_array()) return bad("findings");
  for (const nlohmann::json& f : j["findings"]) {
    Result<report::Finding> parsed = report::ParseFindingJson(f);
    if (!parsed.ok()) return Status(StatusCode::kInvalidArgument, "shard record: findings: " + parsed.status().message());
    r.findings.push_back(std::move(parsed).value());
  }
  if (!j.contains("evidence") || !j["evidence"].is_object()) return bad("evidence");
  r.evidence = j["evidence"];
  return r;
}

}  // namespace borgcheck::engine
