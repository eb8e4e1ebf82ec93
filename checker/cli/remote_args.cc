#include "checker/cli/remote_args.h"

#include <cstdlib>

#include <fmt/format.h>

#include "checker/base/text_escape.h"
#include "checker/keys/passphrase.h"

namespace borgcheck::cli {
namespace {

Status Invalid(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

bool LooksRemote(std::string_view repo) {
  if (repo.starts_with("file://")) return false;
  if (repo.find("://") != std::string_view::npos) return true;
  // borg's scp-like form user@host:path (a colon before the first slash; "./a:b" is local).
  const size_t colon = repo.find(':');
  return colon != std::string_view::npos && !repo.starts_with("/") && colon < repo.find('/');
}

Result<RemoteRepository> ParseRemoteRepository(std::string_view repo) {
  const std::string shown = EscapeText(std::string(repo));
  RemoteRepository out;
  std::string_view authority, path;
  if (repo.starts_with("sftp://") || repo.starts_with("ssh://")) {
    const bool sftp = repo.starts_with("sftp://");
    out.transport = sftp ? Transport::kSftp : Transport::kBorgServe;
    const std::string_view scheme = sftp ? "sftp://" : "ssh://";
    std::string_view rest = repo.substr(scheme.size());
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos || slash + 1 >= rest.size()) {
      return Invalid("no repository path in " + shown + ": write " + std::string(scheme) +
                     (sftp ? "[user@]host[:port]/relative/path or sftp://[user@]host[:port]//absolute/path"
                           : "[user@]host[:port]/absolute/path or ssh://[user@]host[:port]/~/path-in-home"));
    }
    authority = rest.substr(0, slash);
    // sftp: "rel/path" or "/abs/path" (borgstore's spelling); ssh: borg's Location.path, the
    // leading slash kept ("/abs", "/~/rel", "/./rel").
    path = sftp ? rest.substr(slash + 1) : rest.substr(slash);
  } else if (repo.find("://") == std::string_view::npos) {
    // borg 1.x's scp-like [user@]host:path (LooksRemote: a colon before any slash).
    out.transport = Transport::kBorgServe;
    const size_t colon = repo.find(':');
    authority = repo.substr(0, colon);
    path = repo.substr(colon + 1);
    if (authority.find('[') != std::string_view::npos || authority.find(']') != std::string_view::npos) {
      return Invalid("cannot read " + shown + ": for an IPv6 host write ssh://[user@][ADDRESS]/path");
    }
    if (path.empty()) return Invalid("no repository path after ':' in " + shown);
  } else {
    return Invalid("cannot read " + shown +
                   ": borgcheck reads local paths, sftp:// and ssh:// URLs and borg's user@host:path "
                   "(docs/remote.md); for another store, mount the repository or run borgcheck on the server");
  }
  const bool scp_form = repo.find("://") == std::string_view::npos;
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    out.target.user = std::string(authority.substr(0, at));
    authority = authority.substr(at + 1);
    if (out.target.user.empty()) return Invalid("empty user name before '@' in " + shown);
  }
  std::string_view port;
  if (scp_form) {
    out.target.host = std::string(authority);  // the scp form has no port
  } else if (authority.starts_with("[")) {  // an IPv6 address
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Invalid("no ']' after the IPv6 address in " + shown);
    out.target.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Invalid("unexpected text after ']' in " + shown);
      port = after.substr(1);
      if (port.empty()) return Invalid("empty port after ':' in " + shown);
    }
  } else {
    const size_t colon = authority.find(':');
    out.target.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return Invalid("empty port after ':' in " + shown);
    }
  }
  if (out.target.host.empty()) return Invalid("no host in " + shown);
  // ssh would read a host or user beginning with '-' as an option (-oProxyCommand=...).
  if (out.target.host.front() == '-' || out.target.user.starts_with("-")) {
    return Invalid("a host or user name cannot begin with '-': " + shown);
  }
  for (unsigned char c : out.target.host + out.target.user) {
    if (c <= ' ' || c == 0x7f) return Invalid("a host or user name cannot hold spaces or control characters: " + shown);
  }
  if (!port.empty()) {
    if (!AllDigits(port) || port.size() > 5 || std::atoi(std::string(port).c_str()) < 1 ||
        std::atoi(std::string(port).c_str()) > 65535) {
      return Invalid("the port in " + shown + " must be a number from 1 to 65535");
    }
    out.target.port = unsigned(std::atoi(std::string(port).c_str()));
  }
  out.path = std::string(path);
  while (out.path.size() > 1 && out.path.back() == '/') out.path.pop_back();
  if (out.path == "/" ) return Invalid("the repository path in " + shown + " is the server's root folder");
  for (unsigned char c : out.path) {
    if (c < ' ' || c == 0x7f) return Invalid("the repository path in " + shown + " holds control characters");
  }
  return out;
}

Result<std::vector<std::string>> SshCommand(const std::string& rsh_option, bool rsh_given) {
  std::string from = "--rsh";
  std::string cmd = rsh_option;
  if (!rsh_given) {
    const char* env = std::getenv("BORG_RSH");
    from = "BORG_RSH";
    cmd = env && *env ? env : "ssh";
  }
  std::vector<std::string> words;
  if (!keys::SplitCommandLine(cmd, words)) {
    return Invalid("the ssh command from " + from + " cannot be split into words (unbalanced quotes): " +
                   EscapeText(cmd));
  }
  if (words.empty()) return Invalid("the ssh command from " + from + " is empty");
  return words;
}

Result<std::vector<std::string>> RemoteBorgCommand(const std::string& option, bool given) {
  std::string from = "--remote-path";
  std::string cmd = option;
  if (!given) {
    const char* env = std::getenv("BORG_REMOTE_PATH");
    from = "BORG_REMOTE_PATH";
    cmd = env && *env ? env : "borg";
  }
  std::vector<std::string> words;
  if (!keys::SplitCommandLine(cmd, words)) {
    return Invalid("the server's borg command from " + from + " cannot be split into words (unbalanced quotes): " +
                   EscapeText(cmd));
  }
  if (words.empty()) return Invalid("the server's borg command from " + from + " is empty");
  return words;
}

std::string CanonicalBorgServeUrl(const remote::SftpTarget& target, const std::string& path) {
  const bool v6 = target.host.find(':') != std::string::npos;
  std::string p = path;
  if (p.starts_with("~")) p = "/" + p;
  else if (!p.starts_with("/")) p = "/./" + p;
  return fmt::format("ssh://{}{}{}{}{}{}{}", target.user, target.user.empty() ? "" : "@", v6 ? "[" : "",
                     target.host, v6 ? "]" : "", target.port ? fmt::format(":{}", target.port) : "", p);
}

std::string CanonicalRemoteUrl(const remote::SftpTarget& target, const std::string& absolute_path) {
  const bool v6 = target.host.find(':') != std::string::npos;
  // The path begins with '/': the URL's "//" of an absolute path.
  return fmt::format("sftp://{}{}{}{}{}{}/{}", target.user, target.user.empty() ? "" : "@", v6 ? "[" : "",
                     target.host, v6 ? "]" : "", target.port ? fmt::format(":{}", target.port) : "", absolute_path);
}

}  // namespace borgcheck::cli
