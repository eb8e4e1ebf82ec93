// SftpEnv against the real OpenSSH SFTP server: the "ssh command" is a script written into a
// temp folder that drops ssh's arguments (`-s HOST sftp`, appended by SftpEnv) and execs
// /usr/lib/openssh/sftp-server, which speaks SFTP on stdin/stdout. No sshd is needed (the
// tests against a real sshd are Python: tests/remote/). Other scripts stand in for an ssh
// that cannot run, exits at once, stalls, or sends garbage.
//
// Every wait is bounded by a generous timeout; no test takes more than a few seconds.
#include "checker/remote/sftp_env.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace borgcheck;
using namespace borgcheck::remote;
namespace fs = std::filesystem;

namespace {

const char* const kSftpServer = "/usr/lib/openssh/sftp-server";

// main() ignores SIGPIPE; so must the tests (a write to a closed pipe is an EPIPE, not death).
const bool kSigpipeIgnored = [] {
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

bool HaveServer() {
  if (::access(kSftpServer, X_OK) == 0) return true;
  WARN("no " << kSftpServer << ": SFTP tests skipped");
  return false;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sftp_env_test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = char(rng() & 0xff);
  return s;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(f.good());
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A script run as `/bin/sh SCRIPT -s testhost sftp`.
SftpTarget ScriptTarget(const TempDir& dir, const std::string& body) {
  const std::string script = dir.path() + "/fake-ssh";
  WriteFile(script, body);
  SftpTarget t;
  t.rsh = {"/bin/sh", script};
  t.host = "testhost";
  return t;
}

// The real server, started in `root`; the script writes its pid (the sftp-server's, after
// exec) into DIR/pid and its arguments into DIR/args.
SftpTarget ServerTarget(const TempDir& dir, const std::string& root) {
  return ScriptTarget(dir, "echo \"$@\" > '" + dir.path() + "/args'\n" + "echo $$ > '" + dir.path() +
                               "/pid'\n" + "cd '" + root + "' || exit 1\n" + "exec " + kSftpServer + "\n");
}

// The real server in `root`, logging every request (OpenSSH's -l DEBUG1: "open", "read",
// "close ... bytes read N" lines) to DIR/log; the connections of one Env append to the same file.
SftpTarget LoggingServerTarget(const TempDir& dir, const std::string& root) {
  return ScriptTarget(dir, "cd '" + root + "' || exit 1\n" + "exec " + kSftpServer + " -e -l DEBUG1 2>>'" +
                               dir.path() + "/log'\n");
}

// DIR/repo, made: the folder the server starts in.
std::string MakeRoot(const TempDir& dir) {
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  return root;
}

// n bytes from RandomBytes(n, seed), written to `path`; returns them.
std::string WriteRandom(const std::string& path, size_t n, uint32_t seed) {
  std::string bytes = RandomBytes(n, seed);
  WriteFile(path, bytes);
  return bytes;
}

// The real server in `root` (logging to DIR/log) for the first spawn only; every later one (a
// spare, SftpOptions::more_connections_from) runs `spare` instead, a shell command.
SftpTarget FirstOnlyServerTarget(const TempDir& dir, const std::string& root, const std::string& spare) {
  return ScriptTarget(dir, "if [ -e '" + dir.path() + "/first' ]; then " + spare + "\nfi\n" + "touch '" +
                               dir.path() + "/first'\n" + "cd '" + root + "' || exit 1\n" + "exec " + kSftpServer +
                               " -e -l DEBUG1 2>>'" + dir.path() + "/log'\n");
}

size_t CountOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The byte counts of the server's `close "PATH" bytes read N written 0` lines, in order.
std::vector<uint64_t> ClosedHandlesRead(const std::string& log, const std::string& path) {
  std::vector<uint64_t> out;
  const std::string needle = "close \"" + path + "\" bytes read ";
  for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) {
    out.push_back(std::stoull(log.substr(at + needle.size())));
  }
  return out;
}

std::unique_ptr<SftpEnv> MustConnect(const SftpTarget& t, const std::string& path, SftpOptions o = {}) {
  Result<std::unique_ptr<SftpEnv>> env = SftpEnv::Connect(t, path, o);
  INFO(env.status().message());
  REQUIRE(env.ok());
  return std::move(*env);
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

TEST_CASE("sftp_env: SftpEnv reads whole files and ranges exactly as the local bytes", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  std::map<std::string, std::string> files;
  uint32_t seed = 1;
  for (size_t size : {size_t(0), size_t(1), size_t(255 * 1024 - 1), size_t(255 * 1024), size_t(255 * 1024 + 1),
                      size_t(5 << 20)}) {
    const std::string name = "f" + std::to_string(size);
    files[name] = RandomBytes(size, seed++);
    WriteFile(root + "/" + name, files[name]);
  }
  auto env = MustConnect(ServerTarget(dir, root), root);
  CHECK(env->root() == fs::canonical(root).string());
  CHECK(env->Connections() == 1);
  CHECK(env->Lost().ok());

  for (const auto& [name, bytes] : files) {
    INFO(name);
    Result<std::unique_ptr<io::File>> f = env->Open(root + "/" + name);
    REQUIRE(f.ok());
    REQUIRE((*f)->size() == bytes.size());
    std::string got(bytes.size(), '\0');
    REQUIRE((*f)->ReadAt(0, got.size(), reinterpret_cast<uint8_t*>(got.data())).ok());
    CHECK(got == bytes);
    Result<std::string> whole = env->ReadWholeFile(root + "/" + name, 10 << 20);
    REQUIRE(whole.ok());
    CHECK(*whole == bytes);
  }

  const std::string& big = files["f" + std::to_string(5 << 20)];
  Result<std::unique_ptr<io::File>> f = env->Open(root + "/f" + std::to_string(5 << 20));
  REQUIRE(f.ok());
  SECTION("ranges at offsets, across READ boundaries") {
    for (auto [off, n] : std::vector<std::pair<uint64_t, size_t>>{{0, 1},
                                                                   {255 * 1024 - 3, 7},
                                                                   {100, 300 * 1024},
                                                                   {1 << 20, 2 << 20},
                                                                   {(5 << 20) - 65536, 65536},
                                                                   {(5 << 20) - 1, 1},
                                                                   {12345, 64 * 1024 - 1}}) {
      INFO(off << " " << n);
      std::string got(n, '\0');
      REQUIRE((*f)->ReadAt(off, n, reinterpret_cast<uint8_t*>(got.data())).ok());
      CHECK(got == big.substr(off, n));
    }
  }
  SECTION("a read past the end is a short read, small or large") {
    for (auto [off, n] : std::vector<std::pair<uint64_t, size_t>>{
             {(5 << 20) - 10, 20}, {(5 << 20) - 10, 1 << 20}, {(5 << 20) + 5, 3}, {(5 << 20) + 5, 100000}}) {
      INFO(off << " " << n);
      std::string got(n, '\0');
      Status s = (*f)->ReadAt(off, n, reinterpret_cast<uint8_t*>(got.data()));
      CHECK(s.code() == StatusCode::kIoError);
      CHECK(s.message() == "short read: file ended at " + std::to_string(std::max<uint64_t>(off, 5 << 20)));
    }
    std::string tail(10, '\0');
    REQUIRE((*f)->ReadAt((5 << 20) - 10, 10, reinterpret_cast<uint8_t*>(tail.data())).ok());
    CHECK(tail == big.substr((5 << 20) - 10));
  }
  SECTION("many small reads through the read-ahead block equal pread") {
    std::mt19937 rng(7);
    for (int i = 0; i < 400; ++i) {
      const size_t n = 1 + rng() % (i % 3 == 0 ? 65535 : 200);
      const uint64_t off = i % 2 == 0 ? rng() % (big.size() - n) : (uint64_t(i) * 97) % (big.size() - n);
      std::string got(n, '\0');
      REQUIRE((*f)->ReadAt(off, n, reinterpret_cast<uint8_t*>(got.data())).ok());
      REQUIRE(got == big.substr(off, n));
    }
    // A walk of headers, one small read at a time.
    uint64_t off = 0;
    while (off + 17 <= big.size() && off < (3 << 20)) {
      std::string got(17, '\0');
      REQUIRE((*f)->ReadAt(off, 17, reinterpret_cast<uint8_t*>(got.data())).ok());
      REQUIRE(got == big.substr(off, 17));
      off += 17 + (off % 5000);
    }
  }
}

TEST_CASE("sftp_env: SftpEnv lists, stats and refuses what is not a regular file", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directories(root + "/data/0");
  WriteFile(root + "/config", "[repository]\n");
  WriteFile(root + "/data/0/1", std::string(1000, 'x'));
  fs::create_symlink("config", root + "/link-to-file");
  fs::create_symlink("data", root + "/link-to-dir");
  fs::create_symlink("nowhere", root + "/dangling");
  REQUIRE(::mkfifo((root + "/fifo").c_str(), 0600) == 0);
  auto env = MustConnect(ServerTarget(dir, root), root);

  SECTION("List") {
    Result<std::vector<io::DirEntry>> l = env->List(root);
    REQUIRE(l.ok());
    std::map<std::string, io::EntryType> got;
    for (const io::DirEntry& e : *l) got[e.name] = e.type;
    CHECK(got == std::map<std::string, io::EntryType>{{"config", io::EntryType::kRegular},
                                                      {"data", io::EntryType::kDirectory},
                                                      {"link-to-file", io::EntryType::kRegular},
                                                      {"link-to-dir", io::EntryType::kDirectory},
                                                      {"dangling", io::EntryType::kOther},
                                                      {"fifo", io::EntryType::kOther}});
    Result<std::vector<io::DirEntry>> sub = env->List(root + "/data/0/");
    REQUIRE(sub.ok());
    REQUIRE(sub->size() == 1);
    CHECK((*sub)[0].name == "1");
  }
  SECTION("a big folder takes several READDIRs") {
    for (int i = 0; i < 700; ++i) WriteFile(root + "/data/0/n" + std::to_string(i), "");
    Result<std::vector<io::DirEntry>> l = env->List(root + "/data/0");
    REQUIRE(l.ok());
    std::set<std::string> names;
    for (const io::DirEntry& e : *l) names.insert(e.name);
    CHECK(names.size() == 701);
  }
  SECTION("Stat and Lstat") {
    Result<io::FileStat> s = env->Stat(root + "/data/0/1");
    REQUIRE(s.ok());
    CHECK(s->type == io::EntryType::kRegular);
    CHECK(s->size == 1000);
    CHECK(std::string(s->type_name) == "regular file");
    struct stat st;
    REQUIRE(::stat((root + "/data/0/1").c_str(), &st) == 0);
    CHECK(s->mtime_ns == int64_t(st.st_mtim.tv_sec) * 1000000000);
    CHECK(s->inode == 0);
    CHECK(env->Stat(root + "/data")->type == io::EntryType::kDirectory);
    CHECK(env->Stat(root + "/link-to-file")->type == io::EntryType::kRegular);
    Result<io::FileStat> l = env->Lstat(root + "/link-to-file");
    REQUIRE(l.ok());
    CHECK(l->type == io::EntryType::kOther);
    CHECK(std::string(l->type_name) == "symlink");
    CHECK(std::string(env->Stat(root + "/fifo")->type_name) == "FIFO");
  }
  SECTION("missing paths are kNotFound, messages begin with the path") {
    const std::string p = root + "/missing";
    Result<io::FileStat> s = env->Stat(p);
    CHECK(s.status().code() == StatusCode::kNotFound);
    CHECK(StartsWith(s.status().message(), p + ": "));
    CHECK(io::ErrorReason(s.status(), p) == "No such file");
    CHECK(env->Lstat(p).status().code() == StatusCode::kNotFound);
    CHECK(env->Open(p).status().code() == StatusCode::kNotFound);
    CHECK(env->List(p).status().code() == StatusCode::kNotFound);
    CHECK(env->Open(root + "/dangling").status().code() == StatusCode::kNotFound);
  }
  SECTION("Open of a directory or a FIFO, List of a file: kCorruptMetadata, without blocking") {
    Result<std::unique_ptr<io::File>> d = env->Open(root + "/data");
    CHECK(d.status().code() == StatusCode::kCorruptMetadata);
    CHECK(d.status().message() == root + "/data: is a directory, not a regular file");
    Result<std::unique_ptr<io::File>> p = env->Open(root + "/fifo");
    CHECK(p.status().code() == StatusCode::kCorruptMetadata);
    CHECK(p.status().message() == root + "/fifo: is a FIFO, not a regular file");
    Result<std::vector<io::DirEntry>> l = env->List(root + "/config");
    CHECK(l.status().code() == StatusCode::kCorruptMetadata);
    CHECK(l.status().message() == root + "/config: not a directory");
    CHECK(env->Stat(root + "/config").ok());  // the connection is still fine
  }
  SECTION("permission denied is kIoError with the server's message") {
    if (::geteuid() == 0) return;  // root reads everything
    REQUIRE(::chmod((root + "/config").c_str(), 0) == 0);
    Result<std::unique_ptr<io::File>> f = env->Open(root + "/config");
    CHECK(f.status().code() == StatusCode::kIoError);
    CHECK(f.status().message() == root + "/config: Permission denied");
  }
}

TEST_CASE("sftp_env: SftpEnv resolves a path relative to the login folder with REALPATH", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  fs::create_directories(dir.path() + "/home/repo");
  WriteFile(dir.path() + "/home/repo/config", "x");
  const SftpTarget t = ServerTarget(dir, dir.path() + "/home");
  {
    auto env = MustConnect(t, "repo");
    CHECK(env->root() == fs::canonical(dir.path() + "/home/repo").string());
    CHECK(env->Stat(env->root() + "/config")->size == 1);
  }
  {
    auto env = MustConnect(t, "");
    CHECK(env->root() == fs::canonical(dir.path() + "/home").string());
  }
  {
    auto env = MustConnect(t, "no/such/repo");  // kept as given; Stat says kNotFound later
    CHECK(env->root() == "no/such/repo");
    CHECK(env->Stat(env->root()).status().code() == StatusCode::kNotFound);
  }
}

TEST_CASE("sftp_env: SftpEnv builds ssh's arguments without a shell and spawns with SIGINT ignored", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path();
  SftpTarget t = ScriptTarget(dir, "echo \"$@\" > '" + root + "/args'\n" + "grep SigIgn /proc/$$/status > '" + root +
                                       "/sigign'\n" + "exec " + kSftpServer + "\n");
  t.rsh.push_back("-o");
  t.rsh.push_back("BatchMode=yes $(touch " + root + "/pwned)");
  t.user = "u";
  t.port = 2222;
  struct sigaction before = {};
  ::sigaction(SIGINT, nullptr, &before);
  {
    auto env = MustConnect(t, root);
  }
  struct sigaction after = {};
  ::sigaction(SIGINT, nullptr, &after);
  CHECK(after.sa_handler == before.sa_handler);  // restored
  CHECK(ReadFile(root + "/args") == "-o BatchMode=yes $(touch " + root + "/pwned) -p 2222 -s u@testhost sftp\n");
  CHECK(!fs::exists(root + "/pwned"));

  // A user or host that ssh would take for an option is refused before anything runs.
  t.user = "-oProxyCommand=touch " + root + "/pwned";
  CHECK(SftpEnv::Connect(t, root, {}).status().code() == StatusCode::kInvalidArgument);
  t.user = "u";
  t.host = "-oProxyCommand=x";
  CHECK(SftpEnv::Connect(t, root, {}).status().code() == StatusCode::kInvalidArgument);
  CHECK(!fs::exists(root + "/pwned"));
  const std::string sigign = ReadFile(root + "/sigign");  // "SigIgn:\t<hex mask>"
  REQUIRE(sigign.size() > 8);
  const unsigned long long mask = std::stoull(sigign.substr(sigign.find('\t') + 1), nullptr, 16);
  CHECK((mask & (1ull << (SIGINT - 1))) != 0);   // Ctrl-C does not kill ssh
  CHECK((mask & (1ull << (SIGPIPE - 1))) == 0);  // main's SIG_IGN is not inherited
}

TEST_CASE("sftp_env: SftpEnv serves 8 threads on 2 connections", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  std::vector<std::string> contents;
  for (int i = 0; i < 4; ++i) {
    contents.push_back(RandomBytes((1 << 20) + size_t(i) * 77777, uint32_t(100 + i)));
    WriteFile(root + "/f" + std::to_string(i), contents.back());
  }
  SftpOptions o;
  o.connections = 2;
  o.in_flight_bytes = 600 * 1024;  // callers wait for room
  auto env = MustConnect(ServerTarget(dir, root), root, o);
  CHECK(env->Connections() == 2);
  Result<std::unique_ptr<io::File>> shared = env->Open(root + "/f0");
  REQUIRE(shared.ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng{uint32_t(t)};
      for (int round = 0; round < 6; ++round) {
        const int which = (t + round) % 4;
        const std::string& want = contents[size_t(which)];
        Result<std::unique_ptr<io::File>> own = env->Open(root + "/f" + std::to_string(which));
        if (!own.ok()) {
          ++failures;
          return;
        }
        const io::File& f = round % 2 == 0 ? **own : **shared;
        const std::string& bytes = round % 2 == 0 ? want : contents[0];
        for (int i = 0; i < 20; ++i) {
          const size_t n = 1 + rng() % (i % 2 == 0 ? 1000 : 700000);
          const uint64_t off = rng() % (bytes.size() - n);
          std::string got(n, '\0');
          if (!f.ReadAt(off, n, reinterpret_cast<uint8_t*>(got.data())).ok() || got != bytes.substr(off, n)) ++failures;
        }
        if (!env->Stat(root + "/f1").ok() || !env->List(root).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
  CHECK(env->Lost().ok());
}

TEST_CASE("sftp_env: SftpEnv says which command could not be run", "[sftp]") {
  TempDir dir;
  SftpTarget t;
  t.host = "testhost";
  t.rsh = {dir.path() + "/no-such-ssh"};
  Result<std::unique_ptr<SftpEnv>> env = SftpEnv::Connect(t, "repo", {});
  CHECK(env.status().code() == StatusCode::kIoError);
  CHECK(env.status().message() == "could not run \"" + dir.path() + "/no-such-ssh\": No such file or directory");

  // A wrapper whose command is missing: the shell exits 127.
  t.rsh = {"/bin/sh", "-c", "exec " + dir.path() + "/missing-too", "sh"};
  env = SftpEnv::Connect(t, "repo", {});
  CHECK(env.status().code() == StatusCode::kIoError);
  INFO(env.status().message());
  CHECK(StartsWith(env.status().message(), "could not run \"/bin/sh\": exit status 127: "));
  CHECK(env.status().message().find("missing-too") != std::string::npos);
}

TEST_CASE("sftp_env: SftpEnv quotes ssh's stderr when it exits before VERSION", "[sftp]") {
  TempDir dir;
  SftpTarget t = ScriptTarget(dir, "echo 'debug1: noise' >&2\n"
                                   "printf 'ssh: connect to host testhost port 22: Connection refused\\r\\n\\033[31m' >&2\n"
                                   "exit 3\n");
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<SftpEnv>> env = SftpEnv::Connect(t, "repo", {});
  CHECK(SecondsSince(t0) < 10);  // at once, not the 60 s timeout (loose: sanitizers on 2 busy cores)
  CHECK(env.status().code() == StatusCode::kIoError);
  CHECK(env.status().message() ==
        "connection to testhost failed: ssh exited with status 3: debug1: noise\\n"
        "ssh: connect to host testhost port 22: Connection refused\\r\\n\\x1b[31m");
}

TEST_CASE("sftp_env: SftpEnv gives up on a server that never answers VERSION", "[sftp]") {
  TempDir dir;
  SftpTarget t = ScriptTarget(dir, "exec sleep 600\n");
  SftpOptions o;
  o.timeout = std::chrono::seconds(1);
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<SftpEnv>> env = SftpEnv::Connect(t, "repo", o);
  CHECK(SecondsSince(t0) < 10);
  CHECK(env.status().code() == StatusCode::kIoError);
  CHECK(env.status().message() == "connection to testhost failed: no answer for 1 s");
}

TEST_CASE("sftp_env: SftpEnv refuses garbage and other versions without crashing", "[sftp]") {
  TempDir dir;
  const std::string version3 = "printf '\\000\\000\\000\\005\\002\\000\\000\\000\\003'\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"printf 'this is not sftp at all'\nexec sleep 600\n", "protocol error: a reply of"},
      {"printf '\\000\\000\\000\\001\\145'\nexec sleep 600\n", "protocol error: the first reply is not VERSION"},
      {"printf '\\000\\000\\000\\005\\002\\000\\000\\000\\004'\nexec sleep 600\n",
       "the server speaks SFTP version 4, not 3"},
      {"printf 'garbage'\n", "failed: "},  // then EOF
      // VERSION 3, then a DATA that claims more bytes than it has: REALPATH fails.
      {version3 + "printf '\\000\\000\\000\\015\\147\\000\\000\\000\\001\\000\\001\\000\\000abcd'\nexec sleep 600\n",
       "protocol error: malformed DATA reply"},
      // VERSION 3, then a NAME whose count lies.
      {version3 + "printf '\\000\\000\\000\\015\\150\\000\\000\\000\\001\\377\\377\\377\\377\\000\\000\\000\\000'\n"
                  "exec sleep 600\n",
       "protocol error: malformed NAME reply"},
      // VERSION 3, then a packet longer than 1 MiB + 1 KiB.
      {version3 + "printf '\\000\\020\\004\\001\\150'\nexec sleep 600\n", "protocol error: a reply of 1049601 bytes"},
  };
  for (const auto& [script, part] : cases) {
    INFO(script);
    SftpTarget t = ScriptTarget(dir, script);
    const auto t0 = std::chrono::steady_clock::now();
    Result<std::unique_ptr<SftpEnv>> env = SftpEnv::Connect(t, "repo", {});
    CHECK(SecondsSince(t0) < 10);
    REQUIRE(!env.ok());
    CHECK(env.status().code() == StatusCode::kIoError);
    INFO(env.status().message());
    CHECK(env.status().message().find(part) != std::string::npos);
  }
}

namespace {

// A fake SFTP server in python3 for what the real one never does. Every path is a folder except
// ".../f", a file of 600,000 bytes (byte i is (i * 7 + i // 251) % 256). argv[1]:
// "opendir-nosuch" answers OPENDIR with NO_SUCH_FILE for a folder STAT finds; "empty-names"
// answers every READDIR with a NAME of no entries; "short-reads" answers a READ with at most
// 1,000 bytes (the draft allows fewer than asked); "early-eof" answers a READ from 300,000 on
// with EOF, though STAT and FSTAT say 600,000.
constexpr const char* kFakeSftpServer = R"PY(
import struct, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
mode = sys.argv[1]
def rd(n):
    b = inp.read(n)
    if len(b) < n: sys.exit(0)
    return b
def send(t, body):
    out.write(struct.pack('>IB', len(body) + 1, t) + body); out.flush()
def s(b): return struct.pack('>I', len(b)) + b
DIR_ATTRS = struct.pack('>II', 4, 0o40755)
SIZE = 600000
FILE_ATTRS = struct.pack('>IQI', 5, SIZE, 0o100644)
DATA = bytes((i * 7 + i // 251) % 256 for i in range(SIZE))
while True:
    n, t = struct.unpack('>IB', rd(5))
    body = rd(n - 1)
    if t == 1: send(2, struct.pack('>I', 3)); continue
    i = struct.unpack('>I', body[:4])[0]
    arg = body[8:8 + struct.unpack('>I', body[4:8])[0]] if len(body) >= 8 else b''
    if t == 16: send(104, struct.pack('>II', i, 1) + s(arg) + s(arg) + DIR_ATTRS)
    elif t in (17, 7): send(105, struct.pack('>I', i) + (FILE_ATTRS if arg.endswith(b'/f') else DIR_ATTRS))
    elif t == 3: send(102, struct.pack('>I', i) + s(b'f'))
    elif t == 8: send(105, struct.pack('>I', i) + FILE_ATTRS)
    elif t == 5:
        off, want = struct.unpack('>QI', body[9:21])
        end = min(SIZE, off + want, off + 1000 if mode == 'short-reads' else SIZE)
        if off >= SIZE or (mode == 'early-eof' and off >= SIZE // 2):
            send(101, struct.pack('>II', i, 1) + s(b'') + s(b''))
        else:
            end = min(end, SIZE // 2) if mode == 'early-eof' else end
            send(103, struct.pack('>I', i) + s(DATA[off:end]))
    elif t == 11 and mode == 'opendir-nosuch': send(101, struct.pack('>II', i, 2) + s(b'') + s(b''))
    elif t == 11: send(102, struct.pack('>I', i) + s(b'h'))
    elif t == 12: send(104, struct.pack('>II', i, 0))
    else: send(101, struct.pack('>II', i, 0) + s(b'') + s(b''))
)PY";

// An env connected to kFakeSftpServer in `mode`, at /repo.
std::unique_ptr<SftpEnv> FakeServerEnv(const TempDir& dir, const std::string& mode) {
  WriteFile(dir.path() + "/fake_sftp.py", kFakeSftpServer);
  return MustConnect(ScriptTarget(dir, "exec python3 '" + dir.path() + "/fake_sftp.py' " + mode + "\n"), "/repo", {});
}

}  // namespace

TEST_CASE("sftp_env: a folder that cannot be listed is an error, not an empty folder, and empty READDIRs end",
          "[sftp]") {
  if (!fs::exists("/usr/bin/python3")) return;
  TempDir dir;
  SECTION("OPENDIR says no such file, STAT finds a folder") {
    auto env = FakeServerEnv(dir, "opendir-nosuch");
    Result<std::vector<io::DirEntry>> l = env->List("/repo/packs");
    CHECK(l.status().code() == StatusCode::kIoError);
    CHECK(l.status().message() == "/repo/packs: the server cannot list this folder (No such file)");
  }
  SECTION("READDIR answered with no entries, again and again") {
    auto env = FakeServerEnv(dir, "empty-names");
    Result<std::vector<io::DirEntry>> l = env->List("/repo/packs");
    CHECK(l.status().code() == StatusCode::kIoError);
    CHECK(l.status().message() == "/repo/packs: the server answered READDIR 1001 times in a row with no entries");
    CHECK(env->Lost().ok());  // the session goes on
  }
}

TEST_CASE("sftp_env: short DATA replies are asked for again, an EOF before the size is a read error", "[sftp]") {
  if (!fs::exists("/usr/bin/python3")) return;
  TempDir dir;
  std::string expected(600000, '\0');
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = char((i * 7 + i / 251) % 256);
  const std::pair<uint64_t, size_t> ranges[] = {{0, 600000}, {0, 1000}, {123457, 300001}, {599999, 1}};
  SECTION("at most 1,000 bytes a reply") {
    auto env = FakeServerEnv(dir, "short-reads");
    Result<std::unique_ptr<io::File>> f = env->Open("/repo/f");
    REQUIRE(f.ok());
    CHECK((*f)->size() == 600000);
    for (const auto& [offset, n] : ranges) {
      INFO(offset << " + " << n);
      std::string got(n, '\0');
      REQUIRE((*f)->ReadAt(offset, n, reinterpret_cast<uint8_t*>(got.data())).ok());
      CHECK(got == expected.substr(offset, n));
    }
  }
  SECTION("EOF at 300,000 of 600,000") {
    auto env = FakeServerEnv(dir, "early-eof");
    Result<std::unique_ptr<io::File>> f = env->Open("/repo/f");
    REQUIRE(f.ok());
    for (const auto& [offset, n] : ranges) {
      INFO(offset << " + " << n);
      std::string got(n, '\0');
      const Status st = (*f)->ReadAt(offset, n, reinterpret_cast<uint8_t*>(got.data()));
      if (offset + n <= 300000) {
        CHECK(st.ok());
        CHECK(got == expected.substr(offset, n));
      } else {
        CHECK(st.code() == StatusCode::kIoError);  // never the bytes it has, never zeros
      }
    }
  }
}

TEST_CASE("sftp_env: SftpEnv fails every call, without blocking, once the server dies mid-read", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  const std::string bytes = RandomBytes(8 << 20, 42);
  WriteFile(root + "/big", bytes);
  SftpOptions o;
  o.timeout = std::chrono::seconds(20);  // the loss must come from the EOF, not the timeout
  auto env = MustConnect(ServerTarget(dir, root), root, o);
  Result<std::unique_ptr<io::File>> f = env->Open(root + "/big");
  REQUIRE(f.ok());
  const pid_t server = pid_t(std::stol(ReadFile(dir.path() + "/pid")));

  std::atomic<bool> first_read_done{false};
  Status reader_status;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread reader([&] {
    std::string got(bytes.size(), '\0');
    for (int i = 0; i < 10000; ++i) {
      Status s = (*f)->ReadAt(0, got.size(), reinterpret_cast<uint8_t*>(got.data()));
      first_read_done.store(true);
      if (!s.ok()) {
        reader_status = s;
        return;
      }
    }
  });
  while (!first_read_done.load() && SecondsSince(t0) < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto killed = std::chrono::steady_clock::now();  // not t0: the first 8 MiB read is not timed
  REQUIRE(::kill(server, SIGKILL) == 0);
  reader.join();
  CHECK(SecondsSince(killed) < 10);  // the EOF, not the 20 s timeout
  CHECK(reader_status.code() == StatusCode::kIoError);
  CHECK(StartsWith(reader_status.message(), "connection to testhost lost: ssh closed the connection"));
  CHECK(env->Lost().code() == StatusCode::kIoError);
  CHECK(env->Lost().message() == reader_status.message());
  // Every later call fails at once.
  Result<io::FileStat> s = env->Stat(root + "/big");
  CHECK(s.status().code() == StatusCode::kIoError);
  CHECK(s.status().message() == root + "/big: " + env->Lost().message());
  std::string small(10, '\0');
  CHECK(!(*f)->ReadAt(8 << 20, 10, reinterpret_cast<uint8_t*>(small.data())).ok());
  CHECK(env->Open(root + "/big").status().code() == StatusCode::kIoError);
  CHECK(env->List(root).status().code() == StatusCode::kIoError);
  f->reset();  // CLOSE on a lost connection: nothing blocks
}

TEST_CASE("sftp_env: SftpEnv times out a server that stops answering mid-session", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  WriteFile(root + "/f", "hello");
  SftpOptions o;
  o.timeout = std::chrono::seconds(3);  // also the connection's wait for VERSION: room for a busy machine
  auto env = MustConnect(ServerTarget(dir, root), root, o);
  const pid_t server = pid_t(std::stol(ReadFile(dir.path() + "/pid")));
  REQUIRE(::kill(server, SIGSTOP) == 0);  // alive, silent
  const auto t0 = std::chrono::steady_clock::now();
  Result<io::FileStat> s = env->Stat(root + "/f");
  CHECK(SecondsSince(t0) >= 2.9);
  CHECK(SecondsSince(t0) < 15);
  CHECK(s.status().code() == StatusCode::kIoError);
  CHECK(s.status().message() == root + "/f: connection to testhost lost: no answer for 3 s");
  CHECK(env->Lost().message() == "connection to testhost lost: no answer for 3 s");
  ::kill(server, SIGCONT);  // SIGTERM (sent on the loss) is delivered now
}

TEST_CASE("sftp_env: a large ReadAt is striped over every connection and equals the local bytes", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  const size_t size = (9 << 20) + 12345;
  const std::string bytes = RandomBytes(size, 11);
  WriteFile(root + "/seg", bytes);
  const std::string path = root + "/seg";
  SftpOptions o;
  o.connections = 4;
  auto env = MustConnect(LoggingServerTarget(dir, root), root, o);
  {
    Result<std::unique_ptr<io::File>> f = env->Open(path);
    REQUIRE(f.ok());
    REQUIRE((*f)->size() == size);
    std::string got(size, '\0');
    REQUIRE((*f)->ReadAt(0, size, reinterpret_cast<uint8_t*>(got.data())).ok());
    CHECK(got == bytes);
    for (auto [off, n] : std::vector<std::pair<uint64_t, size_t>>{{777, 1 << 20},
                                                                  {(3 << 20) + 5, 4 << 20},
                                                                  {1, (1 << 20) + 3},
                                                                  {size - (3 << 20), 3 << 20},
                                                                  {size - (1 << 20) - 1, 1 << 20}}) {
      INFO(off << " " << n);
      std::string part(n, '\0');
      REQUIRE((*f)->ReadAt(off, n, reinterpret_cast<uint8_t*>(part.data())).ok());
      CHECK(part == bytes.substr(off, n));
    }
    // Across the end: the message of a single handle (where the file ended), whichever stripe
    // saw it; wholly past the end: the offset asked for.
    for (auto [off, n] : std::vector<std::pair<uint64_t, size_t>>{
             {size - 100, 2 << 20}, {size - (2 << 20), 4 << 20}, {0, size + 1}, {size + 5, 1 << 20}, {size, 1 << 20}}) {
      INFO(off << " " << n);
      std::string part(n, '\0');
      Status s = (*f)->ReadAt(off, n, reinterpret_cast<uint8_t*>(part.data()));
      CHECK(s.code() == StatusCode::kIoError);
      CHECK(s.message() == "short read: file ended at " + std::to_string(std::max<uint64_t>(off, size)));
    }
  }
  // The File closed its 4 handles: a STAT on each connection (round robin) comes after its CLOSE.
  for (int i = 0; i < 4; ++i) REQUIRE(env->Stat(path).ok());
  const std::string log = ReadFile(dir.path() + "/log");
  CHECK(CountOf(log, "open \"" + path + "\" flags READ") == 4);
  const std::vector<uint64_t> read = ClosedHandlesRead(log, path);
  REQUIRE(read.size() == 4);
  for (uint64_t r : read) CHECK(r > (4 << 20));  // every handle read its share
  CHECK(env->Lost().ok());
}

TEST_CASE("sftp_env: OpenAhead opens a file once, and the next Open of the path takes it", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  std::map<std::string, std::string> files;
  uint32_t seed = 30;
  for (size_t size : {size_t(100), size_t(300 * 1024), size_t(2 << 20), size_t(9 << 20)}) {
    const std::string path = root + "/f" + std::to_string(size);
    files[path] = RandomBytes(size, seed++);
    WriteFile(path, files[path]);
  }
  const std::string parts = root + "/parts";
  const std::string parts_bytes = RandomBytes(9 << 20, 35);
  WriteFile(parts, parts_bytes);
  SftpOptions o;
  o.connections = 2;
  {
    auto env = MustConnect(LoggingServerTarget(dir, root), root, o);
    for (const auto& [path, bytes] : files) {
      env->OpenAhead(path, io::ReadAhead::kWhole, 0);
    }
    for (const auto& [path, bytes] : files) {
      INFO(path);
      Result<std::string> whole = env->ReadWholeFile(path, 10 << 20);
      REQUIRE(whole.ok());
      CHECK(*whole == bytes);
    }
    // Hinted twice, opened twice: each Open takes one.
    const std::string& twice = files.begin()->first;
    env->OpenAhead(twice, io::ReadAhead::kParts, 0);
    env->OpenAhead(twice, io::ReadAhead::kParts, 0);
    for (int i = 0; i < 2; ++i) {
      Result<std::string> again = env->ReadWholeFile(twice, 1 << 20);
      REQUIRE(again.ok());
      CHECK(*again == files.begin()->second);
    }
    // Read in parts (an object of the archive pass): one handle, however large the file, and the
    // 256 KiB from the first part's offset came with the open: that part reads nothing more.
    env->OpenAhead(parts, io::ReadAhead::kParts, 5 << 20);
    Result<std::unique_ptr<io::File>> f = env->Open(parts);
    REQUIRE(f.ok());
    std::string got(100, '\0');
    REQUIRE((*f)->ReadAt(5 << 20, got.size(), reinterpret_cast<uint8_t*>(got.data())).ok());
    CHECK(got == parts_bytes.substr(5 << 20, 100));
  }
  // The Env is gone: every ssh ended, so the log is whole.
  const std::string log = ReadFile(dir.path() + "/log");
  for (const auto& [path, bytes] : files) {
    INFO(path);
    // Under 8 MiB one handle; the 9 MiB file's stripe was opened ahead with it (one each).
    const size_t handles = (bytes.size() < (8 << 20) ? 1 : 2) + (path == files.begin()->first ? 2 : 0);
    CHECK(CountOf(log, "open \"" + path + "\" flags READ") == handles);
    const std::vector<uint64_t> read = ClosedHandlesRead(log, path);
    REQUIRE(read.size() == handles);
    uint64_t total = 0;
    for (uint64_t r : read) total += r;
    // Opened ahead to be read whole: its first 256 KiB came with its FSTAT; a read of 1 MiB or
    // more (a stream's window) reads from the server anyway.
    const size_t block = 256 * 1024;
    const uint64_t once = bytes.size() <= block || bytes.size() < (1 << 20) ? bytes.size() : bytes.size() + block;
    CHECK(total == (path == files.begin()->first ? 3 : 1) * once);  // the first file: read thrice
  }
  CHECK(CountOf(log, "open \"" + parts + "\" flags READ") == 1);
  CHECK(ClosedHandlesRead(log, parts) == std::vector<uint64_t>{256 * 1024});
}

TEST_CASE("sftp_env: a failed OpenAhead is not the answer, many hints, unused ones are closed", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  {
    auto env = MustConnect(LoggingServerTarget(dir, root), root);
    // Missing at the hint, missing at the Open: what the Open finds.
    env->OpenAhead(root + "/none", io::ReadAhead::kParts, 0);
    CHECK(env->Open(root + "/none").status().code() == StatusCode::kNotFound);
    // Made after the hint's STAT reached the server (its log says so; whole, by a rename): the
    // hint failed, the Open finds it.
    const std::string late = root + "/late";
    env->OpenAhead(late, io::ReadAhead::kParts, 0);
    for (int i = 0; i < 1000 && CountOf(ReadFile(dir.path() + "/log"), "stat name \"" + late + "\"") == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(CountOf(ReadFile(dir.path() + "/log"), "stat name \"" + late + "\"") == 1);
    WriteFile(root + "/late.tmp", "made after the hint");
    REQUIRE(::rename((root + "/late.tmp").c_str(), late.c_str()) == 0);
    Result<std::string> got = env->ReadWholeFile(late, 100);
    REQUIRE(got.ok());
    CHECK(*got == "made after the hint");
    // Ten hints (beyond the six pending at most: which are dropped or let go depends on when
    // each open ends): every Open still reads its own file, and no handle is left open.
    std::vector<std::string> paths;
    for (int i = 0; i < 10; ++i) {
      paths.push_back(root + "/h" + std::to_string(i));
      WriteFile(paths.back(), "file " + std::to_string(i));
    }
    for (const std::string& p : paths) env->OpenAhead(p, io::ReadAhead::kParts, 0);
    for (int i = 0; i < 10; ++i) {
      Result<std::string> h = env->ReadWholeFile(paths[size_t(i)], 100);
      REQUIRE(h.ok());
      CHECK(*h == "file " + std::to_string(i));
    }
    // Hints nobody takes: closed when the Env goes.
    env->OpenAhead(paths[0], io::ReadAhead::kParts, 0);
    env->OpenAhead(paths[1], io::ReadAhead::kParts, 0);
  }
  const std::string log = ReadFile(dir.path() + "/log");
  CHECK(CountOf(log, "flags READ") == CountOf(log, "close \"" + root + "/"));  // every handle closed
  CHECK(CountOf(log, "open \"" + root + "/h0\" flags READ") >= 2);  // read, then hinted again
  for (int i = 0; i < 10; ++i) {
    const std::string p = root + "/h" + std::to_string(i);
    INFO(p);
    CHECK(CountOf(log, "open \"" + p + "\" flags READ") >= 1);
    CHECK(CountOf(log, "open \"" + p + "\" flags READ") <= 3);
  }
}

TEST_CASE("sftp_env: a read that begins in the read-ahead block takes what it holds from it", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  const std::string bytes = RandomBytes(1 << 20, 14);
  const std::string path = root + "/seg";
  WriteFile(path, bytes);
  {
    auto env = MustConnect(LoggingServerTarget(dir, root), root);
    Result<std::unique_ptr<io::File>> f = env->Open(path);
    REQUIRE(f.ok());
    auto read = [&](uint64_t off, size_t n) {
      std::string got(n, '\0');
      REQUIRE((*f)->ReadAt(off, n, reinterpret_cast<uint8_t*>(got.data())).ok());
      CHECK(got == bytes.substr(off, n));
    };
    read(1000, 41);              // a header: the block is [1000, 1000 + 256 KiB)
    read(2000, 200 * 1024);      // an object inside it: no read of its own
    read(100000, 300 * 1024);    // one beyond it: the rest only
    read(1000 + 256 * 1024, 5);  // just past the block: refilled there
  }
  const std::vector<uint64_t> read = ClosedHandlesRead(ReadFile(dir.path() + "/log"), path);
  REQUIRE(read.size() == 1);
  CHECK(read[0] == 256 * 1024 + (100000 + 300 * 1024 - (1000 + 256 * 1024)) + 256 * 1024);
}

TEST_CASE("sftp_env: a file under 8 MiB is read on one handle, however large the read", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  const size_t size = (8 << 20) - 1;
  const std::string bytes = RandomBytes(size, 13);
  const std::string path = root + "/index.7";
  WriteFile(path, bytes);
  SftpOptions o;
  o.connections = 4;
  auto env = MustConnect(LoggingServerTarget(dir, root), root, o);
  {
    Result<std::unique_ptr<io::File>> f = env->Open(path);
    REQUIRE(f.ok());
    std::string got(size, '\0');
    REQUIRE((*f)->ReadAt(0, size, reinterpret_cast<uint8_t*>(got.data())).ok());
    CHECK(got == bytes);
  }
  for (int i = 0; i < 4; ++i) REQUIRE(env->Stat(path).ok());
  const std::string log = ReadFile(dir.path() + "/log");
  CHECK(CountOf(log, "open \"" + path + "\" flags READ") == 1);
  const std::vector<uint64_t> read = ClosedHandlesRead(log, path);
  REQUIRE(read.size() == 1);
  CHECK(read[0] == size);
}

TEST_CASE("sftp_env: concurrent large ReadAts open the stripes once and read exactly", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  const std::string bytes = RandomBytes(12 << 20, 12);
  const std::string path = root + "/seg";
  WriteFile(path, bytes);
  SftpOptions o;
  o.connections = 3;
  o.in_flight_bytes = 700 * 1024;  // stripes wait for room beside each other
  auto env = MustConnect(LoggingServerTarget(dir, root), root, o);
  {
    Result<std::unique_ptr<io::File>> f = env->Open(path);
    REQUIRE(f.ok());
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng{uint32_t(t)};
        for (int i = 0; i < 4; ++i) {
          const size_t n = (1 << 20) + rng() % (3 << 20);
          const uint64_t off = rng() % (bytes.size() - n);
          std::string got(n, '\0');
          if (!(*f)->ReadAt(off, n, reinterpret_cast<uint8_t*>(got.data())).ok() || got != bytes.substr(off, n)) {
            ++failures;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(failures.load() == 0);
  }
  for (int i = 0; i < 3; ++i) REQUIRE(env->Stat(path).ok());
  const std::string log = ReadFile(dir.path() + "/log");
  CHECK(CountOf(log, "open \"" + path + "\" flags READ") == 3);
  CHECK(ClosedHandlesRead(log, path).size() == 3);
  CHECK(env->Lost().ok());
}

TEST_CASE("sftp_env: a file replaced or removed after Open is read from its first handle only", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  const std::string path = root + "/seg";
  const std::string old_bytes = RandomBytes(9 << 20, 21);  // 8 MiB or more: striped
  WriteFile(path, old_bytes);
  SftpOptions o;
  o.connections = 4;
  auto env = MustConnect(LoggingServerTarget(dir, root), root, o);
  Result<std::unique_ptr<io::File>> f = env->Open(path);
  REQUIRE(f.ok());
  SECTION("replaced by a file of another size") {
    WriteFile(root + "/new", RandomBytes((9 << 20) + 1, 22));
    REQUIRE(::rename((root + "/new").c_str(), path.c_str()) == 0);
  }
  SECTION("replaced by a file of the same size and another mtime") {
    WriteFile(root + "/new", RandomBytes(9 << 20, 23));
    struct stat st;
    REQUIRE(::stat(path.c_str(), &st) == 0);
    const struct timespec times[2] = {st.st_atim, {st.st_mtim.tv_sec - 100, 0}};
    REQUIRE(::utimensat(AT_FDCWD, (root + "/new").c_str(), times, 0) == 0);
    REQUIRE(::rename((root + "/new").c_str(), path.c_str()) == 0);
  }
  SECTION("removed (the other OPENs fail)") { REQUIRE(::unlink(path.c_str()) == 0); }
  SECTION("replaced by a folder (the other FSTATs say so)") {
    REQUIRE(::unlink(path.c_str()) == 0);
    fs::create_directory(path);
  }
  std::string got(old_bytes.size(), '\0');
  Status s = (*f)->ReadAt(0, got.size(), reinterpret_cast<uint8_t*>(got.data()));
  INFO(s.message());
  REQUIRE(s.ok());
  CHECK(got == old_bytes);
  std::string part(2 << 20, '\0');
  REQUIRE((*f)->ReadAt(12345, part.size(), reinterpret_cast<uint8_t*>(part.data())).ok());
  CHECK(part == old_bytes.substr(12345, part.size()));
  f->reset();
  for (int i = 0; i < 4; ++i) (void)env->Stat(root);
  const std::vector<uint64_t> read = ClosedHandlesRead(ReadFile(dir.path() + "/log"), path);
  uint64_t total = 0, used = 0;
  for (uint64_t r : read) {
    total += r;
    used += r > 0;
  }
  CHECK(used == 1);  // the first handle read everything
  // The part lies inside the range read before, which the stream read-ahead keeps: it is not
  // transferred again.
  CHECK(total == old_bytes.size());
  CHECK(env->Lost().ok());
}

TEST_CASE("sftp_env: a stream of windows, each starting inside the one before, is read ahead exactly once",
          "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = MakeRoot(dir);
  const size_t size = (21 << 20) + 4321;
  const std::string path = root + "/seg";
  const std::string bytes = WriteRandom(path, size, 31);
  SftpOptions o;
  o.connections = GENERATE(1u, 4u);
  auto env = MustConnect(LoggingServerTarget(dir, root), root, o);
  const bool engine_like = GENERATE(true, false);
  INFO("connections " << o.connections << (engine_like ? ", windows of 4 MiB" : ", windows of 1 to 6 MiB"));
  {
    Result<std::unique_ptr<io::File>> f = env->Open(path);
    REQUIRE(f.ok());
    // As the engine reads a segment: a window, then the next from where the last whole entry
    // ended (a little before the window's end); or windows of any size (an entry larger than
    // the window asks for more from the same offset).
    std::mt19937 rng(7);
    uint64_t off = 0;
    int reads = 0;
    while (off < size) {
      size_t n = engine_like ? (4 << 20) : (1 << 20) + rng() % (5 << 20);
      n = size_t(std::min<uint64_t>(n, size - off));
      std::string got(n, '\0');
      Status s = (*f)->ReadAt(off, n, reinterpret_cast<uint8_t*>(got.data()));
      INFO("read " << reads << " at " << off << " of " << n);
      REQUIRE(s.ok());
      REQUIRE(got == bytes.substr(off, n));
      ++reads;
      if (off + n == size) break;
      const uint64_t back = n > (1 << 20) ? rng() % (64 << 10) : 0;  // the partial entry read again
      off = engine_like || rng() % 4 ? off + n - back : off;          // sometimes again from here
    }
    CHECK(reads > 5);
  }
  for (unsigned i = 0; i < o.connections; ++i) REQUIRE(env->Stat(path).ok());
  uint64_t total = 0;
  for (uint64_t r : ClosedHandlesRead(ReadFile(dir.path() + "/log"), path)) total += r;
  // Engine-like: every byte went over the link once (the kept window serves the overlap, the
  // window read ahead the rest). Any sizes: a window that does not fit is read directly, and a
  // window read ahead may go unused: more, but bounded.
  if (engine_like) {
    CHECK(total == size);
  } else {
    CHECK(total >= size);
    CHECK(total <= 3 * uint64_t(size));
  }
  CHECK(env->Lost().ok());
}

TEST_CASE("sftp_env: more streams at once than the read-ahead budget holds are each read exactly", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  constexpr int kFiles = 5;  // 5 streams of 4 MiB windows want 120 MiB of read-ahead; 64 MiB allow
  std::vector<std::string> bytes;
  for (int i = 0; i < kFiles; ++i) {
    bytes.push_back(RandomBytes((17 << 20) + 1000 * i, 40 + i));
    WriteFile(root + "/seg" + std::to_string(i), bytes.back());
  }
  SftpOptions o;
  o.connections = 4;
  auto env = MustConnect(ServerTarget(dir, root), root, o);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kFiles; ++i) {
    threads.emplace_back([&, i] {
      Result<std::unique_ptr<io::File>> f = env->Open(root + "/seg" + std::to_string(i));
      if (!f.ok()) {
        ++failures;
        return;
      }
      std::mt19937 rng(uint32_t(100 + i));
      const std::string& want = bytes[size_t(i)];
      for (uint64_t off = 0; off < want.size();) {
        const size_t n = size_t(std::min<uint64_t>(4 << 20, want.size() - off));
        std::string got(n, '\0');
        if (!(*f)->ReadAt(off, n, reinterpret_cast<uint8_t*>(got.data())).ok() || got != want.substr(off, n)) {
          ++failures;
          return;
        }
        if (off + n == want.size()) break;
        off += n - rng() % (64 << 10);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures.load() == 0);
  CHECK(env->Lost().ok());
}

TEST_CASE("sftp_env: read-ahead buffers reused from file to file never show another file's bytes", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = MakeRoot(dir);
  // Larger, then smaller, then larger again, each ending inside a window: a buffer made for one
  // file's window is reused for the next file's shorter last window and the stream after it.
  const std::vector<size_t> sizes = {(21 << 20) + 777, (9 << 20) + 5, (13 << 20) + 4097, (21 << 20) + 777};
  std::vector<std::string> bytes;
  for (size_t i = 0; i < sizes.size(); ++i) {
    bytes.push_back(WriteRandom(root + "/seg" + std::to_string(i), sizes[i], uint32_t(70 + i)));
  }
  SftpOptions o;
  o.connections = GENERATE(1u, 2u);
  INFO("connections " << o.connections);
  auto env = MustConnect(ServerTarget(dir, root), root, o);
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      Result<std::unique_ptr<io::File>> f = env->Open(root + "/seg" + std::to_string(i));
      REQUIRE(f.ok());
      const std::string& want = bytes[i];
      uint64_t off = 0;
      while (off < want.size()) {
        const size_t n = size_t(std::min<uint64_t>(4 << 20, want.size() - off));
        std::string got(n, '\0');
        INFO("round " << round << ", file " << i << ", read at " << off << " of " << n);
        REQUIRE((*f)->ReadAt(off, n, reinterpret_cast<uint8_t*>(got.data())).ok());
        REQUIRE(got == want.substr(off, n));
        if (off + n == want.size()) break;
        off += n - 1000;  // the partial entry read again, as the engine does
      }
      // Past the end: a short read, never bytes of a buffer's earlier use.
      std::string tail(8 << 20, '\0');
      CHECK(!(*f)->ReadAt(want.size() - 100, tail.size(), reinterpret_cast<uint8_t*>(tail.data())).ok());
    }
  }
  CHECK(env->Lost().ok());
}

TEST_CASE("sftp_env: with more_connections_from, the first round trip decides whether the others start",
          "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = MakeRoot(dir);
  const size_t size = (21 << 20) + 99;
  const std::string path = root + "/seg";
  const std::string bytes = WriteRandom(path, size, 17);
  // Each spawn is counted; the server logs every request.
  SftpTarget t = ScriptTarget(dir, "echo x >> '" + dir.path() + "/spawns'\n" + "cd '" + root + "' || exit 1\n" +
                                       "exec " + kSftpServer + " -e -l DEBUG1 2>>'" + dir.path() + "/log'\n");
  SftpOptions o;
  o.connections = 4;
  // Thresholds no round trip here can be on the wrong side of: a pipe's is microseconds.
  const bool far = GENERATE(false, true);
  o.more_connections_from = far ? std::chrono::microseconds(1) : std::chrono::microseconds(10'000'000);
  INFO((far ? "round trip above the threshold" : "round trip below the threshold"));
  {
    auto env = MustConnect(t, root, o);
    CHECK(env->round_trip() > std::chrono::microseconds(0));
    CHECK(env->round_trip() < std::chrono::microseconds(10'000'000));
    CHECK(env->Connections() == (far ? 4u : 1u));
    Result<std::unique_ptr<io::File>> f = env->Open(path);
    REQUIRE(f.ok());
    std::string got(size, '\0');
    REQUIRE((*f)->ReadAt(0, size, reinterpret_cast<uint8_t*>(got.data())).ok());
    CHECK(got == bytes);
    CHECK(env->Lost().ok());
  }
  CHECK(CountOf(ReadFile(dir.path() + "/spawns"), "x") == (far ? 4u : 1u));
  // Far: the file's large read is striped over every connection, the late ones included.
  CHECK(CountOf(ReadFile(dir.path() + "/log"), "open \"" + path + "\"") == (far ? 4u : 1u));
}

TEST_CASE("sftp_env: a spare connection that never comes up is left out, and the reads go on without it",
          "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = MakeRoot(dir);
  const size_t size = (21 << 20) + 5;
  const std::string path = root + "/seg";
  const std::string bytes = WriteRandom(path, size, 23);
  // The first spawn is the server; every later one fails as a refused login does, or never
  // answers (its stdout stays open: only the timeout ends it).
  const bool silent = GENERATE(false, true);
  INFO((silent ? "spares never answer" : "spares are refused"));
  SftpTarget t = FirstOnlyServerTarget(
      dir, root, silent ? "exec sleep 60" : "echo 'Permission denied (publickey).' >&2; exit 255");
  SftpOptions o;
  o.connections = 3;
  o.more_connections_from = std::chrono::microseconds(1);
  o.timeout = std::chrono::seconds(3);  // the spares' VERSION; the first answers at once
  auto env = MustConnect(t, root, o);
  CHECK(env->Connections() == 3u);
  const auto t0 = std::chrono::steady_clock::now();
  {
    Result<std::unique_ptr<io::File>> f = env->Open(path);
    REQUIRE(f.ok());
    std::string got(size, '\0');
    // Large: it would be striped over the spares; it waits for them to fail, then reads alone.
    REQUIRE((*f)->ReadAt(0, size, reinterpret_cast<uint8_t*>(got.data())).ok());
    CHECK(got == bytes);
    Result<std::vector<io::DirEntry>> l = env->List(root);  // any connection: the first
    CHECK(l.ok());
  }
  CHECK(SecondsSince(t0) < 20);
  CHECK(env->Lost().ok());
  CHECK(CountOf(ReadFile(dir.path() + "/log"), "open \"" + path + "\"") == 1u);
}

TEST_CASE("sftp_env: an env let go while a spare connection is still connecting ends at once", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = MakeRoot(dir);
  WriteRandom(root + "/seg", (9 << 20) + 1, 29);  // striped: its open ahead waits for the spare
  SftpTarget t = FirstOnlyServerTarget(dir, root, "exec sleep 60");
  SftpOptions o;
  o.connections = 2;
  o.more_connections_from = std::chrono::microseconds(1);
  o.timeout = std::chrono::seconds(60);
  auto env = MustConnect(t, root, o);
  env->OpenAhead(root + "/seg", io::ReadAhead::kWhole, 0);  // opens the stripes: waits on the spare
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  env.reset();
  CHECK(SecondsSince(t0) < 10);  // not the spare's 60 s timeout
}

TEST_CASE("sftp_env: small files are read by the open itself, exactly", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directory(root);
  const std::vector<size_t> sizes = {0, 1, 100, 65535, 65536, 255 * 1024 - 1, 255 * 1024, 255 * 1024 + 1,
                                     256 * 1024 - 1, 256 * 1024, 256 * 1024 + 1, 300 * 1024};
  std::map<size_t, std::string> files;
  for (size_t size : sizes) {
    files[size] = RandomBytes(size, uint32_t(size + 5));
    WriteFile(root + "/f" + std::to_string(size), files[size]);
  }
  SECTION("one connection: no READ after the open's own") {
    auto env = MustConnect(LoggingServerTarget(dir, root), root);
    for (size_t size : sizes) {
      INFO(size);
      const std::string path = root + "/f" + std::to_string(size);
      Result<std::unique_ptr<io::File>> f = env->Open(path);
      REQUIRE(f.ok());
      REQUIRE((*f)->size() == size);
      REQUIRE(env->Stat(path).ok());  // after the open's READs, if any
      const size_t by_open = CountOf(ReadFile(dir.path() + "/log"), "read \"" + path + "\"");
      CHECK(by_open == (size <= 256 * 1024 ? (size + 255 * 1024 - 1) / (255 * 1024) : 0));
      std::string got;
      for (uint64_t off = 0; off < size; off += 1000) {  // small reads, as an entry walk
        std::string piece(std::min<uint64_t>(1000, size - off), '\0');
        REQUIRE((*f)->ReadAt(off, piece.size(), reinterpret_cast<uint8_t*>(piece.data())).ok());
        got += piece;
      }
      CHECK(got == files[size]);
      REQUIRE(env->Stat(path).ok());  // after every READ of this file
      const size_t reads = CountOf(ReadFile(dir.path() + "/log"), "read \"" + path + "\"");
      if (size <= 256 * 1024) {
        CHECK(reads == by_open);  // the small reads needed no READ of their own
      } else {
        CHECK(reads >= 2);
      }
      // A small read across the end: the same short read as ever.
      std::string tail(10, '\0');
      Status s = (*f)->ReadAt(size >= 5 ? size - 5 : 0, 10, reinterpret_cast<uint8_t*>(tail.data()));
      CHECK(s.code() == StatusCode::kIoError);
      CHECK(s.message() == "short read: file ended at " + std::to_string(size));
      if (size >= 5) {
        std::string last(5, '\0');
        REQUIRE((*f)->ReadAt(size - 5, 5, reinterpret_cast<uint8_t*>(last.data())).ok());
        CHECK(last == files[size].substr(size - 5));
      }
    }
  }
  SECTION("little room in flight: the open reads what fits, ReadAt the rest") {
    SftpOptions o;
    o.in_flight_bytes = 100 * 1024;
    o.connections = 2;
    auto env = MustConnect(ServerTarget(dir, root), root, o);
    for (size_t size : sizes) {
      INFO(size);
      Result<std::unique_ptr<io::File>> f = env->Open(root + "/f" + std::to_string(size));
      REQUIRE(f.ok());
      std::string got;
      for (uint64_t off = 0; off < size; off += 4099) {
        std::string piece(std::min<uint64_t>(4099, size - off), '\0');
        REQUIRE((*f)->ReadAt(off, piece.size(), reinterpret_cast<uint8_t*>(piece.data())).ok());
        got += piece;
      }
      CHECK(got == files[size]);
    }
  }
}

TEST_CASE("sftp_env: List of a folder of 1,000 entries is complete and exact", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directories(root + "/big");
  fs::create_directories(root + "/hundred");
  fs::create_directories(root + "/empty");
  std::map<std::string, io::EntryType> want;
  for (int i = 0; i < 1000; ++i) {
    std::string name = std::to_string(i);
    name.insert(name.begin(), i % 7 == 0 ? 'd' : 'n');
    if (i % 7 == 0) {
      fs::create_directory(root + "/big/" + name);
      want[name] = io::EntryType::kDirectory;
    } else {
      WriteFile(root + "/big/" + name, "");
      want[name] = io::EntryType::kRegular;
    }
  }
  for (int i = 0; i < 98; ++i) WriteFile(root + "/hundred/" + std::to_string(i), "");  // with . and ..: 100
  SftpOptions o;
  o.connections = 2;
  auto env = MustConnect(LoggingServerTarget(dir, root), root, o);
  for (int round = 0; round < 3; ++round) {  // both connections, and a connection reused
    Result<std::vector<io::DirEntry>> l = env->List(root + "/big");
    REQUIRE(l.ok());
    REQUIRE(l->size() == 1000);
    std::map<std::string, io::EntryType> got;
    for (const io::DirEntry& e : *l) got[e.name] = e.type;
    CHECK(got == want);
    Result<std::vector<io::DirEntry>> h = env->List(root + "/hundred");
    REQUIRE(h.ok());
    CHECK(h->size() == 98);
    Result<std::vector<io::DirEntry>> e = env->List(root + "/empty");
    REQUIRE(e.ok());
    CHECK(e->empty());
  }
  CHECK(env->Stat(root).ok());
  CHECK(env->Stat(root).ok());
  const std::string log = ReadFile(dir.path() + "/log");
  CHECK(CountOf(log, "opendir \"" + root + "/big\"") == 3);
  CHECK(CountOf(log, "closedir \"" + root + "/big\"") == 3);  // every handle closed
  CHECK(env->Lost().ok());
}

TEST_CASE("sftp_env: List says each entry's size, and a listed regular file is opened without a STAT", "[sftp]") {
  if (!HaveServer()) return;
  TempDir dir;
  const std::string root = dir.path() + "/repo";
  fs::create_directories(root + "/d");
  const std::string a = RandomBytes(1000, 7);
  WriteFile(root + "/a", a);
  WriteFile(root + "/b", RandomBytes(300 * 1024, 8));
  fs::create_symlink("a", root + "/l");
  REQUIRE(::mkfifo((root + "/p").c_str(), 0600) == 0);
  auto env = MustConnect(LoggingServerTarget(dir, root), root);
  auto stats_of = [&](const std::string& name) {
    return CountOf(ReadFile(dir.path() + "/log"), "stat name \"" + root + "/" + name + "\"");
  };

  Result<std::vector<io::DirEntry>> l = env->List(root);
  REQUIRE(l.ok());
  std::map<std::string, std::optional<uint64_t>> sizes;
  for (const io::DirEntry& e : *l) {
    if (e.type == io::EntryType::kRegular) sizes[e.name] = e.size;
  }
  CHECK(sizes == std::map<std::string, std::optional<uint64_t>>{{"a", 1000}, {"b", 300 * 1024}, {"l", 1000}});
  const size_t stats_of_l = stats_of("l");  // the listing follows the link with a STAT

  for (const char* name : {"a", "b", "l"}) {
    INFO(name);
    Result<std::unique_ptr<io::File>> f = env->Open(root + "/" + name);
    REQUIRE(f.ok());
    CHECK((*f)->size() == (name[0] == 'b' ? 300 * 1024 : 1000));
  }
  CHECK(stats_of("a") == 0);
  CHECK(stats_of("b") == 0);
  CHECK(stats_of("l") == stats_of_l);
  Result<std::unique_ptr<io::File>> fa = env->Open(root + "/a");
  REQUIRE(fa.ok());
  std::string got(1000, '\0');
  REQUIRE((*fa)->ReadAt(0, 1000, reinterpret_cast<uint8_t*>(got.data())).ok());
  CHECK(got == a);

  // Not named by a listing: STAT first, as ever (a FIFO is refused without blocking).
  WriteFile(root + "/c", "c");
  REQUIRE(env->Open(root + "/c").ok());
  CHECK(stats_of("c") == 1);
  // A Stat that found a regular file counts as a listing of it: the Open after it sends no
  // STAT of its own; a Stat of a FIFO does not, and the Open still refuses it.
  WriteFile(root + "/s", "ss");
  REQUIRE(env->Stat(root + "/s").ok());
  Result<std::unique_ptr<io::File>> fs_ = env->Open(root + "/s");
  REQUIRE(fs_.ok());
  CHECK((*fs_)->size() == 2);
  CHECK(stats_of("s") == 1);
  REQUIRE(env->Stat(root + "/p").ok());
  CHECK(env->Open(root + "/p").status().message() == root + "/p: is a FIFO, not a regular file");
  // A path a Stat no longer finds is forgotten: made again as a FIFO, the Open stats it first
  // and refuses it, without opening it (which would block the server).
  fs::remove(root + "/s");
  CHECK(env->Stat(root + "/s").status().code() == StatusCode::kNotFound);
  REQUIRE(::mkfifo((root + "/s").c_str(), 0600) == 0);
  CHECK(env->Open(root + "/s").status().message() == root + "/s: is a FIFO, not a regular file");
  CHECK(stats_of("s") == 3);
  Result<std::unique_ptr<io::File>> p = env->Open(root + "/p");
  CHECK(p.status().message() == root + "/p: is a FIFO, not a regular file");

  // Listed as a file, a folder since: FSTAT after OPEN says what was opened.
  fs::remove(root + "/a");
  fs::create_directory(root + "/a");
  Result<std::unique_ptr<io::File>> now_dir = env->Open(root + "/a");
  CHECK(now_dir.status().code() == StatusCode::kCorruptMetadata);
  CHECK(now_dir.status().message() == root + "/a: is a directory, not a regular file");
  // Gone since the listing: kNotFound, as a STAT would have said.
  fs::remove(root + "/b");
  Result<std::unique_ptr<io::File>> gone = env->Open(root + "/b");
  CHECK(gone.status().code() == StatusCode::kNotFound);
  CHECK(StartsWith(gone.status().message(), root + "/b: "));
  // A new listing forgets what is no regular file now: STAT again.
  REQUIRE(env->List(root).ok());
  CHECK(env->Open(root + "/a").status().message() == root + "/a: is a directory, not a regular file");
  CHECK(stats_of("a") == 1);
  CHECK(env->Lost().ok());
}
