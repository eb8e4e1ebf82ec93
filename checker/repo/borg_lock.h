// borg's repository locks, inspected the way borg itself judges them, without touching them.
//
// borg 1.x and 2.0.0b5 (repository versions 1 and 2) share one format (docs/formats.md, "Locks"):
//   lock.exclusive/            a directory made by an atomic rename; while a process holds it, it
//                              contains one empty file "<host id>.<pid>-<thread, hex>", e.g.
//                              "vm@3281355014145.9138-0" (thread is always 0)
//   lock.roster                JSON {"exclusive": [[host id, pid, thread]], "shared": [...]}
// borg master (repository version 4, borgstore) keeps one JSON item per lock in locks/ with the
// same three fields (hostid, processid, threadid) plus `exclusive` and `time`.
//
// The host id is BORG_HOST_ID, else "<fqdn>@<uuid.getnode()>": Python's getfqdn of the host
// name, "@", and the 48-bit hardware address libuuid finds (the first interface with an IPv4
// address and a non-zero hardware address) as a decimal number. borg calls a lock entry stale,
// and removes it on its next command, when its host id is this host's, its thread is 0 and
// kill(pid, 0) fails with ESRCH; an entry of another host is alive for ever (borg cannot tell).
// borgcheck applies the same rule but writes nothing: a stale lock is checked with a warning
// that `borg break-lock` removes it.
//
// Thread contract: free functions; they read the environment, the network interfaces and the
// repository's lock directory, keep no state, and are safe for concurrent use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "checker/base/status.h"
#include "checker/io/env.h"
#include "checker/report/finding.h"

namespace borgcheck::repo {

// ---- who borg is on this machine ----------------------------------------------------------

struct BorgHostId {
  // What borg writes into its locks here, or empty when borg's own host id is random in every
  // borg process (no interface with a hardware address and no BORG_HOST_ID): borg then never
  // recognises its own locks, and no lock can be judged stale.
  std::string id;
  // How it was found, for messages: "BORG_HOST_ID", "host name vm, hardware address of eth0",
  // or why it cannot be known.
  std::string source;
};

// Computes it now (BORG_HOST_ID, gethostname + getaddrinfo(AI_CANONNAME), the interfaces).
BorgHostId LocalBorgHostId();

// ---- one lock owner -------------------------------------------------------------------------

enum class LockOwnerState {
  kAlive,      // this host, and the process exists (kill(pid, 0) succeeds or fails with EPERM)
  kDead,       // this host, thread 0, and kill(pid, 0) fails with ESRCH: stale
  kOtherHost,  // another host id (or ours is unknown): borg treats it as alive
  kThread,     // this host but a non-zero thread: borg does not judge those, treats as alive
};

// borg's platform.process_alive, given the local host id (empty: unknown, so kOtherHost).
LockOwnerState ClassifyLockOwner(std::string_view host, int64_t pid, uint64_t thread,
                                 std::string_view local_host_id);

// kill(pid, 0) != ESRCH, for 0 < pid <= INT32_MAX; false otherwise.
bool ProcessExists(int64_t pid);

// ---- borg 1.x and 2.0.0b5: lock.exclusive/ ----------------------------------------------------

enum class BorgLockState {
  kNone,           // no lock.exclusive
  kStale,          // every entry names a dead process of this host, or the directory is empty
  kHeld,           // an entry names a live process (or a non-zero thread) of this host
  kHeldElsewhere,  // no live local entry, but one of another host (or our host id is unknown)
  kMalformed,      // an entry name borg cannot parse: borg refuses to break it too
  kNotADirectory,  // lock.exclusive is a file, FIFO or dangling link: no borg can hold it
  kUnreadable,     // lock.exclusive cannot be listed (permissions, I/O)
};

struct BorgLockEntry {
  std::string name;  // the file name in lock.exclusive/
  bool parsed = false;
  std::string host;  // the rest only when parsed
  int64_t pid = 0;
  uint64_t thread = 0;
  LockOwnerState owner = LockOwnerState::kOtherHost;
};

struct BorgLockInspection {
  BorgLockState state = BorgLockState::kNone;
  std::vector<BorgLockEntry> entries;  // sorted by name
  std::string error;                   // kUnreadable: the errno text; kNotADirectory: what it is
};

// Reads <repo>/lock.exclusive and judges every entry against `local_host_id` (empty: unknown).
// lock.roster is not read: its shared entries are readers, which never write, and its exclusive
// entry is only ever written while lock.exclusive is held.
// Read through `env`, as every repository byte is (checker/io/env.h).
BorgLockInspection InspectBorgLock(const io::Env& env, const std::string& repo_path,
                                   std::string_view local_host_id);

// What IdentifyRepository and IdentifyBorg2Repository do with the lock (docs/exit-codes.md):
//   kNone            Ok
//   kStale           Ok, and one warning appended to `warnings` (exit 1): which process the
//                    lock names, that it is not running, that `borg break-lock REPO` removes it
//   kNotADirectory   Ok and a warning: no borg can hold it, but borg fails until it is removed
//   kHeld, kHeldElsewhere, kMalformed
//                    kLockHeld (exit 73), naming the entry, host and pid and what to do;
//                    with bypass_lock: Ok, nothing appended
//   kUnreadable      kIoError (exit 2); with bypass_lock: Ok
// `host` is the local host id to judge by; nullptr computes LocalBorgHostId() (only when
// lock.exclusive exists).
Status CheckBorgLock(const io::Env& env, const std::string& repo_path, bool bypass_lock,
                     std::vector<report::Finding>& warnings, const BorgHostId* host = nullptr);

// The clause of a message that says who owns a lock entry, e.g. "process 9138 on this host
// (vm@3281355014145), which is not running" or "process 77 on host other@1 (this host is
// vm@3281355014145)"; shared with borgstore's locks/ messages.
std::string DescribeLockOwner(std::string_view host, int64_t pid, LockOwnerState owner,
                              const BorgHostId& local);

}  // namespace borgcheck::repo
