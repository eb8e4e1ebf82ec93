// Every borg 1.x envelope and id-hash path (the seven modes borg creates) run from many
// threads at once, through the objects the engine uses: crypto::ObjectOpener and
// crypto::IdHasher, and repo::Borg1Verifier (CRC -> envelope -> MAC/decrypt -> decompress ->
// id), one of each per thread as check_run.cc gives each pool worker. Keys are the fixture
// keys (vectors-v1.2.4.json); objects are the fixture's real borg objects plus many distinct
// objects sealed here with one-shot OpenSSL/libb2 calls, intact and damaged. Every outcome,
// message and output byte must equal the single-threaded result.
//
// Catch2 assertions are not thread-safe, so the threads only record mismatches; the main
// thread asserts after joining them.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "checker/crypto/blake2b_lanes.h"
#include "checker/crypto/object_crypto.h"
#include "checker/crypto/sha256_lanes.h"
#include "checker/repo/borg1/borg1_verifier.h"
#include "codecs/decompressor.h"
#include "tests/concurrency/concurrency_support.h"

namespace borgcheck::concurrency_test {
namespace {

using crypto::KeyMaterial;
using crypto::KeyMode;

constexpr size_t kThreads = 8;

Vec Unhex(const std::string& hex) {
  std::string s;
  REQUIRE(FromHex(hex, s));
  return Vec(s.begin(), s.end());
}

// One stored object with its chunk id; `entry` is the whole segment entry.
struct ObjectCase {
  std::string name;
  Vec id;
  Vec object;
  Vec entry;

