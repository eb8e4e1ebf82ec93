#include "checker/repo/key_type_probe.h"

#include <fmt/format.h>

namespace borgcheck::repo {

void KeyTypeProbe::Saw(uint8_t type) {
  last_seen_ = type;
  if (known_(type) && !first_known_) first_known_ = type;
}

void KeyTypeProbe::Manifest(std::optional<uint8_t> type) {
  if (!type) return;
  Saw(*type);
  if (known_(*type)) manifest_type_ = type;
}

void KeyTypeProbe::Sample(std::optional<uint8_t> type) {
  ++sampled_;
  if (!type) return;
  Saw(*type);
  if (known_(*type)) votes_[*type]++;
}

bool KeyTypeProbe::Settled() const {
  return sampled_ >= kKeyTypeSamples || (rule_ == KeyTypeRule::kFirstKnown && first_known_);
}

std::optional<uint8_t> KeyTypeProbe::Choose(std::vector<std::string>& notes) const {
  if (rule_ == KeyTypeRule::kFirstKnown) return first_known_;
  std::optional<uint8_t> chosen = manifest_type_;
  auto it = manifest_type_ ? votes_.find(*manifest_type_) : votes_.end();
  size_t chosen_votes = it != votes_.end() ? it->second : 0;
  for (const auto& [t, n] : votes_) {
    if (n > chosen_votes && n * 2 > sampled_ && (!chosen || t != *chosen)) {
      if (manifest_type_) {
        notes.push_back(fmt::format("the manifest's data envelope says type {:#04x}, but {} of {} sampled "
                                    "objects say {:#04x}: the repository is checked as {:#04x}",
                                    *manifest_type_, n, sampled_, t, t));
      }
      chosen = t;
      chosen_votes = n;
    }
  }
  if (!chosen && !votes_.empty()) chosen = votes_.begin()->first;
  return chosen;
}

}  // namespace borgcheck::repo
