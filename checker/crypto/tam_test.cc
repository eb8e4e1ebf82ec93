// Manifest TAM: every fixture manifest verifies (mode none included); one changed byte is a
// mismatch; structural damage is malformed; a manifest without `tam` is absent.
#include "checker/crypto/tam.h"

#include <openssl/evp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
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
  return *KeyModeFromTypeByte(repo["type_byte"].get<uint8_t>());
}

Vec HmacSha512(const Vec& key, const Vec& msg) {
  Vec out(64);
  size_t n = 0;
  REQUIRE(EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA512", nullptr, key.data(), key.size(), msg.data(),
                    msg.size(), out.data(), 64, &n) != nullptr);
  return out;
}

// The manifest map {"version": 1, "tam": {"hmac": hmac, "salt": salt, "type": type}} with str
// or bin byte strings, followed by `extra` bytes.
Vec MakeManifest(const Vec& hmac, const Vec& salt, const std::string& type, bool bin) {
  Vec m{0x82, 0xa7};
  for (char c : std::string("version")) m.push_back(uint8_t(c));
  m.insert(m.end(), {0x01, 0xa3, 't', 'a', 'm', 0x83});
  auto raw = [&](const Vec& v) {
    m.push_back(bin ? 0xc4 : 0xd9);
    m.push_back(uint8_t(v.size()));
    m.insert(m.end(), v.begin(), v.end());
  };
  m.insert(m.end(), {0xa4, 'h', 'm', 'a', 'c'});
  raw(hmac);
  m.insert(m.end(), {0xa4, 's', 'a', 'l', 't'});
  raw(salt);
  m.insert(m.end(), {0xa4, 't', 'y', 'p', 'e'});
  raw(Vec(type.begin(), type.end()));
  return m;
}

}  // namespace

TEST_CASE("every fixture manifest TAM verifies, one changed byte does not", "[tam]") {
  for (const auto& [name, repo] : Vectors()["repos"].items()) {
    INFO("repo " << name);
    const KeyMode mode = ModeOf(repo);
    const KeyMaterial km = KeyOf(repo);
    const KeyMaterial* kp = NeedsKey(mode) ? &km : nullptr;
    const Vec plain = Unhex(repo["manifest"]["plaintext"]);
    const Vec hmac = Unhex(repo["manifest"]["tam_hmac"]);
    REQUIRE(std::search(plain.begin(), plain.end(), hmac.begin(), hmac.end()) != plain.end());

    TamResult r = VerifyManifestTam(plain, mode, kp);
    CHECK(r.outcome == TamOutcome::kVerified);

    // Byte 3 is inside the key "archives": the map stays valid, only the HMAC breaks.
    Vec changed = plain;
    changed[3] ^= 0x01;
    r = VerifyManifestTam(changed, mode, kp);
    CHECK(r.outcome == TamOutcome::kMismatch);
    CHECK(r.message == "Manifest authentication did not verify");

    // A changed hmac byte too.
    changed = plain;
    auto at = std::search(changed.begin(), changed.end(), hmac.begin(), hmac.end());
    at[63] ^= 0x80;
    CHECK(VerifyManifestTam(changed, mode, kp).outcome == TamOutcome::kMismatch);

    // Trailing bytes are ignored by the parser but covered by the HMAC.
    changed = plain;
    changed.push_back(0x00);
    CHECK(VerifyManifestTam(changed, mode, kp).outcome == TamOutcome::kMismatch);
  }
}

TEST_CASE("the tam key matches the vectors' tam_key", "[tam]") {
  // Cross-check with a manifest signed in the test with the vectors' derived key.
  for (const auto& [name, repo] : Vectors()["repos"].items()) {
    INFO("repo " << name);
    const KeyMode mode = ModeOf(repo);
    const KeyMaterial km = KeyOf(repo);
    const Vec salt = Unhex(repo["manifest"]["tam_salt"]);
    const Vec tam_key = Unhex(repo["manifest"]["tam_key"]);
    for (bool bin : {false, true}) {
      Vec m = MakeManifest(Vec(64, 0), salt, "HKDF_HMAC_SHA512", bin);
      const Vec mac = HmacSha512(tam_key, m);
      m = MakeManifest(mac, salt, "HKDF_HMAC_SHA512", bin);
      CHECK(VerifyManifestTam(m, mode, NeedsKey(mode) ? &km : nullptr).outcome ==
            TamOutcome::kVerified);
    }
  }
}

TEST_CASE("mode none: key is salt || \"manifest\", and a keyed mode fails it", "[tam]") {
  const auto& repo = Vectors()["repos"]["none"];
  const Vec plain = Unhex(repo["manifest"]["plaintext"]);
  CHECK(VerifyManifestTam(plain, KeyMode::kNone, nullptr).outcome == TamOutcome::kVerified);
  const KeyMaterial other = KeyOf(Vectors()["repos"]["repokey"]);
  CHECK(VerifyManifestTam(plain, KeyMode::kRepokey, &other).outcome == TamOutcome::kMismatch);
}

TEST_CASE("absent and malformed TAMs", "[tam]") {
  const KeyMode none = KeyMode::kNone;
  const Vec salt(64, 7);
  SECTION("no tam key") {
    CHECK(VerifyManifestTam(Vec{0x81, 0xa1, 'a', 0x01}, none, nullptr).outcome ==
          TamOutcome::kAbsent);
    CHECK(VerifyManifestTam(Vec{0x80}, none, nullptr).outcome == TamOutcome::kAbsent);
  }
  SECTION("not a map, not msgpack, empty") {
    CHECK(VerifyManifestTam(Vec{0x90}, none, nullptr).outcome == TamOutcome::kMalformed);
    CHECK(VerifyManifestTam(Vec{0xc1}, none, nullptr).outcome == TamOutcome::kMalformed);
    CHECK(VerifyManifestTam(Vec{0x81, 0xa1}, none, nullptr).outcome == TamOutcome::kMalformed);
    CHECK(VerifyManifestTam(Vec{}, none, nullptr).outcome == TamOutcome::kMalformed);
    CHECK(VerifyManifestTam(Vec{0xdf, 0xff, 0xff, 0xff, 0xff}, none, nullptr).outcome ==
          TamOutcome::kMalformed);
  }
  SECTION("tam is not a map") {
    CHECK(VerifyManifestTam(Vec{0x81, 0xa3, 't', 'a', 'm', 0x01}, none, nullptr).outcome ==
          TamOutcome::kMalformed);
  }
  SECTION("wrong type, short salt, short hmac") {
    CHECK(
        VerifyManifestTam(MakeManifest(Vec(64, 1), salt, "HKDF_HMAC_SHA256", false), none, nullptr)
            .outcome == TamOutcome::kMalformed);
    CHECK(VerifyManifestTam(MakeManifest(Vec(64, 1), Vec(32, 7), "HKDF_HMAC_SHA512", false), none,
                            nullptr)
              .outcome == TamOutcome::kMalformed);
    CHECK(
        VerifyManifestTam(MakeManifest(Vec(63, 1), salt, "HKDF_HMAC_SHA512", false), none, nullptr)
            .outcome == TamOutcome::kMalformed);
  }
  SECTION("hmac bytes occurring twice") {
    const Vec hmac(64, 0x5a);
    Vec m = MakeManifest(hmac, salt, "HKDF_HMAC_SHA512", false);
    m.insert(m.end(), hmac.begin(), hmac.end());  // trailing copy, ignored by the parser
    CHECK(VerifyManifestTam(m, none, nullptr).outcome == TamOutcome::kMalformed);
  }
}

}  // namespace borgcheck::crypto
