// Decrypting borg 1.x key blobs (spec borg1-format.md §4.1).
//
// Outline of DecryptKeyBlob:
//   1. base64 -> outer msgpack map; check version, algorithm, and the size of every field
//      before any of it is used (a damaged config must not drive PBKDF2 or AES).
//   2. KEK = PBKDF2-HMAC-SHA256(passphrase, salt, iterations, 32).
//   3. inner = AES-256-CTR(KEK, counter 00*16)(data); HMAC-SHA256(KEK, inner) == hash, compared
//      in constant time. A mismatch is a wrong passphrase or a damaged blob: both look alike.
//   4. inner msgpack map -> KeyMaterial, every field's type and length checked.
// The KEK and the decrypted inner map live only in SecureBytes, wiped on every exit path.
#include "checker/crypto/key_blob.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <climits>
#include <cstring>
#include <memory>
#include <msgpack.hpp>

#include "checker/base/msgpack_util.h"
#include "checker/base/text_escape.h"
#include "checker/crypto/key_inner.h"

namespace borgcheck::crypto {
namespace {

constexpr std::string_view kKeyFileHeader = "BORG_KEY ";
constexpr size_t kRepoIdHexLen = 64;
// borg 1.x writes 100000; anything far outside this range is damage, not a stronger key, and
// would otherwise make us spin in PBKDF2 for hours.
constexpr uint64_t kMaxIterations = 100'000'000;
// The inner map is ~220 bytes (HMAC modes) or ~410 (BLAKE2b modes); this bound only keeps a
// damaged length from making us decrypt megabytes.
constexpr size_t kMaxInnerSize = 1 << 20;
constexpr size_t kMsgpackMaxDepth = 32;

Status Corrupt(std::string msg) { return Status(StatusCode::kCorruptMetadata, std::move(msg)); }
Status Unsupported(std::string msg) { return Status(StatusCode::kUnsupported, std::move(msg)); }

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool IsBase64Alphabet(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/';
}

// msgpack byte strings are referenced in place (Strings::kReference), never copied into
// msgpack's zone: for the inner map the strings are key material, and a copy in the zone would
// escape our wipe. borg 1.x packs byte strings as msgpack str (raw); AsRaw accepts bin too.
using msgpack_util::AsRaw;
using msgpack_util::Find;
using msgpack_util::UnpackWhole;  // exactly one object spanning the input, as borg's unpackb

// Non-negative integers only; a negative value is reported as `negative`.
bool AsUint(const msgpack::object* o, uint64_t& out, bool& negative) {
  negative = false;
  if (o == nullptr) return false;
  if (o->type == msgpack::type::POSITIVE_INTEGER) {
    out = o->via.u64;
    return true;
  }
  if (o->type == msgpack::type::NEGATIVE_INTEGER) {
    negative = true;
    return true;
  }
  return false;
}

Status CheckVersion(const msgpack::object& map, const char* what) {
  uint64_t version = 0;
  bool negative = false;
  if (!AsUint(Find(map, "version"), version, negative)) {
    return Corrupt(std::string(what) + ": `version` is missing or not an integer");
  }
  if (negative || version != 1) {
    return Unsupported(std::string(what) + ": version " +
                       (negative ? std::string("<negative>") : std::to_string(version)) +
                       " is not supported (borg 1.x writes version 1)");
  }
  return Status::Ok();
}

// Reads raw field `name` whose length must be one of `len_a` / `len_b` into `out`.
// AES-256-CTR with the initial counter block 00*16, as borg uses for the key blob.
bool AesCtrZeroIv(Bytes key, Bytes in, uint8_t* out) {
  std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(),
                                                                      &EVP_CIPHER_CTX_free);
  EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-256-CTR", nullptr);
  const uint8_t iv[16] = {};
  int outl = 0;
  bool ok = ctx && cipher && in.size() <= INT_MAX &&
            EVP_DecryptInit_ex(ctx.get(), cipher, nullptr, key.data(), iv) == 1 &&
            EVP_DecryptUpdate(ctx.get(), out, &outl, in.data(), static_cast<int>(in.size())) == 1 &&
            static_cast<size_t>(outl) == in.size();
  EVP_CIPHER_free(cipher);
  return ok;
}

Result<KeyMaterial> ParseInner(Bytes plain) {
  msgpack::object_handle oh;
  std::string err;
  if (!UnpackWhole(plain, kMsgpackMaxDepth, oh, err)) {
    return Corrupt("decrypted key is not valid msgpack (" + err + ")");
  }
  const msgpack::object& inner = oh.get();
  if (inner.type != msgpack::type::MAP) return Corrupt("decrypted key is not a msgpack map");
  if (Status s = CheckVersion(inner, "decrypted key"); !s.ok()) return s;

  KeyMaterial km;
  SecureBytes repo_id;
  for (Status s : {ReadKeyField(inner, "repository_id", 32, 32, repo_id),
                   ReadKeyField(inner, "enc_key", 32, 32, km.enc_key),
                   ReadKeyField(inner, "enc_hmac_key", 32, 128, km.enc_hmac_key),
                   ReadKeyField(inner, "id_key", 32, 128, km.id_key)}) {
    if (!s.ok()) return s;
  }
  km.repository_id.assign(reinterpret_cast<const char*>(repo_id.data()), repo_id.size());

  if (Status s = ReadKeyFlags(inner, km.tam_required); !s.ok()) return s;
  return km;
}

}  // namespace

