// io::Env over SFTP version 3 (draft-ietf-secsh-filexfer-02), spoken over the pipes of a spawned
// `ssh ... -s [user@]host sftp` (as sshfs does). The user's ssh (BORG_RSH, default "ssh") keeps
// ~/.ssh/config, the agent, ProxyJump and known_hosts: that is why the client is ours and not
// libssh's or libssh2's, which own the ssh connection and would lose the user's configuration.
// Debian has no library that speaks SFTP over an existing pipe.
//
// Read-only by construction: the client sends INIT, REALPATH, OPEN (SSH_FXF_READ only), READ,
// CLOSE, STAT, LSTAT, FSTAT, OPENDIR, READDIR. No request that writes exists here.
//
// Paths are the server's paths (absolute after Connect resolves the URL's path); an SftpEnv is
// the Env of one repository's server.
//
// Thread contract: an SftpEnv is safe for concurrent use from any number of threads. It owns
// its connections: each connection owns one ssh child process, the pipes to it and one I/O
// thread that reads replies and hands them to the waiting caller by request id; requests are
// written under the connection's mutex. A File owns one server handle on the connection it was
// opened on and, for a file of 8 MiB or more, from its first ReadAt of 1 MiB or more on (or
// from its open, when it was opened ahead to be read whole), one on each other connection where
// the same file opens (same size and mtime); such a ReadAt is split into one contiguous stripe
// per handle, read at once by the calling thread and short-lived threads joined before it
// returns. ReadAt may be called concurrently; the File closes every handle it owns when
// destroyed. Files opened ahead (OpenAhead) are opened by a thread of their own each, joined by
// the Open that takes the file or by the destructor. Connect spawns every ssh process (posix_spawn only) before it returns, so call it
// before any worker thread starts.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/io/env.h"

namespace borgcheck::remote {

// Where and how to connect.
struct SftpTarget {
  std::vector<std::string> rsh = {"ssh"};  // the ssh command, split (BORG_RSH, --rsh)
  std::string user;                         // "" = ssh's default
  std::string host;                         // never begins with '-' (ParseRemoteUrl refuses it)
  unsigned port = 0;                        // 0 = ssh's default
};

struct SftpOptions {
  unsigned connections = 1;  // ssh processes (each one sftp session), 1..16
  // Zero: Connect starts every connection at once and waits for them all. Else, with more than
  // one: Connect starts the first, and the others only if its first round trip (REALPATH) took
  // at least this long; they are not waited for, serve requests once they are up, and are left
  // out if they never come up (refused, exited, no VERSION within `timeout`). Near the
  // server one ssh channel carries more than ssh decrypts, and each other connection's handshake
  // only takes CPU from the run (cli/remote_args.h: kMoreConnectionsFrom, measured).
  std::chrono::microseconds more_connections_from{0};
  // A server that answers nothing for this long while requests wait is taken for lost: the
  // connection is closed and every waiting and later call fails with kIoError.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // Bytes of READ requests outstanding per connection (the ssh channel window is 2 MiB).
  uint64_t in_flight_bytes = 8ull << 20;
};

class SftpEnv final : public io::Env {
 public:
  // Spawns `options.connections` ssh processes, negotiates version 3 on each and resolves
  // `path` (relative to the login folder, or absolute) with REALPATH on the first one (with
  // more_connections_from: the first, then maybe the others, not waited for; one of those that
  // never comes up is left out, and the env goes on without it).
  // Errors (kIoError unless said): ssh cannot be run; ssh exits or closes before VERSION (the
  // message carries the last lines ssh wrote to stderr, escaped: "Permission denied
  // (publickey)", "Host key verification failed", "Connection refused", "subsystem request
  // failed"); a server that speaks another version; no VERSION within the timeout.
  static Result<std::unique_ptr<SftpEnv>> Connect(const SftpTarget& target, const std::string& path,
                                                  const SftpOptions& options);
  ~SftpEnv() override;  // closes the pipes, waits for each ssh (then SIGTERM, SIGKILL)

  // The repository's absolute path on the server (REALPATH of Connect's path; the path as
  // given when REALPATH answers NO_SUCH_FILE, so that Stat/List report kNotFound later).
  const std::string& root() const;
  // Connect's REALPATH round trip (with SftpOptions::more_connections_from, what decided
  // Connections(): 1, or all).
  std::chrono::microseconds round_trip() const;

  // io::Env. Error classes as io/env.h: NO_SUCH_FILE -> kNotFound; a non-regular file at Open
  // -> kCorruptMetadata; PERMISSION_DENIED, FAILURE, a lost connection -> kIoError.
  // Round trips: Open is STAT, OPEN, then FSTAT with (for a file of at most 256 KiB) the READs
  // of all of it, so that its small reads need none of their own (no STAT for a regular file
  // that the latest List of its folder, or a Stat of it, named); List is OPENDIR, then
  // READDIRs two at a time. Nothing is cached across calls: each Open reads the file anew,
  // except a file OpenAhead opened, which the next Open of its path takes.
  // FileStat from SFTP v3 attributes: type from the permission bits, size, mtime in whole
  // seconds (v3 has no more), inode 0 and ctime 0 (v3 has neither).
  Result<std::unique_ptr<io::File>> Open(const std::string& path) const override;
  // Starts Open(path) on a thread of its own (its round trips overlap whatever the caller does
  // next; LeastLoaded picks its connection), with the 256 KiB from `from` (kWhole: from 0) read
  // with its FSTAT and its stripes for kWhole (a file of 8 MiB or more); the next Open of the path joins it and takes the file, or opens anew when it failed
  // (or is the failure, after a lost connection). Each hint is one open (a path hinted twice is
  // taken by two Opens). At most 6 at once, the oldest finished one let go for a new one (its
  // handles closed); a hint beyond that or one after a lost connection is dropped. The
  // destructor waits for the threads, then closes their files.
  void OpenAhead(const std::string& path, io::ReadAhead how, uint64_t from) const override;
  Result<std::vector<io::DirEntry>> List(const std::string& dir) const override;
  Result<io::FileStat> Stat(const std::string& path) const override;
  Result<io::FileStat> Lstat(const std::string& path) const override;
  unsigned Connections() const override;
  // Ok while every connection is up; else why the first one was lost (kIoError). A run that
  // sees it stops reading: the rest is "could not check".
  Status Lost() const override;

  struct Impl;

 private:
  explicit SftpEnv(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace borgcheck::remote
