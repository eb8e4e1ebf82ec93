// SftpEnv: io::Env over SFTP v3 through spawned ssh processes (see sftp_env.h).
//
// Structure: an SftpEnv::Impl owns N Connections (shared with the Files opened on them, so a
// File that outlives its Env still closes its handle safely). A Connection owns one ssh child
// (ChildProcess), one I/O thread and the table of outstanding requests. Callers register a
// request (under mu_), write it (under write_mu_, never while holding mu_: the I/O thread
// needs mu_ to hand replies over, and a server blocked writing to us must not stall it), and
// wait on cv_. The I/O thread reads stdout into a PacketReader, parses each reply, copies DATA
// into the caller's buffer and marks the request done, all under mu_.
//
// Round trips are what a distant server costs, so requests that do not depend on each other's
// answers go out together (Connection::Post, one write): Open's FSTAT with the READs of a small
// file, List's READDIRs two at a time, a File's OPENs (then FSTATs) on the other connections.
// A large ReadAt is striped over every connection (SftpFile), since one ssh channel carries about
// 2 MiB per round trip. Every in-flight READ still counts against its connection's byte bound.
//
// Writes to ssh's stdin go through a non-blocking fd polled in 100 ms steps that check for a
// loss, so that no writer blocks after the connection is lost. EPIPE is handled as a loss
// (main ignores SIGPIPE; the tests do too).
//
// Messages (all kIoError unless said; quoted text from the server or ssh is EscapeText'd):
//   could not run "ARGV0": STRERROR                        posix_spawnp failed
//   could not run "ARGV0": exit status 127[: TAIL]         a wrapper could not run its command
//   connection to HOST failed: ssh exited with status N[: TAIL]   (or "was killed by signal N")
//   connection to HOST failed: the server speaks SFTP version N, not 3
//   connection to HOST failed|lost: no answer for S s      the timeout ("failed" before VERSION)
//   connection to HOST failed|lost: ssh closed the connection[: TAIL]
//   connection to HOST failed|lost: could not write to ssh: STRERROR[: TAIL]
//   connection to HOST failed|lost: protocol error: REASON
//   PATH: MESSAGE    a STATUS reply (NO_SUCH_FILE: kNotFound), or PATH: <one of the above>
//   read error: MESSAGE; short read: file ended at X       File::ReadAt, as env.cc (no path)
// TAIL is the last lines (at most 4 KiB) ssh wrote to stderr.
#include "checker/remote/sftp_env.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <system_error>
#include <functional>
#include <mutex>
#include <new>
#include <thread>
#include <optional>
#include <unordered_map>

#include "checker/base/stop_signal.h"
#include "checker/base/text_escape.h"
#include "checker/remote/sftp_protocol.h"
#include "checker/remote/ssh_process.h"

namespace borgcheck::remote {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kStderrTailBytes = 4096;
constexpr size_t kSmallRead = 64 * 1024;      // reads below this refill the read-ahead block (SftpFile::ReadAt)
constexpr size_t kReadAheadBytes = 256 * 1024;
constexpr size_t kMaxListEntries = 4000000;   // a server that never ends a READDIR loop
constexpr unsigned kMaxEmptyNameReplies = 1000;  // ... or answers it with empty NAMEs
constexpr auto kTick = std::chrono::milliseconds(100);
constexpr auto kKillGrace = std::chrono::seconds(2);
constexpr auto kStderrAfterEof = std::chrono::milliseconds(500);

Status WithPath(const std::string& path, const Status& s) {
  return Status(s.code(), path + ": " + s.message());
}

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

std::string ServerMessage(const sftp::StatusReply& r) {
  if (!r.message.empty()) return EscapeText(r.message);
  switch (r.code) {
    case sftp::kFxEof: return "End of file";
    case sftp::kFxNoSuchFile: return "No such file";
    case sftp::kFxPermissionDenied: return "Permission denied";
    case sftp::kFxFailure: return "Failure";
    default: return "SFTP error " + std::to_string(r.code);
  }
}

// A STATUS reply to a request on `path`: NO_SUCH_FILE -> kNotFound, the rest kIoError.
Status ServerError(const std::string& path, const sftp::StatusReply& r) {
  return Status(r.code == sftp::kFxNoSuchFile ? StatusCode::kNotFound : StatusCode::kIoError,
                path + ": " + ServerMessage(r));
}

io::EntryType TypeOf(const sftp::Attrs& a) {
  if (!a.has_permissions()) return io::EntryType::kOther;
  switch (a.permissions & 0170000u) {
    case 0100000u: return io::EntryType::kRegular;
    case 0040000u: return io::EntryType::kDirectory;
    default: return io::EntryType::kOther;
  }
}

bool IsLink(const sftp::Attrs& a) { return a.has_permissions() && (a.permissions & 0170000u) == 0120000u; }

io::FileStat ToFileStat(const sftp::Attrs& a) {
  io::FileStat s;
  s.type = TypeOf(a);
  s.size = a.size;
  s.mtime_ns = int64_t(a.mtime) * 1000000000;
  s.type_name = a.has_permissions() ? sftp::TypeName(a.permissions) : "special file";
  return s;
}

std::string Join(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

// The first loss among an Env's connections (SftpEnv::Lost). Shared by the Env and its
// connections; safe for concurrent use (mu).
struct LossLog {
  std::mutex mu;
  Status first;
  void Record(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (first.ok()) first = s;
  }
  Status Get() {
    std::lock_guard<std::mutex> lock(mu);
    return first;
  }
};

// One request a caller waits for. Owned by the caller; while it is registered in
// Connection::pending_ the I/O thread fills it, under Connection::mu_ (and so does the caller
// read it). The caller writes id, dst, want and offset before it is registered; the I/O thread
// writes the results; the caller reads them once done (Wait, or under mu_).
struct Pending {
  uint32_t id = 0;  // 0 until registered (Connection::NewId never hands out 0)
  // READ requests (want > 0): where the DATA goes, at most `want` bytes; `offset` is the
  // caller's own bookkeeping (relative to its buffer, or to the file for Connection::Post).
  uint8_t* dst = nullptr;
  uint32_t want = 0;
  uint64_t offset = 0;
  // Results, set by the I/O thread.
  bool done = false;
  uint8_t type = 0;            // the reply's type; 0 when the connection was lost first
  std::string body;            // non-READ requests: the whole reply (type and id included)
  uint32_t got = 0;            // READ: DATA bytes copied to dst
  sftp::StatusReply status;    // READ: a STATUS reply
};

enum class LossKind { kNone, kEof, kTimeout, kProtocol, kWrite };

// One ssh process and its SFTP session. Thread contract: every public method is safe for
// concurrent use, except Start/AwaitVersion (one thread, before the connection is shared) and
// Shutdown (the last user). mu_ guards the request table, the in-flight count, the loss and
// the stderr tail; write_mu_ guards writes to (and the closing of) ssh's stdin; the I/O thread
// owns the PacketReader and the read ends of stdout and stderr.
class Connection {
 public:
  // `spare`: started after Connect's round trip (SftpOptions::more_connections_from), only to
  // go faster. One lost before it was ever ready is left out (left_out()): its loss is not the
  // env's, and the run goes on with the connections that came up.
  Connection(std::string host, const SftpOptions& options, std::shared_ptr<LossLog> log, bool spare = false)
      : host_(std::move(host)), timeout_(options.timeout), in_flight_limit_(options.in_flight_bytes),
        log_(std::move(log)), spare_(spare) {}
  ~Connection() { (void)Shutdown(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Spawns argv, starts the I/O thread and sends INIT.
  Status Start(const std::vector<std::string>& argv) {
    argv0_ = argv.empty() ? "" : argv[0];
    Result<std::unique_ptr<ChildProcess>> p = ChildProcess::Spawn(argv);
    if (!p.ok()) return p.status();
    proc_ = std::move(*p);
    const int fl = ::fcntl(proc_->stdin_fd(), F_GETFL);
    if (fl >= 0) (void)::fcntl(proc_->stdin_fd(), F_SETFL, fl | O_NONBLOCK);
    {
      std::lock_guard<std::mutex> lock(mu_);
      awaiting_version_ = true;
      pending_since_ = Clock::now();
    }
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
      return Status(StatusCode::kIoError, std::string("pipe: ") + std::strerror(errno));
    }
    try {
      io_ = std::thread([this] { IoLoop(); });
    } catch (const std::system_error& e) {
      return Status(StatusCode::kIoError, std::string("could not start a thread: ") + e.what());
    }
    (void)Send(sftp::EncodeInit(3));  // a failure is a loss: AwaitVersion says why
    return Status::Ok();
  }

  // Waits for VERSION 3. On failure shuts the connection down and says why (sftp_env.h).
  Status AwaitVersion() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!WaitOrStop(lock, [&] { return version_received_ || !lost_.ok(); })) return Stopped();
    if (lost_.ok()) return Status::Ok();  // VERSION 3 (HandlePacket refuses any other)
    const LossKind kind = loss_kind_;
    const Status lost = lost_;
    lock.unlock();
    const int ws = Shutdown();
    if (kind != LossKind::kEof && kind != LossKind::kWrite) return lost;
    const std::string tail = TailSuffix();
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127) {
      return Status(StatusCode::kIoError, "could not run \"" + EscapeText(argv0_) + "\": exit status 127" + tail);
    }
    const std::string how = WIFEXITED(ws)     ? "ssh exited with status " + std::to_string(WEXITSTATUS(ws))
                            : WIFSIGNALED(ws) ? "ssh was killed by signal " + std::to_string(WTERMSIG(ws))
                                              : "ssh ended";
    return Status(StatusCode::kIoError, "connection to " + host_ + " failed: " + how + tail);
  }

