// Building a finding located by segment number and offset (borg's "[segment N, offset M]"),
// for the readers of segment-file repositories (borg 1.x, repository version 2) and the runs
// that check them.
//
// Thread contract: a pure function; safe for concurrent use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "checker/repo/chunk_id.h"
#include "checker/report/finding.h"

namespace borgcheck::repo {

// A finding at `segment`/`offset` (either may be absent), against chunk `id` when it is not
// null.
inline report::Finding MakeFinding(report::Severity sev, report::Stage stage, std::string msg,
                                   std::optional<uint32_t> segment, std::optional<uint64_t> offset,
                                   const ChunkId* id = nullptr) {
  report::Finding f;
  f.severity = sev;
  f.stage = stage;
  f.message = std::move(msg);
  f.segment = segment;
  f.offset = offset;
  if (id) f.chunk_id = *id;
  return f;
}

}  // namespace borgcheck::repo
