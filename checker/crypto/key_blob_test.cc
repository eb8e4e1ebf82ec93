// Key blobs and key files: every fixture key decrypts to the vectors' fields; each kind of
// damage gives its own status code.
#include "checker/crypto/key_blob.h"

#include <openssl/evp.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "checker/base/bytes.h"

namespace borgcheck::crypto {
namespace {

const std::string kFixtures = std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg1/";

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const nlohmann::json& Vectors() {
  static const nlohmann::json j =
      nlohmann::json::parse(ReadFile(kFixtures + "vectors-v1.2.4.json"));
  return j;
}

std::string Unhex(const std::string& hex) {
  std::string out;
  REQUIRE(FromHex(hex, out));
  return out;
}

std::string Str(const SecureBytes& b) { return std::string(b.view().begin(), b.view().end()); }

// The `key =` value of a repository config with its TAB-indented continuation lines.
std::string ConfigKey(const std::string& config) {
  std::istringstream in(config);
  std::string line, key;
  bool in_key = false;
  while (std::getline(in, line)) {
    if (in_key && !line.empty() && (line[0] == '\t' || line[0] == ' ')) {
      key += line;
    } else {
      in_key = line.rfind("key = ", 0) == 0;
      if (in_key) key = line.substr(6);
    }
  }
  return key;
}

// The blob of repo `name`: from its key file or its config.
std::string BlobOf(const std::string& name, const nlohmann::json& repo) {
  const std::string source = repo["key_source"];
  if (source.rfind("key file ", 0) == 0) {
    auto kf = ParseKeyFile(ReadFile(kFixtures + "v1.2.4/" + source.substr(9)));
    REQUIRE(kf.ok());
    CHECK(kf->repository_id_hex == repo["repository_id"].get<std::string>());
    return kf->base64;
  }
  return ConfigKey(ReadFile(kFixtures + "v1.2.4/repos/" + name + "/config"));
}

// A minimal msgpack writer for hand-made blobs.
struct Mp {
  std::string out;
  Mp& Map(size_t n) {
    out.push_back(char(0x80 | n));
    return *this;
  }
  Mp& Raw(std::string_view s, bool bin = false) {
    if (bin) {
      out.push_back(char(0xc5));
      out.push_back(char(s.size() >> 8));
      out.push_back(char(s.size()));
    } else if (s.size() < 32) {
      out.push_back(char(0xa0 | s.size()));
    } else {
      out.push_back(char(0xda));
      out.push_back(char(s.size() >> 8));
      out.push_back(char(s.size()));
    }
    out += s;
    return *this;
  }
  Mp& UInt(uint64_t v) {
    out.push_back(char(0xcf));
    for (int i = 7; i >= 0; --i) out.push_back(char(v >> (8 * i)));
    return *this;
  }
  Mp& Int(int64_t v) {
    out.push_back(char(0xd3));
    for (int i = 7; i >= 0; --i) out.push_back(char(uint64_t(v) >> (8 * i)));
    return *this;
  }
  Mp& Bool(bool b) {
    out.push_back(char(b ? 0xc3 : 0xc2));
    return *this;
  }
};

struct InnerSpec {
  std::string repository_id = std::string(32, 'r');
  std::string enc_key = std::string(32, 'e');
  std::string enc_hmac_key = std::string(32, 'h');
  std::string id_key = std::string(32, 'i');
  uint64_t version = 1;
  std::optional<bool> tam_required = true;
  bool bin = false;
};

std::string Inner(const InnerSpec& s) {
  Mp m;
  m.Map(s.tam_required ? 7 : 6);
  m.Raw("chunk_seed").Int(-5);
  m.Raw("enc_hmac_key").Raw(s.enc_hmac_key, s.bin);
  m.Raw("enc_key").Raw(s.enc_key, s.bin);
  m.Raw("id_key").Raw(s.id_key, s.bin);
  m.Raw("repository_id").Raw(s.repository_id, s.bin);
  if (s.tam_required) m.Raw("tam_required").Bool(*s.tam_required);
  m.Raw("version").UInt(s.version);
  return m.out;
}

struct OuterSpec {
  uint64_t version = 1;
  std::string algorithm = "sha256";
  uint64_t iterations = 1000;
  std::string salt = std::string(32, 's');
  size_t hash_len = 32;
  bool flip_data = false;
  std::string trailing;
};

std::string Base64(const std::string& raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(raw.data()), int(raw.size()));
  out.resize(size_t(n));
  return out;
}

// Encrypts `inner` the way borg does and returns the base64 blob, wrapped like a config value.
std::string MakeBlob(const OuterSpec& s, const std::string& inner, std::string_view pass = "pw") {
  unsigned char kek[32];
  const int iters = s.iterations >= 1 && s.iterations <= 100000 ? int(s.iterations) : 1;
  REQUIRE(PKCS5_PBKDF2_HMAC(pass.data(), int(pass.size()),
                            reinterpret_cast<const unsigned char*>(s.salt.data()),
                            int(s.salt.size()), iters, EVP_sha256(), 32, kek) == 1);
  std::string data(inner.size(), '\0');
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  const unsigned char iv[16] = {};
  int outl = 0;
  REQUIRE(EVP_EncryptInit_ex(ctx, EVP_aes_256_ctr(), nullptr, kek, iv) == 1);
  REQUIRE(EVP_EncryptUpdate(ctx, reinterpret_cast<unsigned char*>(data.data()), &outl,
                            reinterpret_cast<const unsigned char*>(inner.data()),
                            int(inner.size())) == 1);
  EVP_CIPHER_CTX_free(ctx);
  unsigned char hash[32];
  size_t hlen = 0;
  REQUIRE(EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, kek, 32,
                    reinterpret_cast<const unsigned char*>(inner.data()), inner.size(), hash, 32,
                    &hlen) != nullptr);
  if (s.flip_data) data[data.size() / 2] ^= 0x20;
  Mp m;
  m.Map(6);
  m.Raw("algorithm").Raw(s.algorithm);
  m.Raw("data").Raw(data);
  m.Raw("hash").Raw(std::string(reinterpret_cast<char*>(hash), s.hash_len));
  m.Raw("iterations").UInt(s.iterations);
  m.Raw("salt").Raw(s.salt);
  m.Raw("version").UInt(s.version);
  std::string b64 = Base64(m.out + s.trailing);
  std::string wrapped;
  for (size_t i = 0; i < b64.size(); i += 70) wrapped += (i ? "\n\t" : "") + b64.substr(i, 70);
  return wrapped;
}

}  // namespace

