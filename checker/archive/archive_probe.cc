// archive_probe: a test tool that runs the archive decoders and the walker over plaintexts
// dumped by real borg, for archive_interop_test.py. Not part of borgcheck.
//
//   archive_probe --generation borg1|b5|master --objects DIR [--missing HEX]... [--damaged HEX]...
//                 [--archive-id HEX]... (master: the archives/ entries) --items|--walk
//
// DIR holds one file per object, as `borg debug dump-repo-objs` writes them:
// <8 digits>_<64 hex id>.obj with the object's decrypted, decompressed plaintext. --missing
// makes an object absent, --damaged makes it fail to fetch (stage authentication).
//
// --items: one JSON line per archive with every item of its stream (ItemStreamDecoder).
// --walk:  one JSON line per archive with the ArchiveWalker's result, then one line with the
//          marked ids, the orphan count (stored objects, manifest excluded, that no walked
//          archive references) and the walker's counters.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "checker/archive/archive_walker.h"
#include "checker/archive/item_stream.h"
#include "checker/archive/metadata_decode.h"

namespace borgcheck::archive {
namespace {

using json = nlohmann::json;

std::string Hex(const ChunkId& id) { return ToHex(Bytes(id.data(), id.size())); }
std::string Str(Bytes b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

bool ParseId(const std::string& hex, ChunkId& id) {
  std::string bin;
  if (hex.size() != 64 || !FromHex(hex, bin)) return false;
  std::memcpy(id.data(), bin.data(), 32);
  return true;
}

class DumpRepo : public ObjectFetcher, public ReferenceTable {
 public:
  bool Load(const std::string& dir) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return false;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      const size_t us = name.find('_');
      if (us == std::string::npos || name.size() != us + 1 + 64 + 4 || name.substr(name.size() - 4) != ".obj") continue;
      ChunkId id;
      if (!ParseId(name.substr(us + 1, 64), id)) continue;
      std::ifstream f(dir + "/" + name, std::ios::binary);
      std::ostringstream s;
      s << f.rdbuf();
      objects_[id] = s.str();
    }
    closedir(d);
    return true;
  }
  void Remove(const ChunkId& id) { objects_.erase(id); }
  void Damage(const ChunkId& id) { damaged_.insert(id); }
  const std::string* Get(const ChunkId& id) const {
    auto it = objects_.find(id);
    return it == objects_.end() ? nullptr : &it->second;
  }
  const std::map<ChunkId, std::string>& objects() const { return objects_; }

  FetchStatus Fetch(const ChunkId& id, ObjectKind, ByteBuffer& plaintext, FetchProblem& problem) override {
    if (damaged_.count(id)) {
      problem.stage = report::Stage::kAuthentication;
      problem.message = "damaged by --damaged";
      return FetchStatus::kDamaged;
    }
    const std::string* p = Get(id);
    if (p == nullptr) return FetchStatus::kMissing;
    plaintext.Assign(AsBytes(*p));
    return FetchStatus::kOk;
  }
  RefState Reference(const ChunkId& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    marked_.insert(id);
    if (!objects_.count(id)) return RefState::kMissing;
    return damaged_.count(id) ? RefState::kBad : RefState::kPresent;
  }
  std::set<ChunkId> marked() {
    std::lock_guard<std::mutex> lock(mu_);
    return marked_;
  }

