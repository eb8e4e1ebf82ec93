// A child process (ssh, for SFTP now and `borg serve` later) spawned with posix_spawnp, no
// shell, with three pipes: its stdin, stdout (1 MiB where the system allows) and stderr. argv
// in, three fds out.
//
// posix_spawnp only, never fork: the checker is threaded. The pipes are made O_CLOEXEC and the
// child's ends are dup2'd onto 0, 1 and 2 by the spawn's file actions, so no other child ever
// inherits them. While spawning, SIGINT is ignored in the parent (and restored right after):
// an ignored signal stays ignored across exec, so Ctrl-C on the terminal does not kill ssh
// before borgcheck closes it cleanly. Every other signal is reset to its default in the child
// and its signal mask is emptied (SIGPIPE is ignored by main and must not stay ignored in ssh).
//
// Thread contract: a ChildProcess is owned by one thread (it moves, it does not copy); the
// owner may hand the fds to other threads (an I/O thread reading stdout and stderr, writers
// of stdin) as long as they stop using them before the fds are closed. Signal() may be called
// from any thread at any time: it and the reaping are serialized by an internal mutex, so a
// signal never reaches a reaped (and possibly reused) pid.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/status.h"

namespace borgcheck::remote {

class ChildProcess {
 public:
  // Spawns argv[0] (searched in PATH) with argv. kIoError "could not run "ARGV0": REASON" when
  // it cannot be run (a missing or non-executable program: glibc's posix_spawnp reports a
  // failed exec as its error); kInvalidArgument for an empty argv.
  static Result<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv);

  // Terminate(2 s) unless already reaped, then closes every fd still open.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  int stdin_fd() const { return stdin_fd_; }  // -1 once closed
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }
  void CloseStdin();

  // kill(pid, sig) unless the child has been reaped. Any thread.
  void Signal(int sig);
  // The wait status once the child has exited (reaps it), nullopt while it runs.
  std::optional<int> TryWait();
  // Closes stdin, waits up to `grace` for the child to exit, then SIGTERM, `grace` again, then
  // SIGKILL and a blocking waitpid: the child is always reaped. Returns its wait status.
  int Terminate(std::chrono::milliseconds grace);

  // "exit status N", "killed by signal N" for a wait status.
  static std::string DescribeWaitStatus(int status);

  // Reads what `fd` holds now, without waiting, until it has no more or ends, handing each
  // piece to `sink`: the rest of a child's stderr once it has ended, whose last lines explain
  // the end. For the thread that owns the fd's reading (an I/O thread, as it stops).
  static void ReadWhatIsLeft(int fd, const std::function<void(const char*, size_t)>& sink);

 private:
  ChildProcess() = default;
  bool WaitUntil(std::chrono::steady_clock::time_point deadline);

  std::mutex mu_;  // guards pid_'s reaping against Signal
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;  // the wait status, once reaped_
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
};

}  // namespace borgcheck::remote
