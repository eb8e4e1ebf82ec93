// The process-wide request to stop: a signal handler (checker/cli/main.cc) records the signal,
// and every long wait polls it (the engine's reader and workers, passphrase prompts and
// BORG_PASSCOMMAND, which are interrupted with EINTR).
//
// Thread contract: every function is safe for concurrent use and async-signal-safe (lock-free
// atomic ints; kill(2) is async-signal-safe).
#pragma once

namespace borgcheck {

// Asks a running check to stop soon. Called from a signal handler.
void RequestStopFromSignal(int signo);

// The signal that asked the run to stop, or 0.
int PendingStopSignal();

// The process group of a child that must not outlive a stop (BORG_PASSCOMMAND: keys/passphrase.cc):
// while one is set, RequestStopFromSignal sends it SIGTERM and SIGCONT, so the child stops even
// while the main thread is blocked elsewhere. 0 clears it. Set and cleared by the main thread;
// the child's leader must not be reaped while it is set (its process group id stays reserved).
void SetStopChildGroup(int pgid);

// Tests only: forgets the request (a process that handled a signal never resumes; a test that
// asked for a stop runs further cases in the same process).
void TEST_ResetStopSignal();

}  // namespace borgcheck