  // Single-threaded results, filled by ComputeReference().
  crypto::OpenOutcome open_outcome{};
  std::string open_message;
  Vec payload;       // opened payload (empty unless kOk)
  Vec plaintext;     // decoded payload (empty unless it decodes)
  Vec computed_id;   // IdHasher over plaintext (empty unless it decodes)
  std::optional<engine::Verdict> verify_failure;
  Vec verified_plaintext;  // ObjectVerifier::plaintext() when it passed
  std::optional<engine::Verdict> crc_only_failure;  // ObjectVerifier(verify_data = false)
};

// Intact objects of every codec, the fixture's real objects, and one case per kind of
// damage, so that every Verify() outcome (entry-crc, envelope, authentication, decompression,
// id-hash, padding) is exercised concurrently.
std::vector<ObjectCase> MakeObjects(KeyMode mode, const KeyMaterial& key, uint32_t seed_base) {
  std::vector<ObjectCase> cases;
  auto add = [&](std::string name, Vec id, Vec object) {
    ObjectCase c;
    c.name = std::string(crypto::KeyModeName(mode)) + " " + name;
    c.entry = MakePutEntry(View(id), View(object));
    c.id = std::move(id);
    c.object = std::move(object);
    cases.push_back(std::move(c));
  };
  uint64_t iv = uint64_t(seed_base) << 20;
  for (size_t i = 0; i < 28; ++i) {
    const uint32_t seed = seed_base + uint32_t(i);
    const size_t size = (size_t(seed) * 7919u) % (96 * 1024) + 1;
    const Vec plain = i % 2 ? MakeMixed(size, seed) : MakeText(size, seed);
    const PayloadCodec codec = kAllPayloadCodecs[i % std::size(kAllPayloadCodecs)];
    const Vec payload = CompressPayload(codec, View(plain), i % 4);
    // The IV advances by the AES blocks used, as borg's counter does.
    add(PayloadCodecName(codec) + " seed " + std::to_string(seed), ChunkIdOf(mode, key, View(plain)),
        SealObject(mode, key, View(payload), iv));
    iv += payload.size() / 16 + 1;
  }
  for (const auto& o : FixtureRepo(mode).at("objects")) {
    add("fixture " + o.at("compression").get<std::string>(), Unhex(o.at("id")),
        Unhex(o.at("stored")));
  }
  const Vec plain = MakeMixed(30000, seed_base + 500);
  const Vec id = ChunkIdOf(mode, key, View(plain));
  const Vec good = SealObject(mode, key, View(CompressPayload(PayloadCodec::kZstd, View(plain))), iv);
  {  // entry CRC: a byte of the object changed, CRC left stale
    ObjectCase c;
    c.name = std::string(crypto::KeyModeName(mode)) + " stale crc";
    c.id = id;
    c.object = good;
    c.entry = MakePutEntry(View(id), View(good));
    c.entry.back() ^= 0x01;
    cases.push_back(std::move(c));
  }
  {  // TYPE byte of another mode
    Vec obj = good;
    obj[0] = mode == KeyMode::kRepokey ? 0x00 : 0x03;
    add("wrong type", id, obj);
  }
  {  // last byte flipped: MAC failure (AES modes) or id/decompression failure (others)
    Vec obj = good;
    obj.back() ^= 0x80;
    add("flipped last byte", id, obj);
  }
  {  // a truncated zstd frame sealed correctly: decompression failure in every mode
    Vec payload = CompressPayload(PayloadCodec::kZstd, View(plain));
    payload.resize(payload.size() - 5);
    add("damaged zstd sealed", id, SealObject(mode, key, View(payload), iv + 100000));
  }
  {  // intact payload under another chunk's id: id-hash failure
    Vec other = id;
    other[7] ^= 0x10;
    add("wrong id", other, good);
  }
  {  // obfuscation padding that is not zero (reported at the decompression stage)
    Vec payload = CompressPayload(PayloadCodec::kObfuscateLz4, View(plain), 9);
    payload.back() = 0x01;
    add("nonzero padding", id, SealObject(mode, key, View(payload), iv + 200000));
  }
  {  // the manifest id (00*32) skips the id check
    add("manifest id", Vec(32, 0), good);
  }
  return cases;
}

bool SameFailure(const std::optional<engine::Verdict>& a,
                 const std::optional<engine::Verdict>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->stage == b->stage && a->message == b->message && a->severity == b->severity);
}

void ComputeReference(KeyMode mode, const KeyMaterial& key, std::vector<ObjectCase>& cases) {
  const KeyMaterial* kp = crypto::NeedsKey(mode) ? &key : nullptr;
  crypto::ObjectOpener opener(mode, kp);
  crypto::IdHasher hasher(mode, kp);
  REQUIRE(opener.status().ok());
  REQUIRE(hasher.status().ok());
  codecs::Decompressor decompressor;
  repo::Borg1Verifier verifier(true, mode, kp);
  repo::Borg1Verifier crc_only(false, mode, kp);
  ByteBuffer scratch, plain;
  for (ObjectCase& c : cases) {
    Bytes payload;
    const crypto::OpenResult r = opener.Open(View(c.object), scratch, payload);
    c.open_outcome = r.outcome;
    c.open_message = r.message;
    if (r.outcome == crypto::OpenOutcome::kOk) {
      c.payload = ToVec(payload);
      if (decompressor.DecodeBorg1(payload, plain).ok) {
        c.plaintext = ToVec(plain.view());
        uint8_t out[32];
        hasher.Compute(plain.view(), out);
        c.computed_id.assign(out, out + 32);
      }
    }
    c.verify_failure = verifier.VerifyAs(View(c.entry), c.id.data());
    if (!c.verify_failure) c.verified_plaintext = ToVec(verifier.plaintext());
    c.crc_only_failure = crc_only.VerifyAs(View(c.entry), c.id.data());
  }
}

// The single-threaded results must themselves be right before they are used as the yardstick:
// intact objects verify and hash to their ids; each damage is seen at its stage.
void CheckReference(KeyMode mode, const std::vector<ObjectCase>& cases) {
  using report::Stage;
  auto stage_of = [&](const std::string& suffix) -> std::optional<Stage> {
    for (const ObjectCase& c : cases) {
      if (c.name.size() >= suffix.size() &&
          c.name.compare(c.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        if (!c.verify_failure) return std::nullopt;
        return c.verify_failure->stage;
      }
    }
    FAIL("no case " << suffix);
    return std::nullopt;
  };
  size_t intact = 0;
  for (const ObjectCase& c : cases) {
    if (c.name.find(" seed ") == std::string::npos && c.name.find(" fixture ") == std::string::npos) {
      continue;
    }
    INFO(c.name);
    CHECK(!c.verify_failure);
    CHECK(c.computed_id == c.id);
    CHECK(!c.crc_only_failure);
    ++intact;
  }
  CHECK(intact == 28 + 6);
  CHECK(stage_of("stale crc") == Stage::kEntryCrc);
  CHECK(stage_of("wrong type") == Stage::kEnvelope);
  CHECK(stage_of("flipped last byte") ==
        (crypto::IsEncrypted(mode) ? Stage::kAuthentication : Stage::kDecompression));
  CHECK(stage_of("damaged zstd sealed") == Stage::kDecompression);
  CHECK(stage_of("wrong id") == Stage::kIdHash);
  CHECK(stage_of("nonzero padding") == Stage::kDecompression);
  CHECK(stage_of("manifest id") == std::nullopt);
}

// Opener + hasher + decompressor per thread, and an ObjectVerifier (verify-data and CRC-only)
// per thread, over all cases from kThreads threads; returns every difference found.
std::vector<std::string> RunOnThreads(KeyMode mode, const KeyMaterial& key,
                                      const std::vector<ObjectCase>& cases, int rounds) {
  const KeyMaterial* kp = crypto::NeedsKey(mode) ? &key : nullptr;
  std::vector<std::vector<std::string>> mismatches(kThreads);  // element t: thread t only
  RunConcurrently(kThreads, [&](size_t t) {
    std::vector<std::string>& bad = mismatches[t];
    // Made on this thread, used only by it (a pool worker's contexts are made once, then
    // reused for every chunk).
    crypto::ObjectOpener opener(mode, kp);
    crypto::IdHasher hasher(mode, kp);
    codecs::Decompressor decompressor;
    repo::Borg1Verifier verifier(true, mode, kp);
    repo::Borg1Verifier crc_only(false, mode, kp);
    if (!opener.status().ok() || !hasher.status().ok()) {
      bad.push_back("opener/hasher failed to construct on thread " + std::to_string(t));
      return;
    }
    ByteBuffer scratch, plain;
    const size_t n = cases.size();
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < n; ++k) {
        const ObjectCase& c = cases[(k + t * n / kThreads + size_t(r)) % n];
        Bytes payload;
        const crypto::OpenResult o = opener.Open(View(c.object), scratch, payload);
        if (o.outcome != c.open_outcome || o.message != c.open_message) {
          bad.push_back(c.name + ": Open outcome differs: " + o.message);
        } else if (o.outcome == crypto::OpenOutcome::kOk) {
          if (ToVec(payload) != c.payload) bad.push_back(c.name + ": opened payload differs");
          if (decompressor.DecodeBorg1(payload, plain).ok) {
            uint8_t id[32];
            hasher.Compute(plain.view(), id);
            if (Vec(id, id + 32) != c.computed_id) bad.push_back(c.name + ": id hash differs");
          } else if (!c.plaintext.empty() || !c.computed_id.empty()) {
            bad.push_back(c.name + ": payload no longer decodes");
          }
        }
        const std::optional<engine::Verdict> f = verifier.VerifyAs(View(c.entry), c.id.data());
        if (!SameFailure(f, c.verify_failure)) {
          bad.push_back(c.name + ": Verify differs: " + (f ? f->message : std::string("passed")));
        } else if (!f && ToVec(verifier.plaintext()) != c.verified_plaintext) {
          bad.push_back(c.name + ": verified plaintext differs");
        }
        if (!SameFailure(crc_only.VerifyAs(View(c.entry), c.id.data()), c.crc_only_failure)) {
          bad.push_back(c.name + ": CRC-only Verify differs");
        }
      }
    }
  });
  std::vector<std::string> all;
  for (auto& m : mismatches) all.insert(all.end(), m.begin(), m.end());
  return all;
}

