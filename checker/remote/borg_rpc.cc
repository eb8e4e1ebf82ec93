// BorgRpc: a client of `borg serve` (see borg_rpc.h).
//
// Structure: BorgRpc::Impl owns the server process (ChildProcess), one I/O thread and the
// table of posted requests. Callers append packed requests to the outgoing buffer and park on
// cv_ (Post/Wait, under mu_); the I/O thread alone touches the three pipes: it writes the
// outgoing buffer non-blocking when the server's stdin has room, feeds the server's stdout into
// a msgpack::unpacker, hands each reply to its slot by msgid, and reads stderr line by line into
// the tail. A self-pipe wakes it when there is something new to write, when a taken reply makes
// room under max_buffered_bytes, and for the shutdown.
//
// Ownership: the slots, the outgoing buffer, the loss and the stderr tail belong to the Impl and
// are guarded by mu_; a reply moves out of its slot into the Result that Wait returns. The
// unpacker and the pipe fds belong to the I/O thread until Shutdown has joined it (Shutdown
// asks the I/O thread to close stdin; nobody else writes or closes the fds before the join).
//
// Messages (kIoError; quoted text from the server is EscapeText'd):
//   connection to HOST failed|lost: the server sent nothing for S s
//   connection to HOST failed|lost: the server closed the connection[: LAST STDERR LINE]
//     ("failed" adds "(is borg installed on the server?)" and the exit status)
//   connection to HOST failed|lost: could not write to the server: STRERROR[: LAST LINE]
//   connection to HOST failed|lost: protocol error: REASON
//   connection to HOST failed|lost: the server sent a reply larger than N bytes
// "failed" until negotiate was answered, "lost" after.
#include "checker/remote/borg_rpc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "checker/base/msgpack_util.h"
#include "checker/base/stop_signal.h"
#include "checker/base/text_escape.h"
#include "checker/remote/ssh_process.h"

namespace borgcheck::remote {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kStderrLines = 20;
constexpr size_t kStderrLineBytes = 4096;
constexpr size_t kReadChunk = 256 * 1024;
constexpr uint32_t kMaxReplyMap = 1000;
constexpr size_t kMaxReplyDepth = 8;
constexpr size_t kV1MaxContainer = 100;  // the 1.1/1.2 server's max_array_len/max_map_len
constexpr auto kTick = std::chrono::milliseconds(100);
constexpr auto kTerminateGrace = std::chrono::seconds(5);
constexpr auto kCloseReplyWait = std::chrono::seconds(5);
constexpr auto kStderrAfterEof = std::chrono::milliseconds(500);
constexpr auto kKillAfterTerm = std::chrono::seconds(2);
constexpr auto kBehindGrace = std::chrono::seconds(1);  // WaitUnlessBehind

std::string Seconds(std::chrono::milliseconds d) {
  const long long ms = d.count();
  std::string s = std::to_string(ms / 1000);
  if (ms % 1000 != 0) {
    std::string frac = std::to_string(ms % 1000);
    frac.insert(0, 3 - frac.size(), '0');
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s;
}

void PackText(msgpack::packer<msgpack::sbuffer>& pk, std::string_view s) {
  pk.pack_str(uint32_t(s.size()));
  pk.pack_str_body(s.data(), uint32_t(s.size()));
}

// An integer msgpack object as int64 (false for another type or a uint above INT64_MAX).
bool AsInt(const msgpack::object& o, int64_t& out) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > uint64_t(INT64_MAX)) return false;
    out = int64_t(o.via.u64);
    return true;
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    out = o.via.i64;
    return true;
  }
  return false;
}

