#include "checker/schedule/unit_state.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace borgcheck::schedule {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxStateFile = 256ull << 20;  // ~1.5 million units
constexpr size_t kMaxFolderName = 200;            // of a path's state folder (NAME_MAX is 255)

std::string Errno(int e) { return std::strerror(e); }

// A parse failure with the reason; thrown only inside ParseState and caught there.
struct Corrupt {
  std::string why;
};

const json& Field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) throw Corrupt{fmt::format("no \"{}\"", key)};
  return *it;
}
double Time(const json& obj, const char* key) {
  const json& v = Field(obj, key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
    throw Corrupt{fmt::format("\"{}\" is not a time", key)};
  }
  return v.get<double>();
}
// A duration: finite, not negative, at most a year (a larger one is no measurement).
double Seconds(const json& obj, const char* key) {
  const json& v = Field(obj, key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || v.get<double>() > 366 * 86400.0) {
    throw Corrupt{fmt::format("\"{}\" is not a duration", key)};
  }
  return v.get<double>();
}
uint64_t Count(const json& obj, const char* key) {
  const json& v = Field(obj, key);
  if (!v.is_number_unsigned()) throw Corrupt{fmt::format("\"{}\" is not a count", key)};
  return v.get<uint64_t>();
}
bool Bool(const json& obj, const char* key) {
  const json& v = Field(obj, key);
  if (!v.is_boolean()) throw Corrupt{fmt::format("\"{}\" is not true or false", key)};
  return v.get<bool>();
}
std::string Text(const json& obj, const char* key) {
  const json& v = Field(obj, key);
  if (!v.is_string()) throw Corrupt{fmt::format("\"{}\" is not a string", key)};
  return v.get<std::string>();
}
const json& Object(const json& obj, const char* key) {
  const json& v = Field(obj, key);
  if (!v.is_object()) throw Corrupt{fmt::format("\"{}\" is not an object", key)};
  return v;
}

UnitResult ResultFrom(const std::string& s) {
  if (s == "clean") return UnitResult::kClean;
  if (s == "warnings") return UnitResult::kWarnings;
  if (s == "errors") return UnitResult::kErrors;
  throw Corrupt{"unknown result \"" + s + "\""};
}
CheckLevel LevelFrom(const std::string& s) {
  if (s == "data") return CheckLevel::kData;
  if (s == "crc") return CheckLevel::kCrc;
  throw Corrupt{"unknown level \"" + s + "\""};
}

json MarkJson(const UnitMark& m) {
  return {{"at", m.at}, {"done_at", m.done_at}, {"result", UnitResultName(m.result)},
          {"how", m.by_slices ? "slices" : "whole"}};
}
UnitMark MarkFrom(const json& j) {
  if (!j.is_object()) throw Corrupt{"a unit mark is not an object"};
  UnitMark m;
  m.at = Time(j, "at");
  m.done_at = Time(j, "done_at");
  m.result = ResultFrom(Text(j, "result"));
  std::string how = Text(j, "how");
  if (how != "whole" && how != "slices") throw Corrupt{"unknown \"how\" \"" + how + "\""};
  m.by_slices = how == "slices";
  return m;
}

json FullJson(const FullVerification& f) {
  return {{"completed_at", f.completed_at}, {"since", f.since}, {"clean", f.clean}};
}
FullVerification FullFrom(const json& j) {
  if (!j.is_object()) throw Corrupt{"a full verification is not an object"};
  return FullVerification{Time(j, "completed_at"), Time(j, "since"), Bool(j, "clean")};
}

json CycleJson(const Cycle& c) { return {{"started_at", c.started_at}, {"completed_at", c.completed_at}}; }
Cycle CycleFrom(const json& j) {
  if (!j.is_object()) throw Corrupt{"a cycle is not an object"};
  return Cycle{Time(j, "started_at"), Time(j, "completed_at")};
}

bool IsHexId(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Status WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status(StatusCode::kIoError, n < 0 ? Errno(errno) : "short write");
    done += size_t(n);
  }
  return Status::Ok();
}

