// BorgRpc against the real servers: `borg serve` (1.2.4, /usr/bin/borg) and `borg2 serve`
// (2.0.0b5, /usr/bin/borg2). The "ssh command" is a script written into a temp folder that
// drops ssh's arguments (`[-p PORT] USER@HOST`) and execs the rest (REMOTE_PATH serve) locally.
// Each test makes its own repositories with the real tools, in a temp folder that is also
// HOME and BORG_BASE_DIR (nothing touches the real home). Other scripts stand in for a server
// that is killed, stays silent, or sends what is no reply.
//
// A test is skipped (WARN) only when the borg binary it needs is absent.
#include "checker/remote/borg_rpc.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "checker/base/msgpack_util.h"
#include "checker/remote/borg_serve_service.h"

using namespace borgcheck;
using namespace borgcheck::remote;
namespace fs = std::filesystem;
using namespace std::string_literals;
using Clock = std::chrono::steady_clock;

namespace {

// main() ignores SIGPIPE; so must the tests (a write to a closed pipe is an EPIPE, not death).
const bool kSigpipeIgnored = [] {
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

bool Have(const char* bin) {
  if (::access(bin, X_OK) == 0) return true;
  WARN("no " << bin << ": borg serve tests skipped");
  return false;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/borg_rpc_test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path_ = tmpl;
    fs::create_directories(path_ + "/home");
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

// Runs a shell command with the borg environment of `dir` (passphrase, HOME, no prompts).
void Run(const TempDir& dir, const std::string& cmd) {
  const std::string env = "HOME='" + dir.path() + "/home' BORG_BASE_DIR='" + dir.path() +
                          "/home' BORG_PASSPHRASE=x BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes "
                          "BORG_RELOCATED_REPO_ACCESS_IS_OK=yes ";
  const std::string full = env + cmd + " >'" + dir.path() + "/cmd.log' 2>&1";
  const int rc = std::system(full.c_str());
  INFO(full << "\n" << ReadFile(dir.path() + "/cmd.log"));
  REQUIRE(rc == 0);
}

// A source folder with `files` random files of `size` bytes each, and a small text file.
std::string MakeSource(const TempDir& dir, int files, size_t size) {
  const std::string src = dir.path() + "/src";
  fs::create_directories(src);
  for (int i = 0; i < files; ++i) WriteFile(src + "/f" + std::to_string(i), RandomBytes(size, uint32_t(i + 1)));
  WriteFile(src + "/small", "hello\n");
  return src;
}

std::string MakeRepo1(const TempDir& dir, const std::string& name, int files = 2, size_t size = 100000) {
  const std::string repo = dir.path() + "/" + name;
  const std::string src = MakeSource(dir, files, size);
  Run(dir, "borg init -e repokey '" + repo + "'");
  Run(dir, "borg create '" + repo + "::a' '" + src + "'");
  return repo;
}

std::string MakeRepo2(const TempDir& dir, const std::string& name) {
  const std::string repo = dir.path() + "/" + name;
  const std::string src = MakeSource(dir, 2, 100000);
  Run(dir, "borg2 -r '" + repo + "' rcreate -e repokey-aes-ocb");
  Run(dir, "borg2 -r '" + repo + "' create a '" + src + "'");
  return repo;
}

// The server's environment: the spawned script inherits ours.
void SetServerEnv(const TempDir& dir) {
  ::setenv("HOME", (dir.path() + "/home").c_str(), 1);
  ::setenv("BORG_BASE_DIR", (dir.path() + "/home").c_str(), 1);
}

// A fake ssh: drops `-p PORT` and `USER@HOST`, then runs `body` (which sees the rest as "$@").
BorgServeTarget ScriptTarget(const TempDir& dir, const std::string& remote_path, const std::string& body) {
  SetServerEnv(dir);
  const std::string script = dir.path() + "/fake-rsh";
  WriteFile(script,
            "#!/bin/sh\n"
            "while [ $# -gt 0 ]; do\n"
            "  case \"$1\" in\n"
            "    -p) shift 2 ;;\n"
            "    -*) shift ;;\n"
            "    *) shift; break ;;\n"
            "  esac\n"
            "done\n" +
                body + "\n");
  REQUIRE(::chmod(script.c_str(), 0755) == 0);
  BorgServeTarget t;
  t.rsh = {script};
  t.user = "nobody";
  t.host = "nohost";
  t.port = 2222;
  t.remote_path = {remote_path};
  t.timeout = std::chrono::milliseconds(30'000);
  return t;
}

BorgServeTarget ServeTarget(const TempDir& dir, const std::string& remote_path) {
  return ScriptTarget(dir, remote_path, "echo $$ > '" + dir.path() + "/pid'\nexec \"$@\"");
}

std::string Hex(std::string_view b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

std::string Unhex(std::string_view h) {
  std::string s;
  for (size_t i = 0; i + 1 < h.size(); i += 2) s += char(std::stoi(std::string(h.substr(i, 2)), nullptr, 16));
  return s;
}

// The `id = <hex>` of a repository's config.
std::string ConfigId(const std::string& repo) {
  std::ifstream f(repo + "/config");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("id = ", 0) == 0) return Unhex(line.substr(5));
  }
  FAIL("no id in " << repo << "/config");
  return "";
}

std::string RawOf(const msgpack::object& o) {
  Bytes b;
  REQUIRE(msgpack_util::AsRaw(&o, b));
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

int64_t IntOf(const msgpack::object& o) {
  REQUIRE((o.type == msgpack::type::POSITIVE_INTEGER || o.type == msgpack::type::NEGATIVE_INTEGER));
  return o.type == msgpack::type::POSITIVE_INTEGER ? int64_t(o.via.u64) : o.via.i64;
}

std::vector<std::string> IdsOf(const msgpack::object& o) {
  REQUIRE(o.type == msgpack::type::ARRAY);
  std::vector<std::string> ids;
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    ids.push_back(RawOf(o.via.array.ptr[i]));
    REQUIRE(ids.back().size() == 32);
  }
  return ids;
}

RpcReply CallOk(BorgRpc& rpc, Method m, std::vector<Arg> args) {
  Result<RpcReply> r = rpc.Call(m, std::move(args));
  INFO("connection: " << (r.ok() ? "ok" : r.status().message()));
  REQUIRE(r.ok());
  INFO("exception: " << r->exception_class << ": " << r->exception_message);
  REQUIRE(r->ok());
  return std::move(*r);
}

std::vector<Arg> OpenArgs(const std::string& repo) {
  return {{"path", Raw{repo}},          {"create", false},          {"lock_wait", int64_t(1)},
          {"lock", true},               {"exclusive", false},       {"append_only", false},
          {"make_parent_dirs", false}};
}

// A PUT entry of a 1.x segment file.
struct Entry {
  uint32_t segment = 0;
  uint64_t offset = 0;
  uint32_t size = 0;  // the whole entry, header included
};

uint32_t Le32(const std::string& b, size_t at) {
  return uint32_t(uint8_t(b[at])) | uint32_t(uint8_t(b[at + 1])) << 8 | uint32_t(uint8_t(b[at + 2])) << 16 |
         uint32_t(uint8_t(b[at + 3])) << 24;
}

// Every PUT of a 1.x repository's segments by id; a later PUT of an id wins.
std::map<std::string, Entry> ScanSegments(const std::string& repo) {
  std::map<uint32_t, std::string> files;
  for (const auto& dir : fs::directory_iterator(repo + "/data")) {
    for (const auto& f : fs::directory_iterator(dir.path())) {
      files[uint32_t(std::stoul(f.path().filename().string()))] = f.path().string();
    }
  }
  std::map<std::string, Entry> puts;
  for (const auto& [seg, path] : files) {
    const std::string b = ReadFile(path);
    REQUIRE(b.substr(0, 8) == "BORG_SEG");
    size_t at = 8;
    while (at + 9 <= b.size()) {
      const uint32_t size = Le32(b, at + 4);
      REQUIRE(size >= 9);
      REQUIRE(at + size <= b.size());
      const uint8_t tag = uint8_t(b[at + 8]);
      if (tag == 0) puts[b.substr(at + 9, 32)] = Entry{seg, at, size};
      if (tag == 1) puts.erase(b.substr(at + 9, 32));
      at += size;
    }
  }
  return puts;
}

}  // namespace

TEST_CASE("borg 1.2 serve: negotiate, open, len, list, scan, pipelined get, errors", "[borg_rpc]") {
  if (!Have("/usr/bin/borg")) return;
  TempDir dir;
  const std::string repo = MakeRepo1(dir, "r1");
  Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(ServeTarget(dir, "borg"));
  INFO((c.ok() ? "" : c.status().message()));
  REQUIRE(c.ok());
  BorgRpc& rpc = **c;
  CHECK(rpc.server_version() == std::array<int64_t, 4>{1, 2, 4, -1});
  CHECK(rpc.server_prerelease() == 0);
  CHECK_FALSE(rpc.bytes_as_bin());
  CHECK(rpc.ServerVersionText() == "1.2.4");

  RpcReply open = CallOk(rpc, Method::kOpen, OpenArgs(repo));
  CHECK(RawOf(open.result) == ConfigId(repo));

  const int64_t len = IntOf(CallOk(rpc, Method::kLen, {}).result);
  RpcReply list = CallOk(rpc, Method::kList, {{"limit", int64_t(100000)}, {"marker", Nil{}}});
  const std::vector<std::string> ids = IdsOf(list.result);
  CHECK(int64_t(ids.size()) == len);
  const std::set<std::string> listed(ids.begin(), ids.end());
  CHECK(listed.size() == ids.size());

  std::set<std::string> scanned;
  std::optional<std::string> marker;
  for (int round = 0; round < 100; ++round) {
    RpcReply s = CallOk(rpc, Method::kScan,
                        {{"limit", int64_t(3)}, {"marker", marker ? ArgValue(Raw{*marker}) : ArgValue(Nil{})}});
    const std::vector<std::string> batch = IdsOf(s.result);
    CHECK(batch.size() <= 3);
    if (batch.empty()) break;
    for (const auto& id : batch) CHECK(scanned.insert(id).second);
    marker = batch.back();
  }
  CHECK(scanned == listed);

  // Every get posted first, then waited for in order.
  const std::map<std::string, Entry> puts = ScanSegments(repo);
  CHECK(puts.size() == ids.size());
  std::vector<uint64_t> msgids;
  for (const auto& id : ids) msgids.push_back(rpc.Post(Method::kGet, {{"id", Raw{id}}}));
  for (size_t i = 0; i < ids.size(); ++i) {
    Result<RpcReply> r = rpc.Wait(msgids[i]);
    REQUIRE(r.ok());
    REQUIRE(r->ok());
    const std::string payload = RawOf(r->result);
    REQUIRE(puts.count(ids[i]) == 1);
    CHECK(payload.size() + 41 == puts.at(ids[i]).size);
    if (ids[i] == std::string(32, '\0')) CHECK(uint8_t(payload[0]) == 0x03);  // repokey AES-CTR-HMAC
  }
  CHECK(listed.count(std::string(32, '\0')) == 1);
  CHECK_FALSE(RawOf(CallOk(rpc, Method::kLoadKey, {}).result).empty());

  Result<RpcReply> missing = rpc.Call(Method::kGet, {{"id", Raw{std::string(32, '\x01')}}});
  REQUIRE(missing.ok());
  CHECK_FALSE(missing->ok());
  CHECK(missing->exception_class == "ObjectNotFound");
  REQUIRE(missing->exception_args.size() == 2);
  CHECK(missing->exception_args[0] == Hex(std::string(32, '\x01')));
  CHECK(missing->exception_args[1] == repo);
  CHECK(missing->exception_message.find("not found") != std::string::npos);
  // The session goes on after a method error.
  CHECK(RawOf(CallOk(rpc, Method::kGet, {{"id", Raw{std::string(32, '\0')}}}).result).size() > 0);
  CHECK(rpc.Lost().ok());
  CHECK(rpc.BytesReceived() > 0);

  const auto t0 = Clock::now();
  rpc.Close();
  rpc.Close();  // idempotent
  CHECK(Clock::now() - t0 < std::chrono::seconds(10));  // borg serve exits; Close waits 5 s at most
  CHECK_FALSE(rpc.Lost().ok());
  CHECK_FALSE(fs::exists(repo + "/lock.roster"));  // the server released its lock
}

TEST_CASE("borg2 2.0.0b5 serve: bytes as bin, info, list, scan(limit, state), get", "[borg_rpc]") {
  if (!Have("/usr/bin/borg2")) return;
  TempDir dir;
  const std::string repo = MakeRepo2(dir, "r2");
  Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(ServeTarget(dir, "borg2"));
  INFO((c.ok() ? "" : c.status().message()));
  REQUIRE(c.ok());
  BorgRpc& rpc = **c;
  CHECK(rpc.server_version() == std::array<int64_t, 4>{2, 0, 0, -3});
  CHECK(rpc.server_prerelease() == 5);
  CHECK(rpc.bytes_as_bin());
  CHECK(rpc.ServerVersionText() == "2.0.0b5");

  RpcReply open = CallOk(rpc, Method::kOpen, OpenArgs(repo));
  CHECK(RawOf(open.result) == ConfigId(repo));
  RpcReply info = CallOk(rpc, Method::kInfo, {});
  REQUIRE(info.result.type == msgpack::type::MAP);
  const msgpack::object* version = msgpack_util::Find(info.result, "version");
  REQUIRE(version != nullptr);
  CHECK(IntOf(*version) == 2);
  const msgpack::object* info_id = msgpack_util::Find(info.result, "id");
  REQUIRE(info_id != nullptr);
  CHECK(RawOf(*info_id) == ConfigId(repo));

  const int64_t len = IntOf(CallOk(rpc, Method::kLen, {}).result);
  RpcReply list = CallOk(rpc, Method::kList, {{"limit", int64_t(100000)}, {"marker", Nil{}}});
  const std::vector<std::string> ids = IdsOf(list.result);
  CHECK(int64_t(ids.size()) == len);
  const std::set<std::string> listed(ids.begin(), ids.end());

  // scan(limit, state) -> [ids, state]; state [segment, offset, end_segment], nil to start.
  std::set<std::string> scanned;
  std::vector<int64_t> state;
  bool first = true;
  for (int round = 0; round < 100; ++round) {
    RpcReply s = CallOk(rpc, Method::kScan,
                        {{"limit", int64_t(3)}, {"state", first ? ArgValue(Nil{}) : ArgValue(state)}});
    first = false;
    REQUIRE(s.result.type == msgpack::type::ARRAY);
    REQUIRE(s.result.via.array.size == 2);
    const std::vector<std::string> batch = IdsOf(s.result.via.array.ptr[0]);
    CHECK(batch.size() <= 3);
    if (batch.empty()) break;
    for (const auto& id : batch) CHECK(scanned.insert(id).second);
    const msgpack::object& st = s.result.via.array.ptr[1];
    REQUIRE(st.type == msgpack::type::ARRAY);
    REQUIRE(st.via.array.size == 3);
    state.clear();
    for (uint32_t i = 0; i < 3; ++i) state.push_back(IntOf(st.via.array.ptr[i]));
  }
  CHECK(scanned == listed);

  std::vector<uint64_t> msgids;
  for (const auto& id : ids) msgids.push_back(rpc.Post(Method::kGet, {{"id", Raw{id}}}));
  for (uint64_t m : msgids) {
    Result<RpcReply> r = rpc.Wait(m);
    REQUIRE(r.ok());
    REQUIRE(r->ok());
    CHECK_FALSE(RawOf(r->result).empty());
  }
  CHECK_FALSE(RawOf(CallOk(rpc, Method::kLoadKey, {}).result).empty());
  Result<RpcReply> missing = rpc.Call(Method::kGet, {{"id", Raw{std::string(32, '\x01')}}});
  REQUIRE(missing.ok());
  CHECK(missing->exception_class == "ObjectNotFound");
  CHECK(rpc.Lost().ok());
  const auto t0 = Clock::now();
  rpc.Close();
  CHECK(Clock::now() - t0 < std::chrono::seconds(10));  // borg serve exits; Close waits 5 s at most
}

TEST_CASE("borg 1.2 serve: a damaged object is an IntegrityError with its segment and offset", "[borg_rpc]") {
  if (!Have("/usr/bin/borg")) return;
  TempDir dir;
  const std::string repo = MakeRepo1(dir, "r1", 2, 200000);
  const std::string copy = dir.path() + "/damaged";
  fs::copy(repo, copy, fs::copy_options::recursive);
  const std::map<std::string, Entry> puts = ScanSegments(copy);
  REQUIRE_FALSE(puts.empty());
  auto largest = puts.begin();
  for (auto it = puts.begin(); it != puts.end(); ++it) {
    if (it->second.size > largest->second.size) largest = it;
  }
  const Entry e = largest->second;
  REQUIRE(e.size > 41 + 10);
  std::string seg_path;
  for (const auto& d : fs::directory_iterator(copy + "/data")) {
    if (fs::exists(d.path() / std::to_string(e.segment))) seg_path = (d.path() / std::to_string(e.segment)).string();
  }
  REQUIRE(!seg_path.empty());
  {
    std::fstream f(seg_path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(e.offset + 41 + 10));
    char b = 0;
    f.read(&b, 1);
    b = char(b ^ 0x5a);
    f.seekp(std::streamoff(e.offset + 41 + 10));
    f.write(&b, 1);
    REQUIRE(f.good());
  }
  Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(ServeTarget(dir, "borg"));
  REQUIRE(c.ok());
  BorgRpc& rpc = **c;
  (void)CallOk(rpc, Method::kOpen, OpenArgs(copy));
  Result<RpcReply> r = rpc.Call(Method::kGet, {{"id", Raw{largest->first}}});
  REQUIRE(r.ok());
  REQUIRE_FALSE(r->ok());
  CHECK(r->exception_class == "IntegrityError");
  INFO(r->exception_message);
  CHECK(r->exception_message.find("Segment entry checksum mismatch") != std::string::npos);
  std::optional<SegmentOffset> so = ParseSegmentOffset(r->exception_message);
  REQUIRE(so.has_value());
  CHECK(so->segment == e.segment);
  CHECK(so->offset == e.offset);
  CHECK(r->exception_message == "Data integrity error: Segment entry checksum mismatch [segment " +
                                    std::to_string(e.segment) + ", offset " + std::to_string(e.offset) + "]");
  CHECK_FALSE(rpc.ServerRebuiltIndex());
  // Other objects still come back.
  CHECK_FALSE(RawOf(CallOk(rpc, Method::kGet, {{"id", Raw{std::string(32, '\0')}}}).result).empty());
}

TEST_CASE("borg 1.2 serve: a missing index is rebuilt by the server, and we notice", "[borg_rpc]") {
  if (!Have("/usr/bin/borg")) return;
  TempDir dir;
  const std::string repo = MakeRepo1(dir, "r1");
  for (const auto& f : fs::directory_iterator(repo)) {
    const std::string name = f.path().filename().string();
    if (name.rfind("index.", 0) == 0) fs::remove(f.path());
  }
  Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(ServeTarget(dir, "borg"));
  REQUIRE(c.ok());
  BorgRpc& rpc = **c;
  (void)CallOk(rpc, Method::kOpen, OpenArgs(repo));
  CHECK(IntOf(CallOk(rpc, Method::kLen, {}).result) > 0);
  rpc.Close();
  // progress_percent JSON lines, which 1.2.4 writes even at WARNING: "Replaying segments  17%".
  bool replay_line = false;
  for (const auto& line : rpc.StderrTail()) replay_line |= line.rfind("Replaying segments", 0) == 0;
  CHECK(replay_line);
  CHECK(rpc.ServerRebuiltIndex());
}

TEST_CASE("borg serve killed: every Wait says lost, Close is prompt", "[borg_rpc]") {
  if (!Have("/usr/bin/borg")) return;
  TempDir dir;
  const std::string repo = MakeRepo1(dir, "r1");
  Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(ServeTarget(dir, "borg"));
  REQUIRE(c.ok());
  BorgRpc& rpc = **c;
  (void)CallOk(rpc, Method::kOpen, OpenArgs(repo));
  const pid_t pid = pid_t(std::stol(ReadFile(dir.path() + "/pid")));
  REQUIRE(pid > 1);
  REQUIRE(::kill(pid, SIGKILL) == 0);
  std::vector<uint64_t> msgids;
  for (int i = 0; i < 5; ++i) msgids.push_back(rpc.Post(Method::kGet, {{"id", Raw{std::string(32, '\0')}}}));
  for (uint64_t m : msgids) {
    Result<RpcReply> r = rpc.Wait(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kIoError);
    CHECK(r.status().message().find("connection to nohost lost") != std::string::npos);
  }
  CHECK_FALSE(rpc.Lost().ok());
  CHECK(rpc.Lost().message().find("lost") != std::string::npos);
  // Posting after the loss answers at once.
  Result<RpcReply> late = rpc.Call(Method::kLen, {});
  CHECK_FALSE(late.ok());
  const auto t0 = Clock::now();
  rpc.Close();
  CHECK(Clock::now() - t0 < std::chrono::seconds(2));
}

TEST_CASE("a silent server: Connect fails after the timeout", "[borg_rpc]") {
  TempDir dir;
  BorgServeTarget t = ScriptTarget(dir, "borg", "exec sleep 30");
  t.timeout = std::chrono::milliseconds(1000);
  const auto t0 = Clock::now();
  Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(t);
  const auto took = Clock::now() - t0;
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == StatusCode::kIoError);
  CHECK(c.status().message() == "connection to nohost failed: the server sent nothing for 1 s");
  CHECK(took >= std::chrono::milliseconds(900));
  CHECK(took < std::chrono::seconds(10));
}

TEST_CASE("a server that exits at once, or sends what is no reply", "[borg_rpc]") {
  // Each fake server that replies reads our request first (`head -c 1`), as borg does: replying
  // before being asked raced Connect's Post (a reply to msgid 1 before msgid 1 was awaited reads
  // as one nobody asked for), which a TSan CI run hit.
  TempDir dir;
  SECTION("exits") {
    Result<std::unique_ptr<BorgRpc>> c =
        BorgRpc::Connect(ScriptTarget(dir, "borg", "echo 'sh: 1: borg: not found' >&2; exit 127"));
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == StatusCode::kIoError);
    CHECK(c.status().message().find("connection to nohost failed: the server closed the connection") == 0);
    CHECK(c.status().message().find("borg: not found") != std::string::npos);
    CHECK(c.status().message().find("exit status 127") != std::string::npos);
  }
  SECTION("says why only after it closed stdout: the message still quotes it") {
    // Stdout closes at once; the reason comes on stderr 0.7 s later, after the 0.5 s that EOF
    // waits for stderr: Connect words the failure once Shutdown has read stderr to its end.
    Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(
        ScriptTarget(dir, "borg", "exec 1>&-; sleep 0.7; echo 'sh: 1: borg: not found' >&2; exit 127"));
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message().find("connection to nohost failed: the server closed the connection") == 0);
    CHECK(c.status().message().find("borg: not found") != std::string::npos);
    CHECK(c.status().message().find("exit status 127") != std::string::npos);
  }
  SECTION("not a map") {
    Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(ScriptTarget(dir, "borg", "head -c 1 >/dev/null; printf '\\001'; exec sleep 30"));
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message() == "connection to nohost failed: protocol error: a reply that is not a map");
  }
  SECTION("a reply nobody asked for") {
    // {"i": 7, "r": nil}
    Result<std::unique_ptr<BorgRpc>> c =
        BorgRpc::Connect(ScriptTarget(dir, "borg", "head -c 1 >/dev/null; printf '\\202\\241i\\007\\241r\\300'; exec sleep 30"));
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message().find("which nobody asked for") != std::string::npos);
  }
  SECTION("1.0.x answers a bare 2") {
    // {"i": 1, "r": 2}
    Result<std::unique_ptr<BorgRpc>> c =
        BorgRpc::Connect(ScriptTarget(dir, "borg", "head -c 1 >/dev/null; printf '\\202\\241i\\001\\241r\\002'; exec sleep 30"));
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == StatusCode::kUnsupported);
  }
  SECTION("an endless str") {
    // str32 of 4 GiB - 1, then 100 MB of zeros: cut at kMaxReplyBytes.
    const auto t0 = Clock::now();
    Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(
        ScriptTarget(dir, "borg", "head -c 1 >/dev/null; printf '\\333\\377\\377\\377\\377'; head -c 100000000 /dev/zero; exec sleep 30"));
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message() ==
          "connection to nohost failed: the server sent a reply larger than " + std::to_string(kMaxReplyBytes) + " bytes");
    CHECK(Clock::now() - t0 < std::chrono::seconds(10));
  }
  SECTION("deep nesting") {
    Result<std::unique_ptr<BorgRpc>> c =
        BorgRpc::Connect(ScriptTarget(dir, "borg", "head -c 1 >/dev/null; printf '\\221\\221\\221\\221\\221\\221\\221\\221\\221\\221\\300'; exec sleep 30"));
    REQUIRE_FALSE(c.ok());
    INFO(c.status().message());
    CHECK(c.status().message().find("connection to nohost failed: protocol error") == 0);
  }
}