  // Sends the request make(id) and waits for its reply: the whole reply body.
  Result<std::string> Call(const std::function<std::string(uint32_t)>& make) {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!lost_.ok()) return lost_;
      Register(&p, 0);
    }
    Status s = Send(make(p.id));
    std::unique_lock<std::mutex> lock(mu_);
    if (!s.ok()) {
      Abandon(&p);
      return s;
    }
    if (!WaitOrStop(lock, [&] { return p.done || !lost_.ok(); })) {
      Abandon(&p);  // p lives on this stack: a later reply must not reach it
      return Stopped();
    }
    if (!p.done || p.type == 0) return lost_;
    return std::move(p.body);
  }

  // Registers every request of `ps` (a READ when p->want > 0: its bytes count in flight) and
  // writes encode(*p) of them all in one write, so that they cost one round trip together. With
  // reads_optional, the READs from the first that would take the connection over its in-flight
  // limit on are left out (their id stays 0: nothing to wait for). Every Pending must stay alive
  // until Wait says it is answered or Forget gives it up. Returns the loss if there is one.
  Status Post(const std::vector<Pending*>& ps, bool reads_optional,
              const std::function<std::string(const Pending&)>& encode) {
    std::string packets;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!lost_.ok()) return lost_;
      bool room = true;
      for (Pending* p : ps) {
        if (p->want > 0 && reads_optional) {
          room = room && (in_flight_ == 0 || in_flight_ + p->want <= in_flight_limit_);
          if (!room) continue;
        }
        Register(p, p->want);
        packets += encode(*p);
      }
    }
    return Send(packets);  // a failure is a loss: LoseLocked has marked every request done
  }

  // Waits for a posted request: Ok when its reply is in *p, else the loss.
  Status Wait(Pending* p) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!WaitOrStop(lock, [&] { return p->done || !lost_.ok(); })) {
      Abandon(p);  // the caller may let p go: a later reply is discarded
      return Stopped();
    }
    if (!p->done || p->type == 0) return lost_;
    return Status::Ok();
  }

  // The caller gives up on p (posted or not, answered or not): a later reply is discarded.
  void Forget(Pending* p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!p->done) Abandon(p);
  }

  // Sends make(id) without waiting; the reply is discarded (CLOSE).
  void SendAndForget(const std::function<std::string(uint32_t)>& make) {
    uint32_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!lost_.ok()) return;
      id = NewId();
      AddSlot(id, nullptr, 0);
    }
    (void)Send(make(id));
  }

  // Reads up to n bytes at offset of `handle` into dst: pipelined READs of at most 255 KiB,
  // bounded by the in-flight limit. Returns how many bytes from the start were read: n, or
  // fewer when the server said EOF. A STATUS other than EOF: kIoError "read error: MESSAGE".
  Result<size_t> ReadRange(const std::string& handle, uint64_t offset, size_t n, uint8_t* dst) {
    struct Piece {
      uint64_t off;
      uint32_t len;
    };
    std::deque<Piece> todo;
    for (uint64_t off = 0; off < n;) {
      const uint32_t len = uint32_t(std::min<uint64_t>(sftp::kMaxReadLength, n - off));
      todo.push_back({off, len});
      off += len;
    }
    std::vector<std::unique_ptr<Pending>> active;
    uint64_t eof_at = n;  // the smallest offset at which the server said EOF
    Status error;
    std::vector<Pending*> to_send;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!lost_.ok()) {
        active.clear();  // LoseLocked has emptied the table: nothing refers to them
        return lost_;
      }
      // Completions.
      for (size_t i = 0; i < active.size();) {
        Pending& p = *active[i];
        if (!p.done) {
          ++i;
          continue;
        }
        if (p.type == sftp::kData) {
          if (p.got == 0) {
            eof_at = std::min(eof_at, p.offset);  // an empty DATA would loop forever: EOF
          } else if (p.got < p.want) {
            todo.push_front({p.offset + p.got, p.want - p.got});  // ask again for the rest
          }
        } else if (p.status.code == sftp::kFxEof) {
          eof_at = std::min(eof_at, p.offset);
        } else if (error.ok()) {
          error = Status(StatusCode::kIoError, "read error: " + ServerMessage(p.status));
        }
        active[i] = std::move(active.back());
        active.pop_back();
      }
      if (!error.ok()) {
        for (auto& p : active) Abandon(p.get());
        return error;
      }
      // New requests, while there is room (one always goes when nothing is in flight).
      to_send.clear();
      while (!todo.empty()) {
        const Piece piece = todo.front();
        if (piece.off >= eof_at) {
          todo.pop_front();
          continue;
        }
        if (in_flight_ != 0 && in_flight_ + piece.len > in_flight_limit_) break;
        todo.pop_front();
        auto p = std::make_unique<Pending>();
        p->dst = dst + piece.off;
        p->want = piece.len;
        p->offset = piece.off;
        Register(p.get(), piece.len);
        to_send.push_back(p.get());
        active.push_back(std::move(p));
      }
      if (!to_send.empty()) {
        // The packets are built while mu_ is held (ids and offsets are ours), written without it.
        std::string packets;
        for (Pending* p : to_send) packets += sftp::EncodeRead(p->id, handle, offset + p->offset, p->want);
        lock.unlock();
        Status s = Send(packets);
        lock.lock();
        if (!s.ok()) continue;  // lost: the top of the loop returns it
      }
      if (active.empty() && todo.empty()) break;
      if (active.empty() && !todo.empty() && todo.front().off >= eof_at) continue;
      const bool woke = WaitOrStop(lock, [&] {
        if (!lost_.ok()) return true;
        for (auto& p : active) {
          if (p->done) return true;
        }
        return !todo.empty() && (in_flight_ == 0 || in_flight_ + todo.front().len <= in_flight_limit_);
      });
      if (!woke) {
        for (auto& p : active) Abandon(p.get());
        return Stopped();
      }
    }
    return size_t(eof_at);
  }

  // A reply that makes no sense for its request (seen by a caller): the connection is lost.
  void ProtocolError(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    LoseLocked(LossKind::kProtocol, Status(StatusCode::kIoError, Prefix() + "protocol error: " + reason));
  }

  Status lost() {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_;
  }

  // Closes ssh's stdin (the first step of a shutdown; several connections close in parallel).
  void CloseInput() {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (proc_) proc_->CloseStdin();
  }

  // Closes stdin, waits for ssh (2 s, SIGTERM, 2 s, SIGKILL), stops the I/O thread. Returns the
  // wait status. Idempotent; the last user only.
  int Shutdown() {
    if (!proc_) return 0;
    CloseInput();
    // Still connecting (a spare in a short run): ssh would finish its handshake before it sees
    // the closed stdin; nothing waits for it. (A lost one is ending, or was signalled.)
    if (!ready_.load() && !lost_flag_.load()) proc_->Signal(SIGTERM);
    const int ws = proc_->Terminate(kKillGrace);
    stop_.store(true);
    if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);  // the I/O thread leaves its poll now
    if (io_.joinable()) io_.join();
    for (int& fd : wake_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (lost_.ok()) LoseLocked(LossKind::kEof, Status(StatusCode::kIoError, Prefix() + "closed"), false);
    }
    proc_.reset();  // closes the fds: nobody uses them any more
    return ws;
  }

  std::atomic<int> open_files{0};
  std::atomic<int> opening{0};  // SftpEnv::Impl::OpenNow calls under way on it (LeastLoaded)
  // VERSION 3 has come. A connection started after Connect's round trip (SftpOptions::
  // more_connections_from) takes requests before that (ssh passes them on once its session is
  // up), but LeastLoaded leaves it out until then.
  bool ready() const { return ready_.load(); }
  // A spare lost before it was ever ready: never used (LeastLoaded and Any skip it, stripes
  // leave it out, a stream does not fail for it).
  bool left_out() const { return spare_ && lost_flag_.load() && !ready_.load(); }
  // The env is going: a spare still connecting is given up now (its waiters wake, its ssh gets
  // SIGTERM), so that nothing waits for its handshake or its timeout.
  void AbortIfConnecting() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ready_.load() || !lost_.ok()) return;
    LoseLocked(LossKind::kEof, Status(StatusCode::kIoError, Prefix() + "closed"), false);
    if (proc_) proc_->Signal(SIGTERM);
  }

 private:
  struct Slot {
    Pending* p;         // nullptr: the reply is discarded (a CLOSE, or an abandoned READ)
    uint32_t read_len;  // bytes counted in in_flight_
  };

  uint32_t NewId() {  // never 0: Pending::id 0 means "not posted"
    while (next_id_ == 0 || pending_.count(next_id_) != 0) ++next_id_;
    return next_id_++;
  }
  void AddSlot(uint32_t id, Pending* p, uint32_t read_len) {
    // Still awaiting VERSION: the timeout runs from Start, not from the first request.
    if (pending_.empty() && !awaiting_version_) pending_since_ = Clock::now();
    pending_.emplace(id, Slot{p, read_len});
    in_flight_ += read_len;
  }
  // Under mu_.
  void Register(Pending* p, uint32_t read_len) {
    p->id = NewId();
    AddSlot(p->id, p, read_len);
  }
  // Under mu_: the caller gives up on p; its reply, if any, is discarded.
  // Waits on cv_ until `ready`; false when a stop signal (SIGTERM, Ctrl-C: base/stop_signal.h)
  // came first, so that a stalled server does not hold a stopping run until the timeout.
  template <typename Ready>
  bool WaitOrStop(std::unique_lock<std::mutex>& lock, Ready ready) {
    while (!cv_.wait_for(lock, std::chrono::milliseconds(100), ready)) {
      if (PendingStopSignal()) return false;
    }
    return true;
  }
  static Status Stopped() {
    return Status(StatusCode::kInterrupted, "stopped by signal " + std::to_string(PendingStopSignal()));
  }

  void Abandon(Pending* p) {
    auto it = pending_.find(p->id);
    if (it != pending_.end() && it->second.p == p) it->second.p = nullptr;
  }

  std::string Prefix() const {  // under mu_
    return "connection to " + host_ + (ready_.load() ? " lost: " : " failed: ");
  }

  // ": <the last lines ssh wrote to stderr, escaped>" or "".
  std::string TailSuffix() {
    std::lock_guard<std::mutex> lock(mu_);
    return TailSuffixLocked();
  }
  std::string TailSuffixLocked() const {
    std::string_view t = stderr_tail_;
    if (tail_truncated_) {  // begin at a line
      const size_t nl = t.find('\n');
      if (nl != std::string_view::npos && nl + 1 < t.size()) t.remove_prefix(nl + 1);
    }
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ' || t.back() == '\t')) {
      t.remove_suffix(1);
    }
    while (!t.empty() && (t.front() == '\n' || t.front() == '\r')) t.remove_prefix(1);
    return t.empty() ? "" : ": " + EscapeText(t);
  }

  // Under mu_: the first loss wins; every waiting request is failed and woken.
  void LoseLocked(LossKind kind, Status why, bool record = true) {
    if (!lost_.ok()) return;
    lost_ = std::move(why);
    loss_kind_ = kind;
    lost_flag_.store(true);
    for (auto& [id, slot] : pending_) {
      if (slot.p != nullptr) slot.p->done = true;  // type stays 0: lost
    }
    pending_.clear();
    in_flight_ = 0;
    if (record && !(spare_ && !ready_.load())) log_->Record(lost_);
    cv_.notify_all();
    if ((kind == LossKind::kTimeout || kind == LossKind::kProtocol) && proc_) {
      // Stop the server: a stalled or confused one must not linger. After an EOF or a failed
      // write ssh is ending by itself (and its exit status is wanted).
      proc_->Signal(SIGTERM);
      term_sent_ = Clock::now();
    }
  }

  Status Send(const std::string& packet) {
    std::lock_guard<std::mutex> w(write_mu_);
    size_t off = 0;
    while (off < packet.size()) {
      if (lost_flag_.load()) return lost();
      const int fd = proc_ ? proc_->stdin_fd() : -1;
      if (fd < 0) {
        std::lock_guard<std::mutex> lock(mu_);
        LoseLocked(LossKind::kWrite, Status(StatusCode::kIoError, Prefix() + "closed"));
        return lost_;
      }
      const ssize_t r = ::write(fd, packet.data() + off, packet.size() - off);
      if (r > 0) {
        off += size_t(r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd pfd{fd, POLLOUT, 0};
        (void)::poll(&pfd, 1, int(kTick.count()));
        continue;
      }
      const int e = r < 0 ? errno : EIO;
      std::lock_guard<std::mutex> lock(mu_);
      LoseLocked(LossKind::kWrite, Status(StatusCode::kIoError, Prefix() + "could not write to ssh: " +
                                                                     std::strerror(e) + TailSuffixLocked()));
      return lost_;
    }
    return Status::Ok();
  }

  // Under mu_: one reply from the server.
  void HandlePacket(std::string_view body) {
    if (!version_received_) {
      if (body.empty() || uint8_t(body[0]) != sftp::kVersion) {
        LoseLocked(LossKind::kProtocol,
                   Status(StatusCode::kIoError, Prefix() + "protocol error: the first reply is not VERSION"));
        return;
      }
      Result<uint32_t> v = sftp::ParseVersion(body);
      if (!v.ok()) {
        LoseLocked(LossKind::kProtocol, Status(StatusCode::kIoError, Prefix() + "protocol error: " + v.status().message()));
        return;
      }
      version_ = *v;
      version_received_ = true;
      awaiting_version_ = false;
      if (version_ != 3) {
        LoseLocked(LossKind::kProtocol, Status(StatusCode::kIoError, Prefix() + "the server speaks SFTP version " +
                                                                          std::to_string(version_) + ", not 3"));
        return;
      }
      ready_.store(true);
      return;
    }
    sftp::ReplyHeader h;
    if (!sftp::ParseReplyHeader(body, &h)) {
      LoseLocked(LossKind::kProtocol, Status(StatusCode::kIoError, Prefix() + "protocol error: a reply of " +
                                                                        std::to_string(body.size()) + " bytes"));
      return;
    }
    // Every reply is checked here, whoever waits for it: a malformed one ends the connection.
    Status bad;
    std::string_view data;
    switch (h.type) {
      case sftp::kStatus: bad = sftp::ParseStatus(body).status(); break;
      case sftp::kHandle: bad = sftp::ParseHandle(body).status(); break;
      case sftp::kName: bad = sftp::ParseName(body).status(); break;
      case sftp::kAttrs: bad = sftp::ParseAttrsReply(body).status(); break;
      case sftp::kData: {
        Result<std::string_view> d = sftp::ParseData(body);
        if (d.ok()) data = *d;
        bad = d.status();
        break;
      }
      default: bad = Status(StatusCode::kIoError, "a reply of unknown type " + std::to_string(h.type));
    }
    if (!bad.ok()) {
      LoseLocked(LossKind::kProtocol, Status(StatusCode::kIoError, Prefix() + "protocol error: " + bad.message()));
      return;
    }
    auto it = pending_.find(h.id);
    if (it == pending_.end()) return;  // nobody asked (a late reply): ignored
    const Slot slot = it->second;
    if (slot.read_len > 0) {  // a READ: DATA or STATUS only, DATA no longer than asked
      if (h.type == sftp::kData && data.size() > slot.read_len) {
        LoseLocked(LossKind::kProtocol, Status(StatusCode::kIoError, Prefix() + "protocol error: " +
                                                                          std::to_string(data.size()) +
                                                                          " bytes of DATA for a READ of " +
                                                                          std::to_string(slot.read_len)));
        return;
      }
      if (h.type != sftp::kData && h.type != sftp::kStatus) {
        LoseLocked(LossKind::kProtocol, Status(StatusCode::kIoError, Prefix() + "protocol error: a reply of type " +
                                                                          std::to_string(h.type) + " to a READ"));
        return;
      }
    }
    pending_.erase(it);
    in_flight_ -= slot.read_len;
    Pending* p = slot.p;
    if (p == nullptr) return;
    p->type = h.type;
    if (slot.read_len > 0) {
      if (h.type == sftp::kData) {
        if (!data.empty()) std::memcpy(p->dst, data.data(), data.size());
        p->got = uint32_t(data.size());
      } else {
        Result<sftp::StatusReply> st = sftp::ParseStatus(body);
        if (st.ok()) p->status = std::move(*st);
      }
    } else {
      p->body.assign(body);
    }
    p->done = true;
  }

  // The I/O thread: reads stdout (replies) and stderr (kept as the tail), detects EOF and the
  // timeout. Never throws out (an exception would end the process): a failure is a loss.
  void IoLoop() {
    try {
      IoLoopBody();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      LoseLocked(LossKind::kProtocol, Status(StatusCode::kIoError, Prefix() + "internal error: " + e.what()));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      LoseLocked(LossKind::kProtocol, Status(StatusCode::kIoError, Prefix() + "internal error"));
    }
    // After an exception the pipes may still need draining until Shutdown: keep it simple and
    // just wait for the stop (the child is being signalled).
    while (!stop_.load()) std::this_thread::sleep_for(kTick);
  }

  void IoLoopBody() {
    const int out_fd = proc_->stdout_fd();
    const int err_fd = proc_->stderr_fd();
    bool out_open = true, err_open = true, eof_reported = false, killed = false;
    Clock::time_point out_eof_at{};
    sftp::PacketReader reader;
    char errbuf[4096];
    while (!stop_.load()) {
      pollfd fds[3];
      nfds_t nfds = 0;
      int out_i = -1, err_i = -1;
      fds[nfds++] = pollfd{wake_[0], POLLIN, 0};  // Shutdown's stop
      if (err_open) {
        err_i = int(nfds);
        fds[nfds++] = pollfd{err_fd, POLLIN, 0};
      }
      if (out_open) {
        out_i = int(nfds);
        fds[nfds++] = pollfd{out_fd, POLLIN, 0};
      }
      const int r = ::poll(fds, nfds, int(kTick.count()));
      if (stop_.load()) break;
      if (r < 0 && errno != EINTR) std::this_thread::sleep_for(kTick);
      // stderr first: its last lines explain why stdout closed.
      if (r > 0 && err_i >= 0 && fds[err_i].revents != 0) {
        const ssize_t n = ::read(err_fd, errbuf, sizeof errbuf);
        if (n > 0) {
          AppendStderr(errbuf, size_t(n));
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          err_open = false;
        }
      }
      if (r > 0 && out_i >= 0 && fds[out_i].revents != 0) {
        const ssize_t n = ::read(out_fd, reader.Space(), sftp::PacketReader::kReadChunk);
        if (n > 0) {
          reader.Commit(size_t(n));
          std::lock_guard<std::mutex> lock(mu_);
          last_recv_ = Clock::now();
          if (lost_.ok()) {
            std::string_view body;
            Status error;
            while (lost_.ok() && reader.Next(&body, &error)) HandlePacket(body);
            if (!error.ok()) LoseLocked(LossKind::kProtocol, Status(StatusCode::kIoError, Prefix() + "protocol error: " + error.message()));
            cv_.notify_all();
          } else {
            reader = sftp::PacketReader();  // lost: drain and drop, so that ssh never blocks
          }
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          out_open = false;
          out_eof_at = Clock::now();
        }
      }
      const Clock::time_point now = Clock::now();
      std::lock_guard<std::mutex> lock(mu_);
      if (!out_open && !eof_reported && (!err_open || now - out_eof_at >= kStderrAfterEof)) {
        eof_reported = true;
        LoseLocked(LossKind::kEof, Status(StatusCode::kIoError, Prefix() + "ssh closed the connection" + TailSuffixLocked()));
      }
      if (lost_.ok() && (awaiting_version_ || !pending_.empty()) &&
          now - std::max(last_recv_, pending_since_) >= timeout_) {
        LoseLocked(LossKind::kTimeout, Status(StatusCode::kIoError, Prefix() + "no answer for " + Seconds(timeout_) + " s"));
      }
      if (!killed && term_sent_ != Clock::time_point{} && out_open && now - term_sent_ >= kKillGrace) {
        killed = true;
        proc_->Signal(SIGKILL);
      }
    }
    // Stopped (ssh has been reaped): what is left in stderr still explains the end, e.g. after
    // a failed write of INIT to an ssh that exited at once.
    if (err_open) ChildProcess::ReadWhatIsLeft(err_fd, [&](const char* b, size_t n) { AppendStderr(b, n); });
  }

  void AppendStderr(const char* bytes, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    stderr_tail_.append(bytes, n);
    if (stderr_tail_.size() > kStderrTailBytes) {
      stderr_tail_.erase(0, stderr_tail_.size() - kStderrTailBytes);
      tail_truncated_ = true;
    }
  }

  const std::string host_;
  const std::chrono::milliseconds timeout_;
  const uint64_t in_flight_limit_;
  const std::shared_ptr<LossLog> log_;
  std::string argv0_;
  std::unique_ptr<ChildProcess> proc_;  // set by Start; reset by Shutdown after the join
  std::thread io_;
  std::atomic<bool> stop_{false};
  int wake_[2] = {-1, -1};  // a byte on wake_[1] wakes the I/O thread (Shutdown)
  std::atomic<bool> lost_flag_{false};  // lost_ is not ok (read by writers without mu_)

  std::mutex write_mu_;  // serializes writes to ssh's stdin and its closing

  std::mutex mu_;
  std::condition_variable cv_;  // notified when replies arrive and on a loss
  std::unordered_map<uint32_t, Slot> pending_;
  uint32_t next_id_ = 1;
  uint64_t in_flight_ = 0;
  bool awaiting_version_ = false;
  bool version_received_ = false;
  uint32_t version_ = 0;
  // VERSION 3 has come: written under mu_ (HandlePacket), read with or without it.
  std::atomic<bool> ready_{false};
  const bool spare_;
  Status lost_;
  LossKind loss_kind_ = LossKind::kNone;
  Clock::time_point pending_since_{};  // when the table last became non-empty
  Clock::time_point last_recv_{};      // when bytes last came from the server
  Clock::time_point term_sent_{};      // when a loss sent SIGTERM
  std::string stderr_tail_;            // the last kStderrTailBytes ssh wrote to stderr
  bool tail_truncated_ = false;
};

