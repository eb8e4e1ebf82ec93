#include "checker/keys/passphrase.h"

#include <csignal>


#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <vector>

#include <openssl/crypto.h>

#include "checker/base/stop_signal.h"
#include "checker/base/text_escape.h"

namespace borgcheck::keys {
namespace {

// A failed BORG_PASSCOMMAND whose words hold shell syntax (a pipe, a redirection, `;`, `&&`,
// `$(...)`, a backquote): borg splits the command into words and runs it without a shell
// (shlex.split), and so does borgcheck, so `cat f | head -1` runs cat with the arguments "f",
// "|", "head" and "-1". Say so, and how to get a shell.
std::string NoShellHint(const std::vector<std::string>& words) {
  static const char* const kShell[] = {"|", "||", "&&", ";", ">", ">>", "<", "&"};
  for (const std::string& w : words) {
    bool shell = w.find("$(") != std::string::npos || w.find('`') != std::string::npos;
    for (const char* op : kShell) shell = shell || w == op;
    if (shell) {
      return ". Note: BORG_PASSCOMMAND is split into words and run without a shell, as borg does, so '" + w +
             "' is passed to " + words[0] + " as an argument; for a pipe or a redirection use "
             "BORG_PASSCOMMAND=\"sh -c '...'\"";
    }
  }
  return "";
}


void StripTrailingNewlines(std::string& s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
}

bool ReadAllFd(int fd, std::string& out) {
  char buf[4096];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR && PendingStopSignal()) return false;  // SIGINT/SIGTERM: give up
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) break;
    out.append(buf, size_t(r));
    if (out.size() > (1 << 20)) return false;  // no passphrase is a megabyte long
  }
  OPENSSL_cleanse(buf, sizeof buf);
  return true;
}

// The BORG_PASSCOMMAND child, made so that it cannot be left behind (issue 13):
//   - it leads a process group of its own, so the command and everything it starts can be
//     signalled together; when we hold the terminal's foreground, the child's group gets it
//     while it runs (a command that asks on /dev/tty is not stopped by SIGTTIN; Ctrl-C then
//     reaches the child's group, and a child killed by SIGINT stops this run as if we had got it);
//   - a stop signal's handler signals the group at once (SetStopChildGroup), wherever the main
//     thread is;
//   - every return path goes through ChildGroup's destructor: the group is told to stop
//     (SIGTERM, SIGCONT), then killed (SIGKILL) if the leader has not exited within a grace
//     period; members left after the leader exited (a background grandchild) are killed while
//     the leader is still a zombie (its pid, the group id, cannot be reused yet); then the
//     leader is reaped;
//   - PR_SET_PDEATHSIG: the child is killed if this process dies first (SIGKILL of borgcheck).
class ChildGroup {
 public:
  explicit ChildGroup(pid_t pid) : pid_(pid) {
    ::setpgid(pid_, pid_);  // the child does it too: whichever runs first
    SetStopChildGroup(pid_);
    tty_ = ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (tty_ >= 0 && ::tcgetpgrp(tty_) == ::getpgrp() && ::tcsetpgrp(tty_, pid_) == 0) {
      handed_tty_ = true;
      ::kill(-pid_, SIGCONT);  // it may have touched the terminal before it was handed over
    }
  }
  ChildGroup(const ChildGroup&) = delete;
  ChildGroup& operator=(const ChildGroup&) = delete;
  ~ChildGroup() { (void)Finish(/*stop=*/true); }

