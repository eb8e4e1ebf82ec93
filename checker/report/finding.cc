#include "checker/report/finding.h"

#include <algorithm>
#include <functional>
#include <tuple>

#include "checker/base/bytes.h"

namespace borgcheck::report {

std::string_view StageName(Stage s) {
  switch (s) {
    case Stage::kEntryCrc: return "entry-crc";
    case Stage::kEnvelope: return "envelope";
    case Stage::kAuthentication: return "authentication";
    case Stage::kDecompression: return "decompression";
    case Stage::kIdHash: return "id-hash";
    case Stage::kMissing: return "missing";
    case Stage::kTruncated: return "truncated";
    case Stage::kIndex: return "index";
    case Stage::kSegment: return "segment";
    case Stage::kLock: return "lock";
    case Stage::kReference: return "reference";
    case Stage::kArchive: return "archive";
    case Stage::kIo: return "io";
    case Stage::kKey: return "key";
  }
  return "unknown";
}

std::string_view SeverityName(Severity s) { return s == Severity::kError ? "error" : "warning"; }

std::string_view RereadName(Reread r) {
  switch (r) {
    case Reread::kNotReread: return "not-reread";
    case Reread::kAgreed: return "agreed";
    case Reread::kDiffered: return "differed";
    case Reread::kPassed: return "passed";
  }
  return "unknown";
}

Finding MakeFinding(Severity severity, Stage stage, const Location& where, const ChunkId* id,
                    std::string message) {
  Finding f;
  f.severity = severity;
  f.stage = stage;
  if (id) f.chunk_id = *id;
  f.segment = where.segment;
  f.location = where.item;
  f.offset = where.offset;
  f.message = std::move(message);
  return f;
}

std::string ChunkIdHex(const ChunkId& id) { return ToHex(Bytes(id.data(), id.size())); }

std::string LocationSuffix(const Finding& f) {
  if (!f.segment) {
    if (f.location.empty()) return "";
    std::string s = "[" + f.location;
    if (f.offset) s += ", offset " + std::to_string(*f.offset);
    return s + "]";
  }
  std::string s = "[segment " + std::to_string(*f.segment);
  if (f.offset) s += ", offset " + std::to_string(*f.offset);
  return s + "]";
}

bool FindingLess(const Finding& a, const Finding& b) {
  auto key = [](const Finding& f) {
    return std::make_tuple(!f.segment.has_value(), f.segment.value_or(0), std::cref(f.location),
                           !f.offset.has_value(),
                           f.offset.value_or(0), int(f.stage), f.chunk_id.value_or(ChunkId{}),
                           f.message, int(f.severity));
  };
  return key(a) < key(b);
}

void FindingSink::Add(Finding f) {
  std::lock_guard<std::mutex> lock(mu_);
  findings_.push_back(std::move(f));
}

std::vector<Finding> FindingSink::Sorted() const {
  std::vector<Finding> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = findings_;
  }
  std::sort(out.begin(), out.end(), FindingLess);
  return out;
}

size_t FindingSink::errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::count_if(findings_.begin(), findings_.end(),
                       [](const Finding& f) { return f.severity == Severity::kError; });
}

size_t FindingSink::warnings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::count_if(findings_.begin(), findings_.end(),
                       [](const Finding& f) { return f.severity == Severity::kWarning; });
}

}  // namespace borgcheck::report
