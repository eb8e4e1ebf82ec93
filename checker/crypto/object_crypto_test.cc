// Envelopes and id hashes: every fixture object opens to its compressed payload and hashes to
// its id; one damaged byte gives the exact outcome; reused contexts agree with fresh ones.
#include "checker/crypto/object_crypto.h"

#include <blake2.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace borgcheck::crypto {
namespace {

using Vec = std::vector<uint8_t>;

const nlohmann::json& Vectors() {
  static const nlohmann::json j = [] {
    std::ifstream f(std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg1/vectors-v1.2.4.json");
    REQUIRE(f.good());
    return nlohmann::json::parse(f);
  }();
  return j;
}

Vec Unhex(const std::string& hex) {
  std::string out;
  REQUIRE(FromHex(hex, out));
  return Vec(out.begin(), out.end());
}

Vec ToVec(Bytes b) { return Vec(b.begin(), b.end()); }

KeyMaterial KeyOf(const nlohmann::json& repo) {
  KeyMaterial km;
  if (!repo.contains("key")) return km;
  const auto& k = repo["key"];
  km.enc_key = SecureBytes(Bytes(Unhex(k["enc_key"])));
  km.enc_hmac_key = SecureBytes(Bytes(Unhex(k["enc_hmac_key"])));
  km.id_key = SecureBytes(Bytes(Unhex(k["id_key"])));
  return km;
}

KeyMode ModeOf(const nlohmann::json& repo) {
  auto m = KeyModeFromTypeByte(repo["type_byte"].get<uint8_t>());
  REQUIRE(m.has_value());
  return *m;
}

// Reference MAC / id with fresh contexts each call, independent of the library.
Vec FreshKeyedHash(KeyMode mode, Bytes key, Bytes msg) {
  Vec out(32);
  if (!NeedsKey(mode)) {
    unsigned int n = 0;
    REQUIRE(EVP_Digest(msg.data(), msg.size(), out.data(), &n, EVP_sha256(), nullptr) == 1);
  } else if (UsesBlake2(mode)) {
    blake2b_state s;
    REQUIRE(blake2b_init(&s, 32) == 0);
    REQUIRE(blake2b_update(&s, key.data(), key.size()) == 0);
    REQUIRE(blake2b_update(&s, msg.data(), msg.size()) == 0);
    REQUIRE(blake2b_final(&s, out.data(), 32) == 0);
  } else {
    size_t n = 0;
    REQUIRE(EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(),
                      msg.data(), msg.size(), out.data(), 32, &n) != nullptr);
  }
  return out;
}

// Builds a stored object from compressed payload C with fresh OpenSSL contexts.
Vec Seal(KeyMode mode, const KeyMaterial& km, const Vec& c, uint64_t iv) {
  if (!IsEncrypted(mode)) {
    // Sized first, then copied: g++ 12 -O2 warns (-Warray-bounds, a false positive) about
    // vector::insert after a one-byte initializer list once this is inlined.
    Vec obj(1 + c.size());
    obj[0] = static_cast<uint8_t>(mode);
    std::copy(c.begin(), c.end(), obj.begin() + 1);
    return obj;
  }
  Vec obj{static_cast<uint8_t>(mode)};
  Vec ivct(8 + c.size());
  for (int i = 0; i < 8; ++i) ivct[i] = uint8_t(iv >> (56 - 8 * i));
  uint8_t counter[16] = {};
  std::memcpy(counter + 8, ivct.data(), 8);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int outl = 0;
  REQUIRE(EVP_EncryptInit_ex(ctx, EVP_aes_256_ctr(), nullptr, km.enc_key.data(), counter) == 1);
  REQUIRE(EVP_EncryptUpdate(ctx, ivct.data() + 8, &outl, c.data(), int(c.size())) == 1);
  EVP_CIPHER_CTX_free(ctx);
  Vec mac = FreshKeyedHash(mode, km.enc_hmac_key.view(), ivct);
  obj.insert(obj.end(), mac.begin(), mac.end());
  obj.insert(obj.end(), ivct.begin(), ivct.end());
  return obj;
}

std::string BadTypeMessage(KeyMode m) {
  return m == KeyMode::kAuthenticated || m == KeyMode::kAuthenticatedBlake2
             ? "Invalid envelope"
             : "Invalid encryption envelope";
}

}  // namespace