TEST_CASE("back-pressure: replies larger than max_buffered_bytes all arrive", "[borg_rpc]") {
  if (!Have("/usr/bin/borg")) return;
  TempDir dir;
  const std::string repo = MakeRepo1(dir, "r1", 6, 300 * 1024);
  BorgServeTarget t = ServeTarget(dir, "borg");
  t.max_buffered_bytes = 64 * 1024;
  t.timeout = std::chrono::milliseconds(10'000);
  Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(t);
  REQUIRE(c.ok());
  BorgRpc& rpc = **c;
  (void)CallOk(rpc, Method::kOpen, OpenArgs(repo));
  const std::vector<std::string> ids =
      IdsOf(CallOk(rpc, Method::kList, {{"limit", int64_t(100000)}, {"marker", Nil{}}}).result);
  const std::map<std::string, Entry> puts = ScanSegments(repo);
  size_t big = 0;
  for (const auto& [id, e] : puts) big += e.size > 300 * 1024 ? 1 : 0;
  CHECK(big >= 6);
  std::vector<uint64_t> msgids;
  for (int round = 0; round < 3; ++round) {
    for (const auto& id : ids) msgids.push_back(rpc.Post(Method::kGet, {{"id", Raw{id}}}));
  }
  // Give the server time to fill the pipe: nothing may be lost while we do not read.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Reading paused once the first big reply was in: the 18 replies (5.4 MB) did not all come
  // (each reply used to count 0 bytes, so the I/O thread never paused).
  CHECK(rpc.BytesReceived() < 1'500'000);
  for (size_t i = 0; i < msgids.size(); ++i) {
    const std::string& id = ids[i % ids.size()];
    if (i % 7 == 3) {  // some are given up on: their replies are dropped when they come
      rpc.Forget(msgids[i]);
      continue;
    }
    Result<RpcReply> r = rpc.Wait(msgids[i]);
    REQUIRE(r.ok());
    REQUIRE(r->ok());
    CHECK(RawOf(r->result).size() + 41 == puts.at(id).size);
  }
  CHECK(rpc.Lost().ok());
  CHECK(IntOf(CallOk(rpc, Method::kLen, {}).result) == int64_t(ids.size()));
}

TEST_CASE("PackRequest: exact bytes of both dialects", "[borg_rpc]") {
  const std::string id(32, '\xab');
  const std::string head = std::string("\x83\xa1i\x01\xa1m\xa3get\xa1\x61\x81\xa2id", 16);
  CHECK(PackRequest(1, Method::kGet, {{"id", Raw{id}}}, false) == head + "\xd9\x20" + id);  // str8
  CHECK(PackRequest(1, Method::kGet, {{"id", Raw{id}}}, true) == head + "\xc4\x20" + id);   // bin8
  // negotiate as borg's own Python packer writes it.
  CHECK(Hex(PackRequest(1, Method::kNegotiate, {}, false)) ==
        "83a16901a16da96e65676f7469617465a16181ab636c69656e745f6461746181ae636c69656e745f76657273696f6e94010204ff");
  CHECK(PackRequest(1, Method::kNegotiate, {}, true) == PackRequest(1, Method::kNegotiate, {}, false));
  // Text is str in both; ints, nil, bools and int arrays as msgpack packs them.
  const std::vector<Arg> args = {{"limit", int64_t(100000)}, {"marker", Nil{}}, {"lock", true},
                                 {"t", std::string("x")},   {"state", std::vector<int64_t>{2, -1}}};
  const std::string body = "\x85\xa5limit\xce\x00\x01\x86\xa0\xa6marker\xc0\xa4lock\xc3\xa1t\xa1x\xa5state\x92\x02\xff"s;
  CHECK(PackRequest(300, Method::kScan, args, true) == "\x83\xa1i\xcd\x01\x2c\xa1m\xa4scan\xa1\x61"s + body);
  CHECK(MethodName(Method::kLen) == std::string("__len__"));
  CHECK(MethodName(Method::kLoadKey) == std::string("load_key"));
}

namespace {
// Walks an unpacked request: counts bin values and the largest map/array.
void Walk(const msgpack::object& o, int& bins, int& strs, uint32_t& largest) {
  switch (o.type) {
    case msgpack::type::BIN: ++bins; break;
    case msgpack::type::STR: ++strs; break;
    case msgpack::type::ARRAY:
      largest = std::max(largest, o.via.array.size);
      for (uint32_t i = 0; i < o.via.array.size; ++i) Walk(o.via.array.ptr[i], bins, strs, largest);
      break;
    case msgpack::type::MAP:
      largest = std::max(largest, o.via.map.size);
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        Walk(o.via.map.ptr[i].key, bins, strs, largest);
        Walk(o.via.map.ptr[i].val, bins, strs, largest);
      }
      break;
    default: break;
  }
}
}  // namespace