bool Base64Decode(std::string_view text, std::string& out) {
  std::string clean;
  clean.reserve(text.size());
  for (char c : text) {
    if (IsSpace(c)) continue;
    if (!IsBase64Alphabet(c) && c != '=') return false;
    clean.push_back(c);
  }
  out.clear();
  if (clean.empty()) return true;
  if (clean.size() % 4 != 0 || clean.size() > INT_MAX) return false;
  // '=' may only pad the last quantum, once or twice.
  size_t pad = 0;
  if (clean.back() == '=') pad = clean[clean.size() - 2] == '=' ? 2 : 1;
  if (clean.find('=') < clean.size() - pad) return false;
  // EVP_DecodeBlock decodes whole quanta and counts padding as data: decode the padding as
  // zero bits ('A') and drop the bytes it produced.
  for (size_t i = clean.size() - pad; i < clean.size(); ++i) clean[i] = 'A';
  out.resize(clean.size() / 4 * 3);
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(clean.data()),
                          static_cast<int>(clean.size()));
  if (n < 0 || static_cast<size_t>(n) != out.size()) {
    out.clear();
    return false;
  }
  out.resize(out.size() - pad);
  return true;
}

Result<KeyFileContents> ParseKeyFile(std::string_view text) {
  // The sanity checks of borg 1.4: at least two lines, a header line of `BORG_KEY ` plus the
  // 64-char repository id, and a body that decodes to at least 20 bytes.
  size_t eol = text.find('\n');
  if (eol == std::string_view::npos) return Corrupt("key file has fewer than 2 lines");
  std::string_view header = text.substr(0, eol);
  while (!header.empty() && IsSpace(header.back())) header.remove_suffix(1);
  if (header.substr(0, kKeyFileHeader.size()) != kKeyFileHeader) {
    return Corrupt("key file does not start with `BORG_KEY `");
  }
  if (header.size() != kKeyFileHeader.size() + kRepoIdHexLen) {
    return Corrupt("key file header line has the wrong length");
  }
  KeyFileContents kf;
  for (char c : header.substr(kKeyFileHeader.size())) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return Corrupt("key file header: repository id is not hex");
    }
    kf.repository_id_hex.push_back(c);
  }
  for (char c : text.substr(eol + 1)) {
    if (!IsSpace(c)) kf.base64.push_back(c);
  }
  std::string decoded;
  if (!Base64Decode(kf.base64, decoded)) return Corrupt("key file body is not valid base64");
  if (decoded.size() < 20) return Corrupt("key file body is too short to be a key");
  return kf;
}