// Runs a function when it goes out of scope (a return or an exception): used to give up
// requests still registered, so that the I/O thread never writes into a Pending that is gone.
class ScopeExit {
 public:
  explicit ScopeExit(std::function<void()> f) : f_(std::move(f)) {}
  ~ScopeExit() { f_(); }
  ScopeExit(const ScopeExit&) = delete;
  ScopeExit& operator=(const ScopeExit&) = delete;

 private:
  std::function<void()> f_;
};

// The bytes every open file of one SftpEnv may hold for its stream read-ahead (SftpFile's
// Window), together: a stream of engine-sized windows (4 MiB) holds up to 24 MiB.
constexpr uint64_t kStreamAheadBudget = 64ull << 20;

// The buffers of the stream read-ahead's windows, for every file of one SftpEnv, and their
// budget: at most kStreamAheadBudget bytes of buffers exist at once, taken or idle. A buffer let
// go is kept idle and given to the next window it is large enough for (and at most twice as
// large as); a new one is made only when none fits, after idle ones are freed to make room. A
// window's pages are then written by the connection's I/O thread without faulting in afresh:
// each 8 MiB window was a new mapping, 16,000 page faults on that thread for the bench's 62 MB
// segment (0 ms, one connection, the sshd harness without the relay: the run 0.60 s -> 0.56 s;
// bench/RESULTS.md, "Remote (sftp), 2026-12-07: reused buffers, wider pipe, spare
// connections").
// Thread contract: any thread; the pool is guarded by mu_. A Buffer is owned by one window and
// returns itself when destroyed; the pool outlives it (the env and every file hold the pool).
class AheadBudget {
 public:
  class Buffer {
   public:
    Buffer() = default;
    Buffer(Buffer&& o) noexcept
        : pool_(std::exchange(o.pool_, nullptr)),
          bytes_(std::move(o.bytes_)),
          capacity_(std::exchange(o.capacity_, 0)) {}
    Buffer& operator=(Buffer&& o) noexcept {
      if (this != &o) {
        Release();
        pool_ = std::exchange(o.pool_, nullptr);
        bytes_ = std::move(o.bytes_);
        capacity_ = std::exchange(o.capacity_, 0);
      }
      return *this;
    }
    ~Buffer() { Release(); }
    explicit operator bool() const { return bytes_ != nullptr; }
    uint8_t* data() const { return bytes_.get(); }
    size_t capacity() const { return capacity_; }

