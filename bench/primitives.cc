// borgcheck_primitives: the single-threaded cost of each primitive borgcheck runs per object,
// over the live objects of one borg 1.x repository, for comparison with a whole check run.
//
// It links the borgcheck libraries and calls what the check calls (ISA-L CRC through
// repo::Crc32, OpenSSL HMAC-SHA256 / crypto::Blake2b, OpenSSL AES-256-CTR, codecs::Decompressor,
// crypto::IdHasher), each alone, over every live object, in passes:
//   1. plan the repository (index or log replay), load the key (BORG_PASSPHRASE etc.);
//   2. "read": stream every committed segment file with 4 MiB preads into one reused buffer,
//      as the check's reader does (from the page cache when warm: mostly kernel copy time);
//   3. load every live entry into memory (untimed);
//   4. time, one pass per primitive over all objects:
//        crc        CRC-32 over entry[4:]               (repo::Crc32 = ISA-L crc32_gzip_refl)
//        mac        HMAC-SHA256 or BLAKE2b over IV||ct  (same contexts/pattern as ObjectOpener)
//        decrypt    AES-256-CTR into a payload arena    (EVP, key schedule made once)
//        open       ObjectOpener::Open (mac + decrypt, the library call; a cross-check)
//        decompress Decompressor::DecodeBorg1 into one reused buffer
//        id_hash    IdHasher::Compute; timed as (decompress + hash) - decompress, because
//                   the hash needs the plaintext and the check hashes it while still cached
//   5. print one JSON object (stdout): per primitive CPU seconds (CLOCK_PROCESS_CPUTIME_ID,
//      so the read's kernel time counts) and wall seconds, the median of --repeat passes,
//      plus objects, stored and plaintext bytes, and the sum of the primitives
//      (read + crc + mac + decrypt + decompress + id_hash).
//
// --engines: instead, the raw single-threaded speed of each hash engine on this machine over
// 256 MiB (OpenSSL SHA-256, borgcheck's own BLAKE2b as the check uses it, libb2's dispatched
// BLAKE2b, and libb2's portable reference BLAKE2b, exported by libb2 0.98 but not declared in
// blake2.h), and under "lanes_MBps" the one-stream and lane speeds of SHA-256, HMAC-SHA256 and
// key-prefixed BLAKE2b-256 at 60,000 bytes, 1 MiB and 8 MiB (bench/hash_engines.h).
//
// Every pass checks its result (CRC equal, MAC equal, id equal): a benchmark over damaged
// data would measure the wrong thing, so a mismatch ends the program with exit 1.
//
// Not a test and not part of borgcheck: built only with -DBORGCHECK_BUILD_BENCH=ON, run by
// bench/compare. Memory: the live entries plus their decrypted payloads (about 2x the stored
// bytes).
//
// Thread contract: single-threaded.
#include <blake2.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/hash_engines.h"
#include "checker/base/bytes.h"
#include "checker/crypto/blake2b.h"
#include "checker/crypto/blake2b_lanes.h"
#include "checker/crypto/key_mode.h"
#include "checker/crypto/object_crypto.h"
#include "checker/crypto/sha256_lanes.h"
#include "checker/io/env.h"
#include "checker/repo/borg1/borg1_plan.h"
#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/segment_log/segment_format.h"
#include "checker/repo/borg1/borg1_key.h"
#include "codecs/decompressor.h"

// libb2's portable implementation: exported, not declared in <blake2.h>. Bench only.
extern "C" {
int blake2b_init_ref(blake2b_state* S, size_t outlen);
int blake2b_update_ref(blake2b_state* S, const uint8_t* in, size_t inlen);
int blake2b_final_ref(blake2b_state* S, uint8_t* out, size_t outlen);
}

namespace {

using namespace borgcheck;

constexpr size_t kMacSize = 32;
constexpr size_t kAesHeaderSize = 1 + 32 + 8;
constexpr size_t kReadWindow = 4 << 20;

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "borgcheck_primitives: %s\n", msg.c_str());
  std::exit(1);
}

double Now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

struct Cost {
  double cpu = 0;
  double wall = 0;
};