Result<KeyMaterial> DecryptKeyBlob(std::string_view base64_text, std::string_view passphrase) {
  // 1. Outer structure.
  std::string raw;
  if (!Base64Decode(base64_text, raw)) return Corrupt("key blob is not valid base64");
  msgpack::object_handle oh;
  std::string err;
  if (!UnpackWhole(AsBytes(raw), kMsgpackMaxDepth, oh, err)) {
    return Corrupt("key blob is not valid msgpack (" + err + ")");
  }
  const msgpack::object& outer = oh.get();
  if (outer.type != msgpack::type::MAP) return Corrupt("key blob is not a msgpack map");
  if (Status s = CheckVersion(outer, "key blob"); !s.ok()) return s;

  Bytes algorithm;
  if (!AsRaw(Find(outer, "algorithm"), algorithm)) {
    return Corrupt("key blob: `algorithm` is missing or not a string");
  }
  const std::string_view algorithm_text(reinterpret_cast<const char*>(algorithm.data()), algorithm.size());
  if (algorithm_text != "sha256") {
    return Unsupported("key blob: algorithm '" + MessageExcerpt(algorithm_text, 32) +
                       "' is not supported (borg 1.x only writes 'sha256')");
  }
  uint64_t iterations = 0;
  bool negative = false;
  if (!AsUint(Find(outer, "iterations"), iterations, negative) || negative || iterations < 1 ||
      iterations > kMaxIterations) {
    return Corrupt("key blob: `iterations` is missing or out of range (1.." +
                   std::to_string(kMaxIterations) + ")");
  }
  Bytes salt, hash, data;
  if (!AsRaw(Find(outer, "salt"), salt) || salt.size() != 32) {
    return Corrupt("key blob: `salt` is missing or not 32 bytes");
  }
  if (!AsRaw(Find(outer, "hash"), hash) || hash.size() != 32) {
    return Corrupt("key blob: `hash` is missing or not 32 bytes");
  }
  if (!AsRaw(Find(outer, "data"), data) || data.empty() || data.size() > kMaxInnerSize) {
    return Corrupt("key blob: `data` is missing, empty or implausibly large");
  }

  if (passphrase.size() > INT_MAX) {
    return Status(StatusCode::kInvalidArgument, "passphrase is too long");
  }

  // 2. Key-encryption key.
  SecureBytes kek(32);
  if (PKCS5_PBKDF2_HMAC(passphrase.data(), static_cast<int>(passphrase.size()), salt.data(),
                        static_cast<int>(salt.size()), static_cast<int>(iterations), EVP_sha256(),
                        static_cast<int>(kek.size()), kek.data()) != 1) {
    return Status(StatusCode::kInternal, "PBKDF2 failed in OpenSSL");
  }

  // 3. Decrypt and authenticate the inner map.
  SecureBytes plain(data.size());
  if (!AesCtrZeroIv(kek.view(), data, plain.data())) {
    return Status(StatusCode::kInternal, "AES-256-CTR failed in OpenSSL");
  }
  uint8_t mac[32];
  size_t mac_len = 0;
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, kek.data(), kek.size(), plain.data(),
                plain.size(), mac, sizeof(mac), &mac_len) == nullptr ||
      mac_len != sizeof(mac)) {
    return Status(StatusCode::kInternal, "HMAC-SHA256 failed in OpenSSL");
  }
  const bool authentic = CRYPTO_memcmp(mac, hash.data(), sizeof(mac)) == 0;
  OPENSSL_cleanse(mac, sizeof(mac));
  if (!authentic) {
    return Status(StatusCode::kWrongPassphrase,
                  "key blob did not authenticate: wrong passphrase, or a damaged key blob "
                  "(the two cannot be told apart)");
  }

  // 4. Inner structure.
  return ParseInner(plain.view());
}

}  // namespace borgcheck::crypto