TEST_CASE("key modes: names, type bytes, repokey accepts 0x01", "[key_mode]") {
  CHECK(!KeyModeFromTypeByte(0x08).has_value());
  CHECK(!KeyModeFromTypeByte(0xff).has_value());
  CHECK(KeyModeFromTypeByte(0x05) == KeyMode::kRepokeyBlake2);
  CHECK(KeyModeName(KeyMode::kAuthenticatedBlake2) == "authenticated-blake2");
  CHECK(KeyModeName(KeyMode::kKeyfile) == "keyfile");
  CHECK(AcceptsTypeByte(KeyMode::kRepokey, 0x01));
  CHECK(AcceptsTypeByte(KeyMode::kRepokey, 0x03));
  CHECK(!AcceptsTypeByte(KeyMode::kKeyfile, 0x01));
  CHECK(!AcceptsTypeByte(KeyMode::kRepokeyBlake2, 0x01));
  CHECK(!AcceptsTypeByte(KeyMode::kNone, 0x07));
}

TEST_CASE("every fixture object opens to its payload and hashes to its id", "[object]") {
  int objects = 0;
  for (const auto& [name, repo] : Vectors()["repos"].items()) {
    INFO("repo " << name);
    const KeyMode mode = ModeOf(repo);
    const KeyMaterial km = KeyOf(repo);
    ObjectOpener opener(mode, NeedsKey(mode) ? &km : nullptr);
    IdHasher hasher(mode, NeedsKey(mode) ? &km : nullptr);
    REQUIRE(opener.status().ok());
    REQUIRE(hasher.status().ok());
    ByteBuffer scratch;
    for (const auto& o : repo["objects"]) {
      INFO("object " << o["id"].get<std::string>());
      const Vec stored = Unhex(o["stored"]);
      Bytes payload;
      OpenResult r = opener.Open(stored, scratch, payload);
      REQUIRE(r.outcome == OpenOutcome::kOk);
      CHECK(ToVec(payload) == Unhex(o["compressed_payload"]));
      uint8_t id[32];
      hasher.Compute(Unhex(o["plaintext"]), id);
      CHECK(Vec(id, id + 32) == Unhex(o["id"]));
      ++objects;
    }
    // The manifest's envelope opens too (its id is not a hash, so no id check).
    Bytes payload;
    CHECK(opener.Open(Unhex(repo["manifest"]["stored"]), scratch, payload).outcome ==
          OpenOutcome::kOk);
  }
  CHECK(objects >= 40);
}

TEST_CASE("one damaged byte: MAC, TYPE, length", "[object]") {
  for (const auto& [name, repo] : Vectors()["repos"].items()) {
    INFO("repo " << name);
    const KeyMode mode = ModeOf(repo);
    const KeyMaterial km = KeyOf(repo);
    ObjectOpener opener(mode, NeedsKey(mode) ? &km : nullptr);
    ByteBuffer scratch;
    Bytes payload;
    const Vec stored = Unhex(repo["objects"][0]["stored"]);

    Vec bad_type = stored;
    bad_type[0] ^= 0x80;
    OpenResult r = opener.Open(bad_type, scratch, payload);
    CHECK(r.outcome == OpenOutcome::kBadEnvelope);
    CHECK(r.message == BadTypeMessage(mode));

    CHECK(opener.Open(Bytes(), scratch, payload).outcome == OpenOutcome::kBadEnvelope);

    Vec legacy = stored;
    legacy[0] = 0x01;
    CHECK((opener.Open(legacy, scratch, payload).outcome == OpenOutcome::kOk) ==
          (mode == KeyMode::kRepokey));

    if (!IsEncrypted(mode)) continue;
    for (size_t at : {size_t{1}, size_t{32}, size_t{33}, size_t{40}, stored.size() - 1}) {
      INFO("flipped byte " << at);
      Vec bad = stored;
      bad[at] ^= 0x01;
      r = opener.Open(bad, scratch, payload);
      CHECK(r.outcome == OpenOutcome::kBadMac);
      CHECK(r.message == "MAC Authentication failed");
      CHECK(payload.empty());
    }
    r = opener.Open(Bytes(stored.data(), 40), scratch, payload);
    CHECK(r.outcome == OpenOutcome::kBadEnvelope);
    CHECK(r.message.find("too short") != std::string::npos);
    // The opener is still good after failures.
    CHECK(opener.Open(stored, scratch, payload).outcome == OpenOutcome::kOk);
  }
}

