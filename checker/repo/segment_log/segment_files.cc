#include "checker/repo/segment_log/segment_files.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

#include <fmt/format.h>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "checker/base/msgpack_util.h"
#include "checker/repo/text_util.h"

namespace borgcheck::repo {
namespace {

bool ParseDecimal(const std::string& s, uint32_t& out) {
  if (s.empty() || s.size() > 10) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  if (v > UINT32_MAX) return false;
  out = uint32_t(v);
  return true;
}

}  // namespace

std::string SegmentPath(const std::string& repo, uint32_t segments_per_dir, uint32_t segment) {
  return fmt::format("{}/data/{}/{}", repo, segment / segments_per_dir, segment);
}

Result<std::vector<SegmentFile>> ListSegmentFiles(const io::Env& env, const std::string& repo,
                                                  std::vector<std::pair<uint32_t, std::string>>* odd) {
  const std::string data = repo + "/data";
  Result<std::vector<io::DirEntry>> dirs = env.List(data);
  if (!dirs.ok()) {
    if (dirs.status().code() == StatusCode::kNotFound || dirs.status().code() == StatusCode::kCorruptMetadata) {
      return Status(StatusCode::kNotARepository, repo + " has no data/ directory");
    }
    return dirs.status();
  }
  std::vector<SegmentFile> out;
  for (const io::DirEntry& d : *dirs) {
    uint32_t dn;
    if (!ParseDecimal(d.name, dn) || d.type != io::EntryType::kDirectory) continue;
    const std::string dir = data + "/" + d.name;
    Result<std::vector<io::DirEntry>> files = env.List(dir);
    if (!files.ok()) return Status(StatusCode::kIoError, "cannot list " + dir + ": " + files.status().message());
    for (const io::DirEntry& f : *files) {
      uint32_t s;
      if (!ParseDecimal(f.name, s)) continue;
      const std::string path = dir + "/" + f.name;
      if (f.type != io::EntryType::kRegular) {
        if (odd) odd->emplace_back(s, path);
        continue;
      }
      Result<std::optional<uint64_t>> size = env.SizeUnlessGone(path, f);
      if (!size.ok()) return size.status();
      if (!*size) continue;
      out.push_back({s, path, **size});
    }
  }
  std::sort(out.begin(), out.end(), [](const SegmentFile& a, const SegmentFile& b) { return a.number < b.number; });
  if (odd) std::sort(odd->begin(), odd->end());
  return out;
}

RepoFolder ListRepoFolder(const io::Env& env, const std::string& repo) {
  RepoFolder out;
  Result<std::vector<io::DirEntry>> entries = env.List(repo);
  if (!entries.ok()) return out;
  for (const io::DirEntry& e : *entries) {
    uint32_t t;
    if (e.type != io::EntryType::kRegular || e.name.rfind("index.", 0) != 0 || !ParseDecimal(e.name.substr(6), t)) {
      continue;
    }
    Result<uint64_t> size = env.EntrySize(repo + "/" + e.name, e);
    if (!size.ok() || *size == 0) continue;
    if (!out.index_txn || t > *out.index_txn) out.index_txn = t;
  }
  out.entries = std::move(entries).value();
  return out;
}

std::optional<uint32_t> FindIndexTransaction(const io::Env& env, const std::string& repo) {
  return ListRepoFolder(env, repo).index_txn;
}

void OpenIndexFilesAhead(const io::Env& env, const std::string& repo, std::optional<uint32_t> t) {
  if (!t) return;
  // integrity.T twice: the index's check reads it, then the hints' check (LoadSegmentHints).
  for (const char* name : {"index", "integrity", "hints", "integrity"}) {
    env.OpenAhead(repo + "/" + name + "." + std::to_string(*t), io::ReadAhead::kWhole, 0);
  }
}

std::optional<uint32_t> NewestCommitted(const io::Env& env, const std::vector<SegmentFile>& segments, Bytes commit) {
  for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
    if (EndsWithCommit(env, *it, commit)) return it->number;
  }
  return std::nullopt;
}

