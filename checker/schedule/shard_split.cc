#include "checker/schedule/shard_split.h"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <queue>
#include <tuple>

namespace borgcheck::schedule {

std::vector<uint32_t> SplitIntoShards(const std::vector<uint64_t>& unit_bytes, uint32_t n) {
  std::vector<uint32_t> shard(unit_bytes.size(), 0);
  if (n <= 1) return shard;
  std::vector<size_t> order(unit_bytes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return unit_bytes[a] > unit_bytes[b]; });
  // (bytes so far, units so far, shard): the least loaded first; units so far spreads units of
  // 0 bytes over the shards instead of piling them onto shard 1.
  using Load = std::tuple<uint64_t, uint64_t, uint32_t>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> loads;
  for (uint32_t s = 0; s < n; ++s) loads.emplace(0, 0, s);
  for (size_t u : order) {
    auto [bytes, count, s] = loads.top();
    loads.pop();
    shard[u] = s;
    loads.emplace(bytes + unit_bytes[u], count + 1, s);
  }
  return shard;
}

std::vector<size_t> UnitsOfShard(const std::vector<uint64_t>& unit_bytes, uint32_t k, uint32_t n) {
  const std::vector<uint32_t> shard = SplitIntoShards(unit_bytes, n);
  std::vector<size_t> out;
  for (size_t u = 0; u < shard.size(); ++u) {
    if (shard[u] + 1 == k) out.push_back(u);
  }
  return out;
}

Status ParseShard(const std::string& text, uint32_t& k, uint32_t& n) {
  const Status bad(StatusCode::kInvalidArgument,
                   "--shard takes K/N, shard K of N (1 <= K <= N <= " + std::to_string(kMaxShards) + "), e.g. 3/8");
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return bad;
  auto number = [](std::string_view s, uint32_t& v) {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size();
  };
  const std::string_view all(text);
  if (!number(all.substr(0, slash), k) || !number(all.substr(slash + 1), n)) return bad;
  if (k < 1 || n < 1 || k > n || n > kMaxShards) return bad;
  return Status::Ok();
}

}  // namespace borgcheck::schedule
