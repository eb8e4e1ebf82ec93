// The borgstore layout of repository version 4, in the order ReadBorgstoreLayout reads it:
//   1. config/: version must be "4", id 64 hex, readme compared with borg's text (a note
//      if it differs: borg does not read it), manifest present or not.
//   2. locks/: a live exclusive lock refuses the run (a writer may be active); stale or
//      unparseable entries are findings (borg itself crashes on a non-JSON entry). Stale is
//      borg master's rule: older than 30 minutes, or a dead process of this host (borg_lock.h).
//   3. packs/<xx>/<64 hex>: names checked (lowercase hex, in the directory of their first two
//      characters); *.tmp and *.hid are borgstore's own temporaries and are skipped.
//   4. index/, keys/, archives/, cache/chunkindex-invalid.
// Nothing here reads a pack; the run hashes and walks them in its workers.
#include "checker/repo/borgstore/borgstore_layout.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>
#include <openssl/sha.h>

#include "checker/base/msgpack_util.h"
#include "checker/repo/borg_lock.h"

namespace borgcheck::repo {
using report::Finding;
using report::Severity;
using report::Stage;

namespace {

constexpr uint32_t kMsgpackMaxDepth = 16;

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// msgpack strings are referenced in place (the input outlives the parse).
using msgpack_util::AsText;
using msgpack_util::FindFirst;  // map lookups here have always taken the first match

Finding LayoutFinding(Severity sev, Stage stage, std::string item, std::string message) {
  return report::MakeFinding(sev, stage, report::Location::Item(std::move(item)), nullptr, std::move(message));
}

bool IsStoreTemporary(const std::string& name) {
  auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
  return ends(".tmp") || ends(".hid");
}

// Parses the leading "YYYY-MM-DDTHH:MM:SS" of an ISO 8601 UTC time.
std::optional<int64_t> ParseIsoUtc(const std::string& s) {
  std::tm tm{};
  if (s.size() < 19 || std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return int64_t(timegm(&tm));
}

// The entries of a directory, sorted by name; an absent directory is empty.
Result<std::vector<io::DirEntry>> ListDir(const io::Env& env, const std::string& dir) {
  Result<std::vector<io::DirEntry>> out = env.List(dir);
  if (!out.ok()) {
    if (out.status().code() == StatusCode::kNotFound) return std::vector<io::DirEntry>();
    return Status(StatusCode::kIoError, "cannot list " + dir + ": " + out.status().message());
  }
  std::sort(out->begin(), out->end(), [](const io::DirEntry& a, const io::DirEntry& b) { return a.name < b.name; });
  return out;
}

Status CheckLocks(const io::Env& env, const std::string& dir, const LayoutOptions& opts, BorgstoreLayout& layout) {
  Result<std::vector<io::DirEntry>> entries = ListDir(env, dir);
  if (!entries.ok()) return entries.status();
  int64_t now = opts.now_unix ? opts.now_unix
                              : std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch()).count();
  std::optional<BorgHostId> local;  // computed for the first lock only: it asks the resolver
  for (const io::DirEntry& e : *entries) {
    const std::string& name = e.name;
    if (e.type != io::EntryType::kRegular || IsStoreTemporary(name)) continue;
    Result<std::string> text = env.ReadWholeFile(dir + "/" + name, 1 << 16);
    nlohmann::json j;
    bool parsed = false;
    if (text.ok()) {
      j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
      parsed = j.is_object();
    }
    if (!parsed) {
      layout.findings.push_back(LayoutFinding(
          Severity::kWarning, Stage::kLock, "locks/" + name,
          "not a JSON lock record: borg fails on every command while this file is in locks/"));
      continue;
    }
    // json::value() would throw on a non-boolean; anything but false or absent counts as exclusive.
    const nlohmann::json& x = j.contains("exclusive") ? j["exclusive"] : nlohmann::json();
    bool exclusive = x.is_boolean() ? x.get<bool>() : !x.is_null();
    std::optional<int64_t> t = j.contains("time") && j["time"].is_string()
                                   ? ParseIsoUtc(j["time"].get<std::string>())
                                   : std::nullopt;
    std::string who = j.contains("hostid") && j["hostid"].is_string() ? j["hostid"].get<std::string>() : "?";
    const auto integer = [&](const char* k) {
      return j.contains(k) && j[k].is_number_integer() ? std::optional<int64_t>(j[k].get<int64_t>()) : std::nullopt;
    };
    const std::optional<int64_t> pid = integer("processid"), thread = integer("threadid");
    if (!local) local = LocalBorgHostId();
    const LockOwnerState owner = pid && thread && *thread >= 0
                                     ? ClassifyLockOwner(who, *pid, uint64_t(*thread), local->id)
                                     : LockOwnerState::kOtherHost;
    const std::string held_by = pid ? DescribeLockOwner(who, *pid, owner, *local) : who;
    const bool old = t && now - *t >= kLockStaleSeconds;
    bool live = !old && owner != LockOwnerState::kDead;
    if (exclusive && live && !opts.bypass_lock) {
      return Status(StatusCode::kLockHeld,
                    "repository " + layout.path + " is locked by borg (locks/" + name + ": " + held_by +
                        "): a backup, prune or compact may be writing. Wait for it to finish, or pass "
                        "--bypass-lock to check anyway (results may then report changes in progress)");
    }
    const std::string why = old ? "older than 30 minutes" : "its process is not running";
    if (exclusive && !live) {
      layout.findings.push_back(LayoutFinding(
          Severity::kWarning, Stage::kLock, "locks/" + name,
          "stale lock: locks/" + name + " is an exclusive lock of " + held_by +
              (old ? ", older than 30 minutes" : "") + " (a borg process was killed or crashed while it held the lock). The repository was "
              "checked anyway. borg deletes a stale lock itself on its next command, or `borg "
              "break-lock " + layout.path + "` removes it now; borgcheck never writes to a repository"));
      continue;
    }
    layout.notes.push_back(fmt::format("{} lock locks/{} held by {}{}", exclusive ? "exclusive" : "shared", name, who,
                                       live ? "" : " is stale (" + why + ")"));
  }
  return Status::Ok();
}

}  // namespace

BlobHeader ReadBlobHeader(Bytes b) {
  BlobHeader h;
  h.version = b[8];
  std::memcpy(h.chunk_id.data(), b.data() + 9, 32);
  h.meta_size = LoadLE32(b.data() + 41);
  h.data_size = LoadLE32(b.data() + 45);
  return h;
}

std::optional<BlobProblem> CheckBlobStructure(Bytes blob, BlobHeader* header) {
  if (blob.size() < kObjHeaderSize) {
    return BlobProblem{BlobProblem::kTooSmall, fmt::format("object too small: expected at least {} header bytes, got {}",
                                                           kObjHeaderSize, blob.size())};
  }
  BlobHeader h = ReadBlobHeader(blob);
  if (header) *header = h;
  if (std::memcmp(blob.data(), kObjMagic.data(), kObjMagic.size()) != 0) {
    return BlobProblem{BlobProblem::kBadMagic, "invalid object magic"};
  }
  if (h.version != kObjVersionB22 && h.version != kObjVersionMaster) {
    return BlobProblem{BlobProblem::kBadVersion, fmt::format("unsupported object version: {}", h.version)};
  }
  if (h.blob_size() != blob.size()) {
    return BlobProblem{BlobProblem::kSizeMismatch,
                       fmt::format("object size inconsistent: expected {} bytes, got {}", h.blob_size(), blob.size())};
  }
  return std::nullopt;
}

size_t BuildObjectAad(Bytes blob_header, uint8_t slot, uint8_t* out) {
  if (blob_header[8] != kObjVersionMaster) return 0;
  std::memcpy(out, blob_header.data(), kObjHeaderAadSize);
  out[kObjHeaderAadSize] = slot;
  return kObjHeaderAadSize + 1;
}

PackWalk WalkPack(Bytes pack) {
  PackWalk w;
  uint64_t pos = 0;
  const uint64_t n = pack.size();
  while (pos < n) {
    if (n - pos < kObjHeaderSize) {
      w.end = WalkEnd::kTrailingBytes;
      w.end_offset = pos;
      w.message = fmt::format("{} trailing bytes after the last object (too short for an object header)", n - pos);
      return w;
    }
    Bytes at = pack.subspan(pos);
    if (std::memcmp(at.data(), kObjMagic.data(), kObjMagic.size()) != 0) {
      w.end = WalkEnd::kNoHeader;
      w.end_offset = pos;
      w.message = fmt::format("no object header at offset {} (pack corruption); the remaining {} bytes cannot be walked",
                              pos, n - pos);
      return w;
    }
    BlobHeader h = ReadBlobHeader(at);
    if (h.blob_size() > n - pos) {
      w.end = WalkEnd::kPastEof;
      w.end_offset = pos;
      w.broken_header = h;
      w.message = fmt::format("object extends past end of file: it needs {} bytes, the pack has {} left (truncated pack?)",
                              h.blob_size(), n - pos);
      return w;
    }
    w.blobs.push_back({pos, h});
    pos += h.blob_size();
  }
  w.end = WalkEnd::kClean;
  w.end_offset = pos;
  return w;
}

std::string CheckManifestPlaintext(Bytes plain, std::vector<std::string>* mandatory_features) {
  msgpack::object_handle oh;
  std::string error;
  if (!msgpack_util::UnpackWhole(plain, kMsgpackMaxDepth, oh, error)) return "manifest is not msgpack: " + error;
  const msgpack::object& m = oh.get();
  if (m.type != msgpack::type::MAP) return "manifest is not a msgpack map";
  const msgpack::object* version = FindFirst(m, "version");
  if (!version || version->type != msgpack::type::POSITIVE_INTEGER || version->via.u64 != 2) {
    return "manifest has no 'version' 2";
  }
  const msgpack::object* archives = FindFirst(m, "archives");
  if (!archives || archives->type != msgpack::type::MAP) return "manifest has no 'archives' map";
  const msgpack::object* config = FindFirst(m, "config");
  if (!config || config->type != msgpack::type::MAP) return "manifest has no 'config' map";
  if (const msgpack::object* ts = FindFirst(m, "timestamp"); !ts || !AsText(*ts)) return "manifest has no 'timestamp'";
  if (const msgpack::object* ff = FindFirst(*config, "feature_flags"); ff && ff->type == msgpack::type::MAP) {
    // {operation: {mandatory: [names], ...}}; borg master supports no feature at all.
    for (uint32_t i = 0; i < ff->via.map.size; ++i) {
      const msgpack::object& op = ff->via.map.ptr[i].val;
      if (op.type != msgpack::type::MAP) continue;
      const msgpack::object* mand = FindFirst(op, "mandatory");
      if (!mand || mand->type != msgpack::type::ARRAY) continue;
      for (uint32_t j = 0; j < mand->via.array.size; ++j) {
        if (std::optional<std::string_view> name = AsText(mand->via.array.ptr[j]); name && mandatory_features) {
          mandatory_features->emplace_back(*name);
        }
      }
    }
  }
  return "";
}

void Sha256(Bytes data, uint8_t out[32]) { SHA256(data.data(), data.size(), out); }

bool ParseHexName(std::string_view name, ChunkId* id) {
  if (name.size() != 64 || !std::all_of(name.begin(), name.end(), IsHex)) return false;
  std::string raw;
  if (!FromHex(name, raw)) return false;
  if (id) std::memcpy(id->data(), raw.data(), 32);
  return true;
}

std::string PackItemName(const std::string& pack_hex) { return "packs/" + pack_hex.substr(0, 2) + "/" + pack_hex; }

Result<BorgstoreLayout> ReadBorgstoreLayout(const io::Env& env, const std::string& path, const LayoutOptions& opts) {
  BorgstoreLayout layout;
  layout.path = path;
  const std::string root = path;

  // 1. config/
  Result<std::string> version = env.ReadWholeFile(root + "/config/version", 64);
  if (!version.ok()) {
    return Status(StatusCode::kNotARepository, path + " is not a borg repository: config/version cannot be read: " +
                                                   version.status().message());
  }
  std::string v = *version;
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  if (v != "4") {
    return Status(StatusCode::kUnsupported, "unsupported repository version " + v + " at " + path +
                                                " (this reader handles borgstore version 4)");
  }
  Result<std::string> id = env.ReadWholeFile(root + "/config/id", 256);
  if (!id.ok()) {
    return Status(StatusCode::kNotARepository,
                  path + " is not a borg repository: config/id cannot be read: " + id.status().message());
  }
  std::string id_hex = *id;
  while (!id_hex.empty() && (id_hex.back() == '\n' || id_hex.back() == ' ')) id_hex.pop_back();
  ChunkId id_raw;
  if (!ParseHexName(id_hex, &id_raw)) {
    return Status(StatusCode::kInvalidRepositoryConfig, "config/id of " + path + " is not 64 lowercase hex characters");
  }
  layout.id_hex = id_hex;
  layout.id.assign(reinterpret_cast<const char*>(id_raw.data()), 32);
  Result<std::string> readme = env.ReadWholeFile(root + "/config/readme", 4096);
  if (!readme.ok() || *readme != kStoreReadme) {
    layout.notes.push_back("config/readme is missing or not borg's text (borg does not read it)");
  }
  layout.manifest_path = root + "/config/manifest";
  {
    Result<io::FileStat> m = env.Stat(layout.manifest_path);
    // Something that is not a regular file is "present" too: reading it then says what it is.
    layout.manifest_present = m.ok();
  }

  // 2. locks/
  if (Status s = CheckLocks(env, root + "/locks", opts, layout); !s.ok()) return s;

  // 3. packs/<xx>/<64 hex>
  Result<std::vector<io::DirEntry>> pack_dirs = ListDir(env, root + "/packs");
  if (!pack_dirs.ok()) return pack_dirs.status();
  for (const io::DirEntry& d : *pack_dirs) {
    const std::string& dname = d.name;
    if (d.type != io::EntryType::kDirectory) {
      if (!IsStoreTemporary(dname)) {
        layout.findings.push_back(LayoutFinding(Severity::kWarning, Stage::kSegment, "packs/" + dname,
                                                "unexpected file directly in packs/ (packs live in packs/<xx>/); not checked"));
      }
      continue;
    }
    Result<std::vector<io::DirEntry>> files = ListDir(env, root + "/packs/" + dname);
    if (!files.ok()) return files.status();
    for (const io::DirEntry& f : *files) {
      const std::string& name = f.name;
      if (IsStoreTemporary(name)) continue;
      std::string item = "packs/" + dname + "/" + name;
      PackFile p;
      if (f.type != io::EntryType::kRegular && ParseHexName(name, &p.id) && name.compare(0, 2, dname) == 0) {
        Result<io::FileStat> st = env.Stat(root + "/" + item);
        const std::string what = std::string("a ") + (st.ok() ? st->type_name : "special file");
        layout.not_regular_packs[name] = what;  // reported by the source, with what the index says of it
        continue;
      }
      if (f.type != io::EntryType::kRegular || !ParseHexName(name, &p.id)) {
        layout.findings.push_back(LayoutFinding(Severity::kWarning, Stage::kSegment, item,
                                                "has an invalid name (not 64 lowercase hex characters); not checked"));
        continue;
      }
      if (name.compare(0, 2, dname) != 0) {
        layout.findings.push_back(LayoutFinding(Severity::kWarning, Stage::kSegment, item,
                                                "is in the wrong directory (borg looks for it in packs/" +
                                                    name.substr(0, 2) + "/); not checked"));
        continue;
      }
      p.name = name;
      p.path = root + "/" + item;
      Result<std::optional<uint64_t>> size = env.SizeUnlessGone(p.path, f);
      if (!size.ok()) return size.status();
      if (!*size) continue;
      p.size = **size;
      layout.pack_bytes += p.size;
      layout.packs.push_back(std::move(p));
    }
  }
  std::sort(layout.packs.begin(), layout.packs.end(), [](const PackFile& a, const PackFile& b) { return a.name < b.name; });

  // 4. index/, keys/, archives/, cache/
  auto list_items = [&](const char* ns, std::vector<StoreItem>& out) -> Status {
    const std::string dir = root + "/" + ns;
    Result<std::vector<io::DirEntry>> items = ListDir(env, dir);
    if (!items.ok()) return items.status();
    for (const io::DirEntry& e : *items) {
      if (e.type != io::EntryType::kRegular || IsStoreTemporary(e.name)) continue;
      Result<std::optional<uint64_t>> size = env.SizeUnlessGone(dir + "/" + e.name, e);
      if (!size.ok()) return size.status();  // an archive left out here would never be walked
      if (!*size) continue;
      out.push_back({e.name, dir + "/" + e.name, **size});
    }
    return Status::Ok();
  };
  if (Status s = list_items("index", layout.index_fragments); !s.ok()) return s;
  if (Status s = list_items("keys", layout.keys); !s.ok()) return s;
  std::vector<StoreItem> archives;
  if (Status s = list_items("archives", archives); !s.ok()) return s;
  for (const StoreItem& a : archives) {
    ChunkId aid;
    if (ParseHexName(a.name, &aid)) {
      layout.archives.push_back(aid);
    } else if (a.name.size() == 68 && a.name.compare(64, 4, ".del") == 0 && ParseHexName(a.name.substr(0, 64), nullptr)) {
      layout.deleted_archives++;
    } else {
      layout.findings.push_back(LayoutFinding(Severity::kWarning, Stage::kSegment, "archives/" + a.name,
                                              "has an invalid name (not an archive id); ignored"));
    }
  }
  std::sort(layout.archives.begin(), layout.archives.end());
  layout.chunkindex_invalid = env.Stat(root + "/cache/chunkindex-invalid").ok();
  return layout;
}

}  // namespace borgcheck::repo