// Reads a whole file of at most kMaxStateFile bytes; nullopt when it does not exist.
Result<std::optional<std::string>> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Status(StatusCode::kIoError, "cannot read the state file " + path + ": " + Errno(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(StatusCode::kIoError, "the state file " + path + " is not a regular file");
  }
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return Status(StatusCode::kIoError, "cannot read the state file " + path + ": " + Errno(e));
    }
    if (n == 0) break;
    text.append(buf, size_t(n));
    if (text.size() > kMaxStateFile) break;  // ParseState calls it corrupt
  }
  ::close(fd);
  return std::optional<std::string>(std::move(text));
}

// 16 hex digits of FNV-1a 64: only to keep an over-long folder name unique (the state file
// records the whole path, and Open compares it).
std::string Fnv1a64Hex(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

// Whether a state's recorded path names the same folder as `repository_path` (both resolved
// now: a legacy file recorded the path as given on the command line).
bool SamePath(const std::string& recorded, const std::string& repository_path) {
  if (recorded == repository_path) return true;
  if (recorded.empty() || recorded[0] != '/') return false;  // relative to a working folder we do not know
  return CanonicalRepositoryPath(recorded) == repository_path;
}

// A state of the version-1 layout (<id>/state.json, one per repository id) is moved to the
// folder of the path it recorded, when that is this run's path; it stays where it is otherwise
// (the run of that path moves it). It is moved under the old layout's lock, so an older
// borgcheck that uses it now is not raced.
Status MigrateLegacyState(const std::string& id_dir, const std::string& path, const std::string& repository_path,
                          bool writable) {
  const std::string legacy = id_dir + "/" + kStateFileName;
  struct stat st;
  if (!writable || ::stat(legacy.c_str(), &st) != 0 || ::stat(path.c_str(), &st) == 0) return Status::Ok();
  const std::string lock = id_dir + "/lock";
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Ok();  // not ours to move then: the run starts from an empty state
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return Status(StatusCode::kIoError,
                  "another borgcheck run is using the state of this repository (" + lock +
                      " is locked): run one check of a repository at a time, or wait for it");
  }
  Result<std::optional<std::string>> text = ReadFile(legacy);
  if (text.ok() && text->has_value()) {
    Result<StateFile> parsed = ParseState(**text);
    // Renamed as it is (one file system, atomic): Open accepts its recorded path by SamePath,
    // and the run's first save records the resolved one.
    if (parsed.ok() && SamePath(parsed->repository, repository_path)) ::rename(legacy.c_str(), path.c_str());
  }
  ::close(fd);
  return Status::Ok();
}

}  // namespace

bool SameFile(const UnitIdentity& recorded, const UnitIdentity& now) {
  return recorded.size == now.size && recorded.mtime_ns == now.mtime_ns && recorded.inode == now.inode &&
         (recorded.ctime_ns == 0 || recorded.ctime_ns == now.ctime_ns);
}

std::string CanonicalRepositoryPath(const std::string& repository) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::canonical(repository, ec);
  if (ec) p = std::filesystem::absolute(repository, ec).lexically_normal();
  std::string out = ec ? repository : p.string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string StateFolderName(const std::string& canonical_path) {
  std::string name;
  for (size_t i = canonical_path.starts_with('/') ? 1 : 0; i < canonical_path.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(canonical_path[i]);
    if (c == '/') name += '+';
    else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || (c == '.' && !name.empty())) name += char(c);
    else name += fmt::format("%{:02X}", c);
  }
  if (name.empty()) name = "+";  // the root folder
  if (name.size() > kMaxFolderName) name = name.substr(0, kMaxFolderName - 17) + "~" + Fnv1a64Hex(canonical_path);
  return name;
}

const char* CheckLevelName(CheckLevel l) { return l == CheckLevel::kData ? "data" : "crc"; }

const char* UnitResultName(UnitResult r) {
  switch (r) {
    case UnitResult::kClean: return "clean";
    case UnitResult::kWarnings: return "warnings";
    case UnitResult::kErrors: return "errors";
  }
  return "errors";
}

std::optional<UnitMark> UnitRecord::MarkFor(CheckLevel level) const {
  if (level == CheckLevel::kData) return data;
  if (data && crc) return data->at >= crc->at ? data : crc;
  return data ? data : crc;
}