void ExpectNoMismatch(const std::vector<std::string>& mismatches) {
  for (size_t i = 0; i < mismatches.size() && i < 10; ++i) UNSCOPED_INFO(mismatches[i]);
  CHECK(mismatches.empty());
}

TEST_CASE("each key mode: 8 threads open, decode, hash and verify exactly as one thread does",
          "[concurrency][crypto]") {
  uint32_t seed_base = 20000;
  for (KeyMode mode : kAllModes) {
    DYNAMIC_SECTION(crypto::KeyModeName(mode)) {
      const KeyMaterial key = FixtureKey(mode);
      std::vector<ObjectCase> cases = MakeObjects(mode, key, seed_base);
      ComputeReference(mode, key, cases);
      CheckReference(mode, cases);
      ExpectNoMismatch(RunOnThreads(mode, key, cases, 2));
    }
    seed_base += 1000;
  }
}

TEST_CASE("all seven modes at once: one thread per mode and worker, sharing nothing mutable",
          "[concurrency][crypto]") {
  // Different runs in one process (or one run after another) must not disturb each other
  // either: OpenSSL's algorithm fetches and provider caches are process-wide.
  struct ModeWork {
    KeyMode mode;
    KeyMaterial key;
    std::vector<ObjectCase> cases;
  };
  std::vector<ModeWork> work;
  uint32_t seed_base = 40000;
  for (KeyMode mode : kAllModes) {
    ModeWork w{mode, FixtureKey(mode), {}};
    w.cases = MakeObjects(mode, w.key, seed_base);
    ComputeReference(mode, w.key, w.cases);
    work.push_back(std::move(w));
    seed_base += 1000;
  }
  const size_t threads = 2 * work.size();
  std::vector<std::vector<std::string>> mismatches(threads);  // element t: thread t only
  RunConcurrently(threads, [&](size_t t) {
    const ModeWork& w = work[t % work.size()];
    const KeyMaterial* kp = crypto::NeedsKey(w.mode) ? &w.key : nullptr;
    repo::Borg1Verifier verifier(true, w.mode, kp);
    for (size_t k = 0; k < w.cases.size(); ++k) {
      const ObjectCase& c = w.cases[(k + t) % w.cases.size()];
      const std::optional<engine::Verdict> f = verifier.VerifyAs(View(c.entry), c.id.data());
      if (!SameFailure(f, c.verify_failure) ||
          (!f && ToVec(verifier.plaintext()) != c.verified_plaintext)) {
        mismatches[t].push_back(c.name + ": Verify differs");
      }
    }
  });
  std::vector<std::string> all;
  for (auto& m : mismatches) all.insert(all.end(), m.begin(), m.end());
  ExpectNoMismatch(all);
}

