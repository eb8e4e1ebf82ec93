// borg's lock.exclusive judged as borg judges it: crafted lock directories with a live owner
// (this test's own pid), a dead one (a child we reaped), another host, junk names and odd file
// types; the exact state, status code, message and warning for each.
#include "checker/repo/borg_lock.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "checker/io/fault_env.h"

namespace borgcheck::repo {
namespace {
namespace fs = std::filesystem;

const BorgHostId kHere{"testhost@1", "a test host id"};

struct TempRepo {
  TempRepo() {
    std::string t = (fs::temp_directory_path() / "borg-lock-test-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempRepo() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  // An entry in lock.exclusive/ (created on first use).
  void Entry(const std::string& name) const {
    fs::create_directories(lock());
    std::ofstream(lock() + "/" + name).flush();
  }
  std::string lock() const { return path + "/lock.exclusive"; }
  std::string path;
};

// A pid that existed a moment ago and does not now: a child, exited and reaped.
int64_t DeadPid() {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(0);
  int st = 0;
  REQUIRE(waitpid(child, &st, 0) == child);
  REQUIRE_FALSE(ProcessExists(child));
  return child;
}

// /proc/self/comm of this binary, as a held-lock message names the owner.
std::string OwnComm() {
  std::ifstream in("/proc/self/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

const std::string kBypass =
    "or pass --bypass-lock to check anyway (results may then report changes in progress)";

TEST_CASE("borg lock: no lock.exclusive is no lock, and costs no host-id lookup", "[lock]") {
  TempRepo r;
  CHECK(InspectBorgLock(io::Env::Default(), r.path, kHere.id).state == BorgLockState::kNone);
  std::vector<report::Finding> w;
  CHECK(CheckBorgLock(io::Env::Default(), r.path, false, w, nullptr).ok());
  CHECK(w.empty());
}

TEST_CASE("borg lock: a live process of this host holds it (exit 73), --bypass-lock checks", "[lock]") {
  TempRepo r;
  const int64_t me = getpid();
  const std::string name = "testhost@1." + std::to_string(me) + "-0";
  r.Entry(name);
  const BorgLockInspection in = InspectBorgLock(io::Env::Default(), r.path, kHere.id);
  CHECK(in.state == BorgLockState::kHeld);
  REQUIRE(in.entries.size() == 1);
  CHECK(in.entries[0].parsed);
  CHECK(in.entries[0].host == "testhost@1");
  CHECK(in.entries[0].pid == me);
  CHECK(in.entries[0].thread == 0);
  CHECK(in.entries[0].owner == LockOwnerState::kAlive);
  std::vector<report::Finding> w;
  const Status s = CheckBorgLock(io::Env::Default(), r.path, false, w, &kHere);
  CHECK(s.code() == StatusCode::kLockHeld);
  CHECK(s.message() == "repository " + r.path + " is locked by borg: lock.exclusive/" + name +
                           " names process " + std::to_string(me) + " (" + OwnComm() +
                           ") on this host (testhost@1), which is running: a backup, prune or "
                           "compact may be writing. Run again when it has finished, " + kBypass);
  CHECK(w.empty());
  CHECK(CheckBorgLock(io::Env::Default(), r.path, true, w, &kHere).ok());
  CHECK(w.empty());
  CHECK(fs::exists(r.lock() + "/" + name));  // never touched
}

TEST_CASE("borg lock: a dead process of this host left a stale lock: checked, with a warning",
          "[lock]") {
  TempRepo r;
  const int64_t dead = DeadPid();
  const std::string name = "testhost@1." + std::to_string(dead) + "-0";
  r.Entry(name);
  const BorgLockInspection in = InspectBorgLock(io::Env::Default(), r.path, kHere.id);
  CHECK(in.state == BorgLockState::kStale);
  REQUIRE(in.entries.size() == 1);
  CHECK(in.entries[0].owner == LockOwnerState::kDead);
  for (bool bypass : {false, true}) {
    INFO(bypass);
    std::vector<report::Finding> w;
    REQUIRE(CheckBorgLock(io::Env::Default(), r.path, bypass, w, &kHere).ok());
    REQUIRE(w.size() == 1);
    CHECK(w[0].severity == report::Severity::kWarning);
    CHECK(w[0].stage == report::Stage::kLock);
    CHECK(w[0].location == "lock.exclusive/" + name);
    CHECK_FALSE(w[0].segment.has_value());
    CHECK_FALSE(w[0].chunk_id.has_value());
    CHECK(w[0].message ==
          "stale lock: lock.exclusive/" + name + " names process " + std::to_string(dead) +
              " on this host (testhost@1), which is not running (a borg process was killed or "
              "crashed while it held the lock). The repository was checked anyway. borg removes "
              "a stale lock itself on its next command, or `borg break-lock " + r.path +
              "` removes it now; borgcheck never writes to a repository and leaves it alone");
  }
  CHECK(fs::exists(r.lock() + "/" + name));
}

TEST_CASE("borg lock: another host's lock is held (borg cannot tell either)", "[lock]") {
  TempRepo r;
  const int64_t dead = DeadPid();
  const std::string name = "otherhost@2." + std::to_string(dead) + "-0";  // dead here means nothing
  r.Entry(name);
  CHECK(InspectBorgLock(io::Env::Default(), r.path, kHere.id).state == BorgLockState::kHeldElsewhere);
  std::vector<report::Finding> w;
  const Status s = CheckBorgLock(io::Env::Default(), r.path, false, w, &kHere);
  CHECK(s.code() == StatusCode::kLockHeld);
  CHECK(s.message() == "repository " + r.path + " is locked by borg: lock.exclusive/" + name +
                           " names process " + std::to_string(dead) +
                           " on host otherhost@2, not this one (this host is testhost@1). Neither "
                           "borg nor borgcheck can tell from here whether it is still running, so "
                           "the lock counts as held. If no borg process on otherhost@2 uses the "
                           "repository, `borg break-lock " + r.path + "` removes it; " + kBypass);
  CHECK(w.empty());
  CHECK(CheckBorgLock(io::Env::Default(), r.path, true, w, &kHere).ok());

  SECTION("when this host's id is unknown, even a name like ours is another host's") {
    TempRepo r2;
    r2.Entry("testhost@1." + std::to_string(dead) + "-0");
    const BorgHostId unknown{"", "unknown: no hardware address"};
    CHECK(InspectBorgLock(io::Env::Default(), r2.path, unknown.id).state == BorgLockState::kHeldElsewhere);
    const Status s2 = CheckBorgLock(io::Env::Default(), r2.path, false, w, &unknown);
    CHECK(s2.code() == StatusCode::kLockHeld);
    CHECK(s2.message().find("names process " + std::to_string(dead) +
                            " on host testhost@1, not this one (this host is unknown: no "
                            "hardware address). ") != std::string::npos);
  }
}

TEST_CASE("borg lock: a non-zero thread is not judged (borg treats it as alive)", "[lock]") {
  TempRepo r;
  const int64_t dead = DeadPid();
  r.Entry("testhost@1." + std::to_string(dead) + "-1f");
  const BorgLockInspection in = InspectBorgLock(io::Env::Default(), r.path, kHere.id);
  CHECK(in.state == BorgLockState::kHeld);
  REQUIRE(in.entries.size() == 1);
  CHECK(in.entries[0].thread == 0x1f);
  CHECK(in.entries[0].owner == LockOwnerState::kThread);
  std::vector<report::Finding> w;
  const Status s = CheckBorgLock(io::Env::Default(), r.path, false, w, &kHere);
  CHECK(s.code() == StatusCode::kLockHeld);
  CHECK(s.message().find("names process " + std::to_string(dead) +
                         " on this host (testhost@1) with a non-zero thread id, which borg does "
                         "not judge: ") != std::string::npos);
}

TEST_CASE("borg lock: names borg cannot have written are refused, as borg refuses them", "[lock]") {
  for (const char* junk : {"garbage", "testhost@1.12", "testhost@1.x-0", "testhost@1.-5-0", ".5-0",
                           "testhost@1.0-0", "testhost@1.99999999999-0", "testhost@1.5-", "testhost@1.5-g",
                           "testhost@1.+5-0", "testhost@1.2147483648-0"}) {
    INFO(junk);
    TempRepo r;
    r.Entry(junk);
    const BorgLockInspection in = InspectBorgLock(io::Env::Default(), r.path, kHere.id);
    CHECK(in.state == BorgLockState::kMalformed);
    REQUIRE(in.entries.size() == 1);
    CHECK_FALSE(in.entries[0].parsed);
    std::vector<report::Finding> w;
    const Status s = CheckBorgLock(io::Env::Default(), r.path, false, w, &kHere);
    CHECK(s.code() == StatusCode::kLockHeld);
    CHECK(s.message() == "repository " + r.path + " is locked by borg: lock.exclusive/" + junk +
                             " is not a borg lock entry (<host id>.<pid>-<thread>), so nobody can "
                             "tell whether its owner is running, and borg refuses to break it as "
                             "well (\"Found malformed lock\"). If no borg process uses the "
                             "repository, `borg break-lock " + r.path + "` removes it; " + kBypass);
    CHECK(w.empty());
  }
  // The largest pid_t and a host with dots and dashes of its own still parse.
  TempRepo r;
  r.Entry("my-host.example.org@5.2147483647-0");
  const BorgLockInspection in = InspectBorgLock(io::Env::Default(), r.path, "my-host.example.org@5");
  REQUIRE(in.entries.size() == 1);
  CHECK(in.entries[0].parsed);
  CHECK(in.entries[0].host == "my-host.example.org@5");
  CHECK(in.entries[0].pid == 2147483647);
}

TEST_CASE("borg lock: several entries, the live one decides, then junk, then another host", "[lock]") {
  const int64_t dead = DeadPid();
  const std::string me = std::to_string(getpid());
  const std::string stale = "testhost@1." + std::to_string(dead) + "-0";
  struct Case {
    std::vector<std::string> names;
    BorgLockState state;
  } cases[] = {
      {{stale, "testhost@1." + me + "-0"}, BorgLockState::kHeld},
      {{stale, "junk", "testhost@1." + me + "-0"}, BorgLockState::kHeld},
      {{stale, "junk", "otherhost@2.1-0"}, BorgLockState::kMalformed},
      {{stale, "otherhost@2.1-0"}, BorgLockState::kHeldElsewhere},
      {{stale, "testhost@1." + std::to_string(DeadPid()) + "-0"}, BorgLockState::kStale},
  };
  for (const Case& c : cases) {
    TempRepo r;
    for (const std::string& n : c.names) r.Entry(n);
    INFO(c.names.size() << " entries, the last " << c.names.back());
    CHECK(InspectBorgLock(io::Env::Default(), r.path, kHere.id).state == c.state);
  }
  TempRepo r;
  r.Entry(stale);
  const std::string stale2 = "testhost@1." + std::to_string(DeadPid()) + "-0";
  r.Entry(stale2);
  std::vector<report::Finding> w;
  REQUIRE(CheckBorgLock(io::Env::Default(), r.path, false, w, &kHere).ok());
  REQUIRE(w.size() == 2);  // one warning per stale entry, in name order
  CHECK(w[0].location == "lock.exclusive/" + std::min(stale, stale2));
  CHECK(w[1].location == "lock.exclusive/" + std::max(stale, stale2));
}

TEST_CASE("borg lock: an empty lock.exclusive is stale (borg takes it over)", "[lock]") {
  TempRepo r;
  fs::create_directory(r.lock());
  CHECK(InspectBorgLock(io::Env::Default(), r.path, kHere.id).state == BorgLockState::kStale);
  std::vector<report::Finding> w;
  REQUIRE(CheckBorgLock(io::Env::Default(), r.path, false, w, &kHere).ok());
  REQUIRE(w.size() == 1);
  CHECK(w[0].location == "lock.exclusive");
  CHECK(w[0].message ==
        "stale lock: lock.exclusive is empty (a borg process stopped while it released the lock, "
        "and borg would take the lock over). The repository was checked anyway. borg removes a "
        "stale lock itself on its next command, or `borg break-lock " + r.path +
            "` removes it now; borgcheck never writes to a repository and leaves it alone");
}

TEST_CASE("borg lock: lock.exclusive that is no directory is a warning, a loop is unreadable",
          "[lock]") {
  SECTION("a regular file") {
    TempRepo r;
    std::ofstream(r.lock()) << "x";
    const BorgLockInspection in = InspectBorgLock(io::Env::Default(), r.path, kHere.id);
    CHECK(in.state == BorgLockState::kNotADirectory);
    CHECK(in.error == "a regular file");
    std::vector<report::Finding> w;
    REQUIRE(CheckBorgLock(io::Env::Default(), r.path, false, w, &kHere).ok());
    REQUIRE(w.size() == 1);
    CHECK(w[0].severity == report::Severity::kWarning);
    CHECK(w[0].location == "lock.exclusive");
    CHECK(w[0].message ==
          "lock.exclusive is a regular file, not borg's lock directory: no borg process can hold "
          "the lock, so the repository was checked, but every borg command fails on it until it "
          "is removed by hand (borg break-lock cannot)");
  }
  SECTION("a FIFO (never opened)") {
    TempRepo r;
    REQUIRE(mkfifo(r.lock().c_str(), 0600) == 0);
    const BorgLockInspection in = InspectBorgLock(io::Env::Default(), r.path, kHere.id);
    CHECK(in.state == BorgLockState::kNotADirectory);
    CHECK(in.error == "a FIFO");
  }
  SECTION("a dangling symbolic link") {
    TempRepo r;
    fs::create_symlink(r.path + "/nowhere", r.lock());
    const BorgLockInspection in = InspectBorgLock(io::Env::Default(), r.path, kHere.id);
    CHECK(in.state == BorgLockState::kNotADirectory);
    CHECK(in.error == "a symbolic link to nothing");
  }
  SECTION("a symbolic link to a directory is followed, as borg's os.listdir does") {
    TempRepo r;
    fs::create_directory(r.path + "/elsewhere");
    std::ofstream(r.path + "/elsewhere/testhost@1." + std::to_string(getpid()) + "-0").flush();
    fs::create_symlink(r.path + "/elsewhere", r.lock());
    CHECK(InspectBorgLock(io::Env::Default(), r.path, kHere.id).state == BorgLockState::kHeld);
  }
  SECTION("a symbolic link loop cannot be read: could not check (exit 2), --bypass-lock checks") {
    TempRepo r;
    fs::create_symlink(r.lock(), r.lock());
    const BorgLockInspection in = InspectBorgLock(io::Env::Default(), r.path, kHere.id);
    CHECK(in.state == BorgLockState::kUnreadable);
    CHECK(in.error == "Too many levels of symbolic links");
    std::vector<report::Finding> w;
    const Status s = CheckBorgLock(io::Env::Default(), r.path, false, w, &kHere);
    CHECK(s.code() == StatusCode::kIoError);
    CHECK(s.message() == "repository " + r.path + ": cannot read its lock directory lock.exclusive "
                         "(Too many levels of symbolic links), so borgcheck cannot tell whether a "
                         "borg process holds it; fix the permissions, " + kBypass);
    CHECK(CheckBorgLock(io::Env::Default(), r.path, true, w, &kHere).ok());
    CHECK(w.empty());
  }
}

TEST_CASE("borg lock: read through the Env it is given, never around it", "[lock]") {
  TempRepo r;
  r.Entry("testhost@1." + std::to_string(getpid()) + "-0");
  REQUIRE(InspectBorgLock(io::Env::Default(), r.path, kHere.id).state == BorgLockState::kHeld);
  // An Env in which lock.exclusive is gone (as a remote store would answer): no lock.
  io::FaultEnv gone;
  gone.VanishAfterOpens("/lock.exclusive", 0);
  CHECK(InspectBorgLock(gone, r.path, kHere.id).state == BorgLockState::kNone);
  std::vector<report::Finding> w;
  CHECK(CheckBorgLock(gone, r.path, false, w, &kHere).ok());
  CHECK(w.empty());
}

TEST_CASE("borg lock: the owner rule is borg's process_alive", "[lock]") {
  const int64_t dead = DeadPid();
  CHECK(ClassifyLockOwner("h@1", getpid(), 0, "h@1") == LockOwnerState::kAlive);
  CHECK(ClassifyLockOwner("h@1", dead, 0, "h@1") == LockOwnerState::kDead);
  CHECK(ClassifyLockOwner("h@1", dead, 3, "h@1") == LockOwnerState::kThread);
  CHECK(ClassifyLockOwner("h@2", dead, 0, "h@1") == LockOwnerState::kOtherHost);
  CHECK(ClassifyLockOwner("h@1", dead, 0, "") == LockOwnerState::kOtherHost);
  CHECK(ClassifyLockOwner("", dead, 0, "") == LockOwnerState::kOtherHost);
  CHECK(ProcessExists(getpid()));
  CHECK(ProcessExists(1));               // EPERM or success: borg counts both as alive
  CHECK(ProcessExists(int64_t(1) << 40));  // outside pid_t: os.kill raises, not judged
  CHECK_FALSE(ProcessExists(dead));
}

TEST_CASE("borg lock: the local host id is BORG_HOST_ID, else <fqdn>@<48-bit node>", "[lock]") {
  const char* saved = std::getenv("BORG_HOST_ID");
  const std::string restore = saved ? saved : "";
  setenv("BORG_HOST_ID", "chosen-id", 1);
  BorgHostId h = LocalBorgHostId();
  CHECK(h.id == "chosen-id");
  CHECK(h.source == "BORG_HOST_ID");
  setenv("BORG_HOST_ID", "", 1);  // empty counts as unset, as borg's `if not hostid`
  h = LocalBorgHostId();
  if (h.id.empty()) {
    CHECK(h.source.rfind("unknown: no network interface with an IPv4 address has a hardware "
                         "address", 0) == 0);
  } else {
    const size_t at = h.id.rfind('@');
    REQUIRE(at != std::string::npos);
    CHECK(at > 0);
    const std::string node = h.id.substr(at + 1);
    REQUIRE_FALSE(node.empty());
    CHECK(node.find_first_not_of("0123456789") == std::string::npos);
    CHECK(std::stoull(node) < (uint64_t(1) << 48));
    CHECK(h.source.rfind("host name " + h.id.substr(0, at) + ", hardware address of ", 0) == 0);
  }
  if (saved) setenv("BORG_HOST_ID", restore.c_str(), 1);
  else unsetenv("BORG_HOST_ID");
}

}  // namespace
}  // namespace borgcheck::repo
