#include "checker/base/stop_signal.h"

#include <signal.h>

#include <atomic>

namespace borgcheck {
namespace {
std::atomic<int> g_stop_signal{0};
std::atomic<int> g_child_group{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free store");
}  // namespace

void RequestStopFromSignal(int signo) {
  g_stop_signal.store(signo);
  if (int pgid = g_child_group.load(); pgid > 0) {
    ::kill(-pgid, SIGTERM);
    ::kill(-pgid, SIGCONT);  // a stopped member (SIGTTIN) must see the SIGTERM
  }
}

void SetStopChildGroup(int pgid) { g_child_group.store(pgid); }

int PendingStopSignal() { return g_stop_signal.load(); }

void TEST_ResetStopSignal() { g_stop_signal.store(0); }

}  // namespace borgcheck
