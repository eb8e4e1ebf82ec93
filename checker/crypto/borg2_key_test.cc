// borg 2 key blobs and id hashes: the fixture keys (argon2 + ChaCha20-Poly1305, key files and
// repokeys, HMAC and BLAKE2b key sizes) decrypt to the recorded key material; borg 1.x "sha256"
// blobs decrypt (b5 reads them) unless refused; damaged or implausible blobs give the exact
// status; every id hash reproduces real chunk ids.
#include "checker/crypto/borg2_key.h"

#include <argon2.h>
#include <blake2.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>
#include <variant>

#include <catch2/catch.hpp>
#include <msgpack.hpp>

#include "checker/crypto/blake3.h"
#include "checker/crypto/borg2_test_util.h"
#include "checker/crypto/key_blob.h"

namespace borgcheck::crypto {
namespace {

using namespace testutil;

std::string KeyFileBase64(const std::string& path) {
  Result<KeyFileContents> kf = ParseKeyFile(ReadFile(path));
  REQUIRE(kf.ok());
  return kf->base64;
}

Vec ToVec(Bytes b) { return Vec(b.begin(), b.end()); }

TEST_CASE("borg2 keys: fixture key files and repokeys decrypt to the recorded key material",
          "[borg2key]") {
  struct Case {
    const char* vectors;
    std::string base64;
    size_t crypt_len, id_len;
  } cases[] = {
      {"keyfile-aes-ocb", KeyFileBase64(B5Dir() + "/keyfile-aes-ocb.key"), 64, 32},
      {"repokey-chacha20-poly1305", ConfigKey(B5Dir() + "/repokey-chacha20-poly1305"), 64, 32},
      {"repokey-blake2-aes-ocb", ConfigKey(B5Dir() + "/repokey-blake2-aes-ocb"), 160, 128},
      {"authenticated-blake2", ConfigKey(B5Dir() + "/authenticated-blake2"), 160, 128},
  };
  for (const Case& c : cases) {
    INFO(c.vectors);
    RepoVectors rv = ParseVectors(B5Dir() + "/expected/" + c.vectors + ".vectors.txt");
    Result<Borg2EncryptedKey> blob = ParseBorg2KeyBlob(c.base64);
    REQUIRE(blob.ok());
    CHECK(blob->algorithm == Borg2KeyAlgorithm::kArgon2ChaCha20Poly1305);
    CHECK(blob->argon2_time_cost == 3);
    CHECK(blob->argon2_memory_cost_kib == 65536);
    CHECK(blob->argon2_parallelism == 4);
    CHECK(blob->salt.size() == 16);
    Result<Borg2KeyMaterial> km = DecryptBorg2Key(*blob, "test");
    REQUIRE(km.ok());
    CHECK(km->key_version == 2);
    CHECK(km->crypt_key.size() == c.crypt_len);
    CHECK(km->id_key.size() == c.id_len);
    CHECK(ToVec(km->crypt_key.view()) == Unhex(rv.kv["crypt_key"]));
    CHECK(ToVec(km->id_key.view()) == Unhex(rv.kv["id_key"]));
    CHECK(ToVec(AsBytes(km->repository_id)) == Unhex(rv.kv["repo_id"]));
    CHECK(km->tam_required);
    if (c.id_len == 128) {  // BLAKE2b keys: 64 random bytes, then 64 zero bytes
      for (size_t i = 64; i < 128; ++i) CHECK(km->id_key.data()[i] == 0);
      for (size_t i = 96; i < 160; ++i) CHECK(km->crypt_key.data()[i] == 0);
    }
    Result<Borg2KeyMaterial> wrong = DecryptBorg2Key(*blob, "tesT");
    CHECK(wrong.status().code() == StatusCode::kWrongPassphrase);
  }
}

TEST_CASE("borg2 keys: a damaged blob reads as a wrong passphrase, malformed ones are refused",
          "[borg2key]") {
  std::string b64 = KeyFileBase64(B5Dir() + "/keyfile-chacha20-poly1305.key");
  std::string raw;
  REQUIRE(Base64Decode(b64, raw));
  SECTION("one bit of the encrypted data") {
    // `data` is the bin8 following the "data" key: flip a byte well inside its ciphertext.
    size_t at = raw.find("data");
    REQUIRE(at != std::string::npos);
    raw[at + 4 + 2 + 100] ^= 1;  // past the bin8 header, inside the ciphertext
    std::string enc(4 * ((raw.size() + 2) / 3), '\0');
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(enc.data()),
                            reinterpret_cast<const unsigned char*>(raw.data()), int(raw.size()));
    enc.resize(size_t(n));
    CHECK(DecryptBorg2KeyBlob(enc, "test").status().code() == StatusCode::kWrongPassphrase);
  }
  SECTION("not base64") {
    CHECK(DecryptBorg2KeyBlob("!!!!", "test").status().code() == StatusCode::kCorruptMetadata);
  }
  SECTION("truncated msgpack") {
    std::string enc(4 * ((raw.size() / 2 + 2) / 3), '\0');
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(enc.data()),
                            reinterpret_cast<const unsigned char*>(raw.data()), int(raw.size() / 2));
    enc.resize(size_t(n));
    CHECK(ParseBorg2KeyBlob(enc).status().code() == StatusCode::kCorruptMetadata);
  }
}

