// A client of borg's RPC (`borg serve`, ../shared/design/borg-serve-protocol.md §1-2): the
// server spawned as `RSH [-p PORT] [USER@]HOST REMOTE_PATH serve` (or REMOTE_PATH serve with
// no ssh at all for tests that set `rsh` to a script), requests and replies as msgpack maps
// over its stdin/stdout, its log lines drained from stderr.
//
// Read-only by construction: the only methods this client can send are the ones in
// BorgRpc::Method (negotiate, open, close, info, load_key, __len__, list, scan, get): there is
// no way to name put, delete, commit, check, save_key, destroy, break_lock or the nonce calls.
//
// Dialects (§1.3): the request is packed by the server's major version, learnt from
// `negotiate` (which carries no byte strings, so it packs alike in both): 1.x takes every byte
// string as msgpack str and a 1.1/1.2 server dies on one bin value or on a map/array of more
// than 100 entries; 2.0.0b5 wants bytes as bin and text as str. Replies are read the same way
// in both (str and bin alike are bytes, msgpack_util::AsRaw).
//
// Bounds: a reply larger than kMaxReplyBytes, nested deeper than 8 or with more than
// kMaxReplyArray entries in one array ends the connection ("lost: the server sent ..."); the
// I/O thread stops reading the server's stdout while the replies read and not yet taken add up
// to more than `max_buffered_bytes` (the server then blocks writing: back-pressure through the
// pipe, memory stays bounded; a reply counts its length on the wire); a Wait starved that way
// for `timeout` (the server answered later requests before an earlier one, which borg never
// does) ends the connection; stderr lines are cut at 4 KiB and only the last 20 are kept.
//
// Thread contract: Connect and Close on the main thread (Connect before any worker thread:
// posix_spawnp). Post, Wait, Forget, Lost, StderrTail and ServerRebuiltIndex are safe for
// concurrent use from any thread (one mutex guards the queues; one I/O thread owns the three
// pipes, writes the requests in order, reads the replies and the log lines). A reply is taken
// by the thread that Waits for its msgid; each msgid is waited for (or forgotten) once.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"

namespace borgcheck::remote {

// A borg object is at most 20 MiB (MAX_OBJECT_SIZE) plus its header; a `list`/`scan` batch of
// 100,000 ids (what borg_serve_service asks for) is about 3.5 MB. msgpack-cxx reserves an
// array's slots when it reads the array's header, so the array bound is also what a few forged
// bytes can make it reserve (200,000 x 24 bytes per level).
inline constexpr uint64_t kMaxReplyBytes = 64ull << 20;
inline constexpr uint32_t kMaxReplyArray = 200'000;

struct BorgServeTarget {
  std::vector<std::string> rsh;  // the ssh command, split ("ssh", or BORG_RSH / --rsh)
  std::string user;              // empty: none (ssh's own default)
  std::string host;
  std::optional<uint16_t> port;  // -p PORT when given
  std::vector<std::string> remote_path = {"borg"};  // BORG_REMOTE_PATH / --remote-path, split
  std::chrono::milliseconds timeout{60'000};  // no byte from the server for this long while a
                                              // reply is awaited: the connection is lost
  uint64_t max_buffered_bytes = 64ull << 20;  // replies read and not yet taken (see above)
};

// The methods a reader needs. Nothing else can be sent.
enum class Method : uint8_t { kNegotiate, kOpen, kClose, kInfo, kLoadKey, kLen, kList, kScan, kGet };

// One named argument of a request. Text packs as str in both dialects; Raw (ids, paths the
// server treats as bytes) as str for a 1.x server and as bin for 2.0.0b5; Nil as nil.
struct Raw {
  std::string bytes;
};
struct Nil {};
using ArgValue = std::variant<Nil, bool, int64_t, std::string /*text*/, Raw, std::vector<int64_t>>;
struct Arg {
  std::string name;
  ArgValue value;
};

// A reply: its result (`r`), or the exception the server raised for this one call (the session
// stays usable).
struct RpcReply {
  msgpack::object_handle handle;     // owns `result` (and its zone)
  msgpack::object result;            // valid while `handle` lives; nil for an error reply
  std::string exception_class;       // empty: success ("IntegrityError", "ObjectNotFound", ...)
  std::vector<std::string> exception_args;  // str/bin args as bytes, ints in decimal, others ""
  std::string exception_message;     // exception_short joined with "\n" (borg's one-line text)
  bool ok() const { return exception_class.empty(); }
};

// The reply stream's pure part, no process and no thread: bytes the server wrote to its stdout
// in, one decoded reply at a time out, with the bounds above (kMaxReplyBytes per reply on the
// wire, kMaxReplyArray entries per array, 1000 per map, depth 8, no ext). The I/O thread feeds
// it what it reads; fuzz/borg_rpc_reply_fuzzer.cc feeds it anything.
class ReplyDecoder {
 public:
  ReplyDecoder();
  // Room for `n` more bytes at the returned pointer; then Consumed(k), k <= n, for those written.
  char* Reserve(size_t n);
  void Consumed(size_t n);
  void Feed(const char* data, size_t n);  // Reserve, copy, Consumed

