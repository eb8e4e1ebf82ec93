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
// Thread contract: as io::ObjectService. It owns the BorgRpc (safe for concurrent use); the
// ticket map is guarded by a mutex.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "checker/io/object_service.h"
#include "checker/remote/borg_rpc.h"

namespace borgcheck::remote {

class BorgServeService final : public io::ObjectService {
 public:
  // `path` as the URL gave it (borg's Location.path: "/abs", "/~/rel", "/./rel", "rel");
  // `host` names the server in messages.
  BorgServeService(std::unique_ptr<BorgRpc> rpc, std::string path, std::string host);
  ~BorgServeService() override;

  Result<io::ServedRepository> Open(bool lock, double lock_wait_seconds) override;
  Result<std::string> LoadKey() override;
  Status ListIds(std::vector<io::ObjectId>& out) override;
  Status ScanIds(std::vector<io::ObjectId>& out) override;
  uint64_t PostGet(const io::ObjectId& id) override;
  io::GetReply WaitGet(uint64_t ticket, ByteBuffer& payload) override;
  void Forget(uint64_t ticket) override;
  Status Lost() const override { return rpc_->Lost(); }
  bool ServerRebuiltIndex() const override { return rpc_->ServerRebuiltIndex(); }
  std::string Describe() const override;
  uint64_t BytesReceived() const override { return rpc_->BytesReceived(); }

  // Closes the session (the server releases borg's lock). Main thread, after the run.
  void Close() { rpc_->Close(); }

 private:
  // A status for a reply that is an exception of a session call (open, list, ...).
  Status SessionError(const char* what, const RpcReply& r) const;
  // A call's reply, or the connection's loss.
  Result<RpcReply> CallChecked(Method m, std::vector<Arg> args);

  std::unique_ptr<BorgRpc> rpc_;
  const std::string path_;
  const std::string host_;
};

// The class of an exception the server raised, as StatusCode (see the table above).
StatusCode BorgExceptionCode(const std::string& exception_class);

}  // namespace borgcheck::remote