Result<std::string> ReadSegmentLogConfig(const io::Env& env, const std::string& path,
                                         const std::optional<std::string>& known) {
  if (known) return *known;
  Result<io::FileStat> st = env.Stat(path);
  if (!st.ok()) {
    if (st.status().code() == StatusCode::kNotFound) {
      return Status(StatusCode::kNotFound, "repository " + path + " does not exist");
    }
    return st.status();
  }
  if (st->type != io::EntryType::kDirectory) {
    return Status(StatusCode::kNotARepository, path + " is not a borg repository: it is not a directory");
  }
  Result<std::string> text = env.ReadWholeFile(path + "/config", 1 << 20);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
    return Status(StatusCode::kNotARepository,
                  path + " is not a borg repository: it has no 'config' file (expected a directory made by "
                         "'borg init' with config, data/ and README)");
  }
  return text;
}

bool EndsWithCommit(const io::Env& env, const SegmentFile& s, Bytes commit) {
  if (s.size < 8 + commit.size()) return false;
  // A planning read: the data pass reads the segment again (io::Env::OpenToReadAgain).
  Result<std::unique_ptr<io::File>> f = env.OpenToReadAgain(s.path);
  if (!f.ok() || (*f)->size() < commit.size()) return false;
  std::vector<uint8_t> tail(commit.size());
  if (!(*f)->ReadAt((*f)->size() - tail.size(), tail.size(), tail.data()).ok()) return false;
  return std::memcmp(tail.data(), commit.data(), tail.size()) == 0;
}

namespace {

// borg's IntegrityCheckedFile: one XXH64 state fed with "%10d"-framed names and positions.
class IntegrityHasher {
 public:
  IntegrityHasher() { state_ = XXH64_createState(); XXH64_reset(state_, 0); }
  ~IntegrityHasher() { XXH64_freeState(state_); }
  void Feed(Bytes b) { XXH64_update(state_, b.data(), b.size()); }
  void FeedStr(const std::string& s) { Feed(AsBytes(s)); }
  void FeedFramed(const std::string& name) {
    FeedStr(fmt::format("{:>10}", name.size()));
    FeedStr(name);
  }
  std::string Digest() const { return fmt::format("{:016x}", XXH64_digest(state_)); }

 private:
  XXH64_state_t* state_;
};

}  // namespace

IntegrityOutcome CheckIndexIntegrity(Bytes index_bytes, const std::string& index_name, size_t header_size,
                                     Bytes integrity_bytes, std::string* why) {
  return CheckFileIntegrity(index_bytes, index_name, "index", header_size, integrity_bytes, why);
}