TEST_CASE("PackRequest: a 1.x request never holds bin", "[borg_rpc]") {
  const Method all[] = {Method::kNegotiate, Method::kOpen, Method::kClose, Method::kInfo, Method::kLoadKey,
                        Method::kLen,       Method::kList, Method::kScan,  Method::kGet};
  for (Method m : all) {
    const std::vector<Arg> args = {{"id", Raw{std::string(32, '\0')}},
                                   {"path", Raw{"/srv/\xff\xfe"}},
                                   {"marker", Raw{std::string(300, '\x01')}},
                                   {"limit", int64_t(-5)},
                                   {"state", std::vector<int64_t>{1, 2, 3}},
                                   {"x", Nil{}}};
    for (bool bin : {false, true}) {
      const std::string packed = PackRequest(42, m, args, bin);
      msgpack::object_handle oh;
      std::string error;
      REQUIRE(msgpack_util::UnpackWhole(AsBytes(packed), 8, oh, error));
      int bins = 0, strs = 0;
      uint32_t largest = 0;
      Walk(oh.get(), bins, strs, largest);
      INFO(MethodName(m) << " bin=" << bin);
      CHECK(largest <= 100);
      if (!bin || m == Method::kNegotiate) {
        CHECK(bins == 0);
      } else {
        CHECK(bins == 3);
      }
      CHECK(strs > 0);
      const msgpack::object* meth = msgpack_util::Find(oh.get(), "m");
      REQUIRE(meth != nullptr);
      CHECK(meth->type == msgpack::type::STR);
      CHECK(RawOf(*meth) == MethodName(m));
    }
  }
}

