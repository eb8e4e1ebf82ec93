#include "checker/engine/key_fallback.h"

#include <algorithm>

namespace borgcheck::engine {

std::string KeyFallback::Note() const {
  return "the key could not be loaded: only the repository layer was checked (keyless: CRCs, the index and the "
         "log); archives not checked";
}

Status KeyFallback::Resolve(std::vector<report::Finding>& findings) const {
  if (!active()) return Status::Ok();
  const bool damage = std::any_of(findings.begin(), findings.end(), [](const report::Finding& f) {
    return f.severity == report::Severity::kError && f.stage != report::Stage::kIo;
  });
  if (!damage) return status_;
  report::Finding f = report::MakeFinding(
      report::Severity::kError, report::Stage::kKey, report::Location::None(), nullptr,
      status_.message() + " (the objects were checked keyless, so the damage above was found; without it this "
                          "run would have ended with the key's own exit code)");
  findings.insert(std::upper_bound(findings.begin(), findings.end(), f, report::FindingLess), std::move(f));
  return Status::Ok();
}

}  // namespace borgcheck::engine
