// Repository version 4 (borg 2 master: borgstore + packs) as an engine source, in phases:
//   1. Plan (main thread): the layout (config, locks: a live lock refuses the run, the
//      packs/<xx>/<sha256> names, index/, keys/, archives/, cache/chunkindex-invalid); the chunk
//      index (every fragment hashed against its name, parsed and merged; bad fragments are
//      findings and the pack walk stands in for them); the key type from the first byte of the
//      manifest's data envelope, else the first indexed objects'. One unit per pack, read on
//      workers.
//   2. Key (verify-data): found and unlocked before any worker thread exists.
//   3. ReadUnit (a pool worker per pack): read the whole pack, SHA-256 against its name (the
//      keyless tier; a mismatch is read once more), walk every blob header, cross-check the walk
//      with the index entries of this pack, then hand over every indexed entry (read at its
//      stated offset and size, as borg reads it) and every blob no entry names (orphans: a
//      warning, verified too).
//   4. Finish (main thread): packs the index names that do not exist, objects only the walk
//      found (a lost index fragment), archives/ entries without their metadata object, the
//      manifest (config/manifest, id 00*32, not in a pack), the notes.
//
// Deliberately absent: borg's archive analysis (items, chunk lists, files) is not part of this
// object pass; and nothing is ever written (borg writes cache/checked-packs, locks and rebuilt
// index fragments into a repository it checks, spec §B.1.1).
//
// Thread contract: see engine/object_source.h. pack_results_[p] is written only by the worker
// reading pack p and read by Finish after the pool is done; everything else is const while
// units are read.
#pragma once

#include <memory>

#include "checker/engine/check_options.h"
#include "checker/engine/object_source.h"
#include "checker/io/env.h"

namespace borgcheck::repo {

std::unique_ptr<engine::ObjectSource> MakeBorgstoreSource(const engine::CheckOptions& options, const io::Env& env);

}  // namespace borgcheck::repo