TEST_CASE("every fixture key blob decrypts to the vector's key fields", "[key_blob]") {
  int checked = 0;
  for (const auto& [name, repo] : Vectors()["repos"].items()) {
    if (!repo.contains("key_blob")) continue;
    INFO("repo " << name);
    const std::string blob = BlobOf(name, repo);
    REQUIRE(!blob.empty());
    auto km = DecryptKeyBlob(blob, Vectors()["passphrase"].get<std::string>());
    REQUIRE(km.ok());
    const auto& key = repo["key"];
    CHECK(Str(km->enc_key) == Unhex(key["enc_key"]));
    CHECK(Str(km->enc_hmac_key) == Unhex(key["enc_hmac_key"]));
    CHECK(Str(km->id_key) == Unhex(key["id_key"]));
    CHECK(km->repository_id == Unhex(key["repository_id"]));
    CHECK(km->repository_id == Unhex(repo["repository_id"]));
    CHECK(km->tam_required == key["tam_required"].get<bool>());
    ++checked;
  }
  CHECK(checked == 7);
}

TEST_CASE("a wrong passphrase is kWrongPassphrase and says it may be damage", "[key_blob]") {
  const auto& repo = Vectors()["repos"]["repokey"];
  auto km = DecryptKeyBlob(BlobOf("repokey", repo), "Test");
  REQUIRE(!km.ok());
  CHECK(km.status().code() == StatusCode::kWrongPassphrase);
  CHECK(km.status().message().find("passphrase") != std::string::npos);
  CHECK(km.status().message().find("damaged") != std::string::npos);
}

TEST_CASE("hand-made blobs: accepted variants", "[key_blob]") {
  SECTION("str fields, 32-byte keys") {
    auto km = DecryptKeyBlob(MakeBlob({}, Inner({})), "pw");
    REQUIRE(km.ok());
    CHECK(Str(km->enc_key) == std::string(32, 'e'));
    CHECK(km->tam_required);
  }
  SECTION("bin fields, 128-byte keys, no tam_required (pre-1.0.9 key)") {
    InnerSpec in;
    in.bin = true;
    in.enc_hmac_key = std::string(128, 'H');
    in.id_key = std::string(128, 'I');
    in.tam_required = std::nullopt;
    auto km = DecryptKeyBlob(MakeBlob({}, Inner(in)), "pw");
    REQUIRE(km.ok());
    CHECK(Str(km->id_key) == std::string(128, 'I'));
    CHECK(!km->tam_required);
  }
  SECTION("empty passphrase is a passphrase like any other") {
    CHECK(DecryptKeyBlob(MakeBlob({}, Inner({}), ""), "").ok());
    CHECK(DecryptKeyBlob(MakeBlob({}, Inner({}), ""), "pw").status().code() ==
          StatusCode::kWrongPassphrase);
  }
}

