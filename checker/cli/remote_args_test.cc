// The remote forms of REPO (remote_args.h): every shape of sftp:// and ssh:// URL and borg's
// user@host:path, the forms refused with advice, and the ssh and remote borg commands' sources.
#include "checker/cli/remote_args.h"

#include <cstdlib>

#include <catch2/catch.hpp>

namespace borgcheck::cli {
namespace {

RemoteRepository Parsed(std::string_view url) {
  Result<RemoteRepository> r = ParseRemoteRepository(url);
  INFO(std::string(url) + ": " + (r.ok() ? std::string() : r.status().message()));
  REQUIRE(r.ok());
  return std::move(r).value();
}

std::string Refusal(std::string_view url) {
  Result<RemoteRepository> r = ParseRemoteRepository(url);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST_CASE("what counts as remote") {
  CHECK(LooksRemote("sftp://host/repo"));
  CHECK(LooksRemote("ssh://user@host:22/srv/repo"));
  CHECK(LooksRemote("user@host:repo"));
  CHECK(LooksRemote("host:/srv/repo"));
  CHECK(LooksRemote("s3:bucket/x") );
  CHECK_FALSE(LooksRemote("/srv/repo"));
  CHECK_FALSE(LooksRemote("repo"));
  CHECK_FALSE(LooksRemote("./a:b"));
  CHECK_FALSE(LooksRemote("/srv/a:b"));
  CHECK_FALSE(LooksRemote("file:///srv/repo"));
}

TEST_CASE("sftp URLs: user, host, port, relative and absolute paths") {
  RemoteRepository a = Parsed("sftp://borg@backup.example:2222//srv/borg/main");
  CHECK(a.target.user == "borg");
  CHECK(a.target.host == "backup.example");
  CHECK(a.target.port == 2222);
  CHECK(a.path == "/srv/borg/main");

  RemoteRepository r = Parsed("sftp://u123@u123.your-storagebox.de/backups/main/");
  CHECK(r.target.user == "u123");
  CHECK(r.target.port == 0);
  CHECK(r.path == "backups/main");  // relative to the login folder; trailing '/' dropped

  RemoteRepository h = Parsed("sftp://host/repo");
  CHECK(h.target.user.empty());
  CHECK(h.target.host == "host");
  CHECK(h.path == "repo");

  RemoteRepository v6 = Parsed("sftp://root@[::1]:22022//tmp/r");
  CHECK(v6.target.host == "::1");
  CHECK(v6.target.port == 22022);
  CHECK(v6.path == "/tmp/r");
  CHECK(CanonicalRemoteUrl(v6.target, v6.path) == "sftp://root@[::1]:22022//tmp/r");
  CHECK(CanonicalRemoteUrl(a.target, a.path) == "sftp://borg@backup.example:2222//srv/borg/main");
  CHECK(CanonicalRemoteUrl(h.target, "/home/me/repo") == "sftp://host//home/me/repo");
}

TEST_CASE("malformed sftp URLs are refused with what to write") {
  CHECK_THAT(Refusal("sftp://host"), Catch::Contains("no repository path"));
  CHECK_THAT(Refusal("sftp://host/"), Catch::Contains("no repository path"));
  CHECK_THAT(Refusal("sftp://host//"), Catch::Contains("root folder"));
  CHECK_THAT(Refusal("sftp:///srv/repo"), Catch::Contains("no host"));
  CHECK_THAT(Refusal("sftp://@host/r"), Catch::Contains("empty user"));
  CHECK_THAT(Refusal("sftp://host:/r"), Catch::Contains("empty port"));
  CHECK_THAT(Refusal("sftp://host:0/r"), Catch::Contains("1 to 65535"));
  CHECK_THAT(Refusal("sftp://host:65536/r"), Catch::Contains("1 to 65535"));
  CHECK_THAT(Refusal("sftp://host:22x/r"), Catch::Contains("1 to 65535"));
  CHECK_THAT(Refusal("sftp://[::1/r"), Catch::Contains("']'"));
  // ssh would take these for options.
  CHECK_THAT(Refusal("sftp://-oProxyCommand=touch%20x/r"), Catch::Contains("cannot begin with '-'"));
  CHECK_THAT(Refusal("sftp://-x@host/r"), Catch::Contains("cannot begin with '-'"));
  CHECK_THAT(Refusal("sftp://ho st/r"), Catch::Contains("spaces or control"));
}

TEST_CASE("ssh:// and user@host:path: borg 1.x's forms, read through borg serve") {
  RemoteRepository a = Parsed("ssh://borg@backup.example:2222/srv/borg/main/");
  CHECK(a.transport == Transport::kBorgServe);
  CHECK(a.target.user == "borg");
  CHECK(a.target.host == "backup.example");
  CHECK(a.target.port == 2222);
  CHECK(a.path == "/srv/borg/main");  // borg's Location.path: the leading '/' kept
  CHECK(CanonicalBorgServeUrl(a.target, a.path) == "ssh://borg@backup.example:2222/srv/borg/main");

  RemoteRepository home = Parsed("ssh://host/~/repo");
  CHECK(home.path == "/~/repo");
  CHECK(home.target.port == 0);
  CHECK(CanonicalBorgServeUrl(home.target, home.path) == "ssh://host/~/repo");
  CHECK(Parsed("ssh://host/./repo").path == "/./repo");

  RemoteRepository scp = Parsed("u123@u123.your-storagebox.de:backups/main");
  CHECK(scp.transport == Transport::kBorgServe);
  CHECK(scp.target.user == "u123");
  CHECK(scp.target.host == "u123.your-storagebox.de");
  CHECK(scp.target.port == 0);  // the scp form has no port
  CHECK(scp.path == "backups/main");
  CHECK(CanonicalBorgServeUrl(scp.target, scp.path) == "ssh://u123@u123.your-storagebox.de/./backups/main");
  CHECK(CanonicalBorgServeUrl(scp.target, "~/r") == "ssh://u123@u123.your-storagebox.de/~/r");
  CHECK(Parsed("host:/srv/repo").path == "/srv/repo");

  RemoteRepository v6 = Parsed("ssh://root@[::1]:22022/tmp/r");
  CHECK(v6.target.host == "::1");
  CHECK(CanonicalBorgServeUrl(v6.target, v6.path) == "ssh://root@[::1]:22022/tmp/r");

  CHECK(Parsed("sftp://host/repo").transport == Transport::kSftp);
}

TEST_CASE("malformed ssh:// and scp forms are refused") {
  CHECK_THAT(Refusal("ssh://host"), Catch::Contains("no repository path"));
  CHECK_THAT(Refusal("ssh://host/"), Catch::Contains("no repository path"));
  CHECK_THAT(Refusal("ssh://-oProxyCommand=x/r"), Catch::Contains("cannot begin with '-'"));
  CHECK_THAT(Refusal("-oProxyCommand=x:r"), Catch::Contains("cannot begin with '-'"));
  CHECK_THAT(Refusal("host:"), Catch::Contains("no repository path"));
  CHECK_THAT(Refusal("[::1]:r"), Catch::Contains("IPv6"));
  CHECK_THAT(Refusal("ssh://host/r\x01x"), Catch::Contains("control characters"));
}

TEST_CASE("other stores are refused with the forms borgcheck reads") {
  CHECK_THAT(Refusal("rest://host/repo"), Catch::Contains("local paths, sftp:// and ssh:// URLs"));
  CHECK_THAT(Refusal("s3://bucket/repo"), Catch::Contains("local paths, sftp:// and ssh:// URLs"));
}

TEST_CASE("the server's borg: --remote-path, else BORG_REMOTE_PATH, else borg") {
  ::unsetenv("BORG_REMOTE_PATH");
  Result<std::vector<std::string>> plain = RemoteBorgCommand("", false);
  REQUIRE(plain.ok());
  CHECK(*plain == std::vector<std::string>{"borg"});
  ::setenv("BORG_REMOTE_PATH", "/opt/borg/bin/borg-1.2", 1);
  Result<std::vector<std::string>> env = RemoteBorgCommand("", false);
  REQUIRE(env.ok());
  CHECK(*env == std::vector<std::string>{"/opt/borg/bin/borg-1.2"});
  Result<std::vector<std::string>> opt = RemoteBorgCommand("sudo -u borg borg", true);
  REQUIRE(opt.ok());
  CHECK(*opt == std::vector<std::string>{"sudo", "-u", "borg", "borg"});
  Result<std::vector<std::string>> empty = RemoteBorgCommand("", true);
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.status().message(), Catch::Contains("--remote-path"));
  ::unsetenv("BORG_REMOTE_PATH");
}

TEST_CASE("the ssh command: --rsh, else BORG_RSH, else ssh, split as a shell would") {
  ::unsetenv("BORG_RSH");
  Result<std::vector<std::string>> plain = SshCommand("", false);
  REQUIRE(plain.ok());
  CHECK(*plain == std::vector<std::string>{"ssh"});
  ::setenv("BORG_RSH", "ssh -i '/keys/my key' -o BatchMode=yes", 1);
  Result<std::vector<std::string>> env = SshCommand("", false);
  REQUIRE(env.ok());
  CHECK(*env == std::vector<std::string>{"ssh", "-i", "/keys/my key", "-o", "BatchMode=yes"});
  Result<std::vector<std::string>> opt = SshCommand("ssh -p 2", true);  // the option wins
  REQUIRE(opt.ok());
  CHECK(*opt == std::vector<std::string>{"ssh", "-p", "2"});
  ::setenv("BORG_RSH", "ssh 'unbalanced", 1);
  Result<std::vector<std::string>> bad = SshCommand("", false);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("BORG_RSH"));
  Result<std::vector<std::string>> empty = SshCommand("  ", true);
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.status().message(), Catch::Contains("empty"));
  ::unsetenv("BORG_RSH");
}

}  // namespace
}  // namespace borgcheck::cli