// Whether a stderr line says the server wrote to the repository for us (borg 1.2 and 2.0.0b5
// repository.py: the replay/compaction/check progress msgids, the index and hints recovery
// warnings).
bool MentionsRebuild(std::string_view msgid, std::string_view message) {
  static constexpr std::string_view kMsgids[] = {"repository.replay_segments", "repository.compact_segments",
                                                 "repository.check"};
  for (std::string_view m : kMsgids) {
    if (msgid == m) return true;
  }
  static constexpr std::string_view kTexts[] = {
      "Replaying segments", "Compacting segments", "Checking segments", "index missing or corrupted",
      "hints file missing or corrupted", "Rebuilding sparse info", "Checking repository transaction"};
  for (std::string_view t : kTexts) {
    if (message.find(t) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

const char* MethodName(Method m) {
  switch (m) {
    case Method::kNegotiate: return "negotiate";
    case Method::kOpen: return "open";
    case Method::kClose: return "close";
    case Method::kInfo: return "info";
    case Method::kLoadKey: return "load_key";
    case Method::kLen: return "__len__";
    case Method::kList: return "list";
    case Method::kScan: return "scan";
    case Method::kGet: return "get";
  }
  return "?";
}

std::string PackRequest(uint64_t msgid, Method m, const std::vector<Arg>& args, bool bytes_as_bin) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(3);
  PackText(pk, "i");
  pk.pack_uint64(msgid);
  PackText(pk, "m");
  PackText(pk, MethodName(m));
  PackText(pk, "a");
  if (m == Method::kNegotiate) {
    // Always {"client_data": {"client_version": [1, 2, 4, -1]}}: no byte strings, so both
    // dialects read it alike (`args` is ignored).
    pk.pack_map(1);
    PackText(pk, "client_data");
    pk.pack_map(1);
    PackText(pk, "client_version");
    pk.pack_array(4);
    pk.pack_int64(1);
    pk.pack_int64(2);
    pk.pack_int64(4);
    pk.pack_int64(-1);
  } else {
    pk.pack_map(uint32_t(args.size()));
    for (const Arg& a : args) {
      PackText(pk, a.name);
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, Nil>) {
              pk.pack_nil();
            } else if constexpr (std::is_same_v<T, bool>) {
              if (v) {
                pk.pack_true();
              } else {
                pk.pack_false();
              }
            } else if constexpr (std::is_same_v<T, int64_t>) {
              pk.pack_int64(v);
            } else if constexpr (std::is_same_v<T, std::string>) {
              PackText(pk, v);
            } else if constexpr (std::is_same_v<T, Raw>) {
              if (bytes_as_bin) {
                pk.pack_bin(uint32_t(v.bytes.size()));
                pk.pack_bin_body(v.bytes.data(), uint32_t(v.bytes.size()));
              } else {
                PackText(pk, v.bytes);
              }
            } else {
              pk.pack_array(uint32_t(v.size()));
              for (int64_t x : v) pk.pack_int64(x);
            }
          },
          a.value);
    }
  }
  return std::string(buf.data(), buf.size());
}