TEST_CASE("hand-made blobs: each kind of damage", "[key_blob]") {
  auto code = [](const std::string& blob) { return DecryptKeyBlob(blob, "pw").status().code(); };
  const std::string inner = Inner({});
  OuterSpec s;

  SECTION("outer version 2 is unsupported") {
    s.version = 2;
    CHECK(code(MakeBlob(s, inner)) == StatusCode::kUnsupported);
  }
  SECTION("algorithm argon2 is unsupported") {
    s.algorithm = "argon2";
    CHECK(code(MakeBlob(s, inner)) == StatusCode::kUnsupported);
  }
  SECTION("iterations 0 and 10^9 are corrupt") {
    s.iterations = 0;
    CHECK(code(MakeBlob(s, inner)) == StatusCode::kCorruptMetadata);
    s.iterations = 1'000'000'000;
    CHECK(code(MakeBlob(s, inner)) == StatusCode::kCorruptMetadata);
  }
  SECTION("salt of 16 bytes is corrupt") {
    s.salt = std::string(16, 's');
    CHECK(code(MakeBlob(s, inner)) == StatusCode::kCorruptMetadata);
  }
  SECTION("hash of 31 bytes is corrupt") {
    s.hash_len = 31;
    CHECK(code(MakeBlob(s, inner)) == StatusCode::kCorruptMetadata);
  }
  SECTION("a flipped data byte looks like a wrong passphrase") {
    s.flip_data = true;
    CHECK(code(MakeBlob(s, inner)) == StatusCode::kWrongPassphrase);
  }
  SECTION("trailing bytes after the map are corrupt") {
    s.trailing = "x";
    CHECK(code(MakeBlob(s, inner)) == StatusCode::kCorruptMetadata);
  }
  SECTION("inner enc_key of 31 bytes is corrupt") {
    InnerSpec in;
    in.enc_key = std::string(31, 'e');
    CHECK(code(MakeBlob(s, Inner(in))) == StatusCode::kCorruptMetadata);
  }
  SECTION("inner id_key of 64 bytes is corrupt") {
    InnerSpec in;
    in.id_key = std::string(64, 'i');
    CHECK(code(MakeBlob(s, Inner(in))) == StatusCode::kCorruptMetadata);
  }
  SECTION("inner version 2 is unsupported") {
    InnerSpec in;
    in.version = 2;
    CHECK(code(MakeBlob(s, Inner(in))) == StatusCode::kUnsupported);
  }
  SECTION("inner plaintext that is not msgpack is corrupt") {
    CHECK(code(MakeBlob(s, "\xc1\xc1\xc1")) == StatusCode::kCorruptMetadata);
  }
  SECTION("not base64, not msgpack, not a map") {
    CHECK(code("!!!!") == StatusCode::kCorruptMetadata);
    CHECK(code(Base64("\xc1")) == StatusCode::kCorruptMetadata);
    CHECK(code(Base64("\x91\x01")) == StatusCode::kCorruptMetadata);
    CHECK(code(Base64("\xdd\xff\xff\xff\xff")) == StatusCode::kCorruptMetadata);  // huge array
    CHECK(code("") == StatusCode::kCorruptMetadata);
  }
}

TEST_CASE("Base64Decode: whitespace, padding, bad input", "[key_blob]") {
  std::string out;
  CHECK(Base64Decode("YQ==", out));
  CHECK(out == "a");
  CHECK(Base64Decode("YWI=", out));
  CHECK(out == "ab");
  CHECK(Base64Decode(" YW\n\tJj \r\n", out));
  CHECK(out == "abc");
  CHECK(Base64Decode("", out));
  CHECK(out.empty());
  CHECK(!Base64Decode("YWJ", out));       // not a whole quantum
  CHECK(!Base64Decode("Y=Jj", out));      // '=' inside
  CHECK(!Base64Decode("YQ==YWJj", out));  // '=' before the end
  CHECK(!Base64Decode("Y===", out));      // three pads
  CHECK(!Base64Decode("YW-j", out));      // URL-safe alphabet is not borg's
}

TEST_CASE("ParseKeyFile: header and sanity checks", "[key_blob]") {
  const std::string id(64, 'a');
  const std::string body = Base64(std::string(30, 'x'));
  SECTION("good file, uppercase id is lowered") {
    auto kf = ParseKeyFile("BORG_KEY " + std::string(64, 'A') + "\n" + body.substr(0, 10) + "\n" +
                           body.substr(10) + "\n");
    REQUIRE(kf.ok());
    CHECK(kf->repository_id_hex == id);
    CHECK(kf->base64 == body);
  }
  SECTION("damage") {
    auto code = [](const std::string& t) { return ParseKeyFile(t).status().code(); };
    CHECK(code("BORG_KEY " + id) == StatusCode::kCorruptMetadata);  // one line
    CHECK(code("BORG_KEX " + id + "\n" + body) == StatusCode::kCorruptMetadata);
    CHECK(code("BORG_KEY " + id + "0\n" + body) == StatusCode::kCorruptMetadata);
    CHECK(code("BORG_KEY " + std::string(64, 'g') + "\n" + body) == StatusCode::kCorruptMetadata);
    CHECK(code("BORG_KEY " + id + "\n" + Base64("short")) == StatusCode::kCorruptMetadata);
    CHECK(code("BORG_KEY " + id + "\n" + body + "*") == StatusCode::kCorruptMetadata);
  }
}

}  // namespace borgcheck::crypto
