// archive_walk: times checker/archive's walker on the plaintexts bench/make-archives-repo
// dumped from a real borg 1.2.4 repository (issue 12's anchor: 30 archives of /usr/share/doc
// and /usr/include). Not a test; nothing here asserts a time.
//
//   archive_walk --dir DIR [--threads N] [--rounds R]
//
// Plaintexts are held in memory, so the fetcher costs a copy: the times are the walk itself
// (decoding, memo, attribution, table lookups). What a real fetch adds is the reading and
// decryption of the chunks counted under "fetched" (distinct metadata only).
//
//   1. the walker on the newest archive alone;
//   2. the walker on every archive, one thread;
//   3. the walker on every archive, N threads (the first archive alone, then the rest in
//      parallel: the schedule archive_walker.h recommends);
//   4. without the memo: every archive's stream decoded in full by ItemStreamDecoder, every
//      reference looked up (what walking each archive costs, as borg does).
// Each is the best of R rounds with a fresh walker and table. Peak RSS is for the process.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "checker/archive/archive_walker.h"
#include "checker/archive/item_stream.h"

using namespace borgcheck;
using namespace borgcheck::archive;

namespace {

ChunkId IdFromHex(const std::string& hex) {
  std::string bin;
  ChunkId id{};
  if (hex.size() == 64 && FromHex(hex, bin)) std::memcpy(id.data(), bin.data(), 32);
  return id;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The chunk table: one mark per stored object.
class Table : public ReferenceTable {
 public:
  explicit Table(const std::vector<ChunkId>& ids) : marks_(ids.size()) {
    index_.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) index_.emplace(ids[i], uint32_t(i));
  }
  RefState Reference(const ChunkId& id) override {
    auto it = index_.find(id);
    if (it == index_.end()) return RefState::kMissing;
    marks_[it->second].store(1, std::memory_order_relaxed);
    return RefState::kPresent;
  }
  size_t marked() const {
    size_t n = 0;
    for (auto& m : marks_) n += m.load();
    return n;
  }

 private:
  std::unordered_map<ChunkId, uint32_t, ChunkIdHash> index_;
  std::vector<std::atomic<uint8_t>> marks_;
};

class Fetcher : public ObjectFetcher {
 public:
  explicit Fetcher(const std::map<ChunkId, std::string>& objects) : objects_(objects) {}
  FetchStatus Fetch(const ChunkId& id, ObjectKind, ByteBuffer& out, FetchProblem&) override {
    auto it = objects_.find(id);
    if (it == objects_.end()) return FetchStatus::kMissing;
    fetched_bytes_.fetch_add(it->second.size(), std::memory_order_relaxed);
    out.Assign(AsBytes(it->second));
    return FetchStatus::kOk;
  }
  uint64_t fetched_bytes() const { return fetched_bytes_.load(); }

