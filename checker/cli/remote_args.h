// Remote repositories on the command line: the URL forms borgcheck reads, the ssh command
// (--rsh, BORG_RSH) and the transport flags (--remote-connections, --remote-timeout). Pure
// parsing; main connects (checker/remote/sftp_env.h) before any worker starts.
//
//   sftp://[user@]host[:port]/relative/path   relative to the login folder (borgstore's form)
//   sftp://[user@]host[:port]//absolute/path  absolute on the server
//   ssh://[user@]host[:port]/absolute/path    through `borg serve` (borg 1.x's URLs: /~/rel and
//   ssh://[user@]host[:port]/~/rel, /./rel    /./rel are relative to the home and the login
//   [user@]host:path                          folder; the scp form has no port)
// The host may be an IPv6 address in brackets: sftp://[::1]:2222//srv/borg.
//
// Thread contract: pure functions and reads of the environment; main thread only.
#pragma once

#include <chrono>
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
// Without --remote-connections, the connections past the first start only when the first's
// round trip is at least this long (remote::SftpOptions::more_connections_from): at 5 ms one
// channel's 2 MiB window carries 400 MB/s, more than ssh decrypts on a core here (OpenSSH's
// sftp fetched the bench's repository at about 170-190 MB/s at 0 ms). At 0 ms on 2 cores, the
// three other handshakes made the run 0.62 s instead of 0.49 s; at 20 and 100 ms, four
// connections are the fastest (bench/RESULTS.md, "Remote (sftp), 2026-12-07: reused buffers,
// wider pipe, spare connections").
inline constexpr std::chrono::microseconds kMoreConnectionsFrom{5000};
// ssh:// (borg serve): one session. Each is a borg process on the server; more sessions were
// slower here (bench/RESULTS.md, "Remote (borg serve)": the server's and ssh's CPU, not the
// link, was the limit), and a backup server has backups to run.
inline constexpr unsigned kDefaultServeConnections = 1;
inline constexpr double kDefaultRemoteTimeoutS = 60;

enum class Transport { kSftp, kBorgServe };

struct RemoteRepository {
  Transport transport = Transport::kSftp;
  remote::SftpTarget target;  // where ssh goes (both transports)
  // sftp: relative to the login folder, or absolute. borg serve: borg's Location.path, sent to
  // the server as it is ("/abs", "/~/rel", "/./rel", "rel", "~/rel"); the server resolves it.
  std::string path;
};

// Whether `repo` names a remote repository (a URL or borg's user@host:path); local paths,
// file:// included, are not.
bool LooksRemote(std::string_view repo);

// An sftp://, ssh:// or user@host:path repository into its parts; kInvalidArgument with a
// message for the user for any other remote form (rest://, s3://, ...) and a malformed URL.
Result<RemoteRepository> ParseRemoteRepository(std::string_view repo);

// The ssh command: --rsh when given, else BORG_RSH, else "ssh", split as a shell would
// (quotes, backslashes; no expansion). kInvalidArgument when it cannot be split or is empty.
Result<std::vector<std::string>> SshCommand(const std::string& rsh_option, bool rsh_given);
// The server's borg for ssh:// repositories: --remote-path when given, else BORG_REMOTE_PATH,
// else "borg", split the same way (a path to a binary, or e.g. "sudo -u borg borg").
Result<std::vector<std::string>> RemoteBorgCommand(const std::string& option, bool given);

// The repository's identity for the state folder, the metrics label and the report:
// sftp://[user@]host[:port]//absolute/path (the resolved path).
std::string CanonicalRemoteUrl(const remote::SftpTarget& target, const std::string& absolute_path);
// ssh://[user@]host[:port]PATH for a borg serve repository, PATH as sent to the server (the
// server does not say how it resolved it): "/abs", "/~/rel", "/./rel"; a scp-form relative path
// becomes "/./rel" and "~/rel" "/~/rel", borg's own spelling of the same place.
std::string CanonicalBorgServeUrl(const remote::SftpTarget& target, const std::string& path);

}  // namespace borgcheck::cli
