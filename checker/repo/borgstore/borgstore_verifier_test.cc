// One repository-version-4 object, built here and damaged one way at a time (spec
// borg2-format.md §B.3, §B.4): each case asserts the stage and borg's words. Tagged objects are
// sealed with crypto::TaggedEnvelope; AEAD objects with OpenSSL directly (the checker itself
// only decrypts), following §B.3.3.
#include "checker/repo/borgstore/borgstore_verifier.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <lz4.h>
#include <msgpack.hpp>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <zlib.h>

#include <map>
#include <string>
#include <vector>

#include "checker/crypto/tagged_envelope.h"

namespace borgcheck::repo {
namespace {
using report::Severity;
using report::Stage;

// A meta map as borg writes it: `clevel` is added when the test gives none (borg always writes
// it, and the parser both borg 2 generations share requires it).
std::string Meta(std::map<std::string, uint64_t> ints, const std::string& type = "F") {
  ints.emplace("clevel", 0);
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(uint32_t(ints.size() + 1));
  pk.pack(std::string("type"));
  pk.pack(type);
  for (const auto& [k, v] : ints) {
    pk.pack(k);
    pk.pack(v);
  }
  return std::string(buf.data(), buf.size());
}

ChunkId Sha(const std::string& s) {
  ChunkId id;
  SHA256(reinterpret_cast<const uint8_t*>(s.data()), s.size(), id.data());
  return id;
}

std::string Header(uint8_t version, const ChunkId& id, size_t meta_size, size_t data_size) {
  std::string h = "BORG_OBJ";
  h.push_back(char(version));
  h.append(reinterpret_cast<const char*>(id.data()), 32);
  uint8_t u32[4];
  StoreLE32(u32, uint32_t(meta_size));
  h.append(reinterpret_cast<char*>(u32), 4);
  StoreLE32(u32, uint32_t(data_size));
  h.append(reinterpret_cast<char*>(u32), 4);
  return h;
}

// The AAD the RepoObj layer uses for `slot` (version 2) or none (version 1).
std::string Aad(const std::string& header, uint8_t version_for_aad, char slot) {
  if (version_for_aad != 2) return "";
  return header.substr(0, 41) + slot;
}

// A none-sha256 (0x80) object; `aad_version` lets a case seal with the other version's rule.
std::string TaggedObject(uint8_t version, const ChunkId& id, const std::string& meta, const std::string& data,
                         int aad_version = -1) {
  crypto::TaggedEnvelope env(crypto::TaggedMac::kSha256, Bytes());
  std::string h = Header(version, id, meta.size() + 34, data.size() + 34);
  uint8_t av = aad_version < 0 ? version : uint8_t(aad_version);
  std::string am = Aad(h, av, 'M'), ad = Aad(h, av, 'D');
  std::vector<uint8_t> m = env.Seal(AsBytes(meta), AsBytes(am), id.data());
  std::vector<uint8_t> d = env.Seal(AsBytes(data), AsBytes(ad), id.data());
  return h + std::string(m.begin(), m.end()) + std::string(d.begin(), d.end());
}

struct Verifier {
  BorgstoreVerifier v{true, crypto::MasterKeyTypeFromByte(0x80), Bytes(), Bytes()};
  std::optional<engine::Verdict> operator()(const std::string& blob, const ChunkId& id) { return v.VerifyAs(AsBytes(blob), id); }
};

const std::string kPlain = "hello hello hello hello hello, borg 2 master";

TEST_CASE("master object: intact objects of every shape verify", "[master-object]") {
  Verifier v;
  ChunkId id = Sha(kPlain);
  SECTION("ctype none, version 2") {
    REQUIRE_FALSE(v(TaggedObject(2, id, Meta({{"ctype", 0}, {"clevel", 255}, {"csize", kPlain.size()}, {"size", kPlain.size()}}), kPlain), id));
    CHECK(std::string(v.v.plaintext().begin(), v.v.plaintext().end()) == kPlain);
    CHECK(v.v.meta().type == "F");
  }
  SECTION("version 1 (b22: no header AAD)") {
    CHECK_FALSE(v(TaggedObject(1, id, Meta({{"ctype", 0}, {"csize", kPlain.size()}, {"size", kPlain.size()}}), kPlain), id));
  }
  SECTION("zlib") {
    uLongf n = compressBound(uLong(kPlain.size()));
    std::string z(n, '\0');
    REQUIRE(compress2(reinterpret_cast<Bytef*>(z.data()), &n, reinterpret_cast<const Bytef*>(kPlain.data()), uLong(kPlain.size()), 6) == Z_OK);
    z.resize(n);
    CHECK_FALSE(v(TaggedObject(2, id, Meta({{"ctype", 5}, {"clevel", 6}, {"csize", z.size()}, {"size", kPlain.size()}}), z), id));
  }
  SECTION("lz4 without size (auto,... compression writes none)") {
    std::string l(size_t(LZ4_compressBound(int(kPlain.size()))), '\0');
    int n = LZ4_compress_default(kPlain.data(), l.data(), int(kPlain.size()), int(l.size()));
    l.resize(size_t(n));
    CHECK_FALSE(v(TaggedObject(2, id, Meta({{"ctype", 1}, {"clevel", 255}, {"csize", l.size()}}), l), id));
    CHECK(v.v.plaintext().size() == kPlain.size());
  }
  SECTION("obfuscation: psize < csize, zero padding") {
    std::string padded = kPlain + std::string(20, '\0');
    CHECK_FALSE(v(TaggedObject(2, id, Meta({{"ctype", 0}, {"csize", padded.size()}, {"psize", kPlain.size()}, {"size", kPlain.size()}, {"olevel", 110}}), padded), id));
  }
  SECTION("the manifest: id 00*32, type M, no id check") {
    CHECK_FALSE(v(TaggedObject(2, ChunkId{}, Meta({{"ctype", 0}, {"csize", kPlain.size()}}, "M"), kPlain), ChunkId{}));
  }
}

TEST_CASE("master object: one failure per kind of damage", "[master-object]") {
  Verifier v;
  ChunkId id = Sha(kPlain);
  const std::string hex = ToHex(Bytes(id.data(), 32));
  auto meta = [&](std::map<std::string, uint64_t> m) { return Meta(m); };
  auto expect = [&](const std::string& blob, Stage stage, const std::string& message,
                    std::optional<ChunkId> as = std::nullopt) {
    std::optional<engine::Verdict> f = v(blob, as.value_or(id));
    REQUIRE(f);
    CHECK(f->stage == stage);
    CHECK(f->message == message);
    return *f;
  };
  std::string good = TaggedObject(2, id, meta({{"ctype", 0}, {"csize", kPlain.size()}, {"size", kPlain.size()}}), kPlain);

  SECTION("a payload byte") {
    std::string b = good;
    b[b.size() - 3] ^= 1;
    expect(b, Stage::kAuthentication, "envelope tag verification failed");
  }
  SECTION("a meta byte") {
    std::string b = good;
    b[49 + 34 + 2] ^= 1;
    expect(b, Stage::kAuthentication, "envelope tag verification failed");
  }
  SECTION("the version byte (v2 envelopes under a v1 header)") {
    std::string b = good;
    b[8] = 1;
    expect(b, Stage::kAuthentication, "envelope tag verification failed");
  }
  SECTION("v1 envelopes under a v2 header") {
    expect(TaggedObject(2, id, meta({{"ctype", 0}, {"csize", kPlain.size()}}), kPlain, 1), Stage::kAuthentication,
           "envelope tag verification failed");
  }
  SECTION("meta and data envelopes swapped within the object (v2 binds the slot)") {
    std::string m = meta({{"ctype", 0}, {"csize", kPlain.size()}});
    std::string b = TaggedObject(2, id, m, kPlain);
    // Swap the two envelopes and their sizes in the header.
    std::string menv = b.substr(49, m.size() + 34), denv = b.substr(49 + m.size() + 34);
    std::string h = Header(2, id, denv.size(), menv.size());
    expect(h + denv + menv, Stage::kAuthentication, "envelope tag verification failed");
  }
  SECTION("checked as another chunk id") {
    ChunkId other = id;
    other[0] ^= 1;
    expect(good, Stage::kEnvelope, "the object header names another chunk: " + hex, other);
  }
  SECTION("another mode's type byte") {
    std::string b = good;
    b[49] = char(0x90);
    expect(b, Stage::kEnvelope, "Invalid encryption envelope");
  }
  SECTION("structure") {
    expect(good.substr(0, good.size() - 1), Stage::kTruncated, "object size inconsistent: expected 197 bytes, got 196");
    expect(good.substr(0, 20), Stage::kTruncated, "object too small: expected at least 49 header bytes, got 20");
    std::string b = good;
    b[3] = 'x';
    expect(b, Stage::kEnvelope, "invalid object magic");
  }
  SECTION("meta is not msgpack") {
    std::string b = TaggedObject(2, id, "\xc1\xc1", kPlain);
    std::optional<engine::Verdict> f = v(b, id);
    REQUIRE(f);
    CHECK(f->stage == Stage::kEnvelope);
    CHECK(f->message.rfind("object metadata: not valid msgpack", 0) == 0);  // b5's parser and words
  }
  SECTION("csize, psize, ctype, size") {
    // The same parser, decoder and verdicts as 2.0.0b5 (repo/borg2/borg2_repo_obj.h).
    expect(TaggedObject(2, id, meta({{"ctype", 0}, {"clevel", 0}, {"csize", 3}}), kPlain), Stage::kEnvelope,
           fmt::format("object metadata does not fit the data: csize 3 != len(data) {}", kPlain.size()));
    expect(TaggedObject(2, id, meta({{"ctype", 0}, {"clevel", 0}}), kPlain), Stage::kEnvelope,
           "object metadata: `csize` is missing");
    expect(TaggedObject(2, id, meta({{"ctype", 0}, {"clevel", 0}, {"csize", kPlain.size()}, {"psize", 999}}), kPlain),
           Stage::kEnvelope, fmt::format("object metadata does not fit the data: psize 999 > csize {}", kPlain.size()));
    expect(TaggedObject(2, id, meta({{"ctype", 9}, {"clevel", 0}, {"csize", kPlain.size()}}), kPlain), Stage::kDecompression,
           "Decompression error: unknown compression type 9");
    std::optional<engine::Verdict> f = v(TaggedObject(2, id, meta({{"ctype", 0}, {"csize", kPlain.size()}, {"size", 5}}), kPlain), id);
    REQUIRE(f);
    CHECK(f->stage == Stage::kDecompression);
  }
  SECTION("authentic garbage for its codec") {
    std::optional<engine::Verdict> f = v(TaggedObject(2, id, meta({{"ctype", 5}, {"csize", kPlain.size()}}), kPlain), id);
    REQUIRE(f);
    CHECK(f->stage == Stage::kDecompression);
    CHECK(f->message.rfind("Decompression error: ", 0) == 0);
  }
  SECTION("the plaintext hashes to another id") {
    ChunkId wrong = Sha("something else");
    expect(TaggedObject(2, wrong, meta({{"ctype", 0}, {"csize", kPlain.size()}}), kPlain), Stage::kIdHash,
           "id verification failed", wrong);
  }
  SECTION("non-zero obfuscation padding under an unkeyed hash (none-sha256) is an error") {
    std::string padded = kPlain + "\x01";
    engine::Verdict f = expect(TaggedObject(2, id, meta({{"ctype", 0}, {"csize", padded.size()}, {"psize", kPlain.size()}}), padded),
                               Stage::kDecompression,
                               "obfuscation padding is not all zero bytes (no key authenticates it: the stored object "
                               "was altered after it was written; borg does not check this)");
    CHECK(f.severity == Severity::kError);
  }
  SECTION("a manifest that is not type M") {
    expect(TaggedObject(2, ChunkId{}, meta({{"ctype", 0}, {"csize", kPlain.size()}}), kPlain), Stage::kEnvelope,
           "the manifest's meta type is 'F', not 'M'", ChunkId{});
  }
  SECTION("the keyless tier only checks the structure") {
    BorgstoreVerifier keyless(false, nullptr, Bytes(), Bytes());
    std::string b = good;
    b[b.size() - 3] ^= 1;
    CHECK_FALSE(keyless.VerifyAs(AsBytes(b), id));
    CHECK(keyless.VerifyAs(AsBytes(b.substr(1)), id));
  }
}

// ---- AEAD objects (types 0x10-0x40), sealed here with OpenSSL ----

std::vector<uint8_t> Range(int from, int to) {
  std::vector<uint8_t> v;
  for (int i = from; i < to; ++i) v.push_back(uint8_t(i));
  return v;
}

// type | 0 | iv48 BE | session 24 | tag 16 | ct, AAD = aad || chunk_id || envelope[0:32].
std::string SealAead(uint8_t type, const std::vector<uint8_t>& crypt_key, uint64_t iv, const std::string& aad,
                     const ChunkId& id, const std::string& plain) {
  const bool ocb = type == 0x10 || type == 0x30;
  std::string session(24, '\x5a');
  std::string domain = std::string("borg-session-key-") + (ocb ? "AES256_OCB" : "CHACHA20_POLY1305");
  std::string kin(crypt_key.begin(), crypt_key.end());
  kin += session + domain;
  uint8_t key[32];
  SHA256(reinterpret_cast<const uint8_t*>(kin.data()), kin.size(), key);
  std::string header(32, '\0');
  header[0] = char(type);
  for (int i = 0; i < 6; ++i) header[2 + i] = char(iv >> (8 * (5 - i)));
  header.replace(8, 24, session);
  uint8_t nonce[12] = {0};
  for (int i = 0; i < 6; ++i) nonce[6 + i] = uint8_t(iv >> (8 * (5 - i)));
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  REQUIRE(EVP_EncryptInit_ex(ctx, ocb ? EVP_aes_256_ocb() : EVP_chacha20_poly1305(), nullptr, nullptr, nullptr) == 1);
  REQUIRE(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, 12, nullptr) == 1);
  if (ocb) REQUIRE(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, nullptr) == 1);
  REQUIRE(EVP_EncryptInit_ex(ctx, nullptr, nullptr, key, nonce) == 1);
  int n = 0;
  std::string full_aad = aad + std::string(reinterpret_cast<const char*>(id.data()), 32) + header;
  REQUIRE(EVP_EncryptUpdate(ctx, nullptr, &n, reinterpret_cast<const uint8_t*>(full_aad.data()), int(full_aad.size())) == 1);
  std::string ct(plain.size() + 16, '\0');
  REQUIRE(EVP_EncryptUpdate(ctx, reinterpret_cast<uint8_t*>(ct.data()), &n, reinterpret_cast<const uint8_t*>(plain.data()), int(plain.size())) == 1);
  int m = 0;
  REQUIRE(EVP_EncryptFinal_ex(ctx, reinterpret_cast<uint8_t*>(ct.data()) + n, &m) == 1);
  ct.resize(size_t(n + m));
  std::string tag(16, '\0');
  REQUIRE(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag.data()) == 1);
  EVP_CIPHER_CTX_free(ctx);
  return header + tag + ct;
}