std::optional<SegmentOffset> ParseSegmentOffset(std::string_view message) {
  static constexpr std::string_view kSeg = "[segment ";
  static constexpr std::string_view kOff = ", offset ";
  size_t end = message.size();
  while (end > 0) {
    const size_t at = message.rfind(kSeg, end - 1);
    if (at == std::string_view::npos) return std::nullopt;
    end = at;
    std::string_view rest = message.substr(at + kSeg.size());
    SegmentOffset so;
    auto r1 = std::from_chars(rest.data(), rest.data() + rest.size(), so.segment);
    if (r1.ec != std::errc() || r1.ptr == rest.data()) continue;
    rest.remove_prefix(size_t(r1.ptr - rest.data()));
    if (rest.substr(0, kOff.size()) != kOff) continue;
    rest.remove_prefix(kOff.size());
    auto r2 = std::from_chars(rest.data(), rest.data() + rest.size(), so.offset);
    if (r2.ec != std::errc() || r2.ptr == rest.data()) continue;
    rest.remove_prefix(size_t(r2.ptr - rest.data()));
    if (rest.empty() || rest.front() != ']') continue;
    return so;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------

namespace {

// One unpacked message as a reply: false with `error` when it is none.
bool DecodeReply(msgpack::object_handle&& oh, ReplyDecoder::Decoded& out, std::string& error) {
  const msgpack::object& o = oh.get();
  if (o.type != msgpack::type::MAP) {
    error = "protocol error: a reply that is not a map";
    return false;
  }
  const msgpack::object* idv = msgpack_util::Find(o, "i");
  int64_t id = 0;
  if (idv == nullptr || !AsInt(*idv, id) || id <= 0) {
    error = "protocol error: a reply without a msgid";
    return false;
  }
  RpcReply reply;
  const msgpack::object* ec = msgpack_util::Find(o, "exception_class");
  if (ec != nullptr) {
    std::optional<std::string_view> cls = msgpack_util::AsText(*ec);
    if (!cls || cls->empty()) {
      error = "protocol error: an error reply without a class name";
      return false;
    }
    reply.exception_class.assign(*cls);
    if (const msgpack::object* args = msgpack_util::Find(o, "exception_args");
        args != nullptr && args->type == msgpack::type::ARRAY) {
      for (uint32_t i = 0; i < args->via.array.size; ++i) {
        const msgpack::object& a = args->via.array.ptr[i];
        int64_t n = 0;
        if (std::optional<std::string_view> t = msgpack_util::AsText(a)) {
          reply.exception_args.emplace_back(*t);
        } else if (a.type == msgpack::type::POSITIVE_INTEGER) {
          reply.exception_args.push_back(std::to_string(a.via.u64));
        } else if (AsInt(a, n)) {
          reply.exception_args.push_back(std::to_string(n));
        } else {
          reply.exception_args.emplace_back();
        }
      }
    }
    if (const msgpack::object* sh = msgpack_util::Find(o, "exception_short"); sh != nullptr) {
      if (sh->type == msgpack::type::ARRAY) {
        for (uint32_t i = 0; i < sh->via.array.size; ++i) {
          std::optional<std::string_view> line = msgpack_util::AsText(sh->via.array.ptr[i]);
          if (!line) continue;
          if (!reply.exception_message.empty()) reply.exception_message += '\n';
          reply.exception_message += *line;
        }
      } else if (std::optional<std::string_view> t = msgpack_util::AsText(*sh)) {
        reply.exception_message.assign(*t);
      }
    }
    if (reply.exception_message.empty()) reply.exception_message = reply.exception_class;
  } else {
    const msgpack::object* r = msgpack_util::Find(o, "r");
    if (r == nullptr) {
      error = "protocol error: a reply with neither a result nor an error";
      return false;
    }
    reply.result = *r;  // points into oh's zone, which moves with the handle
  }
  reply.handle = std::move(oh);
  out.msgid = uint64_t(id);
  out.reply = std::move(reply);
  return true;
}

}  // namespace

ReplyDecoder::ReplyDecoder()
    : unpacker_(nullptr, nullptr, MSGPACK_UNPACKER_INIT_BUFFER_SIZE,
                msgpack::unpack_limit(kMaxReplyArray, kMaxReplyMap, size_t(kMaxReplyBytes), size_t(kMaxReplyBytes), 0,
                                      kMaxReplyDepth)) {}

char* ReplyDecoder::Reserve(size_t n) {
  unpacker_.reserve_buffer(n);
  return unpacker_.buffer();
}

void ReplyDecoder::Consumed(size_t n) { unpacker_.buffer_consumed(n); }

void ReplyDecoder::Feed(const char* data, size_t n) {
  if (n == 0) return;
  std::memcpy(Reserve(n), data, n);
  Consumed(n);
}

void ReplyDecoder::Discard() {
  unpacker_.reset();
  unpacker_.remove_nonparsed_buffer();
}

ReplyDecoder::Step ReplyDecoder::Next(Decoded& out, std::string& error) {
  if (!failed_.empty()) {
    error = failed_;
    return Step::kError;
  }
  const std::string too_large = "the server sent a reply larger than " + std::to_string(kMaxReplyBytes) + " bytes";
  // msgpack-cxx's parsed_size() counts the message in progress and restarts at 0 when next()
  // completes one: the reply's length is what was parsed before plus what this call consumed.
  const uint64_t before = unpacker_.parsed_size();
  const uint64_t unparsed = unpacker_.nonparsed_size();
  msgpack::object_handle oh;
  bool complete = false;
  try {
    complete = unpacker_.next(oh);
  } catch (const std::exception& e) {
    failed_ = std::string("protocol error: ") + e.what();
  }
  if (failed_.empty() && !complete) {
    // The limits of the unpacker check a str/bin only once its body is complete: the length of
    // the message so far bounds what is buffered meanwhile.
    if (unpacker_.message_size() >= kMaxReplyBytes) failed_ = too_large;
    if (failed_.empty()) return Step::kNeedMore;
  }
  if (failed_.empty()) {
    const uint64_t bytes = before + (unparsed - unpacker_.nonparsed_size());
    if (bytes > kMaxReplyBytes) {
      failed_ = too_large;
    } else if (DecodeReply(std::move(oh), out, failed_)) {
      out.wire_bytes = bytes;
      return Step::kReply;
    }
  }
  Discard();
  error = failed_;
  return Step::kError;
}

// ---------------------------------------------------------------------------------------------

class BorgRpc::Impl {
 public:
  explicit Impl(const BorgServeTarget& t)
      : host_(t.host.empty() ? "the server" : t.host),
        timeout_(t.timeout),
        max_buffered_(std::max<uint64_t>(t.max_buffered_bytes, 1)) {}
  ~Impl() { (void)Shutdown(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Status Start(const std::vector<std::string>& argv) {
    Result<std::unique_ptr<ChildProcess>> p = ChildProcess::Spawn(argv);
    if (!p.ok()) return p.status();
    proc_ = std::move(*p);
    for (int fd : {proc_->stdin_fd(), proc_->stdout_fd(), proc_->stderr_fd()}) {
      const int fl = ::fcntl(fd, F_GETFL);
      if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
      return Status(StatusCode::kIoError, std::string("pipe: ") + std::strerror(errno));
    }
    try {
      io_ = std::thread([this] { IoLoop(); });
    } catch (const std::system_error& e) {
      return Status(StatusCode::kIoError, std::string("could not start a thread: ") + e.what());
    }
    return Status::Ok();
  }

  void SetDialect(bool bytes_as_bin) {
    std::lock_guard<std::mutex> lock(mu_);
    bytes_as_bin_ = bytes_as_bin;
    established_ = true;
  }

  uint64_t Post(Method m, const std::vector<Arg>& args) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t id = next_id_++;
    if (!lost_.ok()) return id;  // no slot: Wait answers the loss
    Slot& slot = slots_[id];
    if (!bytes_as_bin_ && m != Method::kNegotiate) {
      // The 1.1/1.2 server dies on a map or array of more than 100 entries: refuse it here.
      bool too_big = args.size() > kV1MaxContainer;
      for (const Arg& a : args) {
        if (const auto* v = std::get_if<std::vector<int64_t>>(&a.value)) too_big |= v->size() > kV1MaxContainer;
      }
      if (too_big) {
        slot.arrived = true;
        slot.error = Status(StatusCode::kInvalidArgument,
                            std::string("a ") + MethodName(m) + " request with more than 100 entries in a map or "
                                                                "array, which a 1.x server refuses");
        return id;
      }
    }
    if (awaited_++ == 0) busy_since_ = Clock::now();
    // A request added to requests the I/O thread has not taken yet needs no wake of its own:
    // it takes them all at once (a burst of posts costs one wake and one write).
    const bool first = outgoing_.empty();
    outgoing_ += PackRequest(id, m, args, bytes_as_bin_);
    lock.unlock();
    if (first) Wake();
    return id;
  }

  // Waits until the reply to `msgid` is there, the connection is lost, or `deadline` passes
  // (kIoError "timed out" then; the slot stays, for a later Wait or Forget). With `gave_up`
  // (WaitUnlessBehind): also gives up, *gave_up set and the slot forgotten, once the reply has
  // not come while the buffered replies filled max_buffered_ for kBehindGrace on end.
  Result<RpcReply> Wait(uint64_t msgid, std::optional<Clock::time_point> deadline = std::nullopt,
                        bool* gave_up = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = slots_.find(msgid);
    if (it == slots_.end()) {
      if (!lost_.ok()) return lost_;
      return Status(StatusCode::kInvalidArgument, "no request " + std::to_string(msgid) + " is awaited");
    }
    // A loss erases the slots still unanswered (LoseLocked): look the slot up again each time.
    auto ready = [&] {
      it = slots_.find(msgid);
      return it == slots_.end() || it->second.arrived || !lost_.ok();
    };
    // A stop signal (SIGTERM, Ctrl-C) ends every wait, so that a stalled server does not hold
    // a stopping run until --remote-timeout; the slot stays (for a later Wait or Forget).
    auto stopped = [&]() -> std::optional<Status> {
      if (const int sig = PendingStopSignal()) {
        return Status(StatusCode::kInterrupted, "stopped by signal " + std::to_string(sig));
      }
      return std::nullopt;
    };
    if (gave_up != nullptr) {
      bool behind = false;  // since behind_since (no std::optional: g++ 12 -O2 warns)
      Clock::time_point behind_since{};
      while (!ready()) {
        if (std::optional<Status> s = stopped()) return *s;
        const Clock::time_point now = Clock::now();
        if (buffered_ < max_buffered_) {
          behind = false;
        } else if (!behind) {
          behind = true;
          behind_since = now;
        } else if (now - behind_since >= kBehindGrace) {
          it->second.forgotten = true;  // dropped when it comes
          *gave_up = true;
          return Status(StatusCode::kIoError, "behind the replies read ahead");
        }
        cv_.wait_for(lock, kTick);
      }
    } else {
      // Counted while it waits: a waiter starved by a full read-ahead (the server answered
      // later requests first) ends the connection after `timeout` (IoLoopBody).
      ++starved_waiters_;
      while (!cv_.wait_for(lock, kTick, ready)) {
        std::optional<Status> s = stopped();
        if (!s && deadline && Clock::now() >= *deadline) s = Status(StatusCode::kIoError, "timed out");
        if (s) {
          --starved_waiters_;
          return *s;
        }
      }
      --starved_waiters_;
    }
    if (it == slots_.end() || !it->second.arrived) {
      if (it != slots_.end()) slots_.erase(it);
      return lost_.ok() ? Status(StatusCode::kInternal, "the request vanished") : lost_;
    }
    Slot slot = std::move(it->second);
    slots_.erase(it);
    const bool was_paused = buffered_ >= max_buffered_;
    buffered_ -= slot.bytes;
    lock.unlock();
    if (was_paused) Wake();
    if (slot.error) return *slot.error;
    return std::move(slot.reply);
  }

  void Forget(uint64_t msgid) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = slots_.find(msgid);
    if (it == slots_.end()) return;
    if (!it->second.arrived) {
      it->second.forgotten = true;
      return;
    }
    const bool was_paused = buffered_ >= max_buffered_;
    buffered_ -= it->second.bytes;
    slots_.erase(it);
    lock.unlock();
    if (was_paused) Wake();
  }

  Status Lost() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_;
  }
  std::vector<std::string> StderrTail() const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::vector<std::string>(tail_.begin(), tail_.end());
  }
  bool ServerRebuiltIndex() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rebuilt_;
  }
  uint64_t BytesReceived() const { return bytes_received_.load(); }

  // Closes the server's stdin (through the I/O thread, which owns it), waits for the server to
  // exit (kTerminateGrace, then SIGTERM, then SIGKILL), stops the I/O thread. Returns the wait
  // status. Idempotent; the owner only.
  int Shutdown() {
    if (!proc_) return shutdown_status_;
    if (io_.joinable()) {
      std::unique_lock<std::mutex> lock(mu_);
      close_stdin_ = true;
      lock.unlock();
      Wake();
      lock.lock();
      // The I/O thread closes stdin within a tick; a stuck one is no reason to hang here.
      cv_.wait_for(lock, 20 * kTick, [&] { return stdin_closed_; });
    }
    // Terminate closes stdin itself when the I/O thread did not (it then no longer runs its
    // write path: close_stdin_ is set and it checks it before every write).
    shutdown_status_ = proc_->Terminate(std::chrono::duration_cast<std::chrono::milliseconds>(kTerminateGrace));
    stop_.store(true);
    Wake();
    if (io_.joinable()) io_.join();
    for (int& fd : wake_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (lost_.ok()) LoseLocked(Status(StatusCode::kIoError, Prefix() + "closed"), false);
    }
    proc_.reset();
    return shutdown_status_;
  }

  // The loss kind, to word Connect's failure.
  bool LostByEof() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_by_eof_;
  }
  std::string LastStderrLine() const {
    std::lock_guard<std::mutex> lock(mu_);
    return tail_.empty() ? "" : tail_.back();
  }
  const std::string& host() const { return host_; }

 private:
  struct Slot {
    bool arrived = false;
    bool forgotten = false;
    uint64_t bytes = 0;  // counted in buffered_ while the reply waits here
    RpcReply reply;
    std::optional<Status> error;  // refused before it was sent (Post)
  };

  void Wake() {
    if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  }

  std::string Prefix() const {  // under mu_
    return "connection to " + host_ + (established_ ? " lost: " : " failed: ");
  }

  // Under mu_: the first loss wins; every waiter is woken.
  void LoseLocked(Status why, bool kill = true) {
    if (!lost_.ok()) return;
    lost_ = std::move(why);
    // Replies that arrived stay takeable; the others are answered with the loss.
    for (auto it = slots_.begin(); it != slots_.end();) {
      if (!it->second.arrived) {
        it = slots_.erase(it);
      } else {
        ++it;
      }
    }
    awaited_ = 0;
    outgoing_.clear();
    cv_.notify_all();
    if (kill && proc_) {
      // A stalled or confused server must not linger (after an EOF it is ending anyway).
      proc_->Signal(SIGTERM);
      term_sent_ = Clock::now();
    }
  }

  // Under mu_: one reply from the server (ReplyDecoder's).
  void HandleReply(ReplyDecoder::Decoded&& d) {
    auto it = slots_.find(d.msgid);
    if (it == slots_.end() || it->second.arrived) {
      LoseLocked(Status(StatusCode::kIoError, Prefix() + "protocol error: a reply to msgid " + std::to_string(d.msgid) +
                                                  ", which nobody asked for"));
      return;
    }
    --awaited_;
    if (awaited_ > 0) busy_since_ = Clock::now();
    Slot& slot = it->second;
    if (slot.forgotten) {
      slots_.erase(it);
      return;
    }
    slot.reply = std::move(d.reply);
    slot.arrived = true;
    slot.bytes = d.wire_bytes;
    buffered_ += d.wire_bytes;
  }

  // One complete stderr line (without its newline): the tail and the rebuild flag.
  void HandleStderrLine(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return;
    std::string text;
    std::string msgid, message;
    bool parsed = false;
    if (line.front() == '{') {
      nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
      if (!j.is_discarded() && j.is_object()) {
        parsed = true;
        auto str = [&](const char* k) -> std::string {
          auto f = j.find(k);
          return f != j.end() && f->is_string() ? f->get<std::string>() : std::string();
        };
        msgid = str("msgid");
        message = str("message");
        const std::string type = str("type");
        if (type == "log_message") {
          const std::string level = str("levelname");
          text = level.empty() ? message : level + ": " + message;
        } else {
          text = message;  // progress_percent / progress_message: the message, if any
        }
      }
    }
    if (!parsed) {
      message.assign(line);
      text = message;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (MentionsRebuild(msgid, message)) rebuilt_ = true;
    if (text.empty()) return;
    if (text.size() > kStderrLineBytes) text.resize(kStderrLineBytes);
    tail_.push_back(EscapeText(text));
    while (tail_.size() > kStderrLines) tail_.pop_front();
  }

  // Splits stderr bytes into lines; a line is cut at kStderrLineBytes (the rest until its
  // newline is dropped).
  void AppendStderr(const char* bytes, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const char c = bytes[i];
      if (c == '\n') {
        HandleStderrLine(err_line_);
        err_line_.clear();
      } else if (err_line_.size() < kStderrLineBytes + 1) {
        err_line_.push_back(c);  // one byte beyond the cut: a JSON line that long is not parsed
      }
    }
  }

  void IoLoop() {
    try {
      IoLoopBody();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      LoseLocked(Status(StatusCode::kIoError, Prefix() + "internal error: " + e.what()));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      LoseLocked(Status(StatusCode::kIoError, Prefix() + "internal error"));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stdin_closed_ = true;  // Terminate closes it; Shutdown must not wait for us
      cv_.notify_all();
    }
    while (!stop_.load()) std::this_thread::sleep_for(kTick);
  }

  // Reads what stdout has; false at EOF or on a read error.
  bool ReadStdout(int fd) {
    const ssize_t n = ::read(fd, decoder_.Reserve(kReadChunk), kReadChunk);
    if (n < 0) return errno == EINTR || errno == EAGAIN;
    if (n == 0) return false;
    decoder_.Consumed(size_t(n));
    bytes_received_.fetch_add(uint64_t(n));
    std::lock_guard<std::mutex> lock(mu_);
    last_recv_ = Clock::now();
    if (!lost_.ok()) {
      decoder_.Discard();  // lost: drain and drop, so that the server never blocks writing
      return true;
    }
    ReplyDecoder::Decoded d;
    std::string error;
    for (;;) {
      const ReplyDecoder::Step step = decoder_.Next(d, error);
      if (step == ReplyDecoder::Step::kNeedMore) break;
      if (step == ReplyDecoder::Step::kError) {
        LoseLocked(Status(StatusCode::kIoError, Prefix() + error));
        break;
      }
      HandleReply(std::move(d));
      if (!lost_.ok()) break;
    }
    cv_.notify_all();
    return true;
  }

  void IoLoopBody() {
    const int in_fd = proc_->stdin_fd();
    const int out_fd = proc_->stdout_fd();
    const int err_fd = proc_->stderr_fd();
    bool in_open = true, out_open = true, err_open = true, eof_reported = false, killed = false;
    bool was_paused = false;
    Clock::time_point out_eof_at{}, resumed_at{}, stalled_since{};
    std::string writing;  // taken from outgoing_, being written
    size_t written = 0;
    char errbuf[16384];
    while (!stop_.load()) {
      bool paused = false, want_close = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (written == writing.size() && !outgoing_.empty()) {
          writing.clear();
          writing.swap(outgoing_);
          written = 0;
        }
        if (!lost_.ok()) {
          writing.clear();
          written = 0;
        }
        paused = lost_.ok() && buffered_ >= max_buffered_;
        want_close = close_stdin_;
      }
      if (was_paused && !paused) resumed_at = Clock::now();
      was_paused = paused;
      if (want_close && in_open) {
        proc_->CloseStdin();
        in_open = false;
        std::lock_guard<std::mutex> lock(mu_);
        stdin_closed_ = true;
        cv_.notify_all();
      }
      pollfd fds[4];
      nfds_t nfds = 0;
      int in_i = -1, out_i = -1, err_i = -1;
      fds[nfds++] = pollfd{wake_[0], POLLIN, 0};
      if (err_open) {
        err_i = int(nfds);
        fds[nfds++] = pollfd{err_fd, POLLIN, 0};
      }
      if (out_open && !paused) {
        out_i = int(nfds);
        fds[nfds++] = pollfd{out_fd, POLLIN, 0};
      }
      if (in_open && written < writing.size()) {
        in_i = int(nfds);
        fds[nfds++] = pollfd{in_fd, POLLOUT, 0};
      }
      const int r = ::poll(fds, nfds, int(kTick.count()));
      if (stop_.load()) break;
      if (r < 0 && errno != EINTR) std::this_thread::sleep_for(kTick);
      if (r > 0 && fds[0].revents != 0) {
        char drain[256];
        while (::read(wake_[0], drain, sizeof drain) > 0) {
        }
      }
      // stderr first: its last lines explain why stdout closed.
      if (r > 0 && err_i >= 0 && fds[err_i].revents != 0) {
        const ssize_t n = ::read(err_fd, errbuf, sizeof errbuf);
        if (n > 0) {
          AppendStderr(errbuf, size_t(n));
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          err_open = false;
          if (!err_line_.empty()) {
            HandleStderrLine(err_line_);
            err_line_.clear();
          }
        }
      }
      if (r > 0 && out_i >= 0 && fds[out_i].revents != 0) {
        if (!ReadStdout(out_fd)) {
          out_open = false;
          out_eof_at = Clock::now();
        }
      }
      if (r > 0 && in_i >= 0 && fds[in_i].revents != 0 && in_open) {
        bool closing = false;
        {
          std::lock_guard<std::mutex> lock(mu_);
          closing = close_stdin_;
        }
        if (!closing) {
          const ssize_t n = ::write(in_fd, writing.data() + written, writing.size() - written);
          if (n > 0) {
            written += size_t(n);
          } else if (n < 0 && errno != EINTR && errno != EAGAIN) {
            const int e = errno;
            in_open = false;
            std::lock_guard<std::mutex> lock(mu_);
            // Only when this write is the loss: a write that fails because an earlier loss
            // (a reply that is no reply) stopped the server must not reword that loss as a
            // closed connection (a race a loaded CI machine hit in borg_rpc_test).
            if (lost_.ok()) {
              const std::string last = tail_.empty() ? "" : ": " + tail_.back();
              LoseLocked(Status(StatusCode::kIoError,
                                Prefix() + "could not write to the server: " + std::strerror(e) + last),
                         false);
              lost_by_eof_ = true;  // the server went away: word it as a closed connection
            }
          }
        }
      }
      const Clock::time_point now = Clock::now();
      std::lock_guard<std::mutex> lock(mu_);
      if (!out_open && !eof_reported && (!err_open || now - out_eof_at >= kStderrAfterEof)) {
        eof_reported = true;
        if (lost_.ok()) {
          const std::string last = tail_.empty() ? "" : ": " + tail_.back();
          LoseLocked(Status(StatusCode::kIoError, Prefix() + "the server closed the connection" + last), false);
          lost_by_eof_ = true;
        }
      }
      if (lost_.ok() && awaited_ > 0 && !paused &&
          now - std::max({last_recv_, busy_since_, resumed_at}) >= timeout_) {
        LoseLocked(Status(StatusCode::kIoError, Prefix() + "the server sent nothing for " + Seconds(timeout_) + " s"));
      }
      // Paused with a reader waiting for a reply that has not come: borg answers in order and
      // the readers take their replies in order, so the replies that fill the read-ahead were
      // sent ahead of the one awaited. Reading stays paused (memory stays bounded) and after
      // `timeout` the connection is lost instead of waiting for ever.
      if (lost_.ok() && paused && starved_waiters_ > 0) {
        if (stalled_since == Clock::time_point{}) stalled_since = now;
        if (now - stalled_since >= timeout_) {
          LoseLocked(Status(StatusCode::kIoError, Prefix() + "protocol error: the server's replies to later requests "
                                                             "fill the read-ahead while an earlier one is awaited"));
        }
      } else {
        stalled_since = Clock::time_point{};
      }
      if (!killed && term_sent_ != Clock::time_point{} && out_open && now - term_sent_ >= kKillAfterTerm) {
        killed = true;
        proc_->Signal(SIGKILL);
      }
    }
    // Stopped (the process has been reaped): what is left in stderr still explains the end, e.g.
    // "borg: not found" after our first write already failed with EPIPE (Connect words its
    // failure from the last line once Shutdown has returned).
    if (err_open) ChildProcess::ReadWhatIsLeft(err_fd, [&](const char* b, size_t n) { AppendStderr(b, n); });
    if (!err_line_.empty()) {
      HandleStderrLine(err_line_);  // a last line without its newline
      err_line_.clear();
    }
  }

  const std::string host_;
  const std::chrono::milliseconds timeout_;
  const uint64_t max_buffered_;

  std::unique_ptr<ChildProcess> proc_;  // set by Start; reset by Shutdown after the join
  std::thread io_;
  std::atomic<bool> stop_{false};
  int wake_[2] = {-1, -1};  // a byte on wake_[1] wakes the I/O thread
  int shutdown_status_ = 0;
  std::atomic<uint64_t> bytes_received_{0};

  // Owned by the I/O thread.
  ReplyDecoder decoder_;
  std::string err_line_;        // the stderr line being read (at most kStderrLineBytes + 1)

  mutable std::mutex mu_;
  std::condition_variable cv_;  // replies arrived, a loss, stdin closed
  std::unordered_map<uint64_t, Slot> slots_;
  uint64_t next_id_ = 1;
  uint64_t awaited_ = 0;      // posted requests not answered yet (forgotten ones included)
  uint64_t buffered_ = 0;     // bytes of replies arrived and not taken (their wire length)
  uint64_t starved_waiters_ = 0;  // Wait calls blocked (not WaitUnlessBehind ones)
  std::string outgoing_;      // packed requests not yet handed to the I/O thread
  bool bytes_as_bin_ = false;
  bool established_ = false;  // negotiate answered
  bool close_stdin_ = false;
  bool stdin_closed_ = false;
  bool rebuilt_ = false;
  bool lost_by_eof_ = false;
  Status lost_;
  Clock::time_point busy_since_{};  // when awaited_ last became non-zero, or a reply came
  Clock::time_point last_recv_{};
  Clock::time_point term_sent_{};
  std::deque<std::string> tail_;  // escaped, oldest first
};

