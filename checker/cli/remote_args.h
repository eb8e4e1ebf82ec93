// Remote repositories on the command line: the URL forms borgcheck reads, the ssh command
// (--rsh, BORG_RSH) and the transport flags (--remote-connections, --remote-timeout). Pure
// parsing; main connects (checker/remote/sftp_env.h) before any worker starts.
//
//   sftp://[user@]host[:port]/relative/path   relative to the login folder (borgstore's form)
//   sftp://[user@]host[:port]//absolute/path  absolute on the server
// The host may be an IPv6 address in brackets: sftp://[::1]:2222//srv/borg.
//
// Thread contract: pure functions and reads of the environment; main thread only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/base/status.h"
#include "checker/remote/sftp_env.h"

namespace borgcheck::cli {

inline constexpr unsigned kMaxRemoteConnections = 16;
// Chosen from bench/RESULTS.md ("Remote"): one ssh channel carries about 2 MiB per round trip,
// so a high-latency link needs several; on a LAN the extra ones cost a connect each.
inline constexpr unsigned kDefaultRemoteConnections = 4;
inline constexpr double kDefaultRemoteTimeoutS = 60;

struct RemoteRepository {
  remote::SftpTarget target;
  std::string path;  // as in the URL: relative to the login folder, or absolute
};

// Whether `repo` names a remote repository (a URL or borg's user@host:path); local paths,
// file:// included, are not.
bool LooksRemote(std::string_view repo);

// An sftp:// URL into its parts; kInvalidArgument with a message for the user for any other
// remote form (ssh://, user@host:path: borg serve, which borgcheck does not speak yet; rest://,
// s3://, ...) and for a malformed URL.
Result<RemoteRepository> ParseRemoteRepository(std::string_view repo);

// The ssh command: --rsh when given, else BORG_RSH, else "ssh", split as a shell would
// (quotes, backslashes; no expansion). kInvalidArgument when it cannot be split or is empty.
Result<std::vector<std::string>> SshCommand(const std::string& rsh_option, bool rsh_given);

// The repository's identity for the state folder, the metrics label and the report:
// sftp://[user@]host[:port]//absolute/path (the resolved path).
std::string CanonicalRemoteUrl(const remote::SftpTarget& target, const std::string& absolute_path);

}  // namespace borgcheck::cli
