// io::ObjectService (io/object_service.h) through `borg serve`: the borg RPC client
// (borg_rpc.h) turned into the calls a reader makes, in the dialect of the server that
// answered (1.x: every string a msgpack str; 2.0.0b5: bytes as bin; its scan takes a state),
// and borg's exceptions turned into the classes the sources and the CLI know:
//   DoesNotExist, ParentPathDoesNotExist                  -> kNotFound (exit 13)
//   PathNotAllowed, PathPermissionDenied                  -> kInvalidArgument (exit 2): the
//                                                            server's --restrict-to-* refuses it
//   LockTimeout, LockFailed, LockError                    -> kLockHeld (exit 73)
//   InvalidRepository, AtticRepository, InvalidRepositoryConfig -> kNotARepository (15)
//   anything else, or the connection                      -> kIoError (exit 2)
// On a get: ObjectNotFound -> kNotFound, IntegrityError -> kIntegrity (with the segment and
// offset its message names), any other exception -> kCouldNotRead.
//
// Sessions: one or more `borg serve` sessions of the same repository (--remote-connections),
// each with its own shared lock. The session calls (open on all of them; list, scan and
// load_key on the first) go to one; gets are spread over all of them in turn, so that a
// distant server's link carries several ssh channels' windows at once and the server reads
// with several processes. A ticket names its session (ticket = msgid * kMaxSessions + session).
//
// Thread contract: as io::ObjectService. It owns the BorgRpcs (each safe for concurrent use);
// the round-robin counter is atomic; nothing else changes after Open.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "checker/io/object_service.h"
#include "checker/remote/borg_rpc.h"

namespace borgcheck::remote {

class BorgServeService final : public io::ObjectService {
 public:
  static constexpr size_t kMaxSessions = 16;
  // `sessions` (1 .. kMaxSessions, connected); `path` as the URL gave it (borg's Location.path:
  // "/abs", "/~/rel", "/./rel", "rel"); `host` names the server in messages.
  BorgServeService(std::vector<std::unique_ptr<BorgRpc>> sessions, std::string path, std::string host);
  ~BorgServeService() override;

  Result<io::ServedRepository> Open(bool lock, double lock_wait_seconds) override;
  Result<std::string> LoadKey() override;
  Status ListIds(std::vector<io::ObjectId>& out) override;
  Status ScanIds(std::vector<io::ObjectId>& out) override;
  uint64_t PostGet(const io::ObjectId& id) override;
  io::GetReply WaitGet(uint64_t ticket, ByteBuffer& payload) override;
  void Forget(uint64_t ticket) override;
  io::GetReply GetUnlessBehind(const io::ObjectId& id, ByteBuffer& payload) override;
  Status Lost() const override;
  bool ServerRebuiltIndex() const override;
  std::string Describe() const override;
  uint64_t BytesReceived() const override;

  // Closes the sessions, all at once (each server releases its lock). Main thread, after the run.
  void Close();

 private:
  // A status for a reply that is an exception of a session call (open, list, ...).
  Status SessionError(const char* what, const RpcReply& r) const;
  // A get's reply as GetReply.
  io::GetReply ToGetReply(const BorgRpc& session, Result<RpcReply>& r, ByteBuffer& payload) const;
  // A call's reply, or the connection's loss.
  Result<RpcReply> CallChecked(Method m, std::vector<Arg> args);

  std::vector<std::unique_ptr<BorgRpc>> sessions_;  // [0] takes the session calls
  BorgRpc* rpc_;                                     // sessions_[0]
  std::atomic<uint64_t> next_{0};                    // the next get's session, round robin
  const std::string path_;
  const std::string host_;
};

// The class of an exception the server raised, as StatusCode (see the table above).
StatusCode BorgExceptionCode(const std::string& exception_class);

// Connects `count` sessions to the same server at once (each BorgRpc::Connect in a thread of
// its own, joined here: an ssh connection costs several round trips). Main thread, before any
// worker exists. The first failure is returned (the others are closed).
Result<std::vector<std::unique_ptr<BorgRpc>>> ConnectSessions(const BorgServeTarget& target, unsigned count);

}  // namespace borgcheck::remote
