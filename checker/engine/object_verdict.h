// What a run's findings say of each stored object, for the archive pass: one verdict per chunk
// id, decided here once. The engine makes the table from the run's findings (every object
// finding is a value the run made: a worker's verification, the source's plan or finish) and
// hands it to the archive pass, which reads it instead of interpreting stages itself. Every
// Stage is listed in VerdictOf without a default, so a new stage does not build warning-clean
// (-Wswitch; CI builds with -Werror) until its meaning for the archives is decided here.
//
// Thread contract: values and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "checker/report/finding.h"

namespace borgcheck::engine {

using ChunkId = report::ChunkId;

enum class ObjectVerdict : uint8_t {
  kDamaged,     // its bytes cannot be had as stored: a check of it failed
  kMissing,     // the repository does not have it (stage `missing`)
  kUnreadable,  // it could not be read (stage `io`): not checked, not known to be damaged
};

// The verdict an error finding gives its object; nullopt for a warning, a finding without a
// chunk id, and the stages that describe records or references rather than an object's bytes
// (`index`, `segment`, and the archive pass's own `reference` and `archive`).
std::optional<ObjectVerdict> VerdictOf(const report::Finding& f);

// The verdicts of one run, per chunk id: `missing` when any finding says so, else the verdict of
// the first (in the findings' order) error finding of the id; `finding` is that finding's index.
struct ObjectVerdicts {
  struct Entry {
    ObjectVerdict verdict = ObjectVerdict::kDamaged;
    size_t finding = 0;
  };
  std::map<ChunkId, Entry> by_id;

  static ObjectVerdicts Of(const std::vector<report::Finding>& findings);
  const Entry* Find(const ChunkId& id) const {
    auto it = by_id.find(id);
    return it == by_id.end() ? nullptr : &it->second;
  }
};

}  // namespace borgcheck::engine
