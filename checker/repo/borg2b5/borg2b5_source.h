// Repository version 2 (borg 2.0.0b5-era segment files) as an engine source, in phases:
//   1. Plan: INI config with version 2, borg's held lock refused (borg_lock.h); committed
//      transaction, header walk of every committed segment with resync after damage, log
//      replay, cross-check with index.T (borg2b5_segments.h). The plan lists every entry, so the
//      reader never parses headers again. One unit per committed segment, read in order.
//   2. Key (verify-data): the key class is the type byte of the manifest's data envelope
//      (borg's rule), outvoted only when most of a sample of other objects disagree; the key is
//      loaded and unlocked before any worker thread exists.
//   3. ReadUnit (main thread): each segment's PUT/PUT2 entries in windows of contiguous
//      entries (up to engine::kReadWindowBytes, one pread each), handed over as objects: current
//      entries live, older ones superseded (checksums only). Damaged regions the plan skipped
//      are never read.
//   4. Finish: the manifest (present? its TAM), which session-key derivation the AEAD sessions
//      used (b5..b7 HKDF, b8.. SHA-256).
//
// What borg's own check does differently (deliberately): borg drops a whole segment at its
// first damaged entry and then skips verify-data altogether; here one damaged entry spoils only
// itself. borg crashes on unauthenticated meta it cannot use (modes none/authenticated); here
// that is an envelope finding against the chunk.
//
// Thread contract: see engine/object_source.h; everything the workers read is const after
// LoadKey.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "checker/engine/check_options.h"
#include "checker/engine/object_source.h"
#include "checker/io/env.h"

namespace borgcheck::repo {

// `config_text`: the config as format detection read it (DetectedFormat), or nullopt (read here).
std::unique_ptr<engine::ObjectSource> MakeBorg2b5Source(const engine::CheckOptions& options, const io::Env& env,
                                                        std::optional<std::string> config_text = std::nullopt);

}  // namespace borgcheck::repo