 private:
  std::map<ChunkId, std::string> objects_;
  std::set<ChunkId> damaged_;
  std::mutex mu_;
  std::set<ChunkId> marked_;
};

json ChunkList(const std::vector<ChunkRef>& l) {
  json a = json::array();
  for (const ChunkRef& c : l) a.push_back({Hex(c.id), c.size, c.offset});
  return a;
}

class JsonItems : public ItemSink {
 public:
  void OnItem(const ItemRecord& item, const ItemPlace& place) override {
    json j;
    j["path"] = Str(item.path);
    j["chunk"] = chunk;  // the item-stream chunk the item ends in
    j["started_in_earlier_chunk"] = place.started_in_carry;
    j["type"] = std::string(ItemTypeName(item.type));
    j["size"] = item.ChunksSize();
    if (item.source) j["source"] = Str(*item.source);
    if (item.target) j["target"] = Str(*item.target);
    if (item.hlid) j["hlid"] = ToHex(*item.hlid);
    if (item.hardlink_master) j["hardlink_master"] = *item.hardlink_master;
    if (item.has_chunks) j["chunks"] = ChunkList(item.chunks);
    if (item.has_chunks_healthy) j["chunks_healthy"] = ChunkList(item.chunks_healthy);
    items.push_back(std::move(j));
  }
  void OnIssue(const StepIssue& issue) override {
    issues.push_back(std::string(IssueKindName(issue.kind)) + ": " + issue.reason);
  }
  json items = json::array();
  json issues = json::array();
  uint32_t chunk = 0;
};

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

int Main(int argc, char** argv) {
  Generation g = Generation::kBorg1;
  std::string dir;
  std::vector<ChunkId> missing, damaged, archive_ids;
  bool items = false, walk = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    auto id_arg = [&](std::vector<ChunkId>& out) {
      ChunkId id;
      const std::string v = next();
      if (!ParseId(v, id)) {
        std::cerr << "bad id " << v << "\n";
        std::exit(2);
      }
      out.push_back(id);
    };
    if (a == "--generation") {
      const std::string v = next();
      g = v == "borg1" ? Generation::kBorg1 : v == "b5" ? Generation::kBorg2b5 : Generation::kBorg2Master;
    } else if (a == "--objects") {
      dir = next();
    } else if (a == "--missing") {
      id_arg(missing);
    } else if (a == "--damaged") {
      id_arg(damaged);
    } else if (a == "--archive-id") {
      id_arg(archive_ids);
    } else if (a == "--items") {
      items = true;
    } else if (a == "--walk") {
      walk = true;
    } else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  DumpRepo repo;
  if (dir.empty() || !repo.Load(dir)) {
    std::cerr << "cannot read --objects " << dir << "\n";
    return 2;
  }
  for (const ChunkId& id : missing) repo.Remove(id);
  for (const ChunkId& id : damaged) repo.Damage(id);

  const ChunkId manifest_id{};
  const std::string* m = repo.Get(manifest_id);
  if (m == nullptr) {
    std::cerr << "no manifest in " << dir << "\n";
    return 2;
  }
  ManifestInfo manifest;
  std::string err;
  if (!DecodeManifest(AsBytes(*m), g, manifest, err)) {
    std::cerr << "manifest: " << err << "\n";
    return 1;
  }
  std::vector<ManifestArchive> archives = manifest.archives;
  for (const ChunkId& id : archive_ids) archives.push_back({"", id, ""});
  {
    json j;
    j["manifest"]["version"] = manifest.version;
    j["manifest"]["archives"] = json::array();
    for (const ManifestArchive& a : manifest.archives) j["manifest"]["archives"].push_back({a.name, Hex(a.id), a.time});
    j["manifest"]["item_keys"] = manifest.item_keys;
    j["manifest"]["has_tam"] = manifest.has_tam;
    std::cout << Dump(j) << "\n";
  }
  const ItemKeySet keys = ItemKeysFor(g, manifest);

  if (items) {
    StreamOptions so;
    so.item.generation = g;
    so.item.item_keys = &keys;
    for (const ManifestArchive& a : archives) {
      json j;
      j["archive"] = a.name;
      j["id"] = Hex(a.id);
      const std::string* obj = repo.Get(a.id);
      ArchiveInfo info;
      if (obj == nullptr || !DecodeArchive(AsBytes(*obj), g, info, err)) {
        j["error"] = obj == nullptr ? "missing" : err;
        std::cout << Dump(j) << "\n";
        continue;
      }
      j["name"] = info.name;
      j["has_tam"] = info.has_tam;
      std::vector<ChunkId> stream = info.items;
      for (const ChunkId& p : info.item_ptrs) {
        const std::string* ptrs = repo.Get(p);
        if (ptrs == nullptr || !DecodeItemPtrs(AsBytes(*ptrs), stream, err)) j["error"] = "item_ptrs";
      }
      j["item_ptrs"] = info.item_ptrs.size();
      j["stream"] = json::array();
      for (const ChunkId& id : stream) j["stream"].push_back(Hex(id));
      ItemStreamDecoder d(so);
      JsonItems sink;
      for (const ChunkId& id : stream) {
        const std::string* c = repo.Get(id);
        sink.chunk = uint32_t(&id - stream.data());
        if (c == nullptr) {
          d.Skip();
        } else {
          d.Feed(AsBytes(*c), sink);
        }
      }
      j["items"] = std::move(sink.items);
      j["issues"] = std::move(sink.issues);
      j["ends_inside_item"] = d.EndsInsideItem();
      std::cout << Dump(j) << "\n";
    }
  }

  if (walk) {
    WalkOptions wo;
    wo.generation = g;
    wo.item_keys = keys;
    ArchiveWalker walker(repo, repo, wo);
    for (uint32_t i = 0; i < archives.size(); ++i) {
      const ArchiveResult r = walker.WalkArchive(i, archives[i]);
      json j;
      j["archive"] = r.name;
      j["id"] = Hex(r.id);
      j["failure"] = std::string(ArchiveFailureName(r.failure));
      j["message"] = r.message;
      j["items"] = r.items;
      j["stream_chunks"] = r.stream_chunks;
      j["item_ptrs"] = r.item_ptrs;
      j["references"] = r.references;
      j["problems"] = json::array();
      for (const StreamProblem& p : r.problems) {
        j["problems"].push_back({{"kind", std::string(StreamProblemKindName(p.kind))},
                                 {"chunk", Hex(p.chunk)},
                                 {"chunk_index", p.chunk_index},
                                 {"chunk_count", p.chunk_count},
                                 {"items_before", p.items_before},
                                 {"stream_offset", p.stream_offset},
                                 {"started_in_earlier_chunk", p.started_in_earlier_chunk},
                                 {"length", p.length},
                                 {"reason", p.reason},
                                 {"path", p.path}});
      }
      j["bad_refs"] = json::array();
      for (const BadReference& b : r.bad_refs) {
        j["bad_refs"].push_back({{"chunk", Hex(b.chunk)},
                                 {"state", b.state == RefState::kMissing ? "missing" : "bad"},
                                 {"archive", archives[b.archive].name.empty() ? r.name : archives[b.archive].name},
                                 {"path", b.path},
                                 {"begin", b.begin},
                                 {"end", b.end},
                                 {"list", std::string(RefListName(b.list))},
                                 {"via", b.via}});
      }
      j["steps_decoded"] = r.steps_decoded;
      j["memo_hits"] = r.memo_hits;
      std::cout << Dump(j) << "\n";
    }
    const std::set<ChunkId> marked = repo.marked();
    uint64_t orphans = 0;
    for (const auto& [id, body] : repo.objects()) {
      if (id != manifest_id && !marked.count(id)) ++orphans;
    }
    const WalkerStats st = walker.stats();
    json j;
    j["orphans"] = orphans;
    j["stored"] = repo.objects().size();
    j["marked"] = json::array();
    for (const ChunkId& id : marked) j["marked"].push_back(Hex(id));
    j["stats"] = {{"steps_decoded", st.steps_decoded}, {"memo_hits", st.memo_hits},
                  {"memo_entries", st.memo_entries}, {"carry_descriptors", st.carry_descriptors},
                  {"bytes_decoded", st.bytes_decoded}, {"fetches", st.fetches},
                  {"carry_rebuilds", st.carry_rebuilds}, {"hardlink_passes", st.hardlink_passes}};
    std::cout << Dump(j) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace borgcheck::archive

int main(int argc, char** argv) { return borgcheck::archive::Main(argc, argv); }