std::string FormatState(const StateFile& s) {
  json units = json::object();
  for (const auto& [key, u] : s.units) {
    json j = {{"size", u.identity.size}, {"mtime_ns", u.identity.mtime_ns}, {"inode", u.identity.inode},
              {"seen_at", u.seen_at}};
    if (u.identity.ctime_ns) j["ctime_ns"] = u.identity.ctime_ns;
    if (u.data) j["data"] = MarkJson(*u.data);
    if (u.crc) j["crc"] = MarkJson(*u.crc);
    if (u.slices_t && !u.slices.empty()) {
      json done = json::object();
      for (const auto& [k, m] : u.slices) done[std::to_string(k)] = {{"at", m.at}, {"result", UnitResultName(m.result)}};
      j["slices"] = {{"level", CheckLevelName(u.slices_level)}, {"t", u.slices_t}, {"done", done}};
    }
    units[key] = std::move(j);
  }
  json full = json::object();
  if (s.full_data) full["data"] = FullJson(*s.full_data);
  if (s.full_crc) full["crc"] = FullJson(*s.full_crc);
  json cycle = json::object();
  if (s.cycle_data) cycle["data"] = CycleJson(*s.cycle_data);
  if (s.cycle_crc) cycle["crc"] = CycleJson(*s.cycle_crc);
  json j = {{"borgcheck_state", kStateVersion},
            {"repository_id", s.repository_id},
            {"repository", s.repository},
            {"updated_at", s.updated_at},
            {"full_verification", full},
            {"cycle", cycle},
            {"units", units}};
  if (s.last_success_at) j["last_success_at"] = *s.last_success_at;
  if (s.after_reading_data_s || s.after_reading_crc_s) {
    json after = json::object();
    if (s.after_reading_data_s) after["data"] = *s.after_reading_data_s;
    if (s.after_reading_crc_s) after["crc"] = *s.after_reading_crc_s;
    j["after_reading_s"] = after;
  }
  if (s.last_run_at) {
    j["last_run"] = {{"finished_at", *s.last_run_at},
                     {"errors", s.last_run_errors},
                     {"warnings", s.last_run_warnings},
                     {"complete", s.last_run_complete}};
  }
  // One unit per line keeps the file diffable and greppable by hand.
  std::string out = "{\n";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    out += first ? "" : ",\n";
    first = false;
    if (it.key() != "units") {
      out += fmt::format("  {}: {}", json(it.key()).dump(), it.value().dump());
      continue;
    }
    out += "  \"units\": {";
    bool first_unit = true;
    for (auto u = it.value().begin(); u != it.value().end(); ++u) {
      out += fmt::format("{}\n    {}: {}", first_unit ? "" : ",", json(u.key()).dump(), u.value().dump());
      first_unit = false;
    }
    out += first_unit ? "}" : "\n  }";
  }
  return out + "\n}\n";
}