  // Whether the leader has exited (not reaped: it stays a zombie until Finish).
  bool Exited() {
    siginfo_t info{};
    return ::waitid(P_PID, id_t(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_;
  }

  // Ends the child: with `stop`, tells it to stop first (and kills it after the grace period);
  // kills what is left of its group; reaps the leader. Returns its wait status (once).
  int Finish(bool stop) {
    if (reaped_) return status_;
    int waited_ms = 0;
    bool told = false;
    while (!Exited()) {
      if (!stop && PendingStopSignal()) stop = true;  // a signal while we wait for it to exit
      if (stop && !told) {
        ::kill(-pid_, SIGTERM);
        ::kill(-pid_, SIGCONT);
        told = true;
      }
      if (told && waited_ms >= 2000) ::kill(-pid_, SIGKILL);  // after a 2 s grace
      ::usleep(10 * 1000);
      if (told) waited_ms += 10;
    }
    ::kill(-pid_, SIGKILL);  // members the leader left behind; its zombie keeps the group id reserved
    SetStopChildGroup(0);
    while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    if (handed_tty_) {
      // We are a background group now: take the terminal back without being stopped by SIGTTOU.
      sigset_t ttou, old;
      sigemptyset(&ttou);
      sigaddset(&ttou, SIGTTOU);
      ::sigprocmask(SIG_BLOCK, &ttou, &old);
      ::tcsetpgrp(tty_, ::getpgrp());
      ::sigprocmask(SIG_SETMASK, &old, nullptr);
    }
    if (tty_ >= 0) ::close(tty_);
    tty_ = -1;
    return status_;
  }

 private:
  const pid_t pid_;
  int tty_ = -1;
  bool handed_tty_ = false;
  bool reaped_ = false;
  int status_ = 0;
};

// Reads the child's stdout until EOF, or until the leader has exited and nothing more is to be
// read (a grandchild holding the pipe open is not waited for), or a stop signal. False on a read
// error, a stop, or more than a megabyte.
bool ReadChildOutput(int fd, ChildGroup& child, std::string& out) {
  char buf[4096];
  bool exited = false;
  bool ok = true;
  for (;;) {
    if (PendingStopSignal()) {
      ok = false;
      break;
    }
    struct pollfd p = {fd, POLLIN, 0};
    int r = ::poll(&p, 1, exited ? 0 : 100);
    if (r < 0) {
      if (errno == EINTR) continue;
      ok = false;
      break;
    }
    if (r > 0) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        ok = false;
        break;
      }
      if (n == 0) break;  // EOF
      out.append(buf, size_t(n));
      if (out.size() > (1 << 20)) {  // no passphrase is a megabyte long
        ok = false;
        break;
      }
      continue;
    }
    if (exited) break;  // the leader is gone and nothing is left to read now
    exited = child.Exited();
  }
  OPENSSL_cleanse(buf, sizeof buf);
  return ok;
}

Result<std::string> RunPassCommand(const std::string& cmd) {
  std::vector<std::string> words;
  if (!SplitCommandLine(cmd, words) || words.empty()) {
    return Status(StatusCode::kPasscommandFailed, "BORG_PASSCOMMAND could not be parsed: unbalanced quotes");
  }
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    return Status(StatusCode::kPasscommandFailed, std::string("BORG_PASSCOMMAND: pipe: ") + std::strerror(errno));
  }
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipefd[0]); ::close(pipefd[1]);
    return Status(StatusCode::kPasscommandFailed, std::string("BORG_PASSCOMMAND: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(127);  // the parent died before the line above
    ::signal(SIGPIPE, SIG_DFL);             // borgcheck ignores it; the command must not inherit that
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(pipefd[1], STDOUT_FILENO);
    ::execvp(argv[0], argv.data());
    _exit(127);
  }
  ::close(pipefd[1]);
  std::string out;
  int status = 0;
  bool ok = false;
  {
    ChildGroup child(pid);
    ok = ReadChildOutput(pipefd[0], child, out);
    ::close(pipefd[0]);
    status = child.Finish(/*stop=*/!ok);
  }
  // Ctrl-C while the child's group held the terminal reached the child only: it is ours too.
  if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGQUIT) && !PendingStopSignal()) {
    RequestStopFromSignal(SIGINT);
  }
  if (int sig = PendingStopSignal()) {
    WipeString(out);
    return Status(StatusCode::kInterrupted,
                  "stopped by signal " + std::to_string(sig) + " while BORG_PASSCOMMAND ran (it was stopped too)");
  }
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    WipeString(out);
    return Status(StatusCode::kPasscommandFailed,
                  "BORG_PASSCOMMAND failed (" + words[0] +
                      (WIFEXITED(status) ? " exited with status " + std::to_string(WEXITSTATUS(status))
                                         : std::string(" was killed")) +
                      "): fix the command or set BORG_PASSPHRASE instead" + NoShellHint(words));
  }
  StripTrailingNewlines(out);
  return out;
}

}  // namespace

void WipeString(std::string& s) {
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}