TEST_CASE("ParseSegmentOffset", "[borg_rpc]") {
  auto so = ParseSegmentOffset("Data integrity error: Segment entry checksum mismatch [segment 2, offset 36942956]");
  REQUIRE(so.has_value());
  CHECK(so->segment == 2);
  CHECK(so->offset == 36942956);
  so = ParseSegmentOffset("[segment 1, offset 5] then [segment 7, offset 18446744073709551615]");
  REQUIRE(so.has_value());
  CHECK(so->segment == 7);
  CHECK(so->offset == 18446744073709551615ull);
  // The last well-formed one wins.
  so = ParseSegmentOffset("[segment 1, offset 5] [segment x, offset 3]");
  REQUIRE(so.has_value());
  CHECK(so->segment == 1);
  CHECK_FALSE(ParseSegmentOffset("[segment 4294967296, offset 1]").has_value());
  CHECK(ParseSegmentOffset("[segment 4294967295, offset 1]").has_value());
  CHECK_FALSE(ParseSegmentOffset("[segment 1, offset 18446744073709551616]").has_value());
  CHECK_FALSE(ParseSegmentOffset("[segment 1, offset ]").has_value());
  CHECK_FALSE(ParseSegmentOffset("[segment -1, offset 2]").has_value());
  CHECK_FALSE(ParseSegmentOffset("[segment 1, offset 2").has_value());
  CHECK_FALSE(ParseSegmentOffset("Object with key 01 not found").has_value());
  CHECK_FALSE(ParseSegmentOffset("").has_value());
}