IntegrityOutcome CheckFileIntegrity(Bytes index_bytes, const std::string& index_name, std::string_view key,
                                    size_t header_size, Bytes integrity_bytes, std::string* why) {
  auto fail = [&](IntegrityOutcome o, std::string m) {
    if (why) *why = std::move(m);
    return o;
  };
  std::string index_json;
  {
    // Limits sized by the input: a damaged length prefix must not make msgpack allocate more
    // than the file could describe (found by fuzz/index_fuzzer).
    msgpack::object_handle oh;
    std::string err;
    if (!msgpack_util::UnpackPrefix(integrity_bytes, 32, oh, err, msgpack_util::Strings::kCopy)) {
      return fail(IntegrityOutcome::kMalformed, "integrity file: " + err);
    }
    const msgpack::object& root = oh.get();
    if (root.type != msgpack::type::MAP) return fail(IntegrityOutcome::kMalformed, "integrity file is not a map");
    // Every `key` entry with a string value is taken in turn: the last one wins.
    for (uint32_t i = 0; i < root.via.map.size; ++i) {
      const auto& kv = root.via.map.ptr[i];
      if (msgpack_util::AsText(kv.key) != key) continue;
      if (std::optional<std::string_view> v = msgpack_util::AsText(kv.val)) index_json.assign(*v);
    }
  }
  if (index_json.empty()) return fail(IntegrityOutcome::kMalformed, "integrity file has no " + std::string(key) + " entry");
  std::string want_header, want_final;
  nlohmann::json j = nlohmann::json::parse(index_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return fail(IntegrityOutcome::kMalformed, "integrity JSON: not a JSON object");
  if (!j.contains("algorithm") || j["algorithm"] != "XXH64") {
    return fail(IntegrityOutcome::kMalformed, "integrity algorithm is not XXH64");
  }
  const nlohmann::json* digests = j.contains("digests") && j["digests"].is_object() ? &j["digests"] : nullptr;
  if (!digests || !digests->contains("final") || !(*digests)["final"].is_string()) {
    return fail(IntegrityOutcome::kMalformed, "integrity JSON: no digests.final");
  }
  want_final = (*digests)["final"].get<std::string>();
  if (digests->contains("HashHeader") && (*digests)["HashHeader"].is_string()) {
    want_header = (*digests)["HashHeader"].get<std::string>();
  }
  if (index_bytes.size() < header_size) return fail(IntegrityOutcome::kMismatch, "index shorter than its header");
  IntegrityHasher h;
  h.FeedFramed(index_name);
  std::string got_header;
  if (header_size) {  // hints.T has no HashHeader part
    h.Feed(index_bytes.first(header_size));
    h.FeedFramed("HashHeader");
    h.FeedStr(std::to_string(header_size));
    got_header = h.Digest();
  }
  h.Feed(index_bytes.subspan(header_size));
  h.FeedFramed("final");
  h.FeedStr(std::to_string(index_bytes.size()));
  std::string got_final = h.Digest();
  if (!want_header.empty() && header_size && want_header != got_header) {
    return fail(IntegrityOutcome::kMismatch, "index header digest " + got_header + " != recorded " + want_header);
  }
  if (want_final != got_final) {
    return fail(IntegrityOutcome::kMismatch,
                std::string(key) + " digest " + got_final + " != recorded " + want_final);
  }
  return IntegrityOutcome::kVerified;
}

Result<IniFile> ParseIni(std::string_view text) {
  IniFile ini;
  std::string section;
  std::string* last_value = nullptr;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string_view t = Trim(line);
    if (t.empty()) continue;  // ConfigParser keeps blank lines inside values; borg writes none
    bool continuation = std::isspace(static_cast<unsigned char>(line.front()));
    if (continuation) {
      if (!last_value) {
        return Status(StatusCode::kCorruptMetadata,
                      "config line " + std::to_string(line_no) + ": continuation without a key");
      }
      last_value->append("\n").append(t);
      continue;
    }
    if (t.front() == '#' || t.front() == ';') continue;
    if (t.front() == '[') {
      if (t.back() != ']') {
        return Status(StatusCode::kCorruptMetadata,
                      "config line " + std::to_string(line_no) + ": malformed section header");
      }
      section = Lower(Trim(t.substr(1, t.size() - 2)));
      ini[section];
      last_value = nullptr;
      continue;
    }
    size_t eq = t.find_first_of("=:");
    if (eq == std::string_view::npos || section.empty()) {
      return Status(StatusCode::kCorruptMetadata,
                    "config line " + std::to_string(line_no) + ": expected 'key = value'");
    }
    std::string key = Lower(Trim(t.substr(0, eq)));
    last_value = &(ini[section][key] = std::string(Trim(t.substr(eq + 1))));
  }
  return ini;
}

bool ParseSize(std::string_view s, uint64_t& out) {
  s = Trim(s);
  if (s.empty()) return false;
  uint64_t mult = 1;
  char last = char(std::toupper(static_cast<unsigned char>(s.back())));
  static constexpr std::string_view kSuffixes = "KMGTP";
  if (size_t p = kSuffixes.find(last); p != std::string_view::npos) {
    for (size_t i = 0; i <= p; ++i) mult *= 1000;
    s.remove_suffix(1);
  }
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return false;
  if (v > UINT64_MAX / mult) return false;
  out = v * mult;
  return true;
}

}  // namespace borgcheck::repo