   private:
    friend class AheadBudget;
    Buffer(AheadBudget* pool, std::unique_ptr<uint8_t[]> bytes, size_t capacity)
        : pool_(pool), bytes_(std::move(bytes)), capacity_(capacity) {}
    void Release() {
      if (pool_ != nullptr && bytes_ != nullptr) pool_->Give(std::move(bytes_), capacity_);
      pool_ = nullptr;
      capacity_ = 0;
    }
    AheadBudget* pool_ = nullptr;
    std::unique_ptr<uint8_t[]> bytes_;
    size_t capacity_ = 0;
  };

  // A buffer of at least n bytes: the smallest idle one that holds n and is at most twice n
  // (a larger one would hold budget a shorter window does not use), else a new one of n bytes
  // if the budget has room once idle ones are freed. Empty without room or memory; then no idle
  // buffer is freed.
  Buffer Take(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (n == 0) return Buffer();
    size_t best = idle_.size();
    uint64_t idle_bytes = 0;
    for (size_t i = 0; i < idle_.size(); ++i) {
      idle_bytes += idle_[i].capacity;
      if (idle_[i].capacity >= n && idle_[i].capacity / 2 <= n &&
          (best == idle_.size() || idle_[i].capacity < idle_[best].capacity)) {
        best = i;
      }
    }
    if (best < idle_.size()) {
      Idle b = std::move(idle_[best]);
      idle_.erase(idle_.begin() + std::ptrdiff_t(best));
      return Buffer(this, std::move(b.bytes), b.capacity);
    }
    if (held_ - idle_bytes + n > kStreamAheadBudget) return Buffer();  // taken ones fill it
    while (held_ + n > kStreamAheadBudget) {  // idle ones are freed to make room
      held_ -= idle_.back().capacity;
      idle_.pop_back();
    }
    std::unique_ptr<uint8_t[]> bytes(new (std::nothrow) uint8_t[n]);
    if (!bytes) return Buffer();
    held_ += n;
    return Buffer(this, std::move(bytes), n);
  }

 private:
  struct Idle {
    std::unique_ptr<uint8_t[]> bytes;
    size_t capacity = 0;
  };
  void Give(std::unique_ptr<uint8_t[]> bytes, size_t capacity) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      idle_.push_back(Idle{std::move(bytes), capacity});
    } catch (const std::bad_alloc&) {
      held_ -= capacity;  // not kept: freed with `bytes`
    }
  }

  std::mutex mu_;
  uint64_t held_ = 0;       // guarded by mu_: the capacity of every buffer, taken or idle
  std::vector<Idle> idle_;  // guarded by mu_
};

Status ShortRead(uint64_t at) {
  return Status(StatusCode::kIoError, "short read: file ended at " + std::to_string(at));
}

// Whether two FSTATs describe the same regular file as far as SFTP v3 can tell: size and mtime
// (whole seconds; v3 has no inode). A file replaced by one of the same size within the same
// second is not told apart; borg never rewrites a segment or pack in place.
bool SameFile(const sftp::Attrs& a, const sftp::Attrs& b) {
  constexpr uint32_t kNeed = sftp::kAttrSize | sftp::kAttrAcModTime | sftp::kAttrPermissions;
  return (a.flags & kNeed) == kNeed && (b.flags & kNeed) == kNeed && TypeOf(a) == io::EntryType::kRegular &&
         TypeOf(b) == io::EntryType::kRegular && a.size == b.size && a.mtime == b.mtime;
}

// An open file: one server handle on the connection it was opened on (the primary), and, for a
// file of kStripeMinFileBytes or more, from the first large ReadAt on (or from OpenStripesAhead),
// one handle on each other connection whose FSTAT agrees with the primary's (the stripes). A ReadAt of at least kStripeMinBytes of the file is split into
// contiguous stripes read at once, one per handle: the calling thread reads the first on the
// primary, short-lived threads (joined before ReadAt returns) the others; so one segment or pack
// is read at the speed of all connections. The bytes are the same file's, so the result is the one a
// single handle gives, short reads included: the first stripe that ends early says where the
// file ended.
//
// A stream of large reads (the engine reads a segment or pack in windows of 4 MiB, each starting
// where the last whole entry of the one before ended, so inside it) is read ahead: after a large
// ReadAt at the file's start or inside the range read before it, twice its length after it is
// read in the background (a Window with a thread of its own), and the range read is kept, so
// that the next windows are served from the two without a round trip of their own. Taking the
// window read ahead starts the one after it before waiting, so up to 16 MiB are in flight while
// the engine verifies: each connection then has more than OpenSSH's 2 MiB channel window
// outstanding, where one window at a time left the link idle for a round trip per window. At
// 100 ms, 4 connections, the bench's read+verify phase took 2.68 s instead of 3.39 s (2.88 s
// reading ahead once the window's length instead of twice; bench/RESULTS.md, "Remote (sftp),
// 2026-12-07"): its 62.7 MB segment at about 58 MB/s instead of 30; the rest is opening its six
// segment files, two round trips each. A window
// whose read failed is not reported: the range is read again directly, and that read's result
// is the answer. The windows' bytes count against the env's AheadBudget (kStreamAheadBudget; a
// stream holds up to 24 MiB while it takes a window); without room a file reads as before. A
// window nobody takes (the reader went elsewhere, or the file is closed) is waited for, not
// cancelled: up to 8 MiB more at the link's speed.
//
// Thread contract: ReadAt may be called concurrently. Const after construction: the primary's
// connection, handle, size and attributes, the path and the other connections. The read-ahead
// block is guarded by cache_mu_; the stream windows (held_, ahead_) by stream_mu_; a Window's
// bytes and status are written by its thread only and read after it is joined (the destructor
// joins ahead_ before it closes any handle). stripes_ is written once, by the first large
// ReadAt or by OpenStripesAhead while it holds stripe_mu_ (stripes_tried_ then true), and is
// read-only after: a reader
// takes stripe_mu_ once to see stripes_tried_, which orders that write before its reads. The
// File owns every handle in stripes_ and closes them all in its destructor.
class SftpFile final : public io::File {
 public:
  static constexpr size_t kStripeMinBytes = 1 << 20;
  // Opening the stripes costs two round trips (OPEN, FSTAT) before the first striped byte; a
  // file smaller than what one connection keeps in flight (8 MiB) is read as soon on its own
  // handle. The bench's 1.3 MB index.N took three round trips striped, one not (100 ms).
  static constexpr uint64_t kStripeMinFileBytes = 8ull << 20;

