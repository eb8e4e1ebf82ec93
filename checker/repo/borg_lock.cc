// borg's locks, judged as borg judges them (see borg_lock.h).
//
// The host id must be borg's to the character, or no lock of this host would ever be judged:
//   - BORG_HOST_ID when set and not empty (borg: `os.environ.get("BORG_HOST_ID")`, then `if not`);
//   - else Python's socket.getfqdn of gethostname() (borg's patched copy: the name stripped,
//     getaddrinfo(name, SOCK_DGRAM, AI_CANONNAME), the first non-empty canonical name, else the
//     name itself), "@", and uuid.getnode(). On Linux Python takes the node from libuuid's
//     uuid_generate_time (the _uuid module), whose node is the hardware address of the first
//     interface SIOCGIFCONF lists (those with an IPv4 address, in a 1024-byte buffer) whose
//     SIOCGIFHWADDR is not all zero; failing that, 6 random bytes per process. We run the same
//     ioctls; we do not call libuuid, which would also update its clock file.
#include "checker/repo/borg_lock.h"

#include <net/if.h>
#include <netdb.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

namespace borgcheck::repo {
namespace {

constexpr const char* kLockDir = "lock.exclusive";

// Python's str.strip() on ASCII: space, \t \n \v \f \r and the separators \x1c..\x1f.
std::string PythonStrip(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); };
  size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

std::string GetHostName() {
  char buf[1024] = {};  // Python's socket.gethostname uses the same buffer size
  if (gethostname(buf, sizeof(buf) - 1) != 0) return std::string();
  return buf;
}

// borg's getfqdn(socket.gethostname()).
std::string BorgFqdn() {
  std::string name = PythonStrip(GetHostName());
  if (name.empty() || name == "0.0.0.0") name = GetHostName();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_CANONNAME;
  addrinfo* res = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &res) == 0) {
    for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
      if (a->ai_canonname != nullptr && a->ai_canonname[0] != '\0') {
        name = a->ai_canonname;
        break;
      }
    }
    freeaddrinfo(res);
  }
  return name;
}

struct NodeId {
  uint64_t node = 0;
  std::string interface;
};

// libuuid's get_node_id, as uuid.getnode() reaches it.
std::optional<NodeId> LibuuidNodeId() {
  const int sd = socket(AF_INET, SOCK_DGRAM, IPPROTO_IP);
  if (sd < 0) return std::nullopt;
  alignas(ifreq) char buf[1024] = {};
  ifconf ifc{};
  ifc.ifc_len = sizeof(buf);
  ifc.ifc_buf = buf;
  std::optional<NodeId> found;
  if (ioctl(sd, SIOCGIFCONF, &ifc) == 0) {
    for (size_t i = 0; i + sizeof(ifreq) <= size_t(ifc.ifc_len); i += sizeof(ifreq)) {
      ifreq listed;
      std::memcpy(&listed, buf + i, sizeof(ifreq));
      ifreq ifr{};
      std::memcpy(ifr.ifr_name, listed.ifr_name, IFNAMSIZ);
      if (ioctl(sd, SIOCGIFHWADDR, &ifr) < 0) continue;
      const auto* a = reinterpret_cast<const unsigned char*>(ifr.ifr_hwaddr.sa_data);
      if (std::all_of(a, a + 6, [](unsigned char c) { return c == 0; })) continue;
      NodeId n;
      for (int k = 0; k < 6; ++k) n.node = n.node << 8 | a[k];
      n.interface.assign(listed.ifr_name, strnlen(listed.ifr_name, IFNAMSIZ));
      found = std::move(n);
      break;
    }
  }
  close(sd);
  return found;
}

bool AllOf(std::string_view s, bool (*pred)(char)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), pred);
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// "<host>.<pid>-<thread hex>", split as borg splits it (the last '-', then the last '.'), but
// only names borg can have written ("%s.%d-%x") count: digits for the pid (1..2^31-1), hex for
// the thread, a non-empty host.
BorgLockEntry ParseEntry(std::string name) {
  BorgLockEntry e;
  e.name = std::move(name);
  const std::string_view n = e.name;
  const size_t dash = n.rfind('-');
  if (dash == std::string_view::npos) return e;
  const std::string_view host_pid = n.substr(0, dash), thread = n.substr(dash + 1);
  const size_t dot = host_pid.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return e;
  const std::string_view host = host_pid.substr(0, dot), pid = host_pid.substr(dot + 1);
  if (!AllOf(pid, IsDigit) || pid.size() > 10 || !AllOf(thread, IsHexDigit) || thread.size() > 16) return e;
  const uint64_t p = std::strtoull(std::string(pid).c_str(), nullptr, 10);
  if (p == 0 || p > uint64_t(INT32_MAX)) return e;
  e.parsed = true;
  e.host = std::string(host);
  e.pid = int64_t(p);
  e.thread = std::strtoull(std::string(thread).c_str(), nullptr, 16);
  return e;
}