TEST_CASE("reused contexts agree with fresh ones over many objects", "[object]") {
  std::mt19937_64 rng(42);
  for (const auto& [name, repo] : Vectors()["repos"].items()) {
    INFO("repo " << name);
    const KeyMode mode = ModeOf(repo);
    const KeyMaterial km = KeyOf(repo);
    const KeyMaterial* kp = NeedsKey(mode) ? &km : nullptr;
    ObjectOpener opener(mode, kp);
    IdHasher hasher(mode, kp);
    ByteBuffer scratch;
    // Lengths 0..299 cover partial AES blocks, so a CTR position left over from the previous
    // object would show; 0 covers the 41-byte minimum object.
    for (size_t len = 0; len < 300; ++len) {
      INFO("length " << len);
      Vec c(len);
      for (auto& b : c) b = uint8_t(rng());
      const Vec obj = Seal(mode, km, c, rng());
      Bytes payload;
      REQUIRE(opener.Open(obj, scratch, payload).outcome == OpenOutcome::kOk);
      CHECK(ToVec(payload) == c);
      ObjectOpener fresh(mode, kp);
      ByteBuffer fresh_scratch;
      Bytes fresh_payload;
      REQUIRE(fresh.Open(obj, fresh_scratch, fresh_payload).outcome == OpenOutcome::kOk);
      CHECK(ToVec(fresh_payload) == c);

      uint8_t id[32];
      hasher.Compute(c, id);
      CHECK(Vec(id, id + 32) == FreshKeyedHash(mode, km.id_key.view(), c));
    }
  }
}

// The lanes' half of Open: the same payload before the MAC is known, the MAC message and the
// stored MAC that Open checks, and the lane hashes of the key give Open's MAC and IdHasher's id.
TEST_CASE("OpenDeferringMac and the lane hashes agree with Open and IdHasher", "[object][lanes]") {
  std::mt19937_64 rng(7);
  for (const auto& [name, repo] : Vectors()["repos"].items()) {
    INFO("repo " << name);
    const KeyMode mode = ModeOf(repo);
    const KeyMaterial km = KeyOf(repo);
    const KeyMaterial* kp = NeedsKey(mode) ? &km : nullptr;
    ObjectOpener opener(mode, kp);
    IdHasher hasher(mode, kp);
    Result<Borg1LaneHashes> lanes = MakeBorg1LaneHashes(mode, kp);
    REQUIRE(lanes.ok());
    CHECK(lanes->mac.has_value() == IsEncrypted(mode));
    REQUIRE(lanes->id.has_value());
    HashPipeline pipeline;
    ByteBuffer scratch, deferred_scratch;
    for (size_t len : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{100}, size_t{5000}}) {
      INFO("length " << len);
      Vec c(len);
      for (auto& b : c) b = uint8_t(rng());
      Vec obj = Seal(mode, km, c, rng());
      for (bool damaged : {false, true}) {
        INFO((damaged ? "last byte flipped" : "intact"));
        if (damaged && c.empty()) continue;  // the last byte is not the payload's
        if (damaged) obj.back() ^= 0x01;
        Bytes payload, deferred, mac_message, stored_mac;
        const OpenResult opened = opener.Open(obj, scratch, payload);
        const OpenResult r = opener.OpenDeferringMac(obj, deferred_scratch, deferred, mac_message, stored_mac);
        REQUIRE(r.outcome == OpenOutcome::kOk);  // no MAC verdict here
        Vec expect = c;
        if (damaged) expect.back() ^= 0x01;  // CTR (or no cipher): the same bit of the payload
        CHECK(ToVec(deferred) == expect);
        if (!IsEncrypted(mode)) {
          CHECK(mac_message.empty());
          CHECK(stored_mac.empty());
          CHECK(opened.outcome == OpenOutcome::kOk);
          continue;
        }
        CHECK(ToVec(mac_message) == Vec(obj.begin() + 33, obj.end()));
        CHECK(ToVec(stored_mac) == Vec(obj.begin() + 1, obj.begin() + 33));
        // The MAC through the lanes decides as Open does.
        uint8_t mac[32], id[32], want_id[32];
        class TwoJobs final : public HashPipeline::Items {
         public:
          HashPipeline::Job jobs[2];
          int Decode(size_t, HashPipeline::Job* out, bool) override {
            out[0] = jobs[0];
            out[1] = jobs[1];
            return 2;
          }
          void Done(size_t) override {}
        } items;
        items.jobs[0] = {&*lanes->mac, mac_message, Bytes(), mac};
        items.jobs[1] = {&*lanes->id, Bytes(c.data(), c.size()), Bytes(), id};
        pipeline.Run(1, items);
        CHECK(MacMatches(mac, stored_mac) == (opened.outcome == OpenOutcome::kOk));
        CHECK(opened.outcome == (damaged ? OpenOutcome::kBadMac : OpenOutcome::kOk));
        hasher.Compute(c, want_id);
        CHECK(Vec(id, id + 32) == Vec(want_id, want_id + 32));
      }
    }
    // The envelope checks are Open's.
    Bytes a, b, m, sm;
    const OpenResult short_obj = opener.OpenDeferringMac(Bytes(), deferred_scratch, a, m, sm);
    CHECK(short_obj.outcome == OpenOutcome::kBadEnvelope);
    CHECK(short_obj.message == opener.Open(Bytes(), scratch, b).message);
    Vec bad_type = Seal(mode, km, Vec(10, 7), 1);
    bad_type[0] ^= 0x80;
    const OpenResult typed = opener.OpenDeferringMac(bad_type, deferred_scratch, a, m, sm);
    CHECK(typed.outcome == OpenOutcome::kBadEnvelope);
    CHECK(typed.message == BadTypeMessage(mode));
    if (IsEncrypted(mode)) {
      const Vec whole = Seal(mode, km, Vec(10, 7), 1);
      const OpenResult cut = opener.OpenDeferringMac(Bytes(whole.data(), 40), deferred_scratch, a, m, sm);
      CHECK(cut.outcome == OpenOutcome::kBadEnvelope);
      CHECK(cut.message == opener.Open(Bytes(whole.data(), 40), scratch, b).message);
    }
  }
  // MacMatches compares all 32 bytes and wants a 32-byte stored MAC.
  uint8_t x[32] = {};
  Vec same(32, 0), other(32, 0), short_mac(31, 0);
  other[31] = 1;
  CHECK(MacMatches(x, same));
  CHECK_FALSE(MacMatches(x, other));
  CHECK_FALSE(MacMatches(x, short_mac));
}

