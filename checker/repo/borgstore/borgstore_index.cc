// Chunk index fragments: parse, check against their names, merge; and the per-pack
// cross-check of index entries against walked blobs.
#include "checker/repo/borgstore/borgstore_index.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/io/env.h"

namespace borgcheck::repo {
using report::Finding;
using report::Severity;
using report::Stage;

namespace {

constexpr uint64_t kMaxFragmentSize = 1ull << 32;  // 50 M entries: far beyond borg's 400 k split
const std::vector<std::string> kValueFields = {"flags", "size", "pack_id", "obj_offset", "obj_size"};
const std::vector<std::string> kValueFormat = {"I", "I", "32s", "I", "I"};

Status Corrupt(std::string why) { return Status(StatusCode::kCorruptMetadata, std::move(why)); }

// Checks the JSON meta of a chunk-index table; returns "" or why it is not one.
std::string CheckMeta(const nlohmann::json& j) {
  if (!j.is_object()) return "the meta is not a JSON object";
  auto is = [&](const char* key, const nlohmann::json& want) { return j.contains(key) && j[key] == want; };
  if (!is("key_size", 32)) return "key_size is not 32";
  if (!is("value_size", 48)) return "value_size is not 48";
  if (!is("byte_order", "little")) return "byte_order is not \"little\"";
  if (!is("value_format", kValueFormat)) return "value_format is not [I, I, 32s, I, I] (not a chunk index)";
  if (j.contains("value_type_fields") && j["value_type_fields"] != kValueFields) {
    return "value_type_fields are not flags, size, pack_id, obj_offset, obj_size (not a chunk index)";
  }
  return "";
}

}  // namespace

Result<IndexFragment> ParseIndexFragment(Bytes content) {
  if (content.size() < kBorghashHeaderSize) return Corrupt(fmt::format("too short for a borghash header ({} bytes)", content.size()));
  if (std::memcmp(content.data(), kBorghashMagic.data(), kBorghashMagic.size()) != 0) return Corrupt("no BORGHASH magic");
  uint32_t version = LoadLE32(content.data() + 8);
  if (version != kBorghashVersion) return Corrupt(fmt::format("unsupported borghash version {}", version));
  uint64_t meta_size = LoadLE32(content.data() + 12);
  IndexFragment frag;
  uint64_t meta_at = kBorghashHeaderSize;
  std::optional<uint64_t> header_used;
  if (content.size() == kBorghashHeaderSize || content[kBorghashHeaderSize] != '{') {
    // Not the 0.2.0 layout: the `mmap` branch's 28-byte header, JSON NUL-padded.
    if (content.size() < kBorghashMmapHeaderSize) return Corrupt("neither borghash layout: the JSON meta does not start at byte 16");
    frag.layout = BorghashLayout::kMmapBranch;
    meta_at = kBorghashMmapHeaderSize;
    frag.capacity = LoadLE32(content.data() + 16);
    header_used = LoadLE32(content.data() + 20);
  }
  if (meta_size > content.size() - meta_at) return Corrupt(fmt::format("meta_size {} runs past the end of the file", meta_size));
  std::string_view meta_text(reinterpret_cast<const char*>(content.data() + meta_at), meta_size);
  if (frag.layout == BorghashLayout::kMmapBranch) {
    size_t nul = meta_text.find('\0');
    if (nul != std::string_view::npos) {
      if (meta_text.find_first_not_of('\0', nul) != std::string_view::npos) return Corrupt("bytes after the JSON padding");
      meta_text = meta_text.substr(0, nul);
    }
  }
  nlohmann::json j = nlohmann::json::parse(meta_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Corrupt("the meta is not valid JSON");
  if (std::string why = CheckMeta(j); !why.empty()) return Corrupt(why);
  uint64_t used;
  if (header_used) {
    used = *header_used;
  } else {
    if (!j.contains("used") || !j["used"].is_number_unsigned()) return Corrupt("the meta has no 'used' count");
    used = j["used"].get<uint64_t>();
    if (j.contains("capacity") && j["capacity"].is_number_unsigned()) frag.capacity = j["capacity"].get<uint64_t>();
  }
  uint64_t records_at = meta_at + meta_size;
  uint64_t have = content.size() - records_at;
  if (used > have / kChunkIndexRecordSize || have != used * kChunkIndexRecordSize) {
    return Corrupt(fmt::format("file size {} is not header + meta + 80 * used ({} records)", content.size(), used));
  }
  frag.records.resize(used);
  for (uint64_t i = 0; i < used; ++i) {
    const uint8_t* r = content.data() + records_at + i * kChunkIndexRecordSize;
    IndexRecord& rec = frag.records[i];
    std::memcpy(rec.chunk_id.data(), r, 32);
    // r[32..36) flags and r[36..40) size are ignored (see the header).
    std::memcpy(rec.entry.pack_id.data(), r + 40, 32);
    rec.entry.offset = LoadLE32(r + 72);
    rec.entry.size = LoadLE32(r + 76);
  }
  return frag;
}

std::string TEST_SerializeIndexFragment(const std::vector<IndexRecord>& records, uint64_t capacity) {
  std::string meta = fmt::format(
      "{{\"key_size\": 32, \"value_size\": 48, \"byte_order\": \"little\", \"value_type_name\": "
      "\"ChunkIndexEntry\", \"value_type_fields\": [\"flags\", \"size\", \"pack_id\", \"obj_offset\", "
      "\"obj_size\"], \"value_format_name\": \"ChunkIndexEntryFormatT\", \"value_format_fields\": "
      "[\"flags\", \"size\", \"pack_id\", \"obj_offset\", \"obj_size\"], \"value_format\": [\"I\", \"I\", "
      "\"32s\", \"I\", \"I\"], \"capacity\": {}, \"used\": {}}}",
      capacity, records.size());
  std::string out(kBorghashMagic);
  uint8_t u32[4];
  StoreLE32(u32, kBorghashVersion);
  out.append(reinterpret_cast<char*>(u32), 4);
  StoreLE32(u32, uint32_t(meta.size()));
  out.append(reinterpret_cast<char*>(u32), 4);
  out += meta;
  for (const IndexRecord& r : records) {
    out.append(reinterpret_cast<const char*>(r.chunk_id.data()), 32);
    StoreLE32(u32, 0x01000000);  // F_NEW, as borg's fragments carry it
    out.append(reinterpret_cast<char*>(u32), 4);
    StoreLE32(u32, 0);
    out.append(reinterpret_cast<char*>(u32), 4);
    out.append(reinterpret_cast<const char*>(r.entry.pack_id.data()), 32);
    StoreLE32(u32, r.entry.offset);
    out.append(reinterpret_cast<char*>(u32), 4);
    StoreLE32(u32, r.entry.size);
    out.append(reinterpret_cast<char*>(u32), 4);
  }
  return out;
}

LoadedChunkIndex LoadChunkIndex(const io::Env& env, const BorgstoreLayout& layout) {
  LoadedChunkIndex idx;
  std::vector<IndexedChunk> all;  // every record of every usable fragment, in fragment order
  auto finding = [&](Severity sev, const std::string& where, std::string msg, const ChunkId* id) -> Finding& {
    idx.findings.push_back(report::MakeFinding(sev, Stage::kIndex, report::Location::Item(where), id, std::move(msg)));
    return idx.findings.back();
  };
  for (const StoreItem& item : layout.index_fragments) {
    const std::string where = "index/" + item.name;
    size_t frag_no = idx.fragment_names.size();
    idx.fragment_names.push_back(item.name);
    ChunkId want;
    bool named = ParseHexName(item.name, &want);
    if (!named) {
      finding(Severity::kWarning, where, "has an invalid name (not 64 lowercase hex characters): borg ignores it", nullptr);
      idx.fragments_bad++;
      continue;
    }
    Result<std::string> content = env.ReadWholeFile(item.path, kMaxFragmentSize);
    if (!content.ok()) {
      finding(Severity::kError, where, "cannot be read: " + content.status().message(), nullptr);
      idx.fragments_bad++;
      continue;
    }
    ChunkId got;
    Sha256(AsBytes(*content), got.data());
    bool name_ok = got == want;
    if (!name_ok) {
      // Read once more before reporting (the engine's policy): the same bytes agree, other bytes
      // that match the name pass (a transient read error: a warning, and those bytes are used).
      ByteBuffer again;
      report::Reread reread = report::Reread::kNotReread;
      switch (io::ReadAgain(env, item.path, 0, AsBytes(*content), again)) {
        case io::SecondRead::kUnreadable: break;
        case io::SecondRead::kSame: reread = report::Reread::kAgreed; break;
        case io::SecondRead::kDifferent: {
          ChunkId got2;
          Sha256(again.view(), got2.data());
          reread = got2 == want ? report::Reread::kPassed : report::Reread::kDiffered;
          if (reread == report::Reread::kPassed) content = std::string(again.view().begin(), again.view().end());
          break;
        }
      }
      name_ok = reread == report::Reread::kPassed;
      Finding& f = finding(name_ok ? Severity::kWarning : Severity::kError, where,
                           name_ok ? std::string("did not match its name (sha256) on the first read; the second read "
                                                 "verified (a transient read error?)")
                                   : std::string("is corrupted: content does not match its name (sha256); borg would "
                                                 "rebuild the chunk index from the packs, and so does this check "
                                                 "(every pack is walked)"),
                           nullptr);
      f.reread = reread;
      if (!name_ok) idx.fragments_bad++;
    }
    Result<IndexFragment> frag = ParseIndexFragment(AsBytes(*content));
    if (!frag.ok()) {
      if (name_ok) idx.fragments_bad++;
      finding(Severity::kError, where, "is not a readable chunk index fragment: " + frag.status().message(), nullptr);
      continue;
    }
    if (frag->layout == BorghashLayout::kMmapBranch) {
      finding(Severity::kWarning, where,
              "uses the borghash `mmap` branch layout (28-byte header, padded JSON), which borg master does not write", nullptr);
    }
    for (const IndexRecord& r : frag->records) all.push_back(IndexedChunk{r.chunk_id, r.entry, uint32_t(frag_no)});
  }
  // Merge: one entry per chunk id, the one of the later fragment (by name) where they disagree.
  std::stable_sort(all.begin(), all.end(), [](const IndexedChunk& x, const IndexedChunk& y) { return x.chunk_id < y.chunk_id; });
  size_t kept = 0;  // compacted in place: no second copy of the records
  for (size_t i = 0; i < all.size(); ++i) {
    if (kept > 0 && all[kept - 1].chunk_id == all[i].chunk_id) {
      const IndexedChunk& prev = all[kept - 1];
      const IndexedChunk& r = all[i];
      if (!(prev.entry == r.entry)) {
        finding(Severity::kWarning, "index/" + idx.fragment_names[r.fragment],
                fmt::format("lists this chunk at [pack {}, offset {}], index/{} at [pack {}, offset {}]; the later "
                            "fragment (by name) is used",
                            ToHex(Bytes(r.entry.pack_id.data(), 32)), r.entry.offset, idx.fragment_names[prev.fragment],
                            ToHex(Bytes(prev.entry.pack_id.data(), 32)), prev.entry.offset),
                &r.chunk_id);
      }
      all[kept - 1] = all[i];
      continue;
    }
    all[kept++] = all[i];
  }
  all.resize(kept);
  idx.chunks = std::move(all);
  for (size_t i = 0; i < idx.chunks.size(); ++i) idx.by_pack[idx.chunks[i].entry.pack_id].push_back(uint32_t(i));
  for (auto& [pack, v] : idx.by_pack) {
    std::sort(v.begin(), v.end(), [&](uint32_t x, uint32_t y) {
      const IndexedChunk& a = idx.chunks[x];
      const IndexedChunk& b = idx.chunks[y];
      return a.entry.offset != b.entry.offset ? a.entry.offset < b.entry.offset : a.chunk_id < b.chunk_id;
    });
  }
  return idx;
}

const IndexedChunk* LoadedChunkIndex::Find(const ChunkId& id) const {
  auto it = std::lower_bound(chunks.begin(), chunks.end(), id,
                             [](const IndexedChunk& c, const ChunkId& k) { return c.chunk_id < k; });
  return it != chunks.end() && it->chunk_id == id ? &*it : nullptr;
}

std::vector<IndexedChunk> LoadedChunkIndex::EntriesOfPack(const ChunkId& pack_id) const {
  std::vector<IndexedChunk> out;
  auto it = by_pack.find(pack_id);
  if (it == by_pack.end()) return out;
  out.reserve(it->second.size());
  for (uint32_t i : it->second) out.push_back(chunks[i]);
  return out;
}

PackCrossCheck CrossCheckPack(const std::vector<IndexedChunk>& entries, const PackWalk& walk) {
  PackCrossCheck out;
  std::vector<bool> claimed(walk.blobs.size(), false);
  for (const IndexedChunk& e : entries) {
    auto it = std::lower_bound(walk.blobs.begin(), walk.blobs.end(), uint64_t(e.entry.offset),
                               [](const WalkedBlob& b, uint64_t off) { return b.offset < off; });
    if (it != walk.blobs.end() && it->offset == e.entry.offset) {
      const WalkedBlob& b = *it;
      if (b.header.chunk_id == e.chunk_id && b.header.blob_size() == e.entry.size) {
        out.matched.push_back({&e, &b});
        claimed[size_t(it - walk.blobs.begin())] = true;
        continue;
      }
      // The entry claims this blob, wrongly: the blob is reported (and verified) as the
      // indexed chunk, not a second time as an orphan.
      claimed[size_t(it - walk.blobs.begin())] = true;
      if (b.header.chunk_id != e.chunk_id) {
        out.unmatched.push_back({&e, "the object at the indexed offset is chunk " + ToHex(Bytes(b.header.chunk_id.data(), 32))});
      } else {
        out.unmatched.push_back({&e, fmt::format("the index says the object is {} bytes, its header says {}",
                                                 e.entry.size, b.header.blob_size())});
      }
      continue;
    }
    if (walk.end != WalkEnd::kClean && e.entry.offset >= walk.end_offset) {
      out.unmatched.push_back({&e, ""});  // beyond where the walk stopped
    } else {
      out.unmatched.push_back({&e, "the indexed offset is not the start of an object in the pack"});
    }
  }
  for (size_t i = 0; i < walk.blobs.size(); ++i) {
    if (!claimed[i]) out.orphans.push_back(&walk.blobs[i]);
  }
  return out;
}

}  // namespace borgcheck::repo
