#include "checker/archive/metadata_decode.h"

#include <cstring>
#include <map>

#include "checker/base/msgpack_util.h"

namespace borgcheck::archive {
namespace {

namespace mu = msgpack_util;

// Manifests and archive objects nest at most 4 deep (config.feature_flags.<op>.mandatory).
constexpr size_t kMaxDepth = 16;

bool AsInt(const msgpack::object* o, int64_t& v) {
  if (o == nullptr) return false;
  if (o->type == msgpack::type::POSITIVE_INTEGER) {
    if (o->via.u64 > uint64_t(INT64_MAX)) return false;
    v = int64_t(o->via.u64);
    return true;
  }
  if (o->type == msgpack::type::NEGATIVE_INTEGER) {
    v = o->via.i64;
    return true;
  }
  return false;
}

bool AsUint(const msgpack::object* o, uint64_t& v) {
  if (o == nullptr || o->type != msgpack::type::POSITIVE_INTEGER) return false;
  v = o->via.u64;
  return true;
}

bool AsString(const msgpack::object* o, std::string& out) {
  Bytes b;
  if (!mu::AsRaw(o, b)) return false;
  out.assign(reinterpret_cast<const char*>(b.data()), b.size());
  return true;
}

bool AsId(const msgpack::object& o, ChunkId& id) {
  Bytes b;
  if (!mu::AsRaw(&o, b) || b.size() != id.size()) return false;
  std::memcpy(id.data(), b.data(), id.size());
  return true;
}

// A list of 32-byte ids; `what` names it in the error.
bool AsIdList(const msgpack::object* o, std::string_view what, std::vector<ChunkId>& ids,
              std::string& error) {
  if (o == nullptr || o->type != msgpack::type::ARRAY) {
    error = std::string(what) + " is not a list";
    return false;
  }
  ids.reserve(ids.size() + o->via.array.size);
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    ChunkId id;
    if (!AsId(o->via.array.ptr[i], id)) {
      error = std::string(what) + " entry " + std::to_string(i) + " is not a 32-byte id";
      return false;
    }
    ids.push_back(id);
  }
  return true;
}

bool AppendKeys(const msgpack::object* o, std::vector<std::string>& keys, std::string& error) {
  if (o == nullptr) return true;
  if (o->type != msgpack::type::ARRAY) {
    error = "item_keys is not a list";
    return false;
  }
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    std::string k;
    if (!AsString(&o->via.array.ptr[i], k)) {
      error = "item_keys entry " + std::to_string(i) + " is not a string";
      return false;
    }
    keys.push_back(std::move(k));
  }
  return true;
}

bool Unpack(Bytes plaintext, msgpack::object_handle& oh, std::string_view what,
            std::string& error) {
  std::string err;
  if (!mu::UnpackWhole(plaintext, kMaxDepth, oh, err)) {
    error = std::string(what) + " is not valid msgpack: " + err;
    return false;
  }
  if (oh.get().type != msgpack::type::MAP) {
    error = std::string(what) + " is not a msgpack map";
    return false;
  }
  return true;
}

}  // namespace

std::string_view GenerationName(Generation g) {
  switch (g) {
    case Generation::kBorg1: return "borg1";
    case Generation::kBorg2b5: return "borg2-b5";
    case Generation::kBorg2Master: return "borg2-master";
  }
  return "borg1";
}

std::string_view ObjectKindName(ObjectKind k) {
  switch (k) {
    case ObjectKind::kManifest: return "manifest";
    case ObjectKind::kArchive: return "archive metadata";
    case ObjectKind::kItemPtrs: return "archive chunk-id list";
    case ObjectKind::kItemStream: return "item metadata";
  }
  return "item metadata";
}

