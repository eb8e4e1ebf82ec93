// A borg 1.x repository (repository version 1) as an engine source, in phases:
//   1. Plan: identify the repository and refuse a held lock (borg1_plan.h, borg_lock.h); the
//      committed transaction, its segments, the live objects sorted by (segment, offset). One
//      unit per committed segment, read in order on one thread; a segment the live list names
//      that is not on disk is a unit too (its ReadUnit reports every object in it as lost).
//   2. Key (verify-data): the manifest's TYPE byte names the mode (else the first live
//      objects'); the key is loaded and unlocked before any worker thread exists.
//   3. ReadUnit: stream the segment in read windows, walk its entries, match them against the
//      live list and hand the live PUTs over. If the walk breaks (impossible header, lost
//      sync), the remaining live objects of the segment are read at the offsets the live list
//      gives, so one bad entry spoils only itself (borg drops the whole segment). Dead entries'
//      CRCs are checked here: a damaged size field makes the walk read garbage as entries, so
//      their failures are held until the walk proves it is still in sync. Every entry feeds the
//      index-vs-log comparison (index mode).
//   4. Finish: index-vs-log leftovers, the manifest (present? its TAM).
//
// Thread contract: see engine/object_source.h. The index-vs-log state is kept by the reading
// thread (in_order); everything the workers read is const after LoadKey.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "checker/engine/check_options.h"
#include "checker/engine/object_source.h"
#include "checker/io/env.h"

namespace borgcheck::repo {

// `config_text`: the config as format detection read it (DetectedFormat), or nullopt (read here).
std::unique_ptr<engine::ObjectSource> MakeBorg1Source(const engine::CheckOptions& options, const io::Env& env,
                                                      std::optional<std::string> config_text = std::nullopt);

}  // namespace borgcheck::repo