// SHA-256 / HMAC-SHA256 lanes (crypto::Sha256Lanes), as a worker would hold them: one lanes
// object per thread, the prepared keys (crypto::HmacSha256Key) shared by all threads and only
// read. Half the threads run the OpenSSL fallback (TEST_ForceOpenSsl), a quarter SHA-NI
// without AVX-512, so every path runs at once; lane counts from 1 to 16, every job list
// rotated per thread, and a streaming pass that feeds two lanes in pieces. Every digest must equal the single-threaded one, which must equal the
// one-shot OpenSSL ids of concurrency_support (ChunkIdOf).
TEST_CASE("sha256 lanes: 8 threads, own lanes objects, shared keys, every engine",
          "[concurrency][crypto]") {
  const KeyMaterial key = FixtureKey(KeyMode::kRepokey);
  KeyMaterial mac_as_id = key;  // ChunkIdOf hashes with id_key: give it enc_hmac_key
  mac_as_id.id_key = key.enc_hmac_key;
  Result<crypto::HmacSha256Key> id_key = crypto::HmacSha256Key::Create(key.id_key.view());
  Result<crypto::HmacSha256Key> mac_key = crypto::HmacSha256Key::Create(key.enc_hmac_key.view());
  REQUIRE(id_key.ok());
  REQUIRE(mac_key.ok());

  std::vector<Vec> messages;
  for (size_t n : {0, 1, 55, 56, 63, 64, 65, 119, 120, 4096}) messages.push_back(MakeRandom(n, 7));
  for (uint32_t i = 0; i < 30; ++i) {
    messages.push_back(MakeMixed((size_t(i) * 104729u) % (300 * 1024) + 1, 60000 + i));
  }
  messages.push_back(MakeRandom(2 << 20, 61000));
  struct Expected {
    const crypto::HmacSha256Key* key;
    size_t message;
    Vec digest;
  };
  std::vector<Expected> expected;
  for (size_t m = 0; m < messages.size(); ++m) {
    expected.push_back({nullptr, m, ChunkIdOf(KeyMode::kNone, key, View(messages[m]))});
    expected.push_back({&*id_key, m, ChunkIdOf(KeyMode::kRepokey, key, View(messages[m]))});
    expected.push_back({&*mac_key, m, ChunkIdOf(KeyMode::kRepokey, mac_as_id, View(messages[m]))});
  }
  // The single-threaded result, through the same jobs.
  {
    crypto::Sha256Lanes lanes;
    REQUIRE(lanes.status().ok());
    std::vector<Vec> out(expected.size(), Vec(32));
    std::vector<crypto::Sha256Lanes::Job> jobs;
    for (size_t j = 0; j < expected.size(); ++j) {
      jobs.push_back({expected[j].key, View(messages[expected[j].message]), out[j].data()});
    }
    lanes.HashAll(jobs, 2);
    for (size_t j = 0; j < expected.size(); ++j) REQUIRE(out[j] == expected[j].digest);
  }

  std::vector<std::vector<std::string>> mismatches(kThreads);  // element t: thread t only
  RunConcurrently(kThreads, [&](size_t t) {
    std::vector<std::string>& bad = mismatches[t];
    crypto::Sha256Lanes lanes;
    if (t % 2 == 1) lanes.TEST_ForceOpenSsl();
    if (t % 4 == 2) lanes.TEST_DisableAvx512();
    if (!lanes.status().ok()) {
      bad.push_back("thread " + std::to_string(t) + ": " + lanes.status().message());
      return;
    }
    const size_t n = expected.size();
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<Vec> out(n, Vec(32));
      std::vector<crypto::Sha256Lanes::Job> jobs;
      for (size_t k = 0; k < n; ++k) {
        const size_t j = (k + 7 * t + pass) % n;
        jobs.push_back({expected[j].key, View(messages[expected[j].message]), out[j].data()});
      }
      lanes.HashAll(jobs, 1 + (5 * t + 3 * pass) % crypto::Sha256Lanes::kMaxLanes);
      for (size_t j = 0; j < n; ++j) {
        if (out[j] != expected[j].digest) {
          bad.push_back("thread " + std::to_string(t) + " HashAll job " + std::to_string(j));
        }
      }
    }
    // Streaming: jobs j and j+1 side by side in lanes 0 and 1, fed 1000 + 64 t bytes at a time.
    const size_t piece = 1000 + 64 * t;
    for (size_t j = t % 3; j + 1 < n; j += 2 + t % 3) {
      size_t pos[2] = {0, 0};
      Vec got[2] = {Vec(32), Vec(32)};
      for (size_t l = 0; l < 2; ++l) {
        if (expected[j + l].key != nullptr) {
          lanes.Start(l, *expected[j + l].key);
        } else {
          lanes.Start(l);
        }
      }
      size_t done = 0;
      crypto::Sha256Lanes::LaneMask ready = 0b11;  // both lanes want their first piece
      while (done < 2) {
        for (size_t l = 0; l < 2; ++l) {
          if ((ready & (1u << l)) == 0) continue;
          if (lanes.IsDone(l)) {
            lanes.Take(l, got[l].data());
            ++done;
            continue;
          }
          const Vec& m = messages[expected[j + l].message];
          const size_t take = std::min(piece, m.size() - pos[l]);
          if (take == 0) {
            lanes.Finish(l);
          } else {
            lanes.Update(l, Bytes(m.data() + pos[l], take));
            pos[l] += take;
          }
        }
        if (done < 2) ready = lanes.Run();
      }
      for (size_t l = 0; l < 2; ++l) {
        if (got[l] != expected[j + l].digest) {
          bad.push_back("thread " + std::to_string(t) + " streamed job " + std::to_string(j + l));
        }
      }
    }
  });
  std::vector<std::string> all;
  for (auto& m : mismatches) all.insert(all.end(), m.begin(), m.end());
  ExpectNoMismatch(all);
}