std::string AeadObject(uint8_t type, const std::vector<uint8_t>& crypt_key, uint8_t version, const ChunkId& id,
                       const std::string& meta, const std::string& data) {
  std::string h = Header(version, id, meta.size() + 48, data.size() + 48);
  std::string m = SealAead(type, crypt_key, 2, Aad(h, version, 'M'), id, meta);
  std::string d = SealAead(type, crypt_key, 1, Aad(h, version, 'D'), id, data);
  return h + m + d;
}

TEST_CASE("master object: AEAD objects of both versions and both suites", "[master-object]") {
  std::vector<uint8_t> crypt_key = Range(0, 64), id_key = Range(100, 132);
  for (uint8_t type : {uint8_t(0x10), uint8_t(0x20), uint8_t(0x30), uint8_t(0x40)}) {
    INFO(int(type));
    const crypto::MasterKeyType* t = crypto::MasterKeyTypeFromByte(type);
    REQUIRE(t);
    BorgstoreVerifier v(true, t, Bytes(crypt_key.data(), 64), Bytes(id_key.data(), 32));
    REQUIRE(v.status().ok());
    crypto::Borg2IdHasher hasher(t->id_hash, Bytes(id_key.data(), 32));
    ChunkId id;
    hasher.Compute(AsBytes(kPlain), id.data());
    std::string meta = Meta({{"ctype", 0}, {"csize", kPlain.size()}, {"size", kPlain.size()}});
    for (uint8_t version : {uint8_t(1), uint8_t(2)}) {
      INFO(int(version));
      std::string blob = AeadObject(type, crypt_key, version, id, meta, kPlain);
      CHECK_FALSE(v.VerifyAs(AsBytes(blob), id));
      std::string other_version = blob;
      other_version[8] = char(3 - version);
      std::optional<engine::Verdict> f = v.VerifyAs(AsBytes(other_version), id);
      REQUIRE(f);
      CHECK(f->stage == Stage::kAuthentication);
      CHECK(f->message == "Could not decrypt [Authentication / EVP_DecryptFinal_ex failed]");
      // Padding the AEAD tag covers: written with the key, so a warning (engine::PaddingVerdict).
      std::string padded = kPlain + std::string("\0\0\x07", 3);
      std::string pmeta = Meta({{"ctype", 0}, {"csize", padded.size()}, {"psize", kPlain.size()}, {"size", kPlain.size()}});
      std::optional<engine::Verdict> p = v.VerifyAs(AsBytes(AeadObject(type, crypt_key, version, id, pmeta, padded)), id);
      REQUIRE(p);
      CHECK(p->stage == Stage::kDecompression);
      CHECK(p->severity == Severity::kWarning);
      CHECK(p->message == "obfuscation padding is not all zero bytes (authenticated, so written with the key; borg "
                          "writes zeros and does not check them)");
    }
    // An envelope of 32..47 bytes.
    std::string h = Header(2, id, 40, 48 + kPlain.size());
    std::string blob = AeadObject(type, crypt_key, 2, id, meta, kPlain);
    std::string short_meta = h + blob.substr(49, 40) + blob.substr(49 + 48 + meta.size());
    std::optional<engine::Verdict> f = v.VerifyAs(AsBytes(short_meta), id);
    REQUIRE(f);
    CHECK(f->stage == Stage::kEnvelope);
    CHECK(f->message == "Could not decrypt [Authentication failed: envelope too short]");
  }
}

}  // namespace
}  // namespace borgcheck::repo
