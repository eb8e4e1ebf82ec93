#include "checker/remote/ssh_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "checker/base/text_escape.h"

extern char** environ;

namespace borgcheck::remote {
namespace {

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Serializes the SIGINT dance of concurrent spawns (one would otherwise "restore" the other's
// SIG_IGN).
std::mutex& SpawnMutex() {
  static std::mutex mu;
  return mu;
}

constexpr int kStdoutPipeBytes = 1 << 20;

}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0].empty()) return Status(StatusCode::kInvalidArgument, "no command to run");
  const std::string what = "could not run \"" + EscapeText(argv[0]) + "\": ";
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {in, out, err}) {
      CloseFd(p[0]);
      CloseFd(p[1]);
    }
  };
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    return Status(StatusCode::kIoError, what + std::strerror(e));
  }
  // The child's stdout carries the replies' bytes: a pipe of 1 MiB instead of 64 KiB lets ssh
  // hand over what it received in fewer, larger writes, and its own buffer stays small (at
  // 0 ms and one connection, the bench's run took 0.55 s with 64 KiB, 0.48 s with 1 MiB;
  // bench/RESULTS.md, "Remote (sftp), 2026-12-07: reused buffers, wider pipe, spare
  // connections"). Best effort: past the system's pipe-max-size or the user's pipe quota the
  // default stays. Each such pipe counts 256 pages against that quota (fs.pipe-user-pages-soft,
  // 16384 by default: 64 of them per user; 16 connections take 16).
  (void)::fcntl(out[0], F_SETPIPE_SZ, kStdoutPipeBytes);

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigfillset(&defaults);
  sigdelset(&defaults, SIGINT);  // stays ignored (below)
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  pid_t pid = -1;
  int rc = 0;
  {
    std::lock_guard<std::mutex> lock(SpawnMutex());
    struct sigaction ign = {}, old = {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGINT, &ign, &old);
    rc = ::posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ);
    ::sigaction(SIGINT, &old, nullptr);
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  CloseFd(in[0]);
  CloseFd(out[1]);
  CloseFd(err[1]);
  if (rc != 0) {
    close_all();
    return Status(StatusCode::kIoError, what + std::strerror(rc));
  }
  std::unique_ptr<ChildProcess> p(new ChildProcess());
  p->pid_ = pid;
  p->stdin_fd_ = in[1];
  p->stdout_fd_ = out[0];
  p->stderr_fd_ = err[0];
  return p;
}

ChildProcess::~ChildProcess() {
  (void)Terminate(std::chrono::seconds(2));
  CloseFd(stdin_fd_);
  CloseFd(stdout_fd_);
  CloseFd(stderr_fd_);
}

void ChildProcess::CloseStdin() { CloseFd(stdin_fd_); }

void ChildProcess::Signal(int sig) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!reaped_ && pid_ > 0) ::kill(pid_, sig);
}

std::optional<int> ChildProcess::TryWait() {
  std::lock_guard<std::mutex> lock(mu_);
  if (reaped_) return status_;
  if (pid_ <= 0) return std::nullopt;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {  // ECHILD: reaped by someone else; never kill it
    reaped_ = true;
    status_ = r == pid_ ? st : 0;
    return status_;
  }
  return std::nullopt;
}

bool ChildProcess::WaitUntil(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    if (TryWait()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int ChildProcess::Terminate(std::chrono::milliseconds grace) {
  CloseStdin();
  if (pid_ <= 0) return 0;
  auto now = [] { return std::chrono::steady_clock::now(); };
  if (!WaitUntil(now() + grace)) {
    Signal(SIGTERM);
    if (!WaitUntil(now() + grace)) {
      Signal(SIGKILL);
      std::lock_guard<std::mutex> lock(mu_);
      if (!reaped_) {
        int st = 0;
        pid_t r;
        do {
          r = ::waitpid(pid_, &st, 0);
        } while (r < 0 && errno == EINTR);
        reaped_ = true;
        status_ = r == pid_ ? st : 0;
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void ChildProcess::ReadWhatIsLeft(int fd, const std::function<void(const char*, size_t)>& sink) {
  char buf[4096];
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 0) <= 0) return;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return;
    sink(buf, size_t(n));
  }
}

std::string ChildProcess::DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "wait status " + std::to_string(status);
}

}  // namespace borgcheck::remote
