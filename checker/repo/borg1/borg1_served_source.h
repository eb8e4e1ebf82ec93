// A borg 1.x repository (version 1) that a server hands out object by object (`borg serve`
// over ssh, io/object_service.h) as an engine source:
//   1. Plan (the service opened the repository: run/check_run.h): the server's list and scan
//      cut into units (segment_log/served_source.h, shared with 2.0.0b5's served source).
//   2. Key: the manifest's TYPE byte names the mode; the repokey comes from the server, a key
//      file from this machine (by the repository id), unlocked before any worker exists.
//   3. ReadUnit (segment_log/served_source.h): gets pipelined across units, each payload
//      handed to the workers' Borg1Verifiers (kBorg1ServedPayload): MAC, decryption, decompression and the id hash here, the entry CRC on the server (its
//      IntegrityError becomes the object's finding, with the segment and offset it names).
//   4. Finish: the manifest's TAM, and what a served run cannot check (the index against the
//      log, dead entries, bytes after the last commit), said in the notes, never claimed.
//
// Thread contract: see engine/object_source.h. The units are read in order on the main thread
// (the pipeline's state is that thread's); the id lists and the key are const once LoadKey
// returns and are read by the workers and the archive pass; the service is safe for concurrent
// use (the second read and the archive pass fetch from workers).
#pragma once

#include <cstddef>
#include <memory>

#include "checker/engine/check_options.h"
#include "checker/engine/object_source.h"
#include "checker/io/object_service.h"

namespace borgcheck::repo {

std::unique_ptr<engine::ObjectSource> MakeBorg1ServedSource(const engine::CheckOptions& options,
                                                           io::ObjectService& service,
                                                           const io::ServedRepository& repo);

}  // namespace borgcheck::repo
