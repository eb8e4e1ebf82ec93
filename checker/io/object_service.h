// A repository reached through a server that hands out stored objects by id and no files:
// `borg serve` over ssh (checker/remote/borg_serve_service.h). The other seam of io/ beside
// io::Env (files): a generation that can be read this way has a source for it
// (repo/borg1/borg1_served_source.h) and reads every object through this interface, so the
// source never sees the RPC, its dialects or the ssh process.
//
// What such a server does and does not give (../shared/design/borg-serve-protocol.md §1.9):
// the objects of the committed transaction by id (the stored payload after the entry header;
// the server checks the entry's CRC and header itself and answers "integrity" when they fail),
// the ids in index order (List) and those of current PUTs in on-disk order (Scan), and the
// repokey blob. No segment files, no index, no hints: the log-level checks cannot be made.
//
// Read-only by construction: no call here writes. The server may still write for us when its
// index is stale (it replays the log: ServerRebuiltIndex).
//
// Thread contract: Open, LoadKey, ListIds and ScanIds on the main thread before any worker
// exists. PostGet, WaitGet, Forget, Lost and the facts are safe for concurrent use; a ticket is
// waited for (or forgotten) once, by one thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"

namespace borgcheck::io {

using ObjectId = std::array<uint8_t, 32>;

// What the server answered to one get.
enum class GetOutcome : uint8_t {
  kOk,          // `payload` holds the stored bytes after the entry header
  kNotFound,    // the server has no such object (borg's ObjectNotFound)
  kIntegrity,   // the server found the stored entry damaged (borg's IntegrityError): `message`
                // says why, `segment`/`offset` where when it said so
  kCouldNotRead,  // any other error of this one call (the server's words in `message`): could
                  // not check, never damage
  kLost,        // the connection is gone (Lost() says why)
  kInterrupted,  // a stop signal ended the wait (base/stop_signal.h): the run is ending
};

struct GetReply {
  GetOutcome outcome = GetOutcome::kLost;
  std::string message;  // escaped for a terminal
  std::optional<uint32_t> segment;
  std::optional<uint64_t> offset;
};

struct ServedRepository {
  ObjectId id{};
  int version = 1;  // the repository version (1: borg 1.x, 2: 2.0.0b5's segments)
};

class ObjectService {
 public:
  virtual ~ObjectService() = default;

  // Opens the repository at the path the URL gave. kNotFound (no repository there, or a path
  // the server's --restrict-to-path/--restrict-to-repository refuses: kPermissionDenied),
  // kLockHeld (borg's lock held past lock_wait), kUnsupported, kIoError (the connection).
  // `lock`: take borg's shared lock for the session (false: --bypass-lock).
  virtual Result<ServedRepository> Open(bool lock, double lock_wait_seconds) = 0;
  // The repokey blob (base64 text, as the config's `key` value), "" when the repository keeps
  // none (a key file, or no encryption). The caller wipes it.
  virtual Result<std::string> LoadKey() = 0;
  // Every id of the committed transaction, in the server's index order.
  virtual Status ListIds(std::vector<ObjectId>& out) = 0;
  // The ids of current PUTs in on-disk order. The server's walk stops at a damaged entry
  // header and skips the rest of that segment, so ids that ListIds has may be missing here.
  virtual Status ScanIds(std::vector<ObjectId>& out) = 0;

  // Pipelined reads: PostGet never blocks on the link; WaitGet blocks until that object's
  // reply is there. The replies read and not yet waited for are bounded in bytes (the server is
  // made to wait), so a caller that posts ahead must wait in order or forget.
  virtual uint64_t PostGet(const ObjectId& id) = 0;
  virtual GetReply WaitGet(uint64_t ticket, ByteBuffer& payload) = 0;
  virtual void Forget(uint64_t ticket) = 0;
  // One object fetched now by a thread that the caller of WaitGet (the pipeline's reader) may
  // be waiting for, e.g. a worker's second read holding a block of the in-flight budget: where
  // its reply would queue behind replies not yet taken that fill the read-ahead bound, it gives
  // up (kCouldNotRead) instead of waiting for a reader that waits for it.
  virtual GetReply GetUnlessBehind(const ObjectId& id, ByteBuffer& payload) { return WaitGet(PostGet(id), payload); }

  // Ok while connected; kIoError "connection to HOST lost: ..." once not.
  virtual Status Lost() const = 0;
  // Whether the server said it replayed its log or rebuilt its index for this session (it
  // wrote to the repository, which a client cannot prevent).
  virtual bool ServerRebuiltIndex() const = 0;
  // "borg serve 1.2.4": what answered, for the summary's notes.
  virtual std::string Describe() const = 0;
  // Bytes received from the server so far.
  virtual uint64_t BytesReceived() const = 0;
};

}  // namespace borgcheck::io