TEST_CASE("WaitUnlessBehind gives up behind a full read-ahead instead of waiting for ever", "[borg_rpc]") {
  if (!Have("/usr/bin/borg")) return;
  TempDir dir;
  const std::string repo = MakeRepo1(dir, "r1", 6, 300 * 1024);
  BorgServeTarget t = ServeTarget(dir, "borg");
  t.max_buffered_bytes = 64 * 1024;
  t.timeout = std::chrono::milliseconds(10'000);
  Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(t);
  REQUIRE(c.ok());
  BorgRpc& rpc = **c;
  (void)CallOk(rpc, Method::kOpen, OpenArgs(repo));
  const std::vector<std::string> ids =
      IdsOf(CallOk(rpc, Method::kList, {{"limit", int64_t(100000)}, {"marker", Nil{}}}).result);
  // Not behind anything: the reply comes.
  {
    std::optional<Result<RpcReply>> r = rpc.WaitUnlessBehind(rpc.Post(Method::kGet, {{"id", Raw{ids[0]}}}));
    REQUIRE(r.has_value());
    REQUIRE(r->ok());
    CHECK((*r)->ok());
  }
  // The "pipeline": gets whose replies nobody takes yet fill the read-ahead.
  std::vector<uint64_t> ahead;
  for (int round = 0; round < 2; ++round) {
    for (const auto& id : ids) ahead.push_back(rpc.Post(Method::kGet, {{"id", Raw{id}}}));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // A "worker's second read" behind them: it gives up (it used to wait until the pipeline's
  // reader took them, which may be waiting for this worker: a deadlock).
  const auto t0 = Clock::now();
  std::optional<Result<RpcReply>> behind = rpc.WaitUnlessBehind(rpc.Post(Method::kGet, {{"id", Raw{ids[0]}}}));
  CHECK_FALSE(behind.has_value());
  CHECK(Clock::now() - t0 < std::chrono::seconds(5));
  // Nothing is lost: the pipeline's replies all come, the forgotten one is dropped.
  for (uint64_t m : ahead) {
    Result<RpcReply> r = rpc.Wait(m);
    REQUIRE(r.ok());
    CHECK(r->ok());
  }
  CHECK(IntOf(CallOk(rpc, Method::kLen, {}).result) == int64_t(ids.size()));
  CHECK(rpc.Lost().ok());
}

namespace {

// A fake server in python3 (no msgpack module: a few lines pack and unpack what the client and
// these tests use). argv[1] names the misbehaviour; the version it claims is argv[2].
constexpr const char* kFakeServer = R"PY(
import struct, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
def rd(n):
    b = inp.read(n)
    if len(b) < n: sys.exit(0)
    return b
def unpack():
    t = rd(1)[0]
    if t <= 0x7f: return t
    if t >= 0xe0: return t - 256
    if 0x80 <= t <= 0x8f: return {unpack(): unpack() for _ in range(t & 15)}
    if 0x90 <= t <= 0x9f: return [unpack() for _ in range(t & 15)]
    if 0xa0 <= t <= 0xbf: return rd(t & 31)
    if t == 0xc0: return None
    if t in (0xc2, 0xc3): return t == 0xc3
    if t in (0xc4, 0xd9): return rd(rd(1)[0])
    if t in (0xc5, 0xda): return rd(struct.unpack('>H', rd(2))[0])
    if t in (0xc6, 0xdb): return rd(struct.unpack('>I', rd(4))[0])
    if t == 0xdc: return [unpack() for _ in range(struct.unpack('>H', rd(2))[0])]
    if t == 0xde: n = struct.unpack('>H', rd(2))[0]; return {unpack(): unpack() for _ in range(n)}
    fmt = {0xcc: '>B', 0xcd: '>H', 0xce: '>I', 0xcf: '>Q', 0xd0: '>b', 0xd1: '>h', 0xd2: '>i', 0xd3: '>q'}[t]
    return struct.unpack(fmt, rd(struct.calcsize(fmt)))[0]
def pack(v):
    if v is None: return b'\xc0'
    if isinstance(v, bool): return b'\xc3' if v else b'\xc2'
    if isinstance(v, int):
        if 0 <= v <= 0x7f: return bytes([v])
        if -32 <= v < 0: return bytes([v + 256])
        return b'\xd3' + struct.pack('>q', v)
    if isinstance(v, str): v = v.encode(); return b'\xdb' + struct.pack('>I', len(v)) + v
    if isinstance(v, bytes): return b'\xc6' + struct.pack('>I', len(v)) + v
    if isinstance(v, list): return b'\xdd' + struct.pack('>I', len(v)) + b''.join(pack(x) for x in v)
    if isinstance(v, dict): return b'\xdf' + struct.pack('>I', len(v)) + b''.join(pack(k) + pack(x) for k, x in v.items())
def reply(i, r):
    out.write(pack({'i': i, 'r': r})); out.flush()
mode, version = sys.argv[1], [int(x) for x in sys.argv[2].split(',')]
held = []
while True:
    req = unpack()
    i, m = req[b'i'], req[b'm']
    if m == b'negotiate': reply(i, {'server_version': version}); continue
    if m == b'open': reply(i, b'\x07' * 32); continue
    if mode == 'out-of-order' and m == b'get':
        held.append(i)
        if len(held) == 2: reply(held[1], b'\x00' * 200000)  # the later one first; the earlier never
        continue
    if mode == 'same-list' and m == b'list':
        reply(i, [bytes([k % 256, k // 256 % 256, k // 65536]) + b'\x01' * 29 for k in range(100000)]); continue
    if mode == 'same-scan-state' and m == b'scan':
        reply(i, [[b'\x02' * 32], [3, 4]]); continue
    if mode == 'same-scan-marker' and m == b'scan':
        reply(i, [b'\x03' * 32] * 100000); continue
    if mode == 'capped' and m in (b'list', b'scan'):  # 10 ids, at most 3 a call, after the marker
        ids = [bytes([k]) * 32 for k in range(10)]
        marker = req[b'a'].get(b'marker')
        start = 0 if marker is None else ids.index(marker) + 1
        reply(i, ids[start:start + 3]); continue
    reply(i, None)
)PY";

BorgServeTarget FakeServerTarget(const TempDir& dir, const std::string& mode, const std::string& version) {
  WriteFile(dir.path() + "/fake_server.py", kFakeServer);
  return ScriptTarget(dir, "borg", "exec python3 '" + dir.path() + "/fake_server.py' " + mode + " " + version);
}

}  // namespace

TEST_CASE("a server that answers a later get first: lost after the timeout, not a hang", "[borg_rpc]") {
  if (!Have("/usr/bin/python3")) return;
  TempDir dir;
  BorgServeTarget t = FakeServerTarget(dir, "out-of-order", "1,2,4,-1");
  t.max_buffered_bytes = 64 * 1024;
  t.timeout = std::chrono::seconds(3);  // also Connect's wait for python3 to start and answer
  Result<std::unique_ptr<BorgRpc>> c = BorgRpc::Connect(t);
  REQUIRE(c.ok());
  BorgRpc& rpc = **c;
  const uint64_t first = rpc.Post(Method::kGet, {{"id", Raw{std::string(32, 'a')}}});
  const uint64_t second = rpc.Post(Method::kGet, {{"id", Raw{std::string(32, 'b')}}});
  const auto t0 = Clock::now();
  Result<RpcReply> r = rpc.Wait(first);  // the second's 200 KB fill the read-ahead: reading pauses
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("connection to nohost lost: protocol error: the server's replies to later") == 0);
  CHECK(Clock::now() - t0 < std::chrono::seconds(15));
  Result<RpcReply> r2 = rpc.Wait(second);  // it had come: still takeable
  CHECK(r2.ok());
}

TEST_CASE("BorgServeService: a list or scan that never ends is refused", "[borg_rpc]") {
  if (!Have("/usr/bin/python3")) return;
  struct Case {
    const char* mode;
    const char* version;
    bool scan;
    const char* message;
  };
  const Case cases[] = {
      {"same-list", "1,2,4,-1", false, "borg serve on nohost answered list with the same batch again"},
      {"same-scan-marker", "1,2,4,-1", true, "borg serve on nohost answered scan with the same batch again"},
      {"same-scan-state", "2,0,0,-3,5", true, "borg serve on nohost answered scan with the same state again"},
  };
  for (const Case& k : cases) {
    INFO(k.mode);
    TempDir dir;
    Result<std::vector<std::unique_ptr<BorgRpc>>> sessions =
        ConnectSessions(FakeServerTarget(dir, k.mode, k.version), 1);
    REQUIRE(sessions.ok());
    BorgServeService service(std::move(*sessions), "/repo", "nohost");
    std::vector<io::ObjectId> ids;
    const auto t0 = Clock::now();
    const Status s = k.scan ? service.ScanIds(ids) : service.ListIds(ids);
    CHECK(s.code() == StatusCode::kIoError);
    CHECK(s.message() == k.message);
    CHECK(ids.size() <= 200'000);
    CHECK(Clock::now() - t0 < std::chrono::seconds(30));
  }
}

TEST_CASE("BorgServeService: a server that caps its batches below the limit still lists every id", "[borg_rpc]") {
  // borg ends a list only at an empty batch: a batch shorter than asked for is not the end.
  if (!Have("/usr/bin/python3")) return;
  std::vector<io::ObjectId> all;
  for (uint8_t k = 0; k < 10; ++k) {
    io::ObjectId id;
    id.fill(k);
    all.push_back(id);
  }
  for (const bool scan : {false, true}) {
    INFO((scan ? "scan" : "list"));
    TempDir dir;
    Result<std::vector<std::unique_ptr<BorgRpc>>> sessions = ConnectSessions(FakeServerTarget(dir, "capped", "1,2,4,-1"), 1);
    REQUIRE(sessions.ok());
    BorgServeService service(std::move(*sessions), "/repo", "nohost");
    std::vector<io::ObjectId> ids;
    const Status s = scan ? service.ScanIds(ids) : service.ListIds(ids);
    CHECK(s.ok());
    CHECK(ids == all);
  }
}

TEST_CASE("ReplyDecoder: replies split anywhere, their wire length, sticky errors", "[borg_rpc]") {
  // {"i": 1, "r": bin(32)} then {"i": 2, "exception_class": "X", "exception_short": ["a", "b"]}
  const std::string one = "\x82\xa1i\x01\xa1r\xc4\x20"s + std::string(32, '\x11');
  const std::string two = "\x83\xa1i\x02\xaf" "exception_class\xa1X\xaf" "exception_short\x92\xa1\x61\xa1\x62"s;
  const std::string stream = one + two;
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    ReplyDecoder d;
    ReplyDecoder::Decoded out;
    std::string error;
    std::vector<ReplyDecoder::Decoded> got;
    d.Feed(stream.data(), cut);
    while (d.Next(out, error) == ReplyDecoder::Step::kReply) got.push_back(std::move(out));
    d.Feed(stream.data() + cut, stream.size() - cut);
    ReplyDecoder::Step st;
    while ((st = d.Next(out, error)) == ReplyDecoder::Step::kReply) got.push_back(std::move(out));
    INFO("cut at " << cut);
    CHECK(st == ReplyDecoder::Step::kNeedMore);
    REQUIRE(got.size() == 2);
    CHECK(got[0].msgid == 1);
    CHECK(got[0].wire_bytes == one.size());
    CHECK(RawOf(got[0].reply.result) == std::string(32, '\x11'));
    CHECK(got[1].msgid == 2);
    CHECK(got[1].wire_bytes == two.size());
    CHECK(got[1].reply.exception_class == "X");
    CHECK(got[1].reply.exception_message == "a\nb");
  }
  ReplyDecoder d;
  ReplyDecoder::Decoded out;
  std::string error;
  d.Feed("\x01", 1);
  CHECK(d.Next(out, error) == ReplyDecoder::Step::kError);
  CHECK(error == "protocol error: a reply that is not a map");
  d.Feed(one.data(), one.size());
  CHECK(d.Next(out, error) == ReplyDecoder::Step::kError);  // stays failed
  // A bin32 that claims 64 MiB + 1: refused once the message passes the bound.
  ReplyDecoder big;
  const std::string head = "\x82\xa1i\x01\xa1r\xc6\x04\x00\x00\x01"s;
  big.Feed(head.data(), head.size());
  const std::string zeros(1 << 20, '\0');
  ReplyDecoder::Step st = ReplyDecoder::Step::kNeedMore;
  for (int i = 0; i < 70 && st == ReplyDecoder::Step::kNeedMore; ++i) {
    big.Feed(zeros.data(), zeros.size());
    st = big.Next(out, error);
  }
  CHECK(st == ReplyDecoder::Step::kError);
  CHECK(error == "the server sent a reply larger than " + std::to_string(kMaxReplyBytes) + " bytes");
}