TEST_CASE("a large object decrypts in one piece", "[object]") {
  const auto& repo = Vectors()["repos"]["repokey-blake2"];
  const KeyMaterial km = KeyOf(repo);
  ObjectOpener opener(KeyMode::kRepokeyBlake2, &km);
  Vec c(5 << 20);
  for (size_t i = 0; i < c.size(); ++i) c[i] = uint8_t(i * 131);
  const Vec obj = Seal(KeyMode::kRepokeyBlake2, km, c, 0xfffffffffffffff0ULL);  // counter wraps
  ByteBuffer scratch;
  Bytes payload;
  REQUIRE(opener.Open(obj, scratch, payload).outcome == OpenOutcome::kOk);
  CHECK(ToVec(payload) == c);
}

TEST_CASE("key material that does not fit the mode", "[object]") {
  CHECK(ValidateKeyMaterial(KeyMode::kNone, nullptr).ok());
  CHECK(ValidateKeyMaterial(KeyMode::kRepokey, nullptr).code() == StatusCode::kInvalidArgument);
  const KeyMaterial hmac_key = KeyOf(Vectors()["repos"]["repokey"]);
  const KeyMaterial blake_key = KeyOf(Vectors()["repos"]["repokey-blake2"]);
  CHECK(ValidateKeyMaterial(KeyMode::kRepokey, &hmac_key).ok());
  CHECK(ValidateKeyMaterial(KeyMode::kRepokeyBlake2, &blake_key).ok());
  CHECK(ValidateKeyMaterial(KeyMode::kRepokeyBlake2, &hmac_key).code() ==
        StatusCode::kCorruptMetadata);
  CHECK(ValidateKeyMaterial(KeyMode::kAuthenticated, &blake_key).code() ==
        StatusCode::kCorruptMetadata);

  ObjectOpener opener(KeyMode::kKeyfileBlake2, &hmac_key);
  CHECK(!opener.status().ok());
  ByteBuffer scratch;
  Bytes payload;
  OpenResult r = opener.Open(Vec(100, 0x04), scratch, payload);
  CHECK(r.outcome == OpenOutcome::kBadEnvelope);
  CHECK(r.message.find("internal error") == 0);
  IdHasher hasher(KeyMode::kRepokey, nullptr);
  CHECK(hasher.status().code() == StatusCode::kInvalidArgument);
  uint8_t id[32];
  hasher.Compute(Vec{1, 2, 3}, id);
  CHECK(Vec(id, id + 32) == Vec(32, 0));
}

TEST_CASE("ConstantTimeEqual", "[object]") {
  const Vec a{1, 2, 3}, b{1, 2, 4}, c{1, 2};
  CHECK(ConstantTimeEqual(a, a));
  CHECK(!ConstantTimeEqual(a, b));
  CHECK(!ConstantTimeEqual(a, c));
  CHECK(ConstantTimeEqual(Bytes(), Bytes()));
}

}  // namespace borgcheck::crypto