// ---------------------------------------------------------------------------------------------

BorgRpc::BorgRpc(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BorgRpc::~BorgRpc() { Close(); }

Result<std::unique_ptr<BorgRpc>> BorgRpc::Connect(const BorgServeTarget& target) {
  std::vector<std::string> argv = target.rsh;
  if (target.port) {
    argv.push_back("-p");
    argv.push_back(std::to_string(*target.port));
  }
  argv.push_back(target.user.empty() ? target.host : target.user + "@" + target.host);
  argv.insert(argv.end(), target.remote_path.begin(), target.remote_path.end());
  argv.push_back("serve");
  auto impl = std::make_unique<Impl>(target);
  if (Status s = impl->Start(argv); !s.ok()) {
    (void)impl->Shutdown();
    return s;
  }
  const std::string failed = "connection to " + impl->host() + " failed: ";
  Result<RpcReply> r = impl->Wait(impl->Post(Method::kNegotiate, {}));
  if (!r.ok()) {
    if (!impl->LostByEof()) {
      (void)impl->Shutdown();
      return r.status();
    }
    const int ws = impl->Shutdown();  // first: stderr is read to its end
    const std::string last = impl->LastStderrLine();
    std::string how = "the server closed the connection (is borg installed on the server?)";
    if (WIFEXITED(ws) || WIFSIGNALED(ws)) how += "; it ended with " + ChildProcess::DescribeWaitStatus(ws);
    return Status(StatusCode::kIoError, failed + how + (last.empty() ? "" : ": " + last));
  }
  auto unsupported = [&](const std::string& why) -> Status {
    (void)impl->Shutdown();
    return Status(StatusCode::kUnsupported, failed + why);
  };
  if (!r->ok()) {
    return unsupported("the server refused negotiate: " + EscapeText(r->exception_class) + ": " +
                       EscapeText(MessageExcerpt(r->exception_message, 200)));
  }
  const msgpack::object& res = r->result;
  int64_t bare = 0;
  if (AsInt(res, bare)) return unsupported("the server is borg 1.0.x (negotiate answered " + std::to_string(bare) + ")");
  const msgpack::object* sv = res.type == msgpack::type::MAP ? msgpack_util::Find(res, "server_version") : nullptr;
  if (sv == nullptr || sv->type != msgpack::type::ARRAY || sv->via.array.size < 4 || sv->via.array.size > 5) {
    return unsupported("negotiate answered no server_version");
  }
  std::array<int64_t, 4> v{};
  for (uint32_t i = 0; i < 4; ++i) {
    if (!AsInt(sv->via.array.ptr[i], v[i])) return unsupported("negotiate answered a server_version that is not numbers");
  }
  int64_t pre = 0;
  if (sv->via.array.size == 5 && !AsInt(sv->via.array.ptr[4], pre)) {
    return unsupported("negotiate answered a server_version that is not numbers");
  }
  if (v[0] != 1 && v[0] != 2) {
    return unsupported("the server is borg " + std::to_string(v[0]) + ".x, which speaks another protocol");
  }
  if (v[0] == 1 && v[1] == 0) return unsupported("the server is borg 1.0.x");
  impl->SetDialect(v[0] >= 2);
  auto rpc = std::unique_ptr<BorgRpc>(new BorgRpc(std::move(impl)));
  rpc->version_ = v;
  rpc->prerelease_ = pre;
  return rpc;
}

std::string BorgRpc::ServerVersionText() const {
  std::string s = std::to_string(version_[0]) + "." + std::to_string(version_[1]) + "." + std::to_string(version_[2]);
  switch (version_[3]) {
    case -1: return s;
    case -4: return s + "a" + std::to_string(prerelease_);
    case -3: return s + "b" + std::to_string(prerelease_);
    case -2: return s + "rc" + std::to_string(prerelease_);
    case -9: return s + ".dev" + std::to_string(prerelease_);
    default: return s + "." + std::to_string(version_[3]);
  }
}

uint64_t BorgRpc::Post(Method m, std::vector<Arg> args) { return impl_->Post(m, args); }
Result<RpcReply> BorgRpc::Wait(uint64_t msgid) { return impl_->Wait(msgid); }
std::optional<Result<RpcReply>> BorgRpc::WaitUnlessBehind(uint64_t msgid) {
  bool gave_up = false;
  Result<RpcReply> r = impl_->Wait(msgid, std::nullopt, &gave_up);
  if (gave_up) return std::nullopt;
  return r;
}
void BorgRpc::Forget(uint64_t msgid) { impl_->Forget(msgid); }
Status BorgRpc::Lost() const { return impl_->Lost(); }
std::vector<std::string> BorgRpc::StderrTail() const { return impl_->StderrTail(); }
bool BorgRpc::ServerRebuiltIndex() const { return impl_->ServerRebuiltIndex(); }
uint64_t BorgRpc::BytesReceived() const { return impl_->BytesReceived(); }

void BorgRpc::Close() {
  if (!impl_ || closed_) return;
  closed_ = true;
  // `close` exists in borg 2 after 2.0.0b5 (b5 answers InvalidRPCMethod): it releases the lock
  // before the process ends. Older servers release it when stdin closes.
  const std::array<int64_t, 5> v = {version_[0], version_[1], version_[2], version_[3], prerelease_};
  const std::array<int64_t, 5> b5 = {2, 0, 0, -3, 5};
  const bool has_close = v > b5;
  if (has_close && impl_->Lost().ok()) {
    const uint64_t id = impl_->Post(Method::kClose, {});
    Result<RpcReply> r = impl_->Wait(id, std::chrono::steady_clock::now() + kCloseReplyWait);
    if (!r.ok()) impl_->Forget(id);
  }
  (void)impl_->Shutdown();
}

}  // namespace borgcheck::remote