bool DecodeManifest(Bytes plaintext, Generation g, ManifestInfo& out, std::string& error) {
  out = ManifestInfo();
  msgpack::object_handle oh;
  if (!Unpack(plaintext, oh, "manifest", error)) return false;
  const msgpack::object& m = oh.get();
  if (!AsInt(mu::Find(m, "version"), out.version) || (out.version != 1 && out.version != 2)) {
    error = "Invalid manifest version";  // borg's ValueError text
    return false;
  }
  AsString(mu::Find(m, "timestamp"), out.timestamp);
  out.has_tam = mu::Find(m, "tam") != nullptr;
  if (!AppendKeys(mu::Find(m, "item_keys"), out.item_keys, error)) return false;
  if (const msgpack::object* config = mu::Find(m, "config"); config != nullptr) {
    if (config->type != msgpack::type::MAP) {
      error = "manifest config is not a map";
      return false;
    }
    if (const msgpack::object* t = mu::Find(*config, "tam_required");
        t != nullptr && t->type == msgpack::type::BOOLEAN) {
      out.tam_required = t->via.boolean;
    }
    if (!AppendKeys(mu::Find(*config, "item_keys"), out.item_keys, error)) return false;
  }
  const msgpack::object* archives = mu::Find(m, "archives");
  if (archives == nullptr || archives->type != msgpack::type::MAP) {
    error = "manifest archives is not a map";
    return false;
  }
  // borg 2 master keeps the archive list in archives/; the manifest's map is always empty
  // and master never reads it.
  if (g == Generation::kBorg2Master) return true;
  std::map<std::string, size_t, std::less<>> position;
  for (uint32_t i = 0; i < archives->via.map.size; ++i) {
    const msgpack::object_kv& kv = archives->via.map.ptr[i];
    ManifestArchive a;
    if (!AsString(&kv.key, a.name)) {
      error = "manifest archive name " + std::to_string(i) + " is not a string";
      return false;
    }
    const msgpack::object* id = kv.val.type == msgpack::type::MAP ? mu::Find(kv.val, "id") : nullptr;
    if (id == nullptr || !AsId(*id, a.id) || !AsString(mu::Find(kv.val, "time"), a.time)) {
      error = "manifest entry of archive " + a.name + " is not {id, time}";
      return false;
    }
    if (auto it = position.find(a.name); it != position.end()) {
      out.archives[it->second] = std::move(a);
    } else {
      position.emplace(a.name, out.archives.size());
      out.archives.push_back(std::move(a));
    }
  }
  return true;
}

ItemKeySet ItemKeysFor(Generation g, const ManifestInfo& manifest) {
  ItemKeySet keys(g);
  for (const std::string& k : manifest.item_keys) keys.Add(k);
  return keys;
}

bool DecodeArchive(Bytes plaintext, Generation g, ArchiveInfo& out, std::string& error) {
  out = ArchiveInfo();
  msgpack::object_handle oh;
  if (!Unpack(plaintext, oh, "archive metadata", error)) return false;
  const msgpack::object& m = oh.get();
  const int64_t want = g == Generation::kBorg1 ? 1 : 2;
  if (!AsInt(mu::Find(m, "version"), out.version)) {
    error = "archive metadata has no version";
    return false;
  }
  if (out.version != want) {
    error = "Unknown archive metadata version " + std::to_string(out.version);
    return false;
  }
  if (!AsString(mu::Find(m, "name"), out.name)) {
    error = "archive metadata has no name";
    return false;
  }
  AsString(mu::Find(m, "time"), out.time);
  out.has_tam = mu::Find(m, "tam") != nullptr;
  uint64_t v = 0;
  if (AsUint(mu::Find(m, "nfiles"), v)) out.nfiles = v;
  if (AsUint(mu::Find(m, "size"), v)) out.size = v;
  const msgpack::object* items = mu::Find(m, "items");
  const msgpack::object* ptrs = mu::Find(m, "item_ptrs");
  if (g == Generation::kBorg1) {
    if (ptrs != nullptr) {
      error = "archive metadata of version 1 has item_ptrs";
      return false;
    }
    return AsIdList(items, "items", out.items, error);
  }
  if (items != nullptr) {  // borg 2 asserts "items" not in metadata
    error = "archive metadata of version 2 has items";
    return false;
  }
  return AsIdList(ptrs, "item_ptrs", out.item_ptrs, error);
}

bool DecodeItemPtrs(Bytes plaintext, std::vector<ChunkId>& ids, std::string& error) {
  msgpack::object_handle oh;
  std::string err;
  if (!mu::UnpackWhole(plaintext, kMaxDepth, oh, err)) {
    error = "archive chunk-id list is not valid msgpack: " + err;
    return false;
  }
  return AsIdList(&oh.get(), "archive chunk-id list", ids, error);
}

bool ParseArchiveEntryName(std::string_view name, ChunkId& id, bool& soft_deleted) {
  soft_deleted = false;
  if (name.size() == 68 && name.substr(64) == ".del") {
    soft_deleted = true;
    name = name.substr(0, 64);
  }
  if (name.size() != 64) return false;
  std::string bin;
  if (!FromHex(name, bin)) return false;
  std::memcpy(id.data(), bin.data(), id.size());
  return true;
}

}  // namespace borgcheck::archive