  SftpFile(std::shared_ptr<Connection> conn, std::vector<std::shared_ptr<Connection>> others, std::string path,
           std::string handle, const sftp::Attrs& attrs, std::vector<uint8_t> ahead, uint64_t ahead_offset,
           std::shared_ptr<AheadBudget> budget)
      : conn_(std::move(conn)), others_(std::move(others)), path_(std::move(path)), handle_(std::move(handle)),
        attrs_(attrs), size_(attrs.size), budget_(std::move(budget)), cache_(std::move(ahead)) {
    cache_offset_ = ahead_offset;  // the read-ahead block from Open (not shared yet: no lock)
    conn_->open_files.fetch_add(1);
  }
  ~SftpFile() override {
    {
      std::unique_ptr<Window> ahead;
      {
        std::lock_guard<std::mutex> lock(stream_mu_);
        ahead = std::move(ahead_);
        held_.reset();
      }
      if (ahead) ahead->Join();  // its reads use the handles closed below
    }
    conn_->SendAndForget([&](uint32_t id) { return sftp::EncodeHandleRequest(sftp::kClose, id, handle_); });
    for (const Stripe& s : stripes_) {
      s.conn->SendAndForget([&](uint32_t id) { return sftp::EncodeHandleRequest(sftp::kClose, id, s.handle); });
    }
    conn_->open_files.fetch_sub(1);
  }
  SftpFile(const SftpFile&) = delete;
  SftpFile& operator=(const SftpFile&) = delete;

  uint64_t size() const override { return size_; }

  Status ReadAt(uint64_t offset, size_t n, uint8_t* dst) const override {
    if (n == 0) return Status::Ok();
    // The read-ahead block serves any read below kStripeMinBytes it holds (a small file's whole
    // read, an object the archive pass reads after its header); a read of kSmallRead or more that
    // begins in it takes what it holds and reads the rest (an object larger than the block). A
    // small read it does not hold refills it from its offset (a walk of entry headers).
    size_t from_cache = 0;
    if (n < kStripeMinBytes && offset < size_ && n <= size_ - offset) {
      std::lock_guard<std::mutex> lock(cache_mu_);
      if (offset >= cache_offset_ && offset - cache_offset_ < cache_.size()) {
        from_cache = std::min<size_t>(n, cache_.size() - size_t(offset - cache_offset_));
      }
      if (from_cache == n || (from_cache > 0 && n >= kSmallRead)) {
        std::memcpy(dst, cache_.data() + (offset - cache_offset_), from_cache);
      } else {
        from_cache = 0;
      }
    }
    if (from_cache == n) return Status::Ok();
    if (from_cache > 0) return ReadDirect(offset + from_cache, n - from_cache, dst + from_cache);
    if (n < kSmallRead && offset < size_ && n <= size_ - offset) {
      std::lock_guard<std::mutex> lock(cache_mu_);
      if (offset >= cache_offset_ && offset - cache_offset_ + n <= cache_.size()) {  // filled since
        std::memcpy(dst, cache_.data() + (offset - cache_offset_), n);
        return Status::Ok();
      }
      const size_t len = size_t(std::min<uint64_t>(std::max(n, kReadAheadBytes), size_ - offset));
      cache_.resize(len);
      Result<size_t> got = conn_->ReadRange(handle_, offset, len, cache_.data());
      if (!got.ok()) {
        cache_.clear();
        return got.status();
      }
      cache_.resize(*got);
      cache_offset_ = offset;
      if (*got < n) return ShortRead(offset + *got);
      std::memcpy(dst, cache_.data(), n);
      return Status::Ok();
    }
    if (n >= kStripeMinBytes) return ReadStream(offset, n, dst);
    return ReadDirect(offset, n, dst);
  }

  // Opens the stripes now, as the first large read would (a file opened ahead: their round
  // trips then overlap the reads before it too). Nothing for a file under kStripeMinFileBytes or
  // without other connections. A lost connection is the reads' to report (ReadStream checks
  // every connection), as after a first large read that lost one.
  void OpenStripesAhead() const {
    if (others_.empty() || size_ < kStripeMinFileBytes) return;
    std::lock_guard<std::mutex> lock(stripe_mu_);
    if (stripes_tried_) return;
    stripes_tried_ = true;
    (void)OpenStripesLocked();
  }

 private:
  struct Stripe {
    std::shared_ptr<Connection> conn;
    std::string handle;
  };

  // A range read ahead in the background (see the class comment), or kept after it was read.
  struct Window {
    uint64_t offset = 0;
    size_t len = 0;
    AheadBudget::Buffer bytes;  // at least len bytes; back to the pool after the join
    Status status;        // the read's result: written by `thread`, read after Join
    std::thread thread;   // joinable while the read may run
    ~Window() { Join(); }
    void Join() {
      if (thread.joinable()) thread.join();
    }
    uint64_t end() const { return offset + len; }
  };

  // A new window of up to n bytes of the file at `offset`, with its bytes taken from the
  // budget; null past the end or without room.
  std::unique_ptr<Window> NewWindow(uint64_t offset, size_t n) const {
    if (offset >= size_ || n == 0) return nullptr;
    const size_t len = size_t(std::min<uint64_t>(n, size_ - offset));
    if (!budget_) return nullptr;
    std::unique_ptr<Window> w(new (std::nothrow) Window());  // no memory: no read-ahead
    if (!w) return nullptr;
    w->offset = offset;
    w->len = len;
    w->bytes = budget_->Take(len);
    if (!w->bytes) return nullptr;
    return w;
  }

  // Starts reading the window at `offset` in the background (stream_mu_ held): ahead_, or
  // nothing when there is no room or no thread.
  void StartAheadLocked(uint64_t offset, size_t n) const {
    std::unique_ptr<Window> w = NewWindow(offset, n);
    if (!w) return;
    Window* raw = w.get();
    try {
      w->thread = std::thread([this, raw] {
        try {
          raw->status = ReadDirect(raw->offset, raw->len, raw->bytes.data());
        } catch (const std::exception& e) {
          raw->status = Status(StatusCode::kIoError, std::string("read error: ") + e.what());
        }
      });
    } catch (const std::system_error&) {
      return;  // no thread: no read-ahead
    }
    ahead_ = std::move(w);
  }

  // A large ReadAt: from the kept range and the window read ahead when together they hold it,
  // else directly; then the next window is read ahead (see the class comment).
  Status ReadStream(uint64_t offset, size_t n, uint8_t* dst) const {
    // A lost connection fails the read, even one a kept window could serve.
    if (Status lost = conn_->lost(); !lost.ok()) return lost;
    for (const std::shared_ptr<Connection>& o : others_) {
      if (o->left_out()) continue;
      if (Status lost = o->lost(); !lost.ok()) return lost;
    }
    std::unique_ptr<Window> taken;
    std::shared_ptr<const Window> kept;
    bool stream = offset <= kStreamStart;  // the file's start, or inside the range read last
    {
      std::lock_guard<std::mutex> lock(stream_mu_);
      stream = stream || (held_ && offset >= held_->offset && offset <= held_->end());
      if (stream && held_ && offset >= held_->offset && offset + n <= held_->end()) {
        std::memcpy(dst, held_->bytes.data() + (offset - held_->offset), n);  // read ahead before
        return Status::Ok();
      }
      if (stream && held_ && ahead_ && ahead_->offset == held_->end() && offset >= held_->offset &&
          offset <= held_->end() && offset + n <= ahead_->end()) {
        taken = std::move(ahead_);
        kept = held_;
        StartAheadLocked(taken->end(), 2 * n);  // before waiting: two windows in flight
      }
    }
    if (taken) {
      taken->Join();
      if (taken->status.ok()) {
        const size_t from_kept = size_t(std::min<uint64_t>(kept->end() - offset, n));
        std::memcpy(dst, kept->bytes.data() + (offset - kept->offset), from_kept);
        std::memcpy(dst + from_kept, taken->bytes.data(), n - from_kept);
        std::lock_guard<std::mutex> lock(stream_mu_);
        held_ = std::shared_ptr<const Window>(std::move(taken));
        return Status::Ok();
      }
      // The window's read failed: the range is read directly below; that read's result is
      // the answer (a transient failure is not reported twice, a lasting one is reported so).
      taken.reset();
    }
    Status s = ReadDirect(offset, n, dst);
    if (!s.ok() || !stream) {
      if (!s.ok()) DropStream();
      return s;
    }
    DropStream();  // first, so that its bytes are back in the budget for the new windows
    std::unique_ptr<Window> copy = NewWindow(offset, n);
    if (!copy) return s;
    std::memcpy(copy->bytes.data(), dst, copy->len);
    std::lock_guard<std::mutex> lock(stream_mu_);
    if (!held_ && !ahead_) {  // else another reader started a stream meanwhile: it stays
      held_ = std::shared_ptr<const Window>(std::move(copy));
      StartAheadLocked(held_->end(), 2 * n);
    }
    return s;
  }

  // Forgets the kept range and the window read ahead; waits for that window's read to end
  // (outside stream_mu_) before returning.
  void DropStream() const {
    std::unique_ptr<Window> dropped;
    std::shared_ptr<const Window> kept;
    {
      std::lock_guard<std::mutex> lock(stream_mu_);
      dropped = std::move(ahead_);
      kept = std::move(held_);
    }
  }

  // Reads [offset, offset + n) through the handles, no read-ahead.
  Status ReadDirect(uint64_t offset, size_t n, uint8_t* dst) const {
    // Striped when at least kStripeMinBytes of the range are in a file of kStripeMinFileBytes:
    // a larger window over a small file's end gains nothing from more handles.
    if (n >= kStripeMinBytes && !others_.empty() && size_ >= kStripeMinFileBytes && offset < size_ &&
        size_ - offset >= kStripeMinBytes) {
      {
        std::lock_guard<std::mutex> lock(stripe_mu_);
        if (!stripes_tried_) {
          stripes_tried_ = true;
          Status s = OpenStripesLocked();
          if (!s.ok()) return s;  // a lost connection; a refused OPEN only leaves it out
        }
      }
      if (!stripes_.empty()) return ReadStriped(offset, n, dst);
    }
    Result<size_t> got = conn_->ReadRange(handle_, offset, n, dst);
    if (!got.ok()) return got.status();
    if (*got < n) return ShortRead(offset + *got);
    return Status::Ok();
  }