Result<StateFile> ParseState(std::string_view text) {
  if (text.size() > kMaxStateFile) {
    return Status(StatusCode::kCorruptMetadata, fmt::format("larger than {} bytes", kMaxStateFile));
  }
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status(StatusCode::kCorruptMetadata, "not valid JSON");
  if (!j.is_object() || !j.contains("borgcheck_state")) {
    return Status(StatusCode::kCorruptMetadata, "not a borgcheck state file (no \"borgcheck_state\")");
  }
  const json& v = j["borgcheck_state"];
  if (!v.is_number_unsigned() || v.get<uint64_t>() == 0) {
    return Status(StatusCode::kCorruptMetadata, "\"borgcheck_state\" is not a version number");
  }
  if (v.get<uint64_t>() > uint64_t(kStateVersion)) {
    return Status(StatusCode::kUnsupported, fmt::format("state version {}; this borgcheck reads version {}",
                                                        v.get<uint64_t>(), kStateVersion));
  }
  try {
    StateFile s;
    s.repository_id = Text(j, "repository_id");
    if (!IsHexId(s.repository_id)) throw Corrupt{"\"repository_id\" is not 64 lowercase hex digits"};
    s.repository = Text(j, "repository");
    s.updated_at = Time(j, "updated_at");
    if (j.contains("last_success_at")) s.last_success_at = Time(j, "last_success_at");
    if (j.contains("last_run")) {
      const json& r = Object(j, "last_run");
      s.last_run_at = Time(r, "finished_at");
      s.last_run_errors = Count(r, "errors");
      s.last_run_warnings = Count(r, "warnings");
      s.last_run_complete = Bool(r, "complete");
    }
    const json& full = Object(j, "full_verification");
    if (full.contains("data")) s.full_data = FullFrom(full["data"]);
    if (full.contains("crc")) s.full_crc = FullFrom(full["crc"]);
    if (j.contains("cycle")) {  // version 1 has none
      const json& cycle = Object(j, "cycle");
      if (cycle.contains("data")) s.cycle_data = CycleFrom(cycle["data"]);
      if (cycle.contains("crc")) s.cycle_crc = CycleFrom(cycle["crc"]);
    }
    if (j.contains("after_reading_s")) {  // optional (earlier files have none)
      const json& after = Object(j, "after_reading_s");
      if (after.contains("data")) s.after_reading_data_s = Seconds(after, "data");
      if (after.contains("crc")) s.after_reading_crc_s = Seconds(after, "crc");
    }
    const json& units = Object(j, "units");
    for (auto it = units.begin(); it != units.end(); ++it) {
      const json& u = it.value();
      if (!u.is_object()) throw Corrupt{"unit \"" + it.key() + "\" is not an object"};
      UnitRecord r;
      r.identity.size = Count(u, "size");
      const json& mt = Field(u, "mtime_ns");
      if (!mt.is_number_integer()) throw Corrupt{"\"mtime_ns\" is not an integer"};
      r.identity.mtime_ns = mt.get<int64_t>();
      if (u.contains("ctime_ns")) {
        const json& ct = u["ctime_ns"];
        if (!ct.is_number_integer()) throw Corrupt{"\"ctime_ns\" is not an integer"};
        r.identity.ctime_ns = ct.get<int64_t>();
      }
      r.identity.inode = Count(u, "inode");
      if (u.contains("seen_at")) r.seen_at = Time(u, "seen_at");  // version 1: 0, before any cycle
      if (u.contains("data")) r.data = MarkFrom(u["data"]);
      if (u.contains("crc")) r.crc = MarkFrom(u["crc"]);
      if (u.contains("slices")) {
        const json& sl = Object(u, "slices");
        r.slices_level = LevelFrom(Text(sl, "level"));
        uint64_t t = Count(sl, "t");
        if (t < 2 || t > 1000000) throw Corrupt{"slice count out of range"};
        r.slices_t = uint32_t(t);
        const json& done = Object(sl, "done");
        for (auto d = done.begin(); d != done.end(); ++d) {
          char* end = nullptr;
          unsigned long k = std::strtoul(d.key().c_str(), &end, 10);
          if (d.key().empty() || *end != '\0' || k < 1 || k > t) throw Corrupt{"slice \"" + d.key() + "\" out of range"};
          if (!d.value().is_object()) throw Corrupt{"a slice mark is not an object"};
          r.slices[uint32_t(k)] = SliceMark{Time(d.value(), "at"), ResultFrom(Text(d.value(), "result"))};
        }
      }
      s.units[it.key()] = std::move(r);
    }
    return s;
  } catch (const Corrupt& c) {
    return Status(StatusCode::kCorruptMetadata, c.why);
  } catch (const json::exception& e) {  // a number out of range for its type
    return Status(StatusCode::kCorruptMetadata, e.what());
  }
}