// BLAKE2b-256 lanes (crypto::Blake2b256Lanes) the same way: one lanes object per thread on
// the engines this CPU has (AVX-512, AVX2, portable, by thread), the key prefixes
// (crypto::Blake2bPrefix of the blake2 fixture's 128-byte keys) shared and only read; HashAll
// with 1..8 lanes and a streaming pass over five lanes fed in pieces. Every digest must equal
// the single-threaded one and the one-shot libb2 id of concurrency_support (ChunkIdOf).
TEST_CASE("blake2b lanes: 8 threads, own lanes objects, shared key prefixes, every engine",
          "[concurrency][crypto]") {
  using crypto::Blake2b256Lanes;
  const KeyMaterial key = FixtureKey(KeyMode::kRepokeyBlake2);
  KeyMaterial mac_as_id = key;
  mac_as_id.id_key = key.enc_hmac_key;
  const crypto::Blake2bPrefix id_prefix = crypto::Blake2bPrefix::Create(key.id_key.view());
  const crypto::Blake2bPrefix mac_prefix = crypto::Blake2bPrefix::Create(key.enc_hmac_key.view());

  std::vector<Vec> messages;
  for (size_t n : {0, 1, 127, 128, 129, 256, 4096}) messages.push_back(MakeRandom(n, 9));
  for (uint32_t i = 0; i < 24; ++i) {
    messages.push_back(MakeMixed((size_t(i) * 104729u) % (200 * 1024) + 1, 62000 + i));
  }
  messages.push_back(MakeRandom(1 << 20, 63000));
  struct Expected {
    const crypto::Blake2bPrefix* prefix;
    size_t message;
    Vec digest;
  };
  std::vector<Expected> expected;
  for (size_t m = 0; m < messages.size(); ++m) {
    expected.push_back({&id_prefix, m, ChunkIdOf(KeyMode::kRepokeyBlake2, key, View(messages[m]))});
    expected.push_back(
        {&mac_prefix, m, ChunkIdOf(KeyMode::kRepokeyBlake2, mac_as_id, View(messages[m]))});
  }
  {
    Blake2b256Lanes lanes;
    std::vector<Vec> out(expected.size(), Vec(32));
    std::vector<Blake2b256Lanes::Job> jobs;
    for (size_t j = 0; j < expected.size(); ++j) {
      jobs.push_back({expected[j].prefix, View(messages[expected[j].message]), out[j].data()});
    }
    lanes.HashAll(jobs);
    for (size_t j = 0; j < expected.size(); ++j) REQUIRE(out[j] == expected[j].digest);
  }

  const Blake2b256Lanes::Engine kEngines[] = {Blake2b256Lanes::Engine::kAvx512,
                                              Blake2b256Lanes::Engine::kAvx2,
                                              Blake2b256Lanes::Engine::kPortable};
  std::vector<std::vector<std::string>> mismatches(kThreads);  // element t: thread t only
  RunConcurrently(kThreads, [&](size_t t) {
    std::vector<std::string>& bad = mismatches[t];
    Blake2b256Lanes lanes;
    (void)lanes.TEST_UseEngine(kEngines[t % 3]);  // stays on the best one if the CPU lacks it
    const size_t n = expected.size();
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<Vec> out(n, Vec(32));
      std::vector<Blake2b256Lanes::Job> jobs;
      for (size_t k = 0; k < n; ++k) {
        const size_t j = (k + 5 * t + pass) % n;
        jobs.push_back({expected[j].prefix, View(messages[expected[j].message]), out[j].data()});
      }
      lanes.HashAll(jobs, 1 + (t + 3 * pass) % Blake2b256Lanes::kMaxLanes);
      for (size_t j = 0; j < n; ++j) {
        if (out[j] != expected[j].digest) {
          bad.push_back("thread " + std::to_string(t) + " HashAll job " + std::to_string(j));
        }
      }
    }
    // Streaming: five jobs side by side, fed 700 + 128 t bytes at a time.
    constexpr size_t kWidth = 5;
    const size_t piece = 700 + 128 * t;
    for (size_t j = t % 4; j + kWidth <= n; j += kWidth + t % 4) {
      size_t pos[kWidth] = {};
      std::vector<Vec> got(kWidth, Vec(32));
      for (size_t l = 0; l < kWidth; ++l) lanes.Start(l, *expected[j + l].prefix);
      size_t done = 0;
      Blake2b256Lanes::LaneMask ready = (1u << kWidth) - 1;
      while (done < kWidth) {
        for (size_t l = 0; l < kWidth; ++l) {
          if ((ready & (1u << l)) == 0) continue;
          if (lanes.IsDone(l)) {
            lanes.Take(l, got[l].data());
            ++done;
            continue;
          }
          const Vec& m = messages[expected[j + l].message];
          const size_t take = std::min(piece, m.size() - pos[l]);
          if (take == 0) {
            lanes.Finish(l);
          } else {
            lanes.Update(l, Bytes(m.data() + pos[l], take));
            pos[l] += take;
          }
        }
        if (done < kWidth) ready = lanes.Run();
      }
      for (size_t l = 0; l < kWidth; ++l) {
        if (got[l] != expected[j + l].digest) {
          bad.push_back("thread " + std::to_string(t) + " streamed job " + std::to_string(j + l));
        }
      }
    }
  });
  std::vector<std::string> all;
  for (auto& m : mismatches) all.insert(all.end(), m.begin(), m.end());
  ExpectNoMismatch(all);
}

}  // namespace
}  // namespace borgcheck::concurrency_test