  // Opens path_ on every other connection: OPEN on all at once, then FSTAT on all at once (two
  // round trips however many connections). A handle joins stripes_ when its FSTAT agrees with
  // the primary's (SameFile); else it is closed. An OPEN or FSTAT the server refuses, or a file
  // that changed, only leaves that connection out (never damage: the primary reads alone). A
  // malformed reply is a protocol error (the connection is lost); a loss is returned, after
  // the handles already open are kept or closed as above.
  Status OpenStripesLocked() const {
    struct Try {
      std::shared_ptr<Connection> conn;
      Pending open, fstat;
      std::string handle;
    };
    std::vector<std::unique_ptr<Try>> tries;
    ScopeExit forget([&] {
      for (auto& t : tries) {
        t->conn->Forget(&t->open);
        t->conn->Forget(&t->fstat);
      }
    });
    Status lost;
    // A spare that never came up is left out like a refused OPEN: its loss is not the read's.
    auto note_loss = [&](const Connection& c, const Status& s) {
      if (lost.ok() && !c.left_out()) lost = s;
    };
    for (const std::shared_ptr<Connection>& c : others_) {
      if (c->left_out()) continue;
      tries.push_back(std::make_unique<Try>());
      Try& t = *tries.back();
      t.conn = c;
      Status s = c->Post({&t.open}, false, [&](const Pending& p) { return sftp::EncodeOpenRead(p.id, path_); });
      if (!s.ok()) note_loss(*c, s);
    }
    for (auto& t : tries) {
      if (t->open.id == 0) continue;
      Status s = t->conn->Wait(&t->open);
      if (!s.ok()) {
        note_loss(*t->conn, s);
        continue;
      }
      if (t->open.type == sftp::kHandle) {
        Result<std::string> h = sftp::ParseHandle(t->open.body);
        if (h.ok()) t->handle = std::move(*h);
      } else if (t->open.type != sftp::kStatus) {  // STATUS: refused, this connection is left out
        t->conn->ProtocolError("a reply of type " + std::to_string(t->open.type) + " to an open");
        note_loss(*t->conn, t->conn->lost());
      }
      if (t->handle.empty()) continue;
      Status f = t->conn->Post({&t->fstat}, false, [&](const Pending& p) {
        return sftp::EncodeHandleRequest(sftp::kFstat, p.id, t->handle);
      });
      if (!f.ok()) note_loss(*t->conn, f);
    }
    for (auto& t : tries) {
      if (t->handle.empty()) continue;
      bool same = false;
      if (t->fstat.id != 0) {
        Status s = t->conn->Wait(&t->fstat);
        if (!s.ok()) {
          note_loss(*t->conn, s);
        } else if (t->fstat.type == sftp::kAttrs) {
          Result<sftp::Attrs> a = sftp::ParseAttrsReply(t->fstat.body);
          same = a.ok() && SameFile(attrs_, *a);
        } else if (t->fstat.type != sftp::kStatus) {
          t->conn->ProtocolError("a reply of type " + std::to_string(t->fstat.type) + " to FSTAT");
          note_loss(*t->conn, t->conn->lost());
        }
      }
      if (same) {
        stripes_.push_back(Stripe{t->conn, std::move(t->handle)});
      } else {
        t->conn->SendAndForget([&](uint32_t id) { return sftp::EncodeHandleRequest(sftp::kClose, id, t->handle); });
      }
    }
    return lost;
  }

  // Reads [offset, offset + n) as 1 + stripes_.size() contiguous stripes at once. The result
  // is a single handle's: the first failed stripe's error, else the first short stripe's end
  // as a short read, else Ok.
  Status ReadStriped(uint64_t offset, size_t n, uint8_t* dst) const {
    const size_t k = 1 + stripes_.size();
    const size_t per = (n + k - 1) / k;
    struct Part {
      Connection* conn;
      const std::string* handle;
      size_t begin, len;
      Result<size_t> got{size_t(0)};  // written by the thread that reads the part, read after join
      bool started = false;           // a thread of its own runs it
    };
    std::vector<Part> parts;
    for (size_t i = 0; i < k && i * per < n; ++i) {
      Connection* c = i == 0 ? conn_.get() : stripes_[i - 1].conn.get();
      const std::string* h = i == 0 ? &handle_ : &stripes_[i - 1].handle;
      parts.push_back(Part{c, h, i * per, std::min(per, n - i * per)});
    }
    auto read = [offset, dst](Part& p) {
      try {
        p.got = p.conn->ReadRange(*p.handle, offset + p.begin, p.len, dst + p.begin);
      } catch (const std::exception& e) {
        p.got = Status(StatusCode::kIoError, std::string("read error: ") + e.what());
      }
    };
    std::vector<std::thread> threads;
    threads.reserve(parts.size());
    {
      ScopeExit join([&] {
        for (std::thread& t : threads) t.join();
      });
      for (size_t i = 1; i < parts.size(); ++i) {
        try {
          threads.emplace_back(read, std::ref(parts[i]));
          parts[i].started = true;
        } catch (const std::system_error&) {
          // No thread: the calling thread reads this stripe itself, after its own.
        }
      }
      read(parts[0]);
      for (size_t i = 1; i < parts.size(); ++i) {
        if (!parts[i].started) read(parts[i]);
      }
    }
    for (const Part& p : parts) {
      if (!p.got.ok()) return p.got.status();
    }
    for (const Part& p : parts) {
      if (*p.got < p.len) return ShortRead(offset + p.begin + *p.got);
    }
    return Status::Ok();
  }

  const std::shared_ptr<Connection> conn_;
  const std::vector<std::shared_ptr<Connection>> others_;  // every connection but conn_
  const std::string path_;
  const std::string handle_;
  const sftp::Attrs attrs_;  // the primary's FSTAT
  const uint64_t size_;
  const std::shared_ptr<AheadBudget> budget_;  // the env's, shared by its files
  // A stream's first window starts at most this far into the file (a segment's after its
  // 8-byte magic, a pack's at 0); a large read elsewhere reads ahead only after one before it.
  static constexpr uint64_t kStreamStart = 4096;
  mutable std::mutex stream_mu_;  // guards held_ and ahead_
  mutable std::shared_ptr<const Window> held_;  // the range read last, kept
  mutable std::unique_ptr<Window> ahead_;       // the range after it, being read
  mutable std::mutex cache_mu_;  // guards the read-ahead block
  mutable std::vector<uint8_t> cache_;
  mutable uint64_t cache_offset_ = 0;
  mutable std::mutex stripe_mu_;
  mutable bool stripes_tried_ = false;  // guarded by stripe_mu_
  mutable std::vector<Stripe> stripes_;  // written once under stripe_mu_, then read-only
};

}  // namespace

// Owned by the SftpEnv; the connections are shared with the Files opened on them.
struct SftpEnv::Impl {
  SftpTarget target;
  SftpOptions options;
  std::string root;
  std::chrono::microseconds round_trip{0};  // REALPATH's, in Connect
  std::shared_ptr<LossLog> loss = std::make_shared<LossLog>();
  std::vector<std::shared_ptr<Connection>> conns;
  mutable std::atomic<unsigned> next{0};
  std::shared_ptr<AheadBudget> ahead_budget = std::make_shared<AheadBudget>();

  // Files opened ahead (SftpEnv::OpenAhead), each by a thread of its own, in hint order; the
  // next Open of the path takes the oldest (a path hinted twice is opened twice: read twice). At most kMaxOpenedAhead: a hint beyond that lets the
  // oldest finished one go (closing its handles), or is dropped when none has finished. The
  // vector is guarded by ahead_mu; an entry's `file` is written by its thread only and read
  // after that thread is joined (`done` says it ended; joining never waits then).
  struct OpenedAhead {
    std::string path;
    std::thread thread;
    std::atomic<bool> done{false};
    Result<std::unique_ptr<io::File>> file{Status(StatusCode::kInternal, "not opened")};
  };
  static constexpr size_t kMaxOpenedAhead = 6;
  mutable std::mutex ahead_mu;
  mutable std::vector<std::unique_ptr<OpenedAhead>> opened_ahead;

  ~Impl() {
    // The threads opening ahead first (each ends within a round trip, or the timeout on a
    // stalled server), then their files (closing their handles), then the connections.
    // A spare still connecting is given up first: a thread opening stripes ahead may wait on it.
    for (auto& c : conns) c->AbortIfConnecting();
    std::vector<std::unique_ptr<OpenedAhead>> ahead;
    {
      std::lock_guard<std::mutex> lock(ahead_mu);
      ahead.swap(opened_ahead);
    }
    for (auto& a : ahead) a->thread.join();
    ahead.clear();
    for (auto& c : conns) c->CloseInput();  // every ssh sees EOF at once
    conns.clear();
  }

  // Open's work (SftpEnv::Open): any thread. `read_from`: a larger file's kReadAheadBytes from
  // there come with its FSTAT too (a file opened ahead: its first small read, a segment's magic
  // or the object a probe or the archive pass reads first, then needs no round trip).
  Result<std::unique_ptr<io::File>> OpenNow(const std::string& path,
                                            std::optional<uint64_t> read_from = std::nullopt) const;
  // The file opened ahead for `path`, taken out of opened_ahead, or null.
  std::unique_ptr<OpenedAhead> TakeOpenedAhead(const std::string& path) const {
    std::lock_guard<std::mutex> lock(ahead_mu);
    for (auto it = opened_ahead.begin(); it != opened_ahead.end(); ++it) {
      if ((*it)->path == path) {
        std::unique_ptr<OpenedAhead> a = std::move(*it);
        opened_ahead.erase(it);
        return a;
      }
    }
    return nullptr;
  }

  // Round robin over the connections that are up (the first always is).
  Connection& Any() const {
    for (size_t tries = 0; tries < conns.size(); ++tries) {
      Connection& c = *conns[next.fetch_add(1) % conns.size()];
      if (c.ready()) return c;
    }
    return *conns[0];
  }

  // Regular files the latest List of their folder (or a Stat of them) named, with the size it
  // said; a Stat or an OPEN that fails forgets the path. Open sends no
  // STAT for them: the STAT guards against opening a FIFO (the server's open(2) would block, and
  // it serves one request at a time), and a listed regular file is none unless someone swapped
  // it on the server since; then the OPEN hangs until --remote-timeout: a lost connection, never
  // damage. FSTAT after OPEN still says what was opened. Guarded by listed_mu; emptied when it
  // would pass kMaxListed paths (about 20 MB; then Open stats again).
  static constexpr size_t kMaxListed = 1u << 17;
  mutable std::mutex listed_mu;
  mutable std::unordered_map<std::string, uint64_t> listed;