// What lock.exclusive is when it is not a directory (followed through links).
std::string KindOf(const io::FileStat& st) {
  const std::string_view t = st.type_name;  // io/env.h's names: "a FIFO", "a block device", ...
  return t == "special file" ? "not a directory" : "a " + std::string(t);
}

std::string LockDirPath(const std::string& repo_path) {
  return repo_path.empty() || repo_path.back() == '/' ? repo_path + kLockDir : repo_path + "/" + kLockDir;
}

// The command name of a running process, for a message ("borg"); empty if unknown.
std::string ProcessName(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

report::Finding LockWarning(std::string location, std::string message) {
  report::Finding f;
  f.severity = report::Severity::kWarning;
  f.stage = report::Stage::kLock;
  f.location = std::move(location);
  f.message = std::move(message);
  return f;
}

const char* const kBypassHint =
    "or pass --bypass-lock to check anyway (results may then report changes in progress)";

}  // namespace

BorgHostId LocalBorgHostId() {
  if (const char* env = std::getenv("BORG_HOST_ID"); env != nullptr && env[0] != '\0') {
    return {env, "BORG_HOST_ID"};
  }
  const std::string fqdn = BorgFqdn();
  const std::optional<NodeId> node = LibuuidNodeId();
  if (!node) {
    return {"", "unknown: no network interface with an IPv4 address has a hardware address, so "
                "borg's uuid.getnode() is random in every borg process here and borg cannot "
                "recognise its own locks either (set BORG_HOST_ID for borg and borgcheck)"};
  }
  return {fqdn + "@" + std::to_string(node->node),
          "host name " + fqdn + ", hardware address of " + node->interface};
}

bool ProcessExists(int64_t pid) {
  // Python's os.kill raises OverflowError outside pid_t: borg then cannot judge it either.
  if (pid < INT32_MIN || pid > INT32_MAX) return true;
  return kill(pid_t(pid), 0) == 0 || errno != ESRCH;
}

LockOwnerState ClassifyLockOwner(std::string_view host, int64_t pid, uint64_t thread,
                                 std::string_view local_host_id) {
  if (local_host_id.empty() || host != local_host_id) return LockOwnerState::kOtherHost;
  if (thread != 0) return LockOwnerState::kThread;
  return ProcessExists(pid) ? LockOwnerState::kAlive : LockOwnerState::kDead;
}

std::string DescribeLockOwner(std::string_view host, int64_t pid, LockOwnerState owner,
                              const BorgHostId& local) {
  const std::string p = "process " + std::to_string(pid);
  switch (owner) {
    case LockOwnerState::kAlive: {
      const std::string name = ProcessName(pid);
      return p + (name.empty() ? "" : " (" + name + ")") + " on this host (" + std::string(host) +
             "), which is running";
    }
    case LockOwnerState::kDead:
      return p + " on this host (" + std::string(host) + "), which is not running";
    case LockOwnerState::kThread:
      return p + " on this host (" + std::string(host) +
             ") with a non-zero thread id, which borg does not judge";
    case LockOwnerState::kOtherHost:
      break;
  }
  return p + " on host " + std::string(host) + ", not this one (this host is " +
         (local.id.empty() ? local.source : local.id) + ")";
}

BorgLockInspection InspectBorgLock(const io::Env& env, const std::string& repo_path,
                                   std::string_view local_host_id) {
  BorgLockInspection r;
  const std::string dir = LockDirPath(repo_path);
  // A "not found" is an answer, any other failure (EACCES on the repository) is not.
  const auto unreadable = [&](const Status& st) {
    r.state = BorgLockState::kUnreadable;
    r.error = io::ErrorReason(st, dir);
    return r;
  };
  const Result<io::FileStat> link = env.Lstat(dir);
  if (!link.ok()) return link.status().code() == StatusCode::kNotFound ? r : unreadable(link.status());
  // borg lists it through a symbolic link as well (os.listdir).
  const Result<io::FileStat> st = env.Stat(dir);
  if (!st.ok() && st.status().code() != StatusCode::kNotFound) return unreadable(st.status());
  if (!st.ok() || st->type != io::EntryType::kDirectory) {
    r.state = BorgLockState::kNotADirectory;
    r.error = st.ok() ? KindOf(*st) : "a symbolic link to nothing";
    return r;
  }
  Result<std::vector<io::DirEntry>> listed = env.List(dir);
  if (!listed.ok()) return unreadable(listed.status());
  for (const io::DirEntry& e : *listed) r.entries.push_back(ParseEntry(e.name));
  std::sort(r.entries.begin(), r.entries.end(),
            [](const BorgLockEntry& a, const BorgLockEntry& b) { return a.name < b.name; });
  bool alive = false, malformed = false, elsewhere = false;
  for (BorgLockEntry& e : r.entries) {
    if (!e.parsed) {
      malformed = true;
      continue;
    }
    e.owner = ClassifyLockOwner(e.host, e.pid, e.thread, local_host_id);
    alive |= e.owner == LockOwnerState::kAlive || e.owner == LockOwnerState::kThread;
    elsewhere |= e.owner == LockOwnerState::kOtherHost;
  }
  // A live process outranks the rest: it is the one a user must wait for.
  r.state = alive       ? BorgLockState::kHeld
            : malformed ? BorgLockState::kMalformed
            : elsewhere ? BorgLockState::kHeldElsewhere
                        : BorgLockState::kStale;
  return r;
}

