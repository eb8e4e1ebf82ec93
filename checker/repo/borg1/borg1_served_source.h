// A borg 1.x repository (version 1) that a server hands out object by object (`borg serve`
// over ssh, io/object_service.h) as an engine source:
//   1. Plan (the service opened the repository: run/check_run.h): take every id the server's
//      index lists, and the ids of its current PUTs in on-disk order (scan). Units are runs of
//      that order (kServedUnitObjects objects), then one more of the listed ids the scan did
//      not return (the server's walk stops at a damaged entry header and skips the rest of
//      that segment: a finding, and those objects are still fetched and verified).
//   2. Key: the manifest's TYPE byte names the mode; the repokey comes from the server, a key
//      file from this machine (by the repository id), unlocked before any worker exists.
//   3. ReadUnit: gets pipelined across units (kServedGetsAhead in flight; the service bounds
//      the bytes), each payload handed to the workers' Borg1Verifiers (kBorg1ServedPayload):
//      MAC, decryption, decompression and the id hash here, the entry CRC on the server (its
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

inline constexpr size_t kServedUnitObjects = 4096;
// Gets in flight: enough to cover a 100 ms round trip at several hundred MB/s of small objects
// (bench/RESULTS.md, "Remote (borg serve)"); the service bounds the bytes of unread replies.
inline constexpr size_t kServedGetsAhead = 2000;

std::unique_ptr<engine::ObjectSource> MakeBorg1ServedSource(const engine::CheckOptions& options,
                                                           io::ObjectService& service,
                                                           const io::ServedRepository& repo);

}  // namespace borgcheck::repo