  void Listed(const std::string& dir, const std::vector<io::DirEntry>& entries) const {
    std::lock_guard<std::mutex> lock(listed_mu);
    if (listed.size() + entries.size() > kMaxListed) listed.clear();
    for (const io::DirEntry& e : entries) {
      if (e.type == io::EntryType::kRegular && e.size) {
        listed[Join(dir, e.name)] = *e.size;
      } else {
        listed.erase(Join(dir, e.name));
      }
    }
  }
  // A STAT's answer counts as a listing of that one path (format detection stats `config`,
  // then reads it: one round trip fewer).
  void Stated(const std::string& path, const sftp::Attrs& a) const {
    std::lock_guard<std::mutex> lock(listed_mu);
    if (TypeOf(a) != io::EntryType::kRegular || !a.has_size()) {
      listed.erase(path);
      return;
    }
    if (listed.size() + 1 > kMaxListed && !listed.count(path)) listed.clear();
    listed[path] = a.size;
  }
  // A path a Stat or OPEN did not find (or could not): the next Open stats it again.
  void Unlisted(const std::string& path) const {
    std::lock_guard<std::mutex> lock(listed_mu);
    listed.erase(path);
  }
  std::optional<uint64_t> ListedSize(const std::string& path) const {
    std::lock_guard<std::mutex> lock(listed_mu);
    auto it = listed.find(path);
    if (it == listed.end()) return std::nullopt;
    return it->second;
  }

  // The first is always ready (Connect waited for it); one still connecting is left out.
  const std::shared_ptr<Connection>& LeastLoaded() const {
    size_t best = 0;
    for (size_t i = 1; i < conns.size(); ++i) {
      if (conns[i]->ready() && conns[i]->open_files.load() + conns[i]->opening.load() <
                                   conns[best]->open_files.load() + conns[best]->opening.load()) {
        best = i;
      }
    }
    return conns[best];
  }

  static Result<sftp::Attrs> StatOn(Connection& c, uint8_t type, const std::string& path) {
    Result<std::string> body = c.Call([&](uint32_t id) { return sftp::EncodePathRequest(type, id, path); });
    if (!body.ok()) return WithPath(path, body.status());
    const uint8_t t = uint8_t((*body)[0]);
    if (t == sftp::kAttrs) {
      Result<sftp::Attrs> a = sftp::ParseAttrsReply(*body);
      if (a.ok()) return *a;
    } else if (t == sftp::kStatus) {
      Result<sftp::StatusReply> st = sftp::ParseStatus(*body);
      if (st.ok()) return ServerError(path, *st);
    }
    c.ProtocolError("a reply of type " + std::to_string(t) + " to a stat");
    return WithPath(path, c.lost());
  }

  // A reply that must be a HANDLE (OPEN, OPENDIR).
  static Result<std::string> HandleOf(Connection& c, const std::string& path, const Result<std::string>& body,
                                      sftp::StatusReply* status) {
    if (!body.ok()) return WithPath(path, body.status());
    const uint8_t t = uint8_t((*body)[0]);
    if (t == sftp::kHandle) {
      Result<std::string> h = sftp::ParseHandle(*body);
      if (h.ok()) return h;
    } else if (t == sftp::kStatus) {
      Result<sftp::StatusReply> st = sftp::ParseStatus(*body);
      if (st.ok()) {
        *status = *st;
        return ServerError(path, *st);
      }
    }
    c.ProtocolError("a reply of type " + std::to_string(t) + " to an open");
    return WithPath(path, c.lost());
  }

  static void Close(Connection& c, const std::string& handle) {
    c.SendAndForget([&](uint32_t id) { return sftp::EncodeHandleRequest(sftp::kClose, id, handle); });
  }
};

SftpEnv::SftpEnv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SftpEnv::~SftpEnv() = default;

Result<std::unique_ptr<SftpEnv>> SftpEnv::Connect(const SftpTarget& target, const std::string& path,
                                                  const SftpOptions& options) {
  if (options.connections < 1 || options.connections > 16) {
    return Status(StatusCode::kInvalidArgument, "connections must be 1 to 16, not " + std::to_string(options.connections));
  }
  if (target.rsh.empty() || target.rsh[0].empty()) return Status(StatusCode::kInvalidArgument, "no ssh command");
  if (target.host.empty() || target.host[0] == '-') {
    return Status(StatusCode::kInvalidArgument, "invalid host \"" + EscapeText(target.host) + "\"");
  }
  // "-oProxyCommand=...@host" would be an option to ssh, not a destination.
  if (!target.user.empty() && target.user[0] == '-') {
    return Status(StatusCode::kInvalidArgument, "invalid user \"" + EscapeText(target.user) + "\"");
  }
  std::vector<std::string> argv = target.rsh;
  if (target.port != 0) {
    argv.push_back("-p");
    argv.push_back(std::to_string(target.port));
  }
  argv.push_back("-s");
  argv.push_back(target.user.empty() ? target.host : target.user + "@" + target.host);
  argv.push_back("sftp");

  auto impl = std::make_unique<Impl>();
  impl->target = target;
  impl->options = options;
  auto start = [&](bool spare) -> Status {
    auto c = std::make_shared<Connection>(target.host, options, impl->loss, spare);
    Status s = c->Start(argv);
    if (!s.ok()) return s;
    impl->conns.push_back(std::move(c));
    return Status::Ok();
  };
  // Decided by the first connection's first round trip: the others start after it.
  const bool decide = options.more_connections_from.count() > 0 && options.connections > 1;
  for (unsigned i = 0; i < (decide ? 1 : options.connections); ++i) {
    if (Status s = start(false); !s.ok()) return s;
  }
  for (auto& c : impl->conns) {
    Status s = c->AwaitVersion();
    if (!s.ok()) return s;
  }

  const std::string asked = path.empty() ? "." : path;
  Connection& c = *impl->conns[0];
  const auto asked_at = std::chrono::steady_clock::now();
  Result<std::string> body = c.Call([&](uint32_t id) { return sftp::EncodePathRequest(sftp::kRealpath, id, asked); });
  if (!body.ok()) return WithPath(asked, body.status());
  impl->round_trip = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - asked_at);
  const uint8_t t = uint8_t((*body)[0]);
  if (t == sftp::kName) {
    Result<std::vector<sftp::NameEntry>> names = sftp::ParseName(*body);
    if (names.ok() && names->size() == 1) {
      impl->root = (*names)[0].name;
    } else {
      return Status(StatusCode::kIoError, asked + ": connection to " + target.host +
                                              " lost: protocol error: REALPATH did not answer one name");
    }
  } else if (t == sftp::kStatus) {
    Result<sftp::StatusReply> st = sftp::ParseStatus(*body);
    if (!st.ok()) return WithPath(asked, st.status());
    if (st->code != sftp::kFxNoSuchFile) return ServerError(asked, *st);
    impl->root = path;
  } else {
    c.ProtocolError("a reply of type " + std::to_string(t) + " to REALPATH");
    return WithPath(asked, c.lost());
  }
  if (decide && impl->round_trip >= options.more_connections_from) {
    // Spares: not waited for, they come up while the run goes on (Connection::ready). Spawned
    // here, once the path is resolved, so still before any worker thread starts. One that
    // cannot even be spawned (no pipe, no thread, no process) is only not there.
    for (unsigned i = 1; i < options.connections; ++i) {
      if (!start(true).ok()) break;
    }
  }
  return std::unique_ptr<SftpEnv>(new SftpEnv(std::move(impl)));
}

const std::string& SftpEnv::root() const { return impl_->root; }

std::chrono::microseconds SftpEnv::round_trip() const { return impl_->round_trip; }

Result<std::unique_ptr<io::File>> SftpEnv::Open(const std::string& path) const {
  if (std::unique_ptr<Impl::OpenedAhead> a = impl_->TakeOpenedAhead(path)) {
    a->thread.join();  // at most the rest of its round trips
    if (a->file.ok()) return std::move(a->file);
    // A failed open ahead is not the answer: this Open's is (the path may exist by now); but
    // after a lost connection it is (another try could wait a whole --remote-timeout more).
    if (!impl_->loss->Get().ok()) return a->file.status();
  }
  return impl_->OpenNow(path);
}

void SftpEnv::OpenAhead(const std::string& path, io::ReadAhead how, uint64_t from) const {
  if (!impl_->loss->Get().ok()) return;  // every open would fail
  std::lock_guard<std::mutex> lock(impl_->ahead_mu);
  std::vector<std::unique_ptr<Impl::OpenedAhead>>& ahead = impl_->opened_ahead;
  if (ahead.size() >= Impl::kMaxOpenedAhead) {
    auto oldest = std::find_if(ahead.begin(), ahead.end(), [](const auto& a) { return a->done.load(); });
    if (oldest == ahead.end()) return;  // all still opening: the hint is dropped
    (*oldest)->thread.join();           // ended: no wait
    ahead.erase(oldest);                // closes its handles (sends CLOSE, waits for nothing)
  }
  auto a = std::make_unique<Impl::OpenedAhead>();
  a->path = path;
  Impl::OpenedAhead* raw = a.get();
  const Impl* impl = impl_.get();
  try {
    a->thread = std::thread([impl, raw, how, from] {
      raw->file = impl->OpenNow(raw->path, how == io::ReadAhead::kWhole ? 0 : from);
      // Read whole: its large reads are striped; read in parts, the stripes' two round trips
      // would only delay the first part.
      if (raw->file.ok() && how == io::ReadAhead::kWhole) static_cast<const SftpFile&>(**raw->file).OpenStripesAhead();
      raw->done.store(true);
    });
  } catch (const std::system_error&) {
    return;  // no thread to spare: Open opens then
  }
  ahead.push_back(std::move(a));
}