Result<StateDir::Opened> StateDir::Open(const std::string& base, const std::string& repository_id,
                                        const std::string& repository_path) {
  if (!IsHexId(repository_id)) {
    return Status(StatusCode::kInternal, "the repository id is unknown: the state cannot be kept");
  }
  Opened o;
  o.dir.reset(new StateDir());
  StateDir& d = *o.dir;
  const std::string id_dir = base + "/" + repository_id;
  d.dir_ = id_dir + "/" + StateFolderName(repository_path);
  d.path_ = d.dir_ + "/" + kStateFileName;
  o.state.repository_id = repository_id;
  o.state.repository = repository_path;

  // mkdir -p: $XDG_STATE_HOME may not exist yet on a fresh account. The repository's folders
  // are 0700: its state names the repository's units and when they were checked.
  for (size_t at = 1; at <= d.dir_.size(); ++at) {
    if (at != d.dir_.size() && d.dir_[at] != '/') continue;
    const std::string p = d.dir_.substr(0, at);
    if (::mkdir(p.c_str(), at >= id_dir.size() ? 0700 : 0755) != 0 && errno != EEXIST) {
      d.writable_ = false;
      o.warnings.push_back(fmt::format("cannot create the state folder {}: {}; this run reads no state and saves "
                                       "none (exit 2 unless it finds integrity errors)",
                                       p, Errno(errno)));
      return o;
    }
  }
  const std::string lock = d.dir_ + "/lock";
  d.lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (d.lock_fd_ < 0) d.lock_fd_ = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (d.lock_fd_ >= 0 && ::flock(d.lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Status(StatusCode::kIoError,
                    "another borgcheck run is using the state of this repository (" + lock +
                        " is locked): run one check of a repository at a time, or wait for it");
    }
  }
  if (::access(d.dir_.c_str(), W_OK) != 0) {
    d.writable_ = false;
    o.warnings.push_back(fmt::format("the state folder {} is not writable ({}): this run follows the saved state "
                                     "but cannot record what it verifies (exit 2 unless it finds integrity errors)",
                                     d.dir_, Errno(errno)));
  }

  if (Status m = MigrateLegacyState(id_dir, d.path_, repository_path, d.writable_); !m.ok()) return m;

  Result<std::optional<std::string>> text = ReadFile(d.path_);
  if (!text.ok()) {
    o.warnings.push_back(text.status().message() + "; this run starts from an empty state");
    return o;
  }
  if (!text->has_value()) return o;
  Result<StateFile> parsed = ParseState(**text);
  if (!parsed.ok()) {
    if (parsed.status().code() == StatusCode::kUnsupported) {
      return Status(StatusCode::kInvalidArgument,
                    "the state file " + d.path_ + " was written by a newer borgcheck (" + parsed.status().message() +
                        "): refused. Run that version, or remove the file to start a new rotation");
    }
    std::string aside = d.path_ + ".corrupt";
    std::string what = "the state file " + d.path_ + " is corrupt (" + parsed.status().message() + ")";
    if (d.writable_ && ::rename(d.path_.c_str(), aside.c_str()) == 0) {
      o.warnings.push_back(what + ": set aside as " + aside + "; this run starts from an empty state (every unit "
                                  "counts as unverified)");
    } else {
      o.warnings.push_back(what + ": this run starts from an empty state (every unit counts as unverified)");
    }
    return o;
  }
  if (parsed->repository_id != repository_id) {
    return Status(StatusCode::kInvalidArgument,
                  "the state file " + d.path_ + " belongs to repository " + parsed->repository_id + ", not to " +
                      repository_id + ": refused (was the folder copied?). Remove it, or pass another --state-dir");
  }
  if (!SamePath(parsed->repository, repository_path)) {
    return Status(StatusCode::kInvalidArgument,
                  "the state file " + d.path_ + " belongs to the copy at " + parsed->repository + ", not to " +
                      repository_path + ": refused (was the folder copied?). Remove it, or pass another --state-dir");
  }
  o.state = std::move(parsed).value();
  return o;
}

StateDir::~StateDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

Status StateDir::Save(const StateFile& s) {
  if (!writable_) return Status(StatusCode::kIoError, "the state folder " + dir_ + " is not writable");
  const std::string text = FormatState(s);
  const std::string tmp = path_ + "." + std::to_string(::getpid()) + ".tmp";
  auto fail = [&](const char* what, int e) {
    ::unlink(tmp.c_str());
    return Status(StatusCode::kIoError, fmt::format("cannot save the state file {} ({}): {}", path_, what, Errno(e)));
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return fail("creating the temporary file", errno);
  if (Status w = WriteAll(fd, text); !w.ok()) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status(StatusCode::kIoError, "cannot save the state file " + path_ + ": " + w.message());
  }
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    return fail("fsync", e);
  }
  if (::close(fd) != 0) return fail("close", errno);
  if (::rename(tmp.c_str(), path_.c_str()) != 0) return fail("rename", errno);
  // The rename is durable once the folder is: without this a crash could bring the old file back.
  int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Status(StatusCode::kIoError, "cannot open the state folder " + dir_ + ": " + Errno(errno));
  int rc = ::fsync(dfd);
  int e = errno;
  ::close(dfd);
  if (rc != 0) return Status(StatusCode::kIoError, "cannot fsync the state folder " + dir_ + ": " + Errno(e));
  return Status::Ok();
}

}  // namespace borgcheck::schedule