// Packs an outer key map with the given argon2 parameters and returns its base64.
std::string PackArgon2Blob(uint64_t t, uint64_t m, uint64_t p, const std::string& type,
                           const std::string& algorithm = "argon2 chacha20-poly1305", uint64_t version = 1) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(8);
  pk.pack(std::string("algorithm")); pk.pack(algorithm);
  pk.pack(std::string("argon2_memory_cost")); pk.pack(m);
  pk.pack(std::string("argon2_parallelism")); pk.pack(p);
  pk.pack(std::string("argon2_time_cost")); pk.pack(t);
  pk.pack(std::string("argon2_type")); pk.pack(type);
  std::string data(100, 'x'), salt(16, 's');
  pk.pack(std::string("data")); pk.pack_bin(uint32_t(data.size())); pk.pack_bin_body(data.data(), uint32_t(data.size()));
  pk.pack(std::string("salt")); pk.pack_bin(uint32_t(salt.size())); pk.pack_bin_body(salt.data(), uint32_t(salt.size()));
  pk.pack(std::string("version")); pk.pack(version);
  std::string enc(4 * ((buf.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(enc.data()),
                          reinterpret_cast<const unsigned char*>(buf.data()), int(buf.size()));
  enc.resize(size_t(n));
  return enc;
}

TEST_CASE("borg2 keys: argon2 parameters are bounded before argon2 runs", "[borg2key]") {
  CHECK(ParseBorg2KeyBlob(PackArgon2Blob(3, 65536, 4, "id")).ok());
  CHECK(ParseBorg2KeyBlob(PackArgon2Blob(3, uint64_t(1) << 40, 4, "id")).status().code() ==
        StatusCode::kCorruptMetadata);
  CHECK(ParseBorg2KeyBlob(PackArgon2Blob(0, 65536, 4, "id")).status().code() == StatusCode::kCorruptMetadata);
  CHECK(ParseBorg2KeyBlob(PackArgon2Blob(3, 65536, 0, "id")).status().code() == StatusCode::kCorruptMetadata);
  CHECK(ParseBorg2KeyBlob(PackArgon2Blob(3, 65536, 4, "x")).status().code() == StatusCode::kUnsupported);
  CHECK(ParseBorg2KeyBlob(PackArgon2Blob(3, 65536, 4, "id", "rot13")).status().code() == StatusCode::kUnsupported);
  CHECK(ParseBorg2KeyBlob(PackArgon2Blob(3, 65536, 4, "id", "argon2 chacha20-poly1305", 2)).status().code() ==
        StatusCode::kUnsupported);
  Result<Borg2EncryptedKey> d = ParseBorg2KeyBlob(PackArgon2Blob(1, 64, 1, "d"));
  REQUIRE(d.ok());
  CHECK(d->argon2_type == 0);
  // a well-formed blob whose data is garbage: argon2 runs, the tag fails
  CHECK(DecryptBorg2Key(*d, "test").status().code() == StatusCode::kWrongPassphrase);
}

// An argon2 outer map with every field settable; a field set to std::nullopt is left out, an
// integer field may be given as a string or negative to test its type check.
struct Argon2Fields {
  std::variant<std::monostate, int64_t, std::string> t = int64_t(1), m = int64_t(8), p = int64_t(1);
  size_t salt_size = 16, data_size = 100;
};

std::string PackArgon2Fields(const Argon2Fields& f) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  const auto present = [](const auto& v) { return v.index() != 0; };
  pk.pack_map(uint32_t(5 + present(f.t) + present(f.m) + present(f.p)));
  pk.pack(std::string("algorithm")); pk.pack(std::string("argon2 chacha20-poly1305"));
  const auto field = [&](const char* name, const auto& v) {
    if (!present(v)) return;
    pk.pack(std::string(name));
    if (v.index() == 1) pk.pack(std::get<1>(v));
    else pk.pack(std::get<2>(v));
  };
  field("argon2_memory_cost", f.m);
  field("argon2_parallelism", f.p);
  field("argon2_time_cost", f.t);
  pk.pack(std::string("argon2_type")); pk.pack(std::string("id"));
  std::string data(f.data_size, 'x'), salt(f.salt_size, 's');
  pk.pack(std::string("data")); pk.pack_bin(uint32_t(data.size())); pk.pack_bin_body(data.data(), uint32_t(data.size()));
  pk.pack(std::string("salt")); pk.pack_bin(uint32_t(salt.size())); pk.pack_bin_body(salt.data(), uint32_t(salt.size()));
  pk.pack(std::string("version")); pk.pack(1);
  std::string enc(4 * ((buf.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(enc.data()),
                          reinterpret_cast<const unsigned char*>(buf.data()), int(buf.size()));
  enc.resize(size_t(n));
  return enc;
}

TEST_CASE("borg2 keys: every argon2 parameter libargon2 would refuse is kCorruptMetadata naming it",
          "[borg2key]") {
  struct Case {
    const char* what;
    Argon2Fields f;
    StatusCode code;
    const char* message;
  } cases[] = {
      // the fuzz find: libargon2 needs 8 KiB per lane, its validate_inputs refuses m < 8 * p
      {"m 16 KiB, p 4", {int64_t(1), int64_t(16), int64_t(4)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_memory_cost 16 KiB is below libargon2's minimum of 8 KiB per lane "
       "(argon2_parallelism 4 needs at least 32 KiB)"},
      {"m 31 KiB, p 4", {int64_t(1), int64_t(31), int64_t(4)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_memory_cost 31 KiB is below libargon2's minimum of 8 KiB per lane "
       "(argon2_parallelism 4 needs at least 32 KiB)"},
      {"m 2039 KiB, p 255", {int64_t(1), int64_t(2039), int64_t(255)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_memory_cost 2039 KiB is below libargon2's minimum of 8 KiB per lane "
       "(argon2_parallelism 255 needs at least 2040 KiB)"},
      {"m 7 KiB (ARGON2_MIN_MEMORY)", {int64_t(1), int64_t(7), int64_t(1)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_memory_cost 7 KiB is out of range (8 KiB..4194304 KiB)"},
      {"m 0", {int64_t(1), int64_t(0), int64_t(1)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_memory_cost 0 KiB is out of range (8 KiB..4194304 KiB)"},
      {"m 1 TiB (our cost cap)", {int64_t(1), int64_t(1) << 30, int64_t(1)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_memory_cost 1073741824 KiB is out of range (8 KiB..4194304 KiB)"},
      {"m negative", {int64_t(1), int64_t(-8), int64_t(1)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_memory_cost -8 KiB is out of range (8 KiB..4194304 KiB)"},
      {"m missing", {int64_t(1), std::monostate(), int64_t(1)}, StatusCode::kCorruptMetadata,
       "key blob: `argon2_memory_cost` is missing"},
      {"t 0 (ARGON2_MIN_TIME)", {int64_t(0), int64_t(8), int64_t(1)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_time_cost 0 is out of range (1..1000)"},
      {"t 1001 (our cost cap)", {int64_t(1001), int64_t(8), int64_t(1)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_time_cost 1001 is out of range (1..1000)"},
      {"t 2^32 (past ARGON2_MAX_TIME)", {int64_t(1) << 32, int64_t(8), int64_t(1)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_time_cost 4294967296 is out of range (1..1000)"},
      {"t negative", {int64_t(-1), int64_t(8), int64_t(1)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_time_cost -1 is out of range (1..1000)"},
      {"t a string", {std::string("3"), int64_t(8), int64_t(1)}, StatusCode::kCorruptMetadata,
       "key blob: `argon2_time_cost` is not an integer"},
      {"p 0 (ARGON2_MIN_LANES, ARGON2_MIN_THREADS)", {int64_t(1), int64_t(8), int64_t(0)},
       StatusCode::kCorruptMetadata, "key blob: argon2_parallelism 0 is out of range (1..255)"},
      {"p 256 (our cost cap)", {int64_t(1), int64_t(4096), int64_t(256)}, StatusCode::kCorruptMetadata,
       "key blob: argon2_parallelism 256 is out of range (1..255)"},
      {"p 2^24 (past ARGON2_MAX_LANES)", {int64_t(1), int64_t(4096), int64_t(1) << 24},
       StatusCode::kCorruptMetadata, "key blob: argon2_parallelism 16777216 is out of range (1..255)"},
      {"p missing", {int64_t(1), int64_t(8), std::monostate()}, StatusCode::kCorruptMetadata,
       "key blob: `argon2_parallelism` is missing"},
      {"salt 7 bytes (ARGON2_MIN_SALT_LENGTH)", {int64_t(1), int64_t(8), int64_t(1), 7, 100},
       StatusCode::kCorruptMetadata, "key blob: argon2 salt has 7 bytes, out of range (8..1024)"},
      {"salt 0 bytes", {int64_t(1), int64_t(8), int64_t(1), 0, 100}, StatusCode::kCorruptMetadata,
       "key blob: argon2 salt has 0 bytes, out of range (8..1024)"},
      {"salt 1025 bytes", {int64_t(1), int64_t(8), int64_t(1), 1025, 100}, StatusCode::kCorruptMetadata,
       "key blob: argon2 salt has 1025 bytes, out of range (8..1024)"},
      {"data shorter than the tag", {int64_t(1), int64_t(8), int64_t(1), 16, 15}, StatusCode::kCorruptMetadata,
       "key blob: `data` has 15 bytes, shorter than its 16-byte tag"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const Result<Borg2EncryptedKey> r = ParseBorg2KeyBlob(PackArgon2Fields(c.f));
    CHECK(r.status().code() == c.code);
    CHECK(r.status().message() == c.message);
  }
}

TEST_CASE("borg2 keys: the parser's argon2 boundaries are accepted by libargon2 itself", "[borg2key]") {
  // Each blob parses, so argon2 runs and the garbage data fails its tag: kWrongPassphrase, never
  // an argon2 error. These are the corners of the accepted set.
  struct Case {
    const char* what;
    Argon2Fields f;
  } cases[] = {
      {"t 1, m 8 KiB, p 1, salt 8", {int64_t(1), int64_t(8), int64_t(1), 8, 16}},
      {"m 32 KiB, p 4", {int64_t(1), int64_t(32), int64_t(4)}},
      {"m 2040 KiB, p 255", {int64_t(1), int64_t(2040), int64_t(255)}},
      {"m 9 KiB, p 1 (not a multiple of the lane size)", {int64_t(2), int64_t(9), int64_t(1)}},
      {"salt 1024 bytes", {int64_t(1), int64_t(8), int64_t(1), 1024, 100}},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const Result<Borg2EncryptedKey> r = ParseBorg2KeyBlob(PackArgon2Fields(c.f));
    REQUIRE(r.ok());
    const Result<Borg2KeyMaterial> km = DecryptBorg2Key(*r, "test");
    CHECK(km.status().code() == StatusCode::kWrongPassphrase);
  }
}

TEST_CASE("borg2 keys: DecryptBorg2Key checks a hand-built blob before argon2 runs", "[borg2key]") {
  Result<Borg2EncryptedKey> parsed = ParseBorg2KeyBlob(PackArgon2Fields({}));
  REQUIRE(parsed.ok());
  Borg2EncryptedKey b = *parsed;
  SECTION("memory below 8 KiB per lane (was kInternal 'argon2 failed: Memory cost is too small')") {
    b.argon2_memory_cost_kib = 16;
    b.argon2_parallelism = 4;
    const Result<Borg2KeyMaterial> km = DecryptBorg2Key(b, "test");
    CHECK(km.status().code() == StatusCode::kCorruptMetadata);
    CHECK(km.status().message() ==
          "key blob: argon2_memory_cost 16 KiB is below libargon2's minimum of 8 KiB per lane "
          "(argon2_parallelism 4 needs at least 32 KiB)");
  }
  SECTION("time cost 0") {
    b.argon2_time_cost = 0;
    const Result<Borg2KeyMaterial> km = DecryptBorg2Key(b, "test");
    CHECK(km.status().code() == StatusCode::kCorruptMetadata);
    CHECK(km.status().message() == "key blob: argon2_time_cost 0 is out of range (1..1000)");
  }
  SECTION("no tag") {
    b.data.clear();
    const Result<Borg2KeyMaterial> km = DecryptBorg2Key(b, "test");
    CHECK(km.status().code() == StatusCode::kCorruptMetadata);
    CHECK(km.status().message() == "key blob: `data` has 0 bytes, shorter than its 16-byte tag");
  }
  SECTION("an argon2 type libargon2 does not know") {
    b.argon2_type = 7;
    const Result<Borg2KeyMaterial> km = DecryptBorg2Key(b, "test");
    CHECK(km.status().code() == StatusCode::kUnsupported);
    CHECK(km.status().message() == "key blob: unknown argon2_type 7");
  }
}

TEST_CASE("borg2 keys: libargon2 error codes map to kCorruptMetadata, resource failures to kInternal",
          "[borg2key]") {
  Borg2EncryptedKey b;
  b.argon2_time_cost = 3;
  b.argon2_memory_cost_kib = 65536;
  b.argon2_parallelism = 4;
  b.salt.assign(16, 's');
  const std::string params =
      " (argon2_time_cost 3, argon2_memory_cost 65536 KiB, argon2_parallelism 4, salt 16 bytes)";
  for (int rc : {int(ARGON2_MEMORY_TOO_LITTLE), int(ARGON2_TIME_TOO_SMALL), int(ARGON2_LANES_TOO_FEW),
                 int(ARGON2_SALT_TOO_SHORT), int(ARGON2_INCORRECT_TYPE), int(ARGON2_THREADS_TOO_MANY)}) {
    INFO(rc);
    const Status s = TEST_Argon2FailureStatus(rc, b);
    CHECK(s.code() == StatusCode::kCorruptMetadata);
    CHECK(s.message().rfind("key blob: libargon2 refuses its parameters: ", 0) == 0);
    CHECK(s.message().size() > params.size() + 45);
    CHECK(s.message().substr(s.message().size() - params.size()) == params);
  }
  CHECK(TEST_Argon2FailureStatus(ARGON2_MEMORY_TOO_LITTLE, b).message() ==
        "key blob: libargon2 refuses its parameters: Memory cost is too small" + params);
  const Status oom = TEST_Argon2FailureStatus(ARGON2_MEMORY_ALLOCATION_ERROR, b);
  CHECK(oom.code() == StatusCode::kInternal);
  CHECK(oom.message() == "argon2 could not run: Memory allocation error" + params);
  CHECK(TEST_Argon2FailureStatus(ARGON2_THREAD_FAIL, b).code() == StatusCode::kInternal);
}

TEST_CASE("borg2 keys: borg 1.x 'sha256' (PBKDF2) key blobs decrypt, crypt_key = enc_key || enc_hmac_key",
          "[borg2key]") {
  const std::string dir = SharedDir() + "/fixtures/borg1/v1.2.4/keys/";
  for (const char* name : {"keyfile.key", "keyfile-blake2.key"}) {
    INFO(name);
    std::string b64 = KeyFileBase64(dir + name);
    Result<KeyMaterial> v1 = DecryptKeyBlob(b64, "test");
    REQUIRE(v1.ok());
    Result<Borg2KeyMaterial> km = DecryptBorg2KeyBlob(b64, "test");
    REQUIRE(km.ok());
    CHECK(km->key_version == 1);
    Vec want = ToVec(v1->enc_key.view());
    Vec hk = ToVec(v1->enc_hmac_key.view());
    want.insert(want.end(), hk.begin(), hk.end());
    CHECK(ToVec(km->crypt_key.view()) == want);
    CHECK(ToVec(km->id_key.view()) == ToVec(v1->id_key.view()));
    CHECK(km->repository_id == v1->repository_id);
    CHECK(DecryptBorg2KeyBlob(b64, "nope").status().code() == StatusCode::kWrongPassphrase);
    CHECK(DecryptBorg2KeyBlob(b64, "test", {false}).status().code() == StatusCode::kUnsupported);
  }
}

TEST_CASE("borg2 key types: repository version 2's table", "[borg2key]") {
  CHECK(Borg2b5KeyTypes().size() == 11);
  for (uint8_t b : {0x00, 0x01, 0x03, 0x04, 0x05, 0x08, 0x12, 0x50, 0x60, 0xff}) {
    CHECK(Borg2b5KeyTypeFromByte(b) == nullptr);
  }
  const Borg2KeyType* t = Borg2b5KeyTypeFromByte(0x40);
  REQUIRE(t != nullptr);
  CHECK(t->name == "keyfile-blake2-chacha20-poly1305");
  CHECK(t->suite == AeadSuite::kChaCha20Poly1305);
  CHECK(t->id_hash == Borg2IdHash::kBlake2b256);
  CHECK(t->location == Borg2KeyLocation::kKeyFile);
  EnvelopeClass c = t->envelope_class();
  CHECK(c.accepted_types == std::vector<uint8_t>{0x40, 0x41});
  CHECK(Borg2b5KeyTypeFromByte(0x02)->needs_key() == false);
  CHECK(Borg2b5KeyTypeFromByte(0x07)->location == Borg2KeyLocation::kRepository);
  CHECK(Borg2b5KeyTypeFromByte(0x06)->id_hash == Borg2IdHash::kBlake2b256);
  Borg2KeyMaterial km;
  km.crypt_key = SecureBytes(size_t(64));
  km.id_key = SecureBytes(size_t(32));
  CHECK(ValidateBorg2KeyMaterial(*Borg2b5KeyTypeFromByte(0x11), &km).ok());
  CHECK(ValidateBorg2KeyMaterial(*Borg2b5KeyTypeFromByte(0x31), &km).code() == StatusCode::kCorruptMetadata);
  CHECK(ValidateBorg2KeyMaterial(*Borg2b5KeyTypeFromByte(0x02), nullptr).ok());
}

// The first vector object of each repository is stored uncompressed (ctype 0), so the id hash of
// its decrypted data envelope payload must be its chunk id.
TEST_CASE("borg2 id hashes reproduce real chunk ids (sha256, HMAC-SHA256, BLAKE2b prefixed)",
          "[borg2key]") {
  struct Case {
    const char* repo;
    std::string base64;
  } cases[] = {
      {"none", ""},
      {"authenticated", ConfigKey(B5Dir() + "/authenticated")},
      {"authenticated-blake2", ConfigKey(B5Dir() + "/authenticated-blake2")},
      {"keyfile-aes-ocb", KeyFileBase64(B5Dir() + "/keyfile-aes-ocb.key")},
      {"repokey-blake2-aes-ocb", ConfigKey(B5Dir() + "/repokey-blake2-aes-ocb")},
  };
  for (const Case& c : cases) {
    INFO(c.repo);
    RepoVectors rv = ParseVectors(B5Dir() + "/expected/" + c.repo + ".vectors.txt");
    const ObjectVector& o = rv.objects.at(0);
    const Borg2KeyType* kt = Borg2b5KeyTypeFromByte(o.data.type);
    REQUIRE(kt != nullptr);
    Borg2KeyMaterial km;
    if (!c.base64.empty()) {
      Result<Borg2KeyMaterial> r = DecryptBorg2KeyBlob(c.base64, "test");
      REQUIRE(r.ok());
      km = std::move(r).value();
    }
    REQUIRE(ValidateBorg2KeyMaterial(*kt, &km).ok());
    std::optional<Vec> payload = FindPut2Payload(B5Dir() + "/" + c.repo + "/data/0/2", o.id);
    REQUIRE(payload.has_value());
    size_t meta_len = (*payload)[0] | size_t((*payload)[1]) << 8;
    Bytes data_env(payload->data() + 2 + meta_len, payload->size() - 2 - meta_len);
    EnvelopeOpener opener(kt->envelope_class(), km.crypt_key.view(), {});
    ByteBuffer scratch;
    Bytes plain;
    REQUIRE(opener.Open(data_env, {}, o.id.data(), scratch, plain).outcome == EnvelopeOutcome::kOk);
    Borg2IdHasher hasher(kt->id_hash, km.id_key.view());
    REQUIRE(hasher.status().ok());
    uint8_t id[32];
    hasher.Compute(plain, id);
    CHECK(Vec(id, id + 32) == o.id);
    hasher.Compute(plain, id);  // reused contexts give the same answer
    CHECK(Vec(id, id + 32) == o.id);
  }
}

TEST_CASE("borg2 id hashes agree with one-shot references, BLAKE2b is not the keyed mode", "[borg2key]") {
  Vec key128(128), key32(32), msg(3000);
  for (size_t i = 0; i < key128.size(); ++i) key128[i] = uint8_t(i * 7 + 1);
  for (size_t i = 0; i < key32.size(); ++i) key32[i] = uint8_t(i + 100);
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = uint8_t(i * 13);
  uint8_t out[32], ref[32];

  Borg2IdHasher b2(Borg2IdHash::kBlake2b256, key128);
  b2.Compute(msg, out);
  Vec concat = key128;
  concat.insert(concat.end(), msg.begin(), msg.end());
  REQUIRE(blake2b(ref, concat.data(), nullptr, 32, concat.size(), 0) == 0);
  CHECK(Vec(out, out + 32) == Vec(ref, ref + 32));
  REQUIRE(blake2b(ref, msg.data(), key128.data(), 32, msg.size(), 64) == 0);
  CHECK(Vec(out, out + 32) != Vec(ref, ref + 32));

  Borg2IdHasher hm(Borg2IdHash::kHmacSha256, key32);
  hm.Compute(msg, out);
  unsigned int n = 0;
  HMAC(EVP_sha256(), key32.data(), int(key32.size()), msg.data(), msg.size(), ref, &n);
  CHECK(Vec(out, out + 32) == Vec(ref, ref + 32));

  Borg2IdHasher sh(Borg2IdHash::kSha256, {});
  sh.Compute(msg, out);
  EVP_Digest(msg.data(), msg.size(), ref, &n, EVP_sha256(), nullptr);
  CHECK(Vec(out, out + 32) == Vec(ref, ref + 32));

  Borg2IdHasher b3(Borg2IdHash::kBlake3Keyed, key32);
  b3.Compute(msg, out);
  Blake3Keyed(key32.data(), msg, ref);
  CHECK(Vec(out, out + 32) == Vec(ref, ref + 32));

  Borg2IdHasher bad(Borg2IdHash::kHmacSha256, key128);
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  bad.Compute(msg, out);
  CHECK(Vec(out, out + 32) == Vec(32, 0));
}

}  // namespace
}  // namespace borgcheck::crypto