Result<std::unique_ptr<io::File>> SftpEnv::Impl::OpenNow(const std::string& path,
                                                          std::optional<uint64_t> read_from) const {
  const std::shared_ptr<Connection> conn = LeastLoaded();
  // Counted from here until the file exists (or the open failed): opens made at once (files
  // opened ahead) go to different connections.
  conn->opening.fetch_add(1);
  ScopeExit opened([&] { conn->opening.fetch_sub(1); });
  Connection& c = *conn;
  // STAT first: the server's open(2) of a FIFO would block it, and it serves one request at
  // a time. Not for a regular file a listing named (Impl::listed): the listing said so.
  std::optional<uint64_t> size = ListedSize(path);
  if (!size) {
    Result<sftp::Attrs> st = Impl::StatOn(c, sftp::kStat, path);
    if (!st.ok()) return st.status();
    if (TypeOf(*st) != io::EntryType::kRegular) {
      return Status(StatusCode::kCorruptMetadata,
                    path + ": is a " + (st->has_permissions() ? sftp::TypeName(st->permissions) : "special file") +
                        ", not a regular file");
    }
    if (st->has_size()) size = st->size;
  }
  sftp::StatusReply status;
  Result<std::string> handle = Impl::HandleOf(
      c, path, c.Call([&](uint32_t id) { return sftp::EncodeOpenRead(id, path); }), &status);
  if (!handle.ok()) {
    Unlisted(path);
    return handle.status();
  }
  // FSTAT and, for a file STAT said is at most kReadAheadBytes, the READs of all of it (of a
  // larger one's kReadAheadBytes from read_from), in one write: the read-ahead block is then
  // filled without a round trip of its own. The READs are left out when the connection has no
  // room for them in flight (the first ReadAt reads then).
  static_assert(kReadAheadBytes <= 2 * uint64_t(sftp::kMaxReadLength));
  Pending fstat;
  Pending reads[2];
  std::vector<uint8_t> ahead;
  std::vector<Pending*> batch{&fstat};
  uint64_t base = 0;  // the block's offset in the file
  if (size && *size > 0 && *size <= kReadAheadBytes) {
    ahead.resize(size_t(*size));
  } else if (size && read_from && *read_from < *size) {
    base = *read_from;
    ahead.resize(size_t(std::min<uint64_t>(*size - base, kReadAheadBytes)));
  }
  if (!ahead.empty()) {
    for (size_t i = 0, off = 0; off < ahead.size(); ++i) {
      reads[i].dst = ahead.data() + off;
      reads[i].want = uint32_t(std::min<size_t>(sftp::kMaxReadLength, ahead.size() - off));
      reads[i].offset = base + off;
      batch.push_back(&reads[i]);
      off += reads[i].want;
    }
  }
  ScopeExit forget([&] {
    for (Pending* p : batch) c.Forget(p);
  });
  Status error = c.Post(batch, true, [&](const Pending& p) {
    return p.want > 0 ? sftp::EncodeRead(p.id, *handle, p.offset, p.want)
                      : sftp::EncodeHandleRequest(sftp::kFstat, p.id, *handle);
  });
  if (error.ok()) error = c.Wait(&fstat);
  sftp::Attrs attrs;
  if (!error.ok()) {
    error = WithPath(path, error);
  } else if (fstat.type == sftp::kAttrs && sftp::ParseAttrsReply(fstat.body).ok()) {
    attrs = *sftp::ParseAttrsReply(fstat.body);
    if (TypeOf(attrs) != io::EntryType::kRegular) {
      error = Status(StatusCode::kCorruptMetadata,
                     path + ": is a " + (attrs.has_permissions() ? sftp::TypeName(attrs.permissions) : "special file") +
                         ", not a regular file");
    } else if (!attrs.has_size()) {
      error = Status(StatusCode::kIoError, path + ": the server did not say the file's size");
    }
  } else if (fstat.type == sftp::kStatus && sftp::ParseStatus(fstat.body).ok()) {
    error = Status(StatusCode::kIoError, path + ": " + ServerMessage(*sftp::ParseStatus(fstat.body)));
  } else {
    c.ProtocolError("a reply of type " + std::to_string(fstat.type) + " to FSTAT");
    error = WithPath(path, c.lost());
  }
  // The read-ahead block: the bytes from `base` that came back without a gap (DATA may be
  // shorter than asked; a STATUS, EOF or other, ends it), never beyond the size FSTAT says.
  size_t have = 0;
  for (size_t i = 0; error.ok() && i + 1 < batch.size(); ++i) {
    Pending& r = reads[i];
    if (r.id == 0) break;  // left out for room
    Status w = c.Wait(&r);
    if (!w.ok()) {
      error = WithPath(path, w);
      break;
    }
    if (r.type != sftp::kData || r.offset != base + have) break;
    have += r.got;
    if (r.got < r.want) break;
  }
  if (!error.ok()) {
    Impl::Close(c, *handle);
    return error;
  }
  ahead.resize(std::min<uint64_t>(have, attrs.size > base ? attrs.size - base : 0));
  std::vector<std::shared_ptr<Connection>> others;
  for (const std::shared_ptr<Connection>& o : conns) {
    if (o != conn) others.push_back(o);
  }
  return std::unique_ptr<io::File>(
      new SftpFile(conn, std::move(others), path, std::move(*handle), attrs, std::move(ahead), base, ahead_budget));
}

Result<std::vector<io::DirEntry>> SftpEnv::List(const std::string& dir) const {
  Connection& c = impl_->Any();
  sftp::StatusReply status;
  Result<std::string> handle = Impl::HandleOf(
      c, dir, c.Call([&](uint32_t id) { return sftp::EncodePathRequest(sftp::kOpendir, id, dir); }), &status);
  if (!handle.ok()) {
    if (!c.lost().ok()) return handle.status();
    // OpenSSH answers NO_SUCH_FILE (ENOTDIR) or FAILURE for a file: STAT tells.
    Result<sftp::Attrs> st = Impl::StatOn(c, sftp::kStat, dir);
    if (st.ok() && TypeOf(*st) != io::EntryType::kDirectory) {
      return Status(StatusCode::kCorruptMetadata, dir + ": not a directory");
    }
    if (!st.ok() && st.status().code() == StatusCode::kNotFound) return st.status();
    // A folder that is there but cannot be listed is not an empty one (a caller may take "not
    // found" for "no entries"), whatever OPENDIR's status said.
    if (handle.status().code() == StatusCode::kNotFound) {
      return Status(StatusCode::kIoError, dir + ": the server cannot list this folder (" + ServerMessage(status) + ")");
    }
    return handle.status();
  }
  // Two READDIRs outstanding: the next is on its way while a reply is handled, so that a
  // folder of one or two replies costs one round trip after OPENDIR. Replies are taken oldest
  // first: the draft asks a server to process the requests on one file in the order received
  // (OpenSSH's serves one request at a time), so each READDIR gets the next batch, and after an
  // EOF the other one (EOF again) is given up.
  std::vector<io::DirEntry> out;
  std::vector<size_t> to_follow;  // symlinks and entries of unknown type
  Status error;
  unsigned empty_replies = 0;  // in a row: NAME with no entries (the draft says one or more)
  std::deque<std::unique_ptr<Pending>> outstanding;
  ScopeExit forget([&] {
    for (auto& p : outstanding) c.Forget(p.get());
  });
  auto post_readdir = [&]() -> Status {
    outstanding.push_back(std::make_unique<Pending>());
    return c.Post({outstanding.back().get()}, false,
                  [&](const Pending& p) { return sftp::EncodeHandleRequest(sftp::kReaddir, p.id, *handle); });
  };
  for (int i = 0; i < 2; ++i) {
    Status s = post_readdir();
    if (!s.ok()) return WithPath(dir, s);
  }
  for (;;) {
    Pending& p = *outstanding.front();
    Status s = c.Wait(&p);
    if (!s.ok()) return WithPath(dir, s);
    const uint8_t t = p.type;
    if (t == sftp::kStatus) {
      Result<sftp::StatusReply> st = sftp::ParseStatus(p.body);
      if (st.ok() && st->code == sftp::kFxEof) break;
      error = st.ok() ? Status(StatusCode::kIoError, dir + ": " + ServerMessage(*st)) : WithPath(dir, st.status());
      break;
    }
    Result<std::vector<sftp::NameEntry>> names =
        t == sftp::kName ? sftp::ParseName(p.body) : Result<std::vector<sftp::NameEntry>>(StatusCode::kIoError, "");
    if (!names.ok()) {
      c.ProtocolError("a reply of type " + std::to_string(t) + " to READDIR");
      return WithPath(dir, c.lost());
    }
    outstanding.pop_front();  // answered: no longer registered
    empty_replies = names->empty() ? empty_replies + 1 : 0;
    if (empty_replies > kMaxEmptyNameReplies) {  // else a server could keep us here for ever
      error = Status(StatusCode::kIoError, dir + ": the server answered READDIR " +
                                               std::to_string(empty_replies) + " times in a row with no entries");
      break;
    }
    for (sftp::NameEntry& n : *names) {
      if (n.name == "." || n.name == "..") continue;
      io::DirEntry e;
      e.name = std::move(n.name);
      e.type = TypeOf(n.attrs);
      if (n.attrs.has_size()) e.size = n.attrs.size;
      if (IsLink(n.attrs) || !n.attrs.has_permissions()) to_follow.push_back(out.size());
      out.push_back(std::move(e));
    }
    if (out.size() > kMaxListEntries) {
      error = Status(StatusCode::kIoError, dir + ": more than " + std::to_string(kMaxListEntries) + " entries");
      break;
    }
    s = post_readdir();
    if (!s.ok()) return WithPath(dir, s);
  }
  Impl::Close(c, *handle);
  if (!error.ok()) return error;
  for (size_t i : to_follow) {  // follow symlinks, as stat does
    Result<sftp::Attrs> st = Impl::StatOn(c, sftp::kStat, Join(dir, out[i].name));
    out[i].size.reset();  // a link's own size, not its target's
    if (st.ok()) {
      out[i].type = TypeOf(*st);
      if (st->has_size()) out[i].size = st->size;
    } else if (!c.lost().ok()) {
      return WithPath(dir, c.lost());
    }
  }
  impl_->Listed(dir, out);
  return out;
}

Result<io::FileStat> SftpEnv::Stat(const std::string& path) const {
  Result<sftp::Attrs> a = Impl::StatOn(impl_->Any(), sftp::kStat, path);
  if (!a.ok()) {
    impl_->Unlisted(path);
    return a.status();
  }
  impl_->Stated(path, *a);
  return ToFileStat(*a);
}

Result<io::FileStat> SftpEnv::Lstat(const std::string& path) const {
  Result<sftp::Attrs> a = Impl::StatOn(impl_->Any(), sftp::kLstat, path);
  if (!a.ok()) return a.status();
  return ToFileStat(*a);
}

// Those started: all, or 1 where the round trip was short (SftpOptions::more_connections_from).
unsigned SftpEnv::Connections() const { return unsigned(impl_->conns.size()); }

Status SftpEnv::Lost() const { return impl_->loss->Get(); }

}  // namespace borgcheck::remote