bool SplitCommandLine(const std::string& cmd, std::vector<std::string>& words) {
  words.clear();
  std::string cur;
  bool in_word = false;
  enum { kNone, kSingle, kDouble } quote = kNone;
  for (size_t i = 0; i < cmd.size(); ++i) {
    char c = cmd[i];
    if (quote == kSingle) {
      if (c == '\'') quote = kNone; else cur.push_back(c);
      continue;
    }
    if (quote == kDouble) {
      if (c == '"') { quote = kNone; continue; }
      if (c == '\\' && i + 1 < cmd.size() && std::strchr("\\\"$`\n", cmd[i + 1])) { cur.push_back(cmd[++i]); continue; }
      cur.push_back(c);
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) { words.push_back(cur); cur.clear(); in_word = false; }
      continue;
    }
    in_word = true;
    if (c == '\'') quote = kSingle;
    else if (c == '"') quote = kDouble;
    else if (c == '\\' && i + 1 < cmd.size()) cur.push_back(cmd[++i]);
    else cur.push_back(c);
  }
  if (quote != kNone) return false;
  if (in_word) words.push_back(cur);
  return true;
}

Result<PassphraseSource> PassphraseFromEnvironment() {
  PassphraseSource src;
  if (const char* p = std::getenv("BORG_PASSPHRASE")) {
    src.passphrase = std::string(p);
    src.source = "BORG_PASSPHRASE";
    return src;
  }
  if (const char* cmd = std::getenv("BORG_PASSCOMMAND"); cmd && *cmd) {
    Result<std::string> r = RunPassCommand(cmd);
    if (!r.ok()) return r.status();
    src.passphrase = std::move(r).value();
    src.source = "BORG_PASSCOMMAND";
    return src;
  }
  if (const char* fdtext = std::getenv("BORG_PASSPHRASE_FD"); fdtext && *fdtext) {
    char* end = nullptr;
    long fd = std::strtol(fdtext, &end, 10);
    std::string out;
    if (*end != '\0' || fd < 0 || fd > 65535 || !ReadAllFd(int(fd), out)) {
      return Status(StatusCode::kInvalidArgument,
                    std::string("BORG_PASSPHRASE_FD=") + fdtext + " is not a readable file descriptor");
    }
    StripTrailingNewlines(out);
    src.passphrase = std::move(out);
    src.source = "BORG_PASSPHRASE_FD";
    return src;
  }
  // A systemd credential (LoadCredential=borg-passphrase:... in the unit): a file only the
  // service can read, so the passphrase is in neither the unit nor the environment.
  if (const char* dir = std::getenv("CREDENTIALS_DIRECTORY"); dir && *dir) {
    const std::string path = std::string(dir) + "/borg-passphrase";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0 || errno != ENOENT) {
      std::string out;
      bool ok = fd >= 0 && ReadAllFd(fd, out);
      int e = errno;
      if (fd >= 0) ::close(fd);
      if (!ok) {
        WipeString(out);
        return Status(StatusCode::kInvalidArgument,
                      "the systemd credential " + path + " cannot be read: " + std::strerror(e));
      }
      StripTrailingNewlines(out);
      src.passphrase = std::move(out);
      src.source = "the systemd credential borg-passphrase";
      return src;
    }
  }
  return src;
}

std::optional<std::string> PromptPassphrase(const std::string& prompt) {
  int fd = ::open("/dev/tty", O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct termios old_t;
  bool have_t = ::tcgetattr(fd, &old_t) == 0;
  if (have_t) {
    struct termios t = old_t;
    t.c_lflag &= ~tcflag_t(ECHO);
    ::tcsetattr(fd, TCSAFLUSH, &t);
  }
  // The prompt names a key file or repository path: escaped as all text output is.
  const std::string shown = EscapeText(prompt);
  (void)!::write(fd, shown.data(), shown.size());
  std::string line;
  char c;
  for (;;) {
    ssize_t r = ::read(fd, &c, 1);
    if (r < 0 && errno == EINTR && !PendingStopSignal()) continue;
    if (r != 1 || c == '\n') break;
    line.push_back(c);
  }
  if (have_t) ::tcsetattr(fd, TCSAFLUSH, &old_t);
  (void)!::write(fd, "\n", 1);
  ::close(fd);
  c = 0;
  return line;
}

}  // namespace borgcheck::keys