  enum class Step : uint8_t { kNeedMore, kReply, kError };
  struct Decoded {
    uint64_t msgid = 0;       // > 0, at most INT64_MAX
    RpcReply reply;
    uint64_t wire_bytes = 0;  // the reply's length on the wire (what back-pressure counts)
  };
  // The next complete reply; kNeedMore when the bytes so far end inside one; kError when the
  // stream cannot go on (`error`: "protocol error: REASON" or "the server sent a reply larger
  // than N bytes"; the bytes are not escaped: they are our own words). After kError every call
  // answers kError.
  Step Next(Decoded& out, std::string& error);
  // Drops every byte fed and not decoded (after the connection was lost: drain and drop).
  void Discard();

 private:
  msgpack::unpacker unpacker_;
  std::string failed_;  // non-empty once Next answered kError
};

class BorgRpc {
 public:
  // Spawns the server (remote/ssh_process.h), starts the I/O thread and negotiates. kIoError
  // "connection to HOST failed: ..." (ssh's or the server's last stderr line, or "is borg
  // installed on the server?" when it closes before negotiate answers); kUnsupported for a
  // server that answers negotiate with a version we do not speak (1.0.x's bare `2`, or a major
  // version other than 1 and 2).
  static Result<std::unique_ptr<BorgRpc>> Connect(const BorgServeTarget& target);
  ~BorgRpc();  // Close()
  BorgRpc(const BorgRpc&) = delete;
  BorgRpc& operator=(const BorgRpc&) = delete;

  // The server's version from negotiate: {major, minor, patch, pre}, pre -1 for a release,
  // e.g. {1,2,4,-1}, {2,0,0,-3} for 2.0.0b5 (then server_prerelease() is 5; b5 sends the
  // 5-tuple [2,0,0,-3,5], 1.2.4 the 4-tuple [1,2,4,-1]).
  const std::array<int64_t, 4>& server_version() const { return version_; }
  int64_t server_prerelease() const { return prerelease_; }
  bool bytes_as_bin() const { return version_[0] >= 2; }  // the 2.0.0b5 dialect
  std::string ServerVersionText() const;                 // "1.2.4", "2.0.0b5"

  // Sends one request (queued to the I/O thread; never blocks on the pipe) and returns its
  // msgid. After the connection is lost it returns a msgid whose Wait answers Lost().
  uint64_t Post(Method m, std::vector<Arg> args);
  // The reply to `msgid`: blocks until it arrives. Not ok: the connection is lost (Lost()'s
  // status, kIoError), or a stop signal came (kInterrupted: base/stop_signal.h; the request
  // stays posted); a reply that is an exception is an ok Result with !reply.ok().
  Result<RpcReply> Wait(uint64_t msgid);
  Result<RpcReply> Call(Method m, std::vector<Arg> args) { return Wait(Post(m, std::move(args))); }
  // As Wait, for a caller that the reader of the replies ahead of `msgid` may itself be waiting
  // for (a worker's second read while the main thread's gets fill the read-ahead bound): nullopt
  // (and the reply forgotten) when, for a second on end, the reply has not come and the replies
  // read and not taken fill max_buffered_bytes, so that the I/O thread reads no further.
  std::optional<Result<RpcReply>> WaitUnlessBehind(uint64_t msgid);
  // The reply to `msgid` will not be waited for: dropped when it comes.
  void Forget(uint64_t msgid);

  // Ok while connected; kIoError "connection to HOST lost: WHY" once the server closed its
  // stdout, sent what is not a reply, exceeded a bound, or was silent for `timeout` while a
  // reply was awaited.
  Status Lost() const;
  // The last lines the server (or ssh) wrote to stderr, escaped for a terminal
  // (base/text_escape.h), oldest first; JSON log records reduced to "LEVEL: message".
  std::vector<std::string> StderrTail() const;
  // Whether the server said it replayed segments / rebuilt its index or hints (its log or
  // progress messages): it wrote to the repository for us, which we cannot prevent remotely.
  bool ServerRebuiltIndex() const;

  // Sends `close` where the server has it (2.x after 2.0.0b5, which answers InvalidRPCMethod to
  // it; waits up to 5 s for the reply), closes stdin, waits up to 5 s for the server
  // to exit (it releases its lock then), then terminates it. Idempotent.
  void Close();

  // Bytes of replies received (payload accounting for the summary's bytes_read).
  uint64_t BytesReceived() const;

 private:
  class Impl;
  explicit BorgRpc(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::array<int64_t, 4> version_{};
  int64_t prerelease_ = 0;
  bool closed_ = false;  // Close ran (the owner's thread only)
};

// Packs one request as the given dialect packs it (for tests and the fuzzer): the map
// {"i": msgid, "m": method, "a": {args}}.
std::string PackRequest(uint64_t msgid, Method m, const std::vector<Arg>& args, bool bytes_as_bin);
// The wire name of a method ("get", "__len__", ...).
const char* MethodName(Method m);

// Parses "[segment N, offset M]" out of an IntegrityError message; nullopt when absent.
struct SegmentOffset {
  uint32_t segment = 0;
  uint64_t offset = 0;
};
std::optional<SegmentOffset> ParseSegmentOffset(std::string_view message);

}  // namespace borgcheck::remote