// Runs fn `repeat` times; returns the median CPU and wall seconds (each taken separately).
Cost Measure(int repeat, const std::function<void()>& fn) {
  std::vector<double> cpu, wall;
  for (int i = 0; i < repeat; ++i) {
    double c0 = Now(CLOCK_PROCESS_CPUTIME_ID), w0 = Now(CLOCK_MONOTONIC);
    fn();
    cpu.push_back(Now(CLOCK_PROCESS_CPUTIME_ID) - c0);
    wall.push_back(Now(CLOCK_MONOTONIC) - w0);
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(wall.begin(), wall.end());
  return {cpu[cpu.size() / 2], wall[wall.size() / 2]};
}

// The check's MAC, done the same way as object_crypto.cc: HMAC context keyed once and
// re-initialised per message, or a BLAKE2b state with the 128-byte key absorbed once.
class Mac {
 public:
  Mac(crypto::KeyMode mode, Bytes key) : blake2_(crypto::UsesBlake2(mode)) {
    if (blake2_) {
      if (!keyed_.Init(kMacSize)) Die("blake2b init failed");
      keyed_.Update(key);
      return;
    }
    mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    ctx_ = mac_ ? EVP_MAC_CTX_new(mac_) : nullptr;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    if (!ctx_ || EVP_MAC_init(ctx_, key.data(), key.size(), params) != 1) Die("HMAC init failed");
  }
  ~Mac() {
    EVP_MAC_CTX_free(ctx_);
    EVP_MAC_free(mac_);
  }
  void Compute(Bytes msg, uint8_t out[kMacSize]) {
    if (blake2_) {
      crypto::Blake2b s = keyed_;
      s.Update(msg);
      s.Final(out);
      return;
    }
    size_t n = 0;
    if (EVP_MAC_init(ctx_, nullptr, 0, nullptr) != 1 || EVP_MAC_update(ctx_, msg.data(), msg.size()) != 1 ||
        EVP_MAC_final(ctx_, out, &n, kMacSize) != 1) {
      Die("HMAC failed");
    }
  }

 private:
  bool blake2_;
  crypto::Blake2b keyed_;
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* ctx_ = nullptr;
};

struct Object {
  size_t entry_pos = 0;     // in the entry arena
  uint32_t entry_size = 0;  // whole entry, header included
  size_t payload_pos = 0;   // in the payload arena (after decrypt)
  uint32_t payload_size = 0;
  bool manifest = false;
  const uint8_t* id = nullptr;  // 32 bytes, in the plan
};

int Engines(int repeat) {
  constexpr size_t kSize = 256 << 20;
  ByteBuffer data;
  data.Resize(kSize);
  for (size_t i = 0; i < kSize; ++i) data.data()[i] = uint8_t(i * 2654435761u >> 13);
  uint8_t out[32];
  std::map<std::string, Cost> cost;
  cost["sha256_openssl"] = Measure(repeat, [&] {
    unsigned int n = 0;
    if (EVP_Digest(data.data(), kSize, out, &n, EVP_sha256(), nullptr) != 1) Die("SHA-256 failed");
  });
  cost["blake2b_borgcheck"] = Measure(repeat, [&] {
    crypto::Blake2b h;
    if (!h.Init(32)) Die("blake2b init failed");
    h.Update(Bytes(data.data(), kSize));
    h.Final(out);
  });
  cost["blake2b_libb2_dispatch"] = Measure(repeat, [&] {
    blake2b_state s;
    blake2b_init(&s, 32);
    blake2b_update(&s, data.data(), kSize);
    blake2b_final(&s, out, 32);
  });
  cost["blake2b_libb2_ref"] = Measure(repeat, [&] {
    blake2b_state s;
    blake2b_init_ref(&s, 32);
    blake2b_update_ref(&s, data.data(), kSize);
    blake2b_final_ref(&s, out, 32);
  });
  std::string line = "{\"engines_MBps\": {";
  bool first = true;
  for (const auto& [k, c] : cost) {
    line += fmt::format("{}\"{}\": {:.0f}", first ? "" : ", ", k, double(kSize) / 1e6 / c.cpu);
    first = false;
  }
  line += "}, \"lanes_MBps\": " + bench::MeasureHashLanes(repeat) + "}\n";
  std::fputs(line.c_str(), stdout);
  return 0;
}

int Main(int argc, char** argv) {
  std::string repo_path;
  int repeat = 3;
  bool engines = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--engines") {
      engines = true;
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (!a.empty() && a[0] != '-' && repo_path.empty()) {
      repo_path = a;
    } else {
      Die("usage: borgcheck_primitives [--repeat N] REPO | --engines  (passphrase: BORG_PASSPHRASE)");
    }
  }
  if (engines) return Engines(repeat);
  if (repo_path.empty()) Die("usage: borgcheck_primitives [--repeat N] REPO | --engines");

  // 1. Plan and key.
  Result<repo::RepoConfig> config = repo::IdentifyRepository(io::Env::Default(), repo_path, {true});
  if (!config.ok()) Die(config.status().message());
  Result<repo::RepositoryPlan> plan_r =
      repo::PlanRepository(io::Env::Default(), repo_path, *config, repo::ListRepoFolder(io::Env::Default(), repo_path));
  if (!plan_r.ok()) Die(plan_r.status().message());
  const repo::RepositoryPlan& plan = *plan_r;
  if (!plan.findings.empty()) Die("the repository has findings; benchmark an intact one");
  std::map<uint32_t, const repo::SegmentFile*> segs;
  for (const repo::SegmentFile& s : plan.segments) segs[s.number] = &s;

  // 3 (first, to learn the mode). Load every live entry.
  ByteBuffer entries;
  {
    uint64_t total = 0;
    std::vector<uint32_t> sizes(plan.live.size());
    std::map<uint32_t, std::unique_ptr<io::File>> files;
    for (size_t i = 0; i < plan.live.size(); ++i) {
      const repo::LiveObject& o = plan.live[i];
      auto [it, fresh] = files.try_emplace(o.segment);
      if (fresh) {
        Result<std::unique_ptr<io::File>> f = io::Env::Default().Open(segs.at(o.segment)->path);
        if (!f.ok()) Die(f.status().message());
        it->second = std::move(f).value();
      }
      uint8_t hdr[repo::kHeaderSizeWithKey];
      if (!it->second->ReadAt(o.offset, sizeof hdr, hdr).ok()) Die("header read failed");
      sizes[i] = LoadLE32(hdr + 4);
      total += sizes[i];
    }
    entries.Resize(total);
    size_t pos = 0;
    for (size_t i = 0; i < plan.live.size(); ++i) {
      const repo::LiveObject& o = plan.live[i];
      if (!files.at(o.segment)->ReadAt(o.offset, sizes[i], entries.data() + pos).ok()) Die("entry read failed");
      pos += sizes[i];
    }
  }
  std::vector<Object> objects(plan.live.size());
  uint64_t stored = 0;
  {
    size_t pos = 0;
    for (size_t i = 0; i < plan.live.size(); ++i) {
      Object& ob = objects[i];
      ob.entry_pos = pos;
      ob.entry_size = LoadLE32(entries.data() + pos + 4);
      ob.id = plan.live[i].id.data();
      ob.manifest = std::all_of(ob.id, ob.id + 32, [](uint8_t b) { return b == 0; });
      pos += ob.entry_size;
      stored += ob.entry_size;
    }
  }
  if (objects.empty()) Die("no live objects");
  auto entry_of = [&](const Object& o) { return Bytes(entries.data() + o.entry_pos, o.entry_size); };
  auto obj_of = [&](const Object& o) { return entry_of(o).subspan(repo::kHeaderSizeWithKey); };

  std::optional<crypto::KeyMode> mode_opt = crypto::KeyModeFromTypeByte(obj_of(objects[0])[0]);
  if (!mode_opt) Die("unknown TYPE byte");
  const crypto::KeyMode mode = *mode_opt;
  std::optional<crypto::KeyMaterial> key;
  if (crypto::NeedsKey(mode)) {
    Result<crypto::KeyMaterial> k = repo::LoadBorg1Key(repo_path, *config, mode);
    if (!k.ok()) Die(k.status().message());
    key = std::move(k).value();
  }
  const bool encrypted = crypto::IsEncrypted(mode);

  std::map<std::string, Cost> cost;

  // 2. Read: every committed segment, in 4 MiB windows, into one buffer.
  {
    ByteBuffer window;
    window.Resize(kReadWindow);
    uint64_t read_bytes = 0;
    cost["read"] = Measure(repeat, [&] {
      read_bytes = 0;
      for (const repo::SegmentFile& s : plan.segments) {
        Result<std::unique_ptr<io::File>> f = io::Env::Default().Open(s.path);
        if (!f.ok()) Die(f.status().message());
        for (uint64_t off = 0; off < (*f)->size(); off += kReadWindow) {
          size_t n = size_t(std::min<uint64_t>(kReadWindow, (*f)->size() - off));
          if (!(*f)->ReadAt(off, n, window.data()).ok()) Die("segment read failed");
          read_bytes += n;
        }
      }
    });
    if (read_bytes != plan.total_bytes) {
      // total_bytes may stop at a COMMIT with stray bytes after it; fine, but say so.
      std::fprintf(stderr, "note: read %llu bytes, plan total %llu\n", (unsigned long long)read_bytes,
                   (unsigned long long)plan.total_bytes);
    }
  }

  // 4. Primitives.
  cost["crc"] = Measure(repeat, [&] {
    for (const Object& o : objects) {
      Bytes e = entry_of(o);
      if (repo::Crc32(e.subspan(4)) != LoadLE32(e.data())) Die("CRC mismatch");
    }
  });

  ByteBuffer payloads;
  if (encrypted) {
    Mac mac(mode, key->enc_hmac_key.view());
    cost["mac"] = Measure(repeat, [&] {
      uint8_t out[kMacSize];
      for (const Object& o : objects) {
        Bytes obj = obj_of(o);
        mac.Compute(obj.subspan(1 + kMacSize), out);
        if (CRYPTO_memcmp(out, obj.data() + 1, kMacSize) != 0) Die("MAC mismatch");
      }
    });
    uint64_t payload_total = 0;
    for (Object& o : objects) {
      o.payload_pos = payload_total;
      o.payload_size = uint32_t(obj_of(o).size() - kAesHeaderSize);
      payload_total += o.payload_size;
    }
    payloads.Resize(payload_total);
    std::memset(payloads.data(), 0, payload_total);  // fault the arena in before timing
    EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-256-CTR", nullptr);
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    if (!cipher || !ctx || EVP_DecryptInit_ex(ctx, cipher, nullptr, key->enc_key.data(), nullptr) != 1) {
      Die("AES init failed");
    }
    cost["decrypt"] = Measure(repeat, [&] {
      for (const Object& o : objects) {
        Bytes obj = obj_of(o);
        uint8_t counter[16] = {};
        std::memcpy(counter + 8, obj.data() + 1 + kMacSize, 8);
        int outl = 0;
        if (EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, counter) != 1 ||
            EVP_DecryptUpdate(ctx, payloads.data() + o.payload_pos, &outl, obj.data() + kAesHeaderSize,
                              int(o.payload_size)) != 1 ||
            size_t(outl) != o.payload_size) {
          Die("AES-CTR failed");
        }
      }
    });
    EVP_CIPHER_CTX_free(ctx);
    EVP_CIPHER_free(cipher);
  } else {
    // Unencrypted modes: the payload is the object after its TYPE byte, no MAC, no cipher.
    uint64_t payload_total = 0;
    for (Object& o : objects) payload_total += obj_of(o).size() - 1;
    payloads.Resize(payload_total);
    size_t pos = 0;
    for (Object& o : objects) {
      Bytes p = obj_of(o).subspan(1);
      o.payload_pos = pos;
      o.payload_size = uint32_t(p.size());
      std::memcpy(payloads.data() + pos, p.data(), p.size());
      pos += p.size();
    }
    cost["mac"] = {};
    cost["decrypt"] = {};
  }
  {
    crypto::ObjectOpener opener(mode, key ? &*key : nullptr);
    if (!opener.status().ok()) Die(opener.status().message());
    ByteBuffer scratch;
    cost["open"] = Measure(repeat, [&] {
      for (const Object& o : objects) {
        Bytes payload;
        if (opener.Open(obj_of(o), scratch, payload).outcome != crypto::OpenOutcome::kOk) Die("Open failed");
      }
    });
  }
  auto payload_of = [&](const Object& o) { return Bytes(payloads.data() + o.payload_pos, o.payload_size); };

  codecs::Decompressor dec;
  ByteBuffer plain;
  uint64_t plaintext = 0;
  cost["decompress"] = Measure(repeat, [&] {
    plaintext = 0;
    for (const Object& o : objects) {
      codecs::DecodeResult r = dec.DecodeBorg1(payload_of(o), plain);
      if (!r.ok) Die("decompression failed: " + r.error);
      plaintext += plain.size();
    }
  });
  crypto::IdHasher hasher(mode, key ? &*key : nullptr);
  if (!hasher.status().ok()) Die(hasher.status().message());
  Cost both = Measure(repeat, [&] {
    for (const Object& o : objects) {
      codecs::DecodeResult r = dec.DecodeBorg1(payload_of(o), plain);
      if (!r.ok) Die("decompression failed: " + r.error);
      if (o.manifest) continue;  // its id is not a hash
      uint8_t id[32];
      hasher.Compute(plain.view(), id);
      if (std::memcmp(id, o.id, 32) != 0) Die("id mismatch");
    }
  });
  cost["decompress+id_hash"] = both;
  cost["id_hash"] = {std::max(0.0, both.cpu - cost["decompress"].cpu),
                     std::max(0.0, both.wall - cost["decompress"].wall)};

  // The MAC and id messages of every object in hash lanes (crypto/sha256_lanes.h,
  // blake2b_lanes.h), all plaintexts in memory at once (an arena; untimed to fill): what the
  // hashing costs at each lane schedule, against the one-stream mac + id_hash above.
  //   lanes_1       every message on one lane, one after the other (the lane code, one stream)
  //   lanes_pairs   per object its MAC and its id side by side, objects one after the other:
  //                 what a verifier gets from one object alone
  //   lanes_4 / _16 every message of the repository through HashAll with 4 / 16 lanes (BLAKE2b:
  //                 8): the best schedule, which needs all plaintexts in memory
  std::vector<std::string> lane_keys;
  {
    ByteBuffer arena;
    arena.Resize(plaintext);
    std::vector<std::pair<size_t, size_t>> plains(objects.size());
    size_t at = 0;
    for (size_t i = 0; i < objects.size(); ++i) {
      codecs::DecodeResult r = dec.DecodeBorg1(payload_of(objects[i]), plain);
      if (!r.ok) Die("decompression failed: " + r.error);
      std::memcpy(arena.data() + at, plain.data(), plain.size());
      plains[i] = {at, plain.size()};
      at += plain.size();
    }
    const bool b2 = crypto::UsesBlake2(mode);
    std::optional<crypto::HmacSha256Key> mac_h, id_h;
    std::optional<crypto::Blake2bPrefix> mac_p, id_p;
    if (b2) {
      if (encrypted) mac_p = crypto::Blake2bPrefix::Create(key->enc_hmac_key.view());
      id_p = crypto::Blake2bPrefix::Create(key->id_key.view());
    } else if (crypto::NeedsKey(mode)) {
      auto k1 = crypto::HmacSha256Key::Create(key->id_key.view());
      if (!k1.ok()) Die("HMAC key");
      id_h = std::move(k1).value();
      if (encrypted) {
        auto k2 = crypto::HmacSha256Key::Create(key->enc_hmac_key.view());
        if (!k2.ok()) Die("HMAC key");
        mac_h = std::move(k2).value();
      }
    }
    struct Msg {
      Bytes m;
      bool is_mac;
      const uint8_t* want;
      uint8_t out[32];
    };
    std::vector<Msg> msgs;
    for (size_t i = 0; i < objects.size(); ++i) {
      const Object& o = objects[i];
      if (encrypted) msgs.push_back({obj_of(o).subspan(1 + kMacSize), true, obj_of(o).data() + 1, {}});
      if (!o.manifest) msgs.push_back({Bytes(arena.data() + plains[i].first, plains[i].second), false, o.id, {}});
    }
    crypto::Sha256Lanes sha;
    crypto::Blake2b256Lanes blk;
    auto run = [&](size_t from, size_t to, size_t lanes) {
      if (b2) {
        std::vector<crypto::Blake2b256Lanes::Job> jobs;
        for (size_t i = from; i < to; ++i) jobs.push_back({msgs[i].is_mac ? &*mac_p : &*id_p, msgs[i].m, msgs[i].out});
        blk.HashAll(jobs, lanes);
      } else {
        std::vector<crypto::Sha256Lanes::Job> jobs;
        for (size_t i = from; i < to; ++i) {
          const crypto::HmacSha256Key* k = msgs[i].is_mac ? (mac_h ? &*mac_h : nullptr) : (id_h ? &*id_h : nullptr);
          jobs.push_back({k, msgs[i].m, msgs[i].out});
        }
        sha.HashAll(jobs, lanes);
      }
    };
    auto check = [&] {
      for (Msg& m : msgs) {
        if (std::memcmp(m.out, m.want, 32) != 0) Die("lane digest mismatch");
        std::memset(m.out, 0, 32);
      }
    };
    cost["lanes_1"] = Measure(repeat, [&] { run(0, msgs.size(), 1); });
    check();
    cost["lanes_pairs"] = Measure(repeat, [&] {
      for (size_t i = 0; i < msgs.size();) {
        size_t j = i + 1;
        if (j < msgs.size() && msgs[i].is_mac && !msgs[j].is_mac) ++j;  // an object's MAC and id
        run(i, j, 2);
        i = j;
      }
    });
    check();
    cost["lanes_4"] = Measure(repeat, [&] { run(0, msgs.size(), 4); });
    check();
    cost["lanes_16"] = Measure(repeat, [&] { run(0, msgs.size(), b2 ? 8 : 16); });
    check();
    lane_keys = {"lanes_1", "lanes_pairs", "lanes_4", "lanes_16"};
  }

  Cost sum;
  for (const char* k : {"read", "crc", "mac", "decrypt", "decompress", "id_hash"}) {
    sum.cpu += cost[k].cpu;
    sum.wall += cost[k].wall;
  }
  cost["sum"] = sum;
  // The same sum with the MAC and id at their best engine: the cheapest of one stream and the
  // lane schedules above.
  {
    Cost best = {cost["mac"].cpu + cost["id_hash"].cpu, cost["mac"].wall + cost["id_hash"].wall};
    for (const std::string& k : lane_keys) {
      if (cost[k].cpu < best.cpu) best = cost[k];
    }
    cost["mac+id_best"] = best;
    Cost sb;
    for (const char* k : {"read", "crc", "decrypt", "decompress"}) {
      sb.cpu += cost[k].cpu;
      sb.wall += cost[k].wall;
    }
    sb.cpu += best.cpu;
    sb.wall += best.wall;
    cost["sum_best"] = sb;
  }

  std::string out = "{";
  out += fmt::format("\"repository\": \"{}\", \"mode\": \"{}\", \"objects\": {}, \"stored_bytes\": {}, "
                     "\"plaintext_bytes\": {}, \"segment_bytes\": {}, \"repeat\": {}, \"primitives\": {{",
                     repo_path, crypto::KeyModeName(mode), objects.size(), stored, plaintext, plan.total_bytes,
                     repeat);
  bool first = true;
  for (const char* k : {"read", "crc", "mac", "decrypt", "open", "decompress", "id_hash", "decompress+id_hash", "lanes_1",
                        "lanes_pairs", "lanes_4", "lanes_16", "mac+id_best", "sum", "sum_best"}) {
    out += fmt::format("{}\"{}\": {{\"cpu_s\": {:.4f}, \"wall_s\": {:.4f}}}", first ? "" : ", ", k, cost[k].cpu,
                       cost[k].wall);
    first = false;
  }
  out += "}}\n";
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
