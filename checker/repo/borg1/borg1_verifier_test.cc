// Borg1Verifier::VerifyBatch with hash lanes against Verify, object by object, in every borg 1.x
// mode (the fixtures' vectors-v1.2.4.json: keys and stored objects of borg 1.2.4): random
// batches of the fixtures' objects, of sealed objects up to 1.5 MiB (so that the large lane
// slot and the small ones mix), of the manifest, and of damaged copies (a byte flipped anywhere:
// CRC, header, TYPE, MAC, IV, ciphertext; the CRC fixed or not; objects cut short; a payload
// that does not decompress under a MAC that fails or verifies; a wrong id), many batches per
// verifier so that the lane buffers are reused. Every result (stage, severity, message,
// plaintext size) must equal Verify's on the same bytes.
#include "checker/repo/borg1/borg1_verifier.h"

#include <openssl/evp.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/segment_log/segment_format.h"

namespace borgcheck::repo {
namespace {

using Vec = std::vector<uint8_t>;

Vec Unhex(const std::string& hex) {
  std::string out;
  REQUIRE(FromHex(hex, out));
  return Vec(out.begin(), out.end());
}

const nlohmann::json& Vectors() {
  static const nlohmann::json j = [] {
    std::ifstream f(std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg1/vectors-v1.2.4.json");
    REQUIRE(f.good());
    return nlohmann::json::parse(f);
  }();
  return j;
}

crypto::KeyMaterial KeyOf(const nlohmann::json& repo) {
  crypto::KeyMaterial km;
  if (!repo.contains("key")) return km;
  const auto& k = repo["key"];
  km.enc_key = SecureBytes(Bytes(Unhex(k["enc_key"])));
  km.enc_hmac_key = SecureBytes(Bytes(Unhex(k["enc_hmac_key"])));
  km.id_key = SecureBytes(Bytes(Unhex(k["id_key"])));
  return km;
}

void FixCrc(Vec& e) {
  const uint32_t crc = Crc32(Bytes(e.data() + 4, e.size() - 4));
  for (int i = 0; i < 4; ++i) e[i] = uint8_t(crc >> (8 * i));
}

// A PUT entry of `id` holding `obj`, with a correct CRC.
Vec Entry(const Vec& id, const Vec& obj) {
  Vec e(kHeaderSizeWithKey + obj.size());
  const uint32_t size = uint32_t(e.size());
  for (int i = 0; i < 4; ++i) e[4 + i] = uint8_t(size >> (8 * i));
  e[8] = kTagPut;
  std::copy(id.begin(), id.end(), e.begin() + 9);
  std::copy(obj.begin(), obj.end(), e.begin() + kHeaderSizeWithKey);
  FixCrc(e);
  return e;
}

// A stored object of payload C (compression header included), sealed as borg 1.x does.
Vec Seal(crypto::KeyMode mode, const crypto::KeyMaterial& km, const Vec& c, uint64_t iv) {
  if (!crypto::IsEncrypted(mode)) {
    // Sized, then copied (g++ 12 -O2 gives a false -Warray-bounds for insert after {byte}).
    Vec obj(1 + c.size());
    obj[0] = uint8_t(mode);
    std::copy(c.begin(), c.end(), obj.begin() + 1);
    return obj;
  }
  Vec ivct(8 + c.size());
  for (int i = 0; i < 8; ++i) ivct[i] = uint8_t(iv >> (56 - 8 * i));
  uint8_t counter[16] = {};
  std::copy(ivct.begin(), ivct.begin() + 8, counter + 8);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int outl = 0;
  REQUIRE(EVP_EncryptInit_ex(ctx, EVP_aes_256_ctr(), nullptr, km.enc_key.data(), counter) == 1);
  REQUIRE(EVP_EncryptUpdate(ctx, ivct.data() + 8, &outl, c.data(), int(c.size())) == 1);
  EVP_CIPHER_CTX_free(ctx);
  uint8_t mac[32];
  if (crypto::UsesBlake2(mode)) {
    Result<crypto::Borg1LaneHashes> h = crypto::MakeBorg1LaneHashes(mode, &km);
    REQUIRE(h.ok());
    crypto::HashPipeline p;
    class One final : public crypto::HashPipeline::Items {
     public:
      crypto::HashPipeline::Job job;
      int Decode(size_t, crypto::HashPipeline::Job* out, bool) override {
        out[0] = job;
        return 1;
      }
      void Done(size_t) override {}
    } one;
    one.job = {&*h->mac, Bytes(ivct.data(), ivct.size()), Bytes(), mac};
    p.Run(1, one);
  } else {
    size_t n = 0;
    REQUIRE(EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, km.enc_hmac_key.data(), km.enc_hmac_key.size(),
                      ivct.data(), ivct.size(), mac, 32, &n) != nullptr);
  }
  Vec obj(1 + 32 + ivct.size());
  obj[0] = uint8_t(mode);
  std::copy(mac, mac + 32, obj.begin() + 1);
  std::copy(ivct.begin(), ivct.end(), obj.begin() + 33);
  return obj;
}

std::string Describe(const engine::ObjectResult& r) {
  if (!r.verdict) return "ok plaintext " + std::to_string(r.plaintext_bytes);
  return std::string(report::StageName(r.verdict->stage)) + " " + std::string(report::SeverityName(r.verdict->severity)) +
         " " + r.verdict->message;
}

TEST_CASE("Borg1Verifier: VerifyBatch with hash lanes equals Verify object by object", "[borg1][lanes]") {
  std::mt19937_64 rng(2024);
  int batches = 0, failures = 0, large = 0;
  for (const auto& [name, repo] : Vectors()["repos"].items()) {
    INFO("repo " << name);
    auto m = crypto::KeyModeFromTypeByte(repo["type_byte"].get<uint8_t>());
    REQUIRE(m.has_value());
    const crypto::KeyMode mode = *m;
    const crypto::KeyMaterial km = KeyOf(repo);
    const crypto::KeyMaterial* kp = crypto::NeedsKey(mode) ? &km : nullptr;
    Result<crypto::Borg1LaneHashes> lanes = crypto::MakeBorg1LaneHashes(mode, kp);
    REQUIRE(lanes.ok());
    Borg1Verifier laned(true, mode, kp, &*lanes);
    Borg1Verifier single(true, mode, kp);
    REQUIRE(laned.status().ok());
    REQUIRE(single.status().ok());
    crypto::IdHasher id_hasher(mode, kp);

    // The pool of intact entries: the fixture's objects, the manifest, and sealed ones of up to
    // 1.5 MiB (uncompressed payloads, "00 00" + bytes).
    std::vector<std::pair<Vec, Vec>> pool;  // (id, entry)
    for (const auto& o : repo["objects"]) {
      const Vec id = Unhex(o["id"]);
      pool.push_back({id, Entry(id, Unhex(o["stored"]))});
    }
    const Vec zero_id(32, 0);
    pool.push_back({zero_id, Entry(zero_id, Unhex(repo["manifest"]["stored"]))});
    for (size_t len : {size_t{0}, size_t{1}, size_t{300}, size_t{70000}, size_t{300000}, size_t{1500000}}) {
      Vec c = {0x00, 0x00};
      for (size_t i = 0; i < len; ++i) c.push_back(uint8_t(rng()));
      uint8_t id[32];
      id_hasher.Compute(Bytes(c.data() + 2, len), id);
      const Vec idv(id, id + 32);
      pool.push_back({idv, Entry(idv, Seal(mode, km, c, rng()))});
    }

    for (int round = 0; round < 40; ++round) {
      const size_t n = 1 + rng() % 30;
      std::vector<Vec> entries;
      std::vector<engine::ObjectRef> refs;
      for (size_t k = 0; k < n; ++k) {
        const auto& [id, intact] = pool[rng() % pool.size()];
        Vec e = intact;
        engine::ObjectRef ref;
        std::copy(id.begin(), id.end(), ref.id.begin());
        switch (rng() % 6) {
          case 0:
          case 1:
            break;  // intact
          case 2: {  // a byte flipped anywhere, the CRC left as it was
            e[rng() % e.size()] ^= uint8_t(1 + rng() % 255);
            break;
          }
          case 3: {  // a byte flipped after the header, the CRC fixed: the damage reaches the MAC
            if (e.size() > kHeaderSizeWithKey) e[kHeaderSizeWithKey + rng() % (e.size() - kHeaderSizeWithKey)] ^= 0x10;
            FixCrc(e);
            break;
          }
          case 4: {  // cut short (possibly below the 41-byte envelope), CRC fixed
            const size_t keep = kHeaderSizeWithKey + rng() % (e.size() - kHeaderSizeWithKey + 1);
            e.resize(keep);
            const uint32_t size = uint32_t(e.size());
            for (int i = 0; i < 4; ++i) e[4 + i] = uint8_t(size >> (8 * i));
            FixCrc(e);
            break;
          }
          case 5:  // checked as another id
            ref.id[rng() % 32] ^= 0x01;
            break;
        }
        ref.size = uint32_t(e.size());
        entries.push_back(std::move(e));
        refs.push_back(ref);
      }
      std::vector<Bytes> stored;
      for (const Vec& e : entries) {
        stored.push_back(Bytes(e.data(), e.size()));
        if (e.size() >= crypto::LaneBuffers::kLargeStored) ++large;
      }
      std::vector<engine::ObjectResult> got(n);
      laned.VerifyBatch(stored, refs, got);
      for (size_t k = 0; k < n; ++k) {
        INFO("round " << round << ", object " << k << " of " << n);
        engine::ObjectResult want;
        want.verdict = single.Verify(stored[k], refs[k]);
        if (!want.verdict) want.plaintext_bytes = single.plaintext().size();
        CHECK(Describe(got[k]) == Describe(want));
        failures += want.verdict.has_value();
      }
      ++batches;
    }
  }
  CHECK(batches == 8 * 40);
  CHECK(failures > 500);  // the damage reached every stage often enough to compare
  CHECK(large > 50);
}

}  // namespace
}  // namespace borgcheck::repo