Status CheckBorgLock(const io::Env& env, const std::string& repo_path, bool bypass_lock,
                     std::vector<report::Finding>& warnings, const BorgHostId* host) {
  // The common case: no lock, and no need to ask the resolver for this host's name.
  if (Result<io::FileStat> st = env.Lstat(LockDirPath(repo_path));
      !st.ok() && st.status().code() == StatusCode::kNotFound) {
    return Status::Ok();
  }
  const BorgHostId local = host != nullptr ? *host : LocalBorgHostId();
  const BorgLockInspection in = InspectBorgLock(env, repo_path, local.id);
  const std::string repo = "repository " + repo_path;
  const std::string break_lock = "`borg break-lock " + repo_path + "`";
  // The entry a message is about: the first that decided the state.
  const auto first = [&](auto pred) -> const BorgLockEntry* {
    for (const BorgLockEntry& e : in.entries) {
      if (pred(e)) return &e;
    }
    return nullptr;
  };
  switch (in.state) {
    case BorgLockState::kNone:
      return Status::Ok();
    case BorgLockState::kStale: {
      const std::string tail =
          ". The repository was checked anyway. borg removes a stale lock itself on its next "
          "command, or " + break_lock + " removes it now; borgcheck never writes to a repository "
          "and leaves it alone";
      if (in.entries.empty()) {
        warnings.push_back(LockWarning(
            kLockDir, "stale lock: lock.exclusive is empty (a borg process stopped while it "
                      "released the lock, and borg would take the lock over)" + tail));
        return Status::Ok();
      }
      for (const BorgLockEntry& e : in.entries) {
        warnings.push_back(LockWarning(
            std::string(kLockDir) + "/" + e.name,
            "stale lock: lock.exclusive/" + e.name + " names " +
                DescribeLockOwner(e.host, e.pid, e.owner, local) +
                " (a borg process was killed or crashed while it held the lock)" + tail));
      }
      return Status::Ok();
    }
    case BorgLockState::kNotADirectory:
      warnings.push_back(LockWarning(
          kLockDir, "lock.exclusive is " + in.error + ", not borg's lock directory: no borg "
                    "process can hold the lock, so the repository was checked, but every borg "
                    "command fails on it until it is removed by hand (borg break-lock cannot)"));
      return Status::Ok();
    case BorgLockState::kUnreadable:
      if (bypass_lock) return Status::Ok();
      return Status(StatusCode::kIoError,
                    repo + ": cannot read its lock directory lock.exclusive (" + in.error +
                        "), so borgcheck cannot tell whether a borg process holds it; fix the "
                        "permissions, " + kBypassHint);
    case BorgLockState::kHeld: {
      if (bypass_lock) return Status::Ok();
      const BorgLockEntry* e = first([](const BorgLockEntry& x) {
        return x.parsed && (x.owner == LockOwnerState::kAlive || x.owner == LockOwnerState::kThread);
      });
      return Status(StatusCode::kLockHeld,
                    repo + " is locked by borg: lock.exclusive/" + e->name + " names " +
                        DescribeLockOwner(e->host, e->pid, e->owner, local) +
                        ": a backup, prune or compact may be writing. Run again when it has "
                        "finished, " + kBypassHint);
    }
    case BorgLockState::kMalformed: {
      if (bypass_lock) return Status::Ok();
      const BorgLockEntry* e = first([](const BorgLockEntry& x) { return !x.parsed; });
      return Status(StatusCode::kLockHeld,
                    repo + " is locked by borg: lock.exclusive/" + e->name +
                        " is not a borg lock entry (<host id>.<pid>-<thread>), so nobody can tell "
                        "whether its owner is running, and borg refuses to break it as well "
                        "(\"Found malformed lock\"). If no borg process uses the repository, " +
                        break_lock + " removes it; " + kBypassHint);
    }
    case BorgLockState::kHeldElsewhere: {
      if (bypass_lock) return Status::Ok();
      const BorgLockEntry* e = first(
          [](const BorgLockEntry& x) { return x.parsed && x.owner == LockOwnerState::kOtherHost; });
      return Status(StatusCode::kLockHeld,
                    repo + " is locked by borg: lock.exclusive/" + e->name + " names " +
                        DescribeLockOwner(e->host, e->pid, e->owner, local) +
                        ". Neither borg nor borgcheck can tell from here whether it is still "
                        "running, so the lock counts as held. If no borg process on " + e->host +
                        " uses the repository, " + break_lock + " removes it; " + kBypassHint);
    }
  }
  return Status(StatusCode::kInternal, "unknown lock state");
}

}  // namespace borgcheck::repo
