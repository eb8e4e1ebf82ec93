// AEAD envelopes and session keys against real borg 2 objects: the b5 fixture vectors
// (HKDF-SHA512 session keys, AAD = id || header), a master manifest (SHA-256 session keys,
// 42-byte RepoObj AAD prefix), one damaged byte per case with its exact outcome, and OpenSSL
// round trips for the split-AAD and tag-first conventions.
#include "checker/crypto/aead.h"

#include <openssl/evp.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <random>

#include "checker/crypto/borg2_key.h"
#include "checker/crypto/borg2_test_util.h"
#include "checker/crypto/key_blob.h"

namespace borgcheck::crypto {
namespace {

using namespace testutil;

const char* kVectorRepos[] = {"repokey-chacha20-poly1305", "keyfile-aes-ocb", "repokey-blake2-aes-ocb",
                              "none", "authenticated", "authenticated-blake2"};

Vec Sha256(Bytes b) {
  Vec out(32);
  unsigned int n = 0;
  REQUIRE(EVP_Digest(b.data(), b.size(), out.data(), &n, EVP_sha256(), nullptr) == 1);
  return out;
}

Vec ToVec(Bytes b) { return Vec(b.begin(), b.end()); }

struct SplitObject {
  Vec meta, data;
};
SplitObject Split(const Vec& payload) {
  REQUIRE(payload.size() >= 2);
  size_t meta_len = payload[0] | size_t(payload[1]) << 8;
  REQUIRE(2 + meta_len <= payload.size());
  return {Vec(payload.begin() + 2, payload.begin() + 2 + long(meta_len)),
          Vec(payload.begin() + 2 + long(meta_len), payload.end())};
}

TEST_CASE("session keys: HKDF-SHA512 reproduces every b5 vector, SHA-256 does not", "[aead]") {
  int checked = 0;
  for (const char* repo : kVectorRepos) {
    RepoVectors rv = ParseVectors(B5Dir() + "/expected/" + repo + ".vectors.txt");
    REQUIRE(!rv.objects.empty());
    if (!rv.kv.count("crypt_key")) continue;
    Vec crypt_key = Unhex(rv.kv["crypt_key"]);
    for (const ObjectVector& o : rv.objects) {
      for (const EnvelopeVector* e : {&o.meta, &o.data}) {
        const Borg2KeyType* kt = Borg2b5KeyTypeFromByte(e->type);
        REQUIRE(kt != nullptr);
        if (kt->envelope != EnvelopeKind::kAead) continue;
        INFO(repo << " type " << int(e->type));
        uint8_t key[32];
        REQUIRE(DeriveSessionKey(SessionKdf::kHkdfSha512, kt->suite, crypt_key, e->session_id, key).ok());
        CHECK(Vec(key, key + 32) == e->session_key);
        REQUIRE(DeriveSessionKey(SessionKdf::kSha256, kt->suite, crypt_key, e->session_id, key).ok());
        CHECK(Vec(key, key + 32) != e->session_key);
        // nonce and AAD as the vectors record them
        uint8_t nonce[12];
        AeadNonce(e->iv, nonce);
        CHECK(Vec(nonce, nonce + 12) == e->nonce);
        AeadEnvelope env;
        REQUIRE(ParseAeadEnvelope(e->head, env, nullptr));
        Vec aad = o.id;
        aad.insert(aad.end(), env.header.begin(), env.header.end());
        CHECK(aad == e->aad);
        CHECK(ToVec(env.tag) == e->tag);
        CHECK(env.iv == e->iv);
        ++checked;
      }
    }
  }
  CHECK(checked == 12);  // 3 keyed AEAD repos x 2 objects x 2 envelopes
}

TEST_CASE("session keys: SHA-256 derivation is SHA-256(crypt_key || session_id || domain)", "[aead]") {
  Vec crypt_key(64), sid(24);
  for (size_t i = 0; i < crypt_key.size(); ++i) crypt_key[i] = uint8_t(i);
  for (size_t i = 0; i < sid.size(); ++i) sid[i] = uint8_t(0xa0 + i);
  for (AeadSuite suite : {AeadSuite::kAes256Ocb, AeadSuite::kChaCha20Poly1305}) {
    Vec msg = crypt_key;
    msg.insert(msg.end(), sid.begin(), sid.end());
    std::string domain = "borg-session-key-" + std::string(AeadSuiteName(suite));
    msg.insert(msg.end(), domain.begin(), domain.end());
    uint8_t key[32];
    REQUIRE(DeriveSessionKey(SessionKdf::kSha256, suite, crypt_key, sid, key).ok());
    CHECK(Vec(key, key + 32) == Sha256(msg));
  }
  CHECK(AeadSuiteName(AeadSuite::kAes256Ocb) == "AES256_OCB");
  CHECK(AeadSuiteName(AeadSuite::kChaCha20Poly1305) == "CHACHA20_POLY1305");
}

// Opens both envelopes of every vector object of `repo` from the fixture's segment 2 (or the
// manifest's segment 4) and compares with the vectors.
void OpenVectorObjects(const std::string& repo, SessionKdfPolicy policy, SessionKdf want_kdf) {
  RepoVectors rv = ParseVectors(B5Dir() + "/expected/" + repo + ".vectors.txt");
  Vec crypt_key = rv.kv.count("crypt_key") ? Unhex(rv.kv["crypt_key"]) : Vec();
  const Borg2KeyType* kt = Borg2b5KeyTypeFromByte(rv.objects.at(0).meta.type);
  REQUIRE(kt != nullptr);
  EnvelopeOpener opener(kt->envelope_class(), crypt_key, policy);
  REQUIRE(opener.status().ok());
  ByteBuffer scratch;
  for (const ObjectVector& o : rv.objects) {
    std::optional<Vec> payload = FindPut2Payload(B5Dir() + "/" + repo + "/data/0/2", o.id);
    REQUIRE(payload.has_value());
    CHECK(payload->size() == o.len);
    SplitObject so = Split(*payload);
    Bytes plain;
    EnvelopeResult r = opener.Open(so.meta, {}, o.id.data(), scratch, plain);
    REQUIRE(r.outcome == EnvelopeOutcome::kOk);
    CHECK(ToVec(plain) == o.meta.meta_plain);
    r = opener.Open(so.data, {}, o.id.data(), scratch, plain);
    REQUIRE(r.outcome == EnvelopeOutcome::kOk);
    CHECK(plain.size() == *o.data.data_len);
    CHECK(Sha256(plain) == o.data.data_sha256);
  }
  int sessions = 0;
  opener.ForEachSession([&](Bytes sid, SessionKdf kdf) {
    ++sessions;
    CHECK(sid.size() == 24);
    CHECK(kdf == want_kdf);
  });
  CHECK(sessions == (kt->envelope == EnvelopeKind::kAead ? 1 : 0));
}

TEST_CASE("envelopes: every vector object of every mode opens to the recorded plaintext", "[aead]") {
  for (const char* repo : kVectorRepos) {
    INFO(repo);
    OpenVectorObjects(repo, {SessionKdf::kHkdfSha512, true}, SessionKdf::kHkdfSha512);
  }
}

TEST_CASE("envelopes: a SHA-256-first opener falls back to HKDF for b5 sessions, and says so", "[aead]") {
  OpenVectorObjects("repokey-chacha20-poly1305", {SessionKdf::kSha256, true}, SessionKdf::kHkdfSha512);
  OpenVectorObjects("keyfile-aes-ocb", {SessionKdf::kSha256, true}, SessionKdf::kHkdfSha512);
}

TEST_CASE("envelopes: without fallback a SHA-256 opener cannot open b5 objects", "[aead]") {
  RepoVectors rv = ParseVectors(B5Dir() + "/expected/repokey-chacha20-poly1305.vectors.txt");
  const ObjectVector& o = rv.objects.at(0);
  EnvelopeOpener opener(Borg2b5KeyTypeFromByte(0x21)->envelope_class(), Unhex(rv.kv["crypt_key"]),
                        {SessionKdf::kSha256, false});
  std::optional<Vec> payload = FindPut2Payload(B5Dir() + "/repokey-chacha20-poly1305/data/0/2", o.id);
  REQUIRE(payload.has_value());
  ByteBuffer scratch;
  Bytes plain;
  CHECK(opener.Open(Split(*payload).meta, {}, o.id.data(), scratch, plain).outcome ==
        EnvelopeOutcome::kAuthFailed);
}

struct Damage {
  const char* name;
  size_t offset;      // in the data envelope
  uint8_t new_value;  // 0 = flip the low bit
  EnvelopeOutcome want;
};

TEST_CASE("envelopes: one damaged byte gives the exact outcome", "[aead]") {
  RepoVectors rv = ParseVectors(B5Dir() + "/expected/repokey-chacha20-poly1305.vectors.txt");
  const ObjectVector& o = rv.objects.at(1);
  std::optional<Vec> payload = FindPut2Payload(B5Dir() + "/repokey-chacha20-poly1305/data/0/2", o.id);
  REQUIRE(payload.has_value());
  const Vec data = Split(*payload).data;
  const Damage cases[] = {
      {"type 0x21 -> 0x20 (same class, but in the AAD)", 0, 0x20, EnvelopeOutcome::kAuthFailed},
      {"type 0x21 -> 0x02 (other class)", 0, 0x02, EnvelopeOutcome::kBadType},
      {"reserved byte", 1, 0x01, EnvelopeOutcome::kAuthFailed},
      {"IV", 7, 0, EnvelopeOutcome::kAuthFailed},
      {"session id", 20, 0, EnvelopeOutcome::kAuthFailed},
      {"tag", 40, 0, EnvelopeOutcome::kAuthFailed},
      {"first ciphertext byte", 48, 0, EnvelopeOutcome::kAuthFailed},
      {"last ciphertext byte", data.size() - 1, 0, EnvelopeOutcome::kAuthFailed},
  };
  for (const Damage& d : cases) {
    INFO(d.name);
    EnvelopeOpener opener(Borg2b5KeyTypeFromByte(0x21)->envelope_class(), Unhex(rv.kv["crypt_key"]), {});
    Vec bad = data;
    bad[d.offset] = d.new_value ? d.new_value : uint8_t(bad[d.offset] ^ 1);
    ByteBuffer scratch;
    Bytes plain;
    EnvelopeResult r = opener.Open(bad, {}, o.id.data(), scratch, plain);
    CHECK(r.outcome == d.want);
    if (d.want == EnvelopeOutcome::kAuthFailed) {
      CHECK(r.message == "Authentication / EVP_DecryptFinal_ex failed");
    } else {
      CHECK(r.message == "Invalid encryption envelope");
    }
    // the intact envelope still opens afterwards with the same opener
    CHECK(opener.Open(data, {}, o.id.data(), scratch, plain).outcome == EnvelopeOutcome::kOk);
  }
  SECTION("wrong chunk id in the AAD") {
    EnvelopeOpener opener(Borg2b5KeyTypeFromByte(0x21)->envelope_class(), Unhex(rv.kv["crypt_key"]), {});
    Vec other = o.id;
    other[31] ^= 1;
    ByteBuffer scratch;
    Bytes plain;
    CHECK(opener.Open(data, {}, other.data(), scratch, plain).outcome == EnvelopeOutcome::kAuthFailed);
  }
  SECTION("truncated below the header") {
    EnvelopeOpener opener(Borg2b5KeyTypeFromByte(0x21)->envelope_class(), Unhex(rv.kv["crypt_key"]), {});
    ByteBuffer scratch;
    Bytes plain;
    EnvelopeResult r = opener.Open(Bytes(data.data(), 47), {}, o.id.data(), scratch, plain);
    CHECK(r.outcome == EnvelopeOutcome::kMalformed);
    CHECK(opener.Open(Bytes(), {}, o.id.data(), scratch, plain).outcome == EnvelopeOutcome::kMalformed);
  }
  SECTION("an AEAD class without a key refuses to construct") {
    EnvelopeOpener opener(Borg2b5KeyTypeFromByte(0x21)->envelope_class(), Bytes(), {});
    CHECK(opener.status().code() == StatusCode::kInvalidArgument);
  }
}

TEST_CASE("envelopes: plain modes accept only their own type byte", "[aead]") {
  EnvelopeOpener opener(Borg2b5KeyTypeFromByte(0x02)->envelope_class(), Bytes(), {});
  REQUIRE(opener.status().ok());
  const uint8_t id[32] = {};
  ByteBuffer scratch;
  Bytes plain;
  const uint8_t good[] = {0x02, 'a', 'b'};
  REQUIRE(opener.Open(Bytes(good, 3), {}, id, scratch, plain).outcome == EnvelopeOutcome::kOk);
  CHECK(plain.size() == 2);
  CHECK(plain.data() == good + 1);  // a view, no copy
  const uint8_t bad[] = {0x07, 'a'};
  CHECK(opener.Open(Bytes(bad, 2), {}, id, scratch, plain).outcome == EnvelopeOutcome::kBadType);
}

TEST_CASE("envelopes: a borg master manifest opens with SHA-256 session keys and the 42-byte prefix",
          "[aead]") {
  const std::string repo = SharedDir() + "/fixtures/borg2master/repos/aes256-ocb_sha256_repokey";
  std::string key_text;
  for (const auto& e : std::filesystem::directory_iterator(repo + "/keys")) key_text = ReadFile(e.path());
  Result<KeyFileContents> kf = ParseKeyFile(key_text);
  REQUIRE(kf.ok());
  Result<Borg2KeyMaterial> km = DecryptBorg2KeyBlob(kf->base64, "test", {false});
  REQUIRE(km.ok());
  std::string blob = ReadFile(repo + "/config/manifest");
  REQUIRE(blob.size() > 49);
  const auto* b = reinterpret_cast<const uint8_t*>(blob.data());
  REQUIRE(std::memcmp(b, "BORG_OBJ\x02", 9) == 0);
  uint32_t meta_size = LoadLE32(b + 41), data_size = LoadLE32(b + 45);
  REQUIRE(49 + size_t(meta_size) + data_size == blob.size());
  EnvelopeClass cls{EnvelopeKind::kAead, AeadSuite::kAes256Ocb, {0x10}};
  EnvelopeOpener opener(cls, km->crypt_key.view(), {SessionKdf::kSha256, false});
  Vec prefix_m(b, b + 41), prefix_d(b, b + 41);
  prefix_m.push_back('M');
  prefix_d.push_back('D');
  const uint8_t zero_id[32] = {};
  ByteBuffer scratch;
  Bytes plain;
  Bytes meta(b + 49, meta_size), data(b + 49 + meta_size, data_size);
  REQUIRE(opener.Open(meta, prefix_m, zero_id, scratch, plain).outcome == EnvelopeOutcome::kOk);
  CHECK(!plain.empty());
  CHECK(opener.Open(data, prefix_d, zero_id, scratch, plain).outcome == EnvelopeOutcome::kOk);
  // the slot byte matters: the meta envelope does not open as a data envelope
  CHECK(opener.Open(meta, prefix_d, zero_id, scratch, plain).outcome == EnvelopeOutcome::kAuthFailed);
  int sessions = 0;
  opener.ForEachSession([&](Bytes, SessionKdf kdf) { ++sessions; CHECK(kdf == SessionKdf::kSha256); });
  CHECK(sessions == 1);
}

// Encrypts with OpenSSL in the standard way (AAD as one buffer), decrypts with AeadCipher
// (AAD split in parts, tag passed separately).
TEST_CASE("AeadCipher: round trips with OpenSSL for both suites, split AAD, any length", "[aead]") {
  std::mt19937 rng(42);
  for (AeadSuite suite : {AeadSuite::kAes256Ocb, AeadSuite::kChaCha20Poly1305}) {
    AeadCipher cipher(suite);
    REQUIRE(cipher.status().ok());
    for (size_t len : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17), size_t(1000), size_t(65537)}) {
      Vec key(32), nonce(12), aad(106), pt(len), ct(len), tag(16);
      for (auto* v : {&key, &nonce, &aad, &pt}) for (uint8_t& x : *v) x = uint8_t(rng());
      EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
      const EVP_CIPHER* c = suite == AeadSuite::kAes256Ocb ? EVP_aes_256_ocb() : EVP_chacha20_poly1305();
      int outl = 0, finl = 0;
      REQUIRE(EVP_EncryptInit_ex(ctx, c, nullptr, nullptr, nullptr) == 1);
      REQUIRE(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, 12, nullptr) == 1);
      REQUIRE(EVP_EncryptInit_ex(ctx, nullptr, nullptr, key.data(), nonce.data()) == 1);
      REQUIRE(EVP_EncryptUpdate(ctx, nullptr, &outl, aad.data(), int(aad.size())) == 1);
      if (len) REQUIRE(EVP_EncryptUpdate(ctx, ct.data(), &outl, pt.data(), int(len)) == 1);
      REQUIRE(EVP_EncryptFinal_ex(ctx, ct.data() + (len ? outl : 0), &finl) == 1);
      REQUIRE(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag.data()) == 1);
      EVP_CIPHER_CTX_free(ctx);

      Vec out(len + 1);
      Bytes a(aad);
      CHECK(cipher.Decrypt(key.data(), nonce.data(), {a.first(42), a.subspan(42, 32), a.subspan(74)},
                           tag, ct, out.data()));
      CHECK(Vec(out.begin(), out.begin() + long(len)) == pt);
      CHECK(cipher.Decrypt(key.data(), nonce.data(), {a}, tag, ct, out.data()));
      Vec bad_aad = aad;
      bad_aad[100] ^= 0x80;
      CHECK_FALSE(cipher.Decrypt(key.data(), nonce.data(), {Bytes(bad_aad)}, tag, ct, out.data()));
      Vec bad_tag = tag;
      bad_tag[0] ^= 1;
      CHECK_FALSE(cipher.Decrypt(key.data(), nonce.data(), {a}, bad_tag, ct, out.data()));
    }
  }
}

}  // namespace
}  // namespace borgcheck::crypto
