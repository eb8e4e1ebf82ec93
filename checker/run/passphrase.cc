#include "checker/run/passphrase.h"

#include <csignal>

#include "checker/run/check_run.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <vector>

#include <openssl/crypto.h>

namespace borgcheck::run {
namespace {

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

Result<std::string> RunPassCommand(const std::string& cmd) {
  std::vector<std::string> words;
  if (!SplitCommandLine(cmd, words) || words.empty()) {
    return Status(StatusCode::kInvalidArgument, "BORG_PASSCOMMAND could not be parsed: unbalanced quotes");
  }
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    return Status(StatusCode::kInvalidArgument, std::string("BORG_PASSCOMMAND: pipe: ") + std::strerror(errno));
  }
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipefd[0]); ::close(pipefd[1]);
    return Status(StatusCode::kInvalidArgument, std::string("BORG_PASSCOMMAND: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::dup2(pipefd[1], STDOUT_FILENO);
    ::execvp(argv[0], argv.data());
    _exit(127);
  }
  ::close(pipefd[1]);
  std::string out;
  bool ok = ReadAllFd(pipefd[0], out);
  ::close(pipefd[0]);
  int status = 0;
  if (!ok && PendingStopSignal()) ::kill(pid, SIGTERM);  // we are stopping: do not wait forever
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    if (PendingStopSignal()) ::kill(pid, SIGTERM);
  }
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    WipeString(out);
    return Status(StatusCode::kInvalidArgument,
                  "BORG_PASSCOMMAND failed (" + words[0] +
                      (WIFEXITED(status) ? " exited with status " + std::to_string(WEXITSTATUS(status))
                                         : std::string(" was killed")) +
                      "): fix the command or set BORG_PASSPHRASE instead");
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
  (void)!::write(fd, prompt.data(), prompt.size());
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

}  // namespace borgcheck::run