 private:
  const std::map<ChunkId, std::string>& objects_;
  std::atomic<uint64_t> fetched_bytes_{0};
};

std::string PackArchive(const std::string& name, const std::vector<ChunkId>& items) {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  auto str = [&](std::string_view s) {
    pk.pack_str(uint32_t(s.size()));
    pk.pack_str_body(s.data(), uint32_t(s.size()));
  };
  pk.pack_map(4);
  str("items");
  pk.pack_array(uint32_t(items.size()));
  for (const ChunkId& id : items) {
    pk.pack_str(32);
    pk.pack_str_body(reinterpret_cast<const char*>(id.data()), 32);
  }
  str("name");
  str(name);
  str("time");
  str("2026-12-01T00:00:00.000000");
  str("version");
  pk.pack_int(1);
  return std::string(b.data(), b.size());
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Run {
  double seconds = 1e9;
  uint64_t items = 0, references = 0, marked = 0, fetched = 0;
  WalkerStats stats;
};

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  unsigned threads = 2;
  int rounds = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = unsigned(std::stoul(argv[++i]));
    else if (a == "--rounds" && i + 1 < argc) rounds = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: archive_walk --dir DIR [--threads N] [--rounds R]\n");
      return 2;
    }
  }
  const nlohmann::json info = nlohmann::json::parse(ReadFile(dir + "/info.json"));
  std::map<ChunkId, std::string> objects;
  std::vector<ManifestArchive> archives;
  uint64_t stream_chunks = 0;
  for (auto& [name, ids] : info["archives"].items()) {
    std::vector<ChunkId> list;
    for (const std::string hex : ids) {
      const ChunkId id = IdFromHex(hex);
      list.push_back(id);
      if (!objects.count(id)) objects[id] = ReadFile(dir + "/items/by-id/" + hex);
    }
    stream_chunks += list.size();
    const std::string obj = PackArchive(name, list);
    ChunkId aid{};
    const uint64_t h = std::hash<std::string>()(obj);
    std::memcpy(aid.data(), &h, 8);
    std::memcpy(aid.data() + 8, name.data(), std::min<size_t>(name.size(), 24));
    objects[aid] = obj;
    archives.push_back({name, aid, ""});
  }
  std::sort(archives.begin(), archives.end(), [](auto& x, auto& y) { return x.name < y.name; });
  std::vector<ChunkId> ids;
  {
    std::ifstream f(dir + "/ids.txt");
    for (std::string line; std::getline(f, line);) {
      if (!line.empty()) ids.push_back(IdFromHex(line));
    }
  }
  for (const ManifestArchive& a : archives) ids.push_back(a.id);
  uint64_t metadata_bytes = 0;
  for (auto& [id, s] : objects) metadata_bytes += s.size();
  std::printf("input: %zu archives, %llu item-stream chunk references, %zu distinct metadata objects (%.1f MB), "
              "%zu objects in the table\n",
              archives.size(), (unsigned long long)stream_chunks, objects.size(), metadata_bytes / 1e6, ids.size());

  auto walk = [&](const std::vector<ManifestArchive>& which, unsigned nthreads) {
    Run best;
    for (int round = 0; round < rounds; ++round) {
      Table table(ids);
      Fetcher fetcher(objects);
      WalkOptions wo;
      wo.generation = Generation::kBorg1;
      ArchiveWalker w(fetcher, table, wo);
      std::vector<ArchiveResult> results(which.size());
      const auto t0 = std::chrono::steady_clock::now();
      results[0] = w.WalkArchive(0, which[0]);
      if (nthreads == 0) {
        for (size_t i = 1; i < which.size(); ++i) results[i] = w.WalkArchive(uint32_t(i), which[i]);
      }
      std::atomic<size_t> next{1};
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < nthreads; ++t) {
        pool.emplace_back([&] {
          for (size_t i = next++; i < which.size(); i = next++) results[i] = w.WalkArchive(uint32_t(i), which[i]);
        });
      }
      for (auto& t : pool) t.join();
      const double s = Seconds(t0);
      if (s < best.seconds) {
        best = Run();
        best.seconds = s;
        for (auto& r : results) {
          best.items += r.items;
          best.references += r.references;
        }
        best.marked = table.marked();
        best.fetched = fetcher.fetched_bytes();
        best.stats = w.stats();
      }
    }
    return best;
  };
  auto print = [](const char* what, const Run& r) {
    std::printf("%-44s %8.3f s  items %9llu  refs %9llu  marked %7llu  decoded %5llu steps (%6.1f MB)  hits %6llu  "
                "fetched %6.1f MB  memo %llu  carries %llu  rebuilds %llu\n",
                what, r.seconds, (unsigned long long)r.items, (unsigned long long)r.references,
                (unsigned long long)r.marked, (unsigned long long)r.stats.steps_decoded, r.stats.bytes_decoded / 1e6,
                (unsigned long long)r.stats.memo_hits, r.fetched / 1e6, (unsigned long long)r.stats.memo_entries,
                (unsigned long long)r.stats.carry_descriptors, (unsigned long long)r.stats.carry_rebuilds);
  };
  print("walker, newest archive", walk({archives.back()}, 1));
  print("walker, all archives, 1 thread", walk(archives, 0));
  char label[64];
  std::snprintf(label, sizeof label, "walker, all archives, %u threads", threads);
  print(label, walk(archives, threads));

  // Without the memo: every stream in full.
  {
    Run best;
    for (int round = 0; round < rounds; ++round) {
      Table table(ids);
      const ItemKeySet keys(Generation::kBorg1);
      StreamOptions o;
      o.item.item_keys = &keys;
      struct Sink : ItemSink {
        Table* table;
        uint64_t items = 0, refs = 0;
        void OnItem(const ItemRecord& item, const ItemPlace&) override {
          ++items;
          for (const ChunkRef& c : item.chunks) {
            ++refs;
            table->Reference(c.id);
          }
        }
        void OnIssue(const StepIssue&) override {}
      } sink;
      sink.table = &table;
      uint64_t bytes = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (auto& [name, list] : info["archives"].items()) {
        ItemStreamDecoder d(o);
        for (const std::string hex : list) {
          const std::string& c = objects.at(IdFromHex(hex));
          bytes += c.size();
          d.Feed(AsBytes(c), sink);
        }
      }
      const double s = Seconds(t0);
      if (s < best.seconds) {
        best = Run();
        best.seconds = s;
        best.items = sink.items;
        best.references = sink.refs;
        best.marked = table.marked();
        best.stats.bytes_decoded = bytes;
        best.stats.steps_decoded = stream_chunks;
      }
    }
    print("no memo: every stream decoded (borg's way)", best);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("peak RSS %.1f MiB (input plaintexts held in memory: %.1f MB)\n", ru.ru_maxrss / 1024.0, metadata_bytes / 1e6);
  return 0;
}
