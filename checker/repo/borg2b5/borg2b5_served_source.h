// A repository version 2 (borg 2.0.0b5's segments) that a server hands out object by object
// (`borg2 serve` over ssh, io/object_service.h) as an engine source:
//   1. Plan (the service opened the repository: run/check_run.h): the server's list and scan
//      cut into units (segment_log/served_source.h, shared with borg 1.x's served source; b5's
//      scan walks version-2 segments, so the read order is the disk order).
//   2. Key: the key class by the local source's rule (the manifest's data envelope type byte,
//      outvoted only by most of a sample: repo/key_type_probe.h); the repokey comes from the server
//      (load_key), a key file from this machine (BORG_KEY_FILE, or by the repository id in the
//      keys directories, as the local b5 source finds it), unlocked before any worker exists.
//   3. ReadUnit (segment_log/served_source.h): gets pipelined across units, each payload handed
//      to the workers' Borg2b5Verifiers as kBorg2b5ServedPayload: the RepoObj after the PUT2
//      header, whose header CRC and xxh64 digest the server checked (its IntegrityError becomes
//      the object's finding); meta and data envelopes (MAC / AEAD), meta, decompression and the
//      id hash here.
//   4. Finish: the manifest (present? its TAM), the session-key derivation note; what a served
//      run cannot check (the index against the log, superseded and dead entries, uncommitted
//      segments, bytes after the last commit) said in the notes, never claimed.
//
// Thread contract: see engine/object_source.h and segment_log/served_source.h. The key type,
// the key material and the id lane hash are const once LoadKey (and the first MakeVerifier, on
// the main thread before the pool) return, and are read by the workers and the archive pass;
// the key material is wiped in Finish.
#pragma once

#include <memory>

#include "checker/engine/check_options.h"
#include "checker/engine/object_source.h"
#include "checker/io/object_service.h"

namespace borgcheck::repo {

std::unique_ptr<engine::ObjectSource> MakeBorg2b5ServedSource(const engine::CheckOptions& options,
                                                             io::ObjectService& service,
                                                             const io::ServedRepository& repo);

}  // namespace borgcheck::repo
