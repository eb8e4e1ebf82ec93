#include "checker/engine/object_verdict.h"

namespace borgcheck::engine {

using report::Severity;
using report::Stage;

std::optional<ObjectVerdict> VerdictOf(const report::Finding& f) {
  if (f.severity != Severity::kError || !f.chunk_id) return std::nullopt;
  switch (f.stage) {
    // The object's bytes cannot be had as stored: bad for every archive that uses it.
    case Stage::kEntryCrc:
    case Stage::kEnvelope:
    case Stage::kAuthentication:
    case Stage::kDecompression:
    case Stage::kIdHash:
    case Stage::kTruncated:
      return ObjectVerdict::kDamaged;
    case Stage::kMissing:
      return ObjectVerdict::kMissing;
    // Not checked: its uses are named on its io finding (with no repair advice).
    case Stage::kIo:
      return ObjectVerdict::kUnreadable;
    // The repository's records, not an object's content.
    case Stage::kIndex:
    case Stage::kSegment:
    case Stage::kLock:
    // The archive pass's own findings (it makes them from these verdicts).
    case Stage::kReference:
    case Stage::kArchive:
    // The key: no object's verdict.
    case Stage::kKey:
      return std::nullopt;
  }
  return std::nullopt;
}

ObjectVerdicts ObjectVerdicts::Of(const std::vector<report::Finding>& findings) {
  ObjectVerdicts v;
  for (size_t i = 0; i < findings.size(); ++i) {
    const std::optional<ObjectVerdict> verdict = VerdictOf(findings[i]);
    if (!verdict) continue;
    auto [it, inserted] = v.by_id.emplace(*findings[i].chunk_id, Entry{*verdict, i});
    if (!inserted && *verdict == ObjectVerdict::kMissing) it->second.verdict = ObjectVerdict::kMissing;
  }
  return v;
}

}  // namespace borgcheck::engine
