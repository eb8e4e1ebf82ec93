#include "fuzz/fuzz_support.h"

#include <blake2.h>
#include <openssl/evp.h>

#include <array>
#include <climits>
#include <cstring>
#include <memory>
#include <msgpack.hpp>
#include <sstream>

#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/segment_log/segment_format.h"

namespace borgcheck::fuzz {
namespace {

SecureBytes Pattern(uint8_t first, size_t n) {
  SecureBytes b(n);
  for (size_t i = 0; i < n; ++i) b.data()[i] = static_cast<uint8_t>(first + i);
  return b;
}

crypto::KeyMaterial MakeKey(size_t keyed_len) {
  crypto::KeyMaterial k;
  k.enc_key = Pattern(0x10, 32);
  k.enc_hmac_key = Pattern(0x40, keyed_len);
  k.id_key = Pattern(0xc0, keyed_len);
  SecureBytes repo_id = Pattern(0x80, 32);
  k.repository_id.assign(reinterpret_cast<const char*>(repo_id.data()), repo_id.size());
  k.tam_required = true;
  return k;
}

// Aborts on an OpenSSL failure: the builders run on fixed, valid parameters, so a failure here
// is a broken environment, not an input the target should survive.
void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz support: %s failed\n", what);
    std::abort();
  }
}

std::string AesCtr(Bytes key, const uint8_t counter[16], Bytes in) {
  std::string out(in.size(), '\0');
  std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(),
                                                                      &EVP_CIPHER_CTX_free);
  int outl = 0;
  Require(ctx && in.size() <= INT_MAX &&
              EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_ctr(), nullptr, key.data(), counter) == 1 &&
              (in.empty() ||
               EVP_EncryptUpdate(ctx.get(), reinterpret_cast<uint8_t*>(out.data()), &outl,
                                 in.data(), static_cast<int>(in.size())) == 1),
          "AES-256-CTR");
  return out;
}

void HmacSha256(Bytes key, Bytes msg, uint8_t out[32]) {
  size_t n = 0;
  Require(EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(),
                    msg.data(), msg.size(), out, 32, &n) != nullptr &&
              n == 32,
          "HMAC-SHA256");
}

void PrefixedBlake2b(Bytes key, Bytes msg, uint8_t out[32]) {
  blake2b_state s;
  Require(blake2b_init(&s, 32) == 0 && blake2b_update(&s, key.data(), key.size()) == 0 &&
              blake2b_update(&s, msg.data(), msg.size()) == 0 && blake2b_final(&s, out, 32) == 0,
          "BLAKE2b");
}

}  // namespace

const crypto::KeyMaterial& FixedKey(crypto::KeyMode mode) {
  static const crypto::KeyMaterial kHmacKey = MakeKey(32);
  static const crypto::KeyMaterial kBlake2Key = MakeKey(128);
  return crypto::UsesBlake2(mode) ? kBlake2Key : kHmacKey;
}

std::string SealObject(crypto::KeyMode mode, Bytes payload, uint64_t iv) {
  std::string obj(1, static_cast<char>(mode));
  if (!crypto::IsEncrypted(mode)) {
    obj.append(reinterpret_cast<const char*>(payload.data()), payload.size());
    return obj;
  }
  const crypto::KeyMaterial& key = FixedKey(mode);
  uint8_t counter[16] = {};
  for (int i = 0; i < 8; ++i) counter[8 + i] = static_cast<uint8_t>(iv >> (56 - 8 * i));
  std::string iv_ct(reinterpret_cast<const char*>(counter + 8), 8);
  iv_ct += AesCtr(key.enc_key.view(), counter, payload);
  uint8_t mac[32];
  if (crypto::UsesBlake2(mode)) {
    PrefixedBlake2b(key.enc_hmac_key.view(), AsBytes(iv_ct), mac);
  } else {
    HmacSha256(key.enc_hmac_key.view(), AsBytes(iv_ct), mac);
  }
  obj.append(reinterpret_cast<const char*>(mac), sizeof mac);
  obj += iv_ct;
  return obj;
}

std::string MakePutEntry(const uint8_t id[32], Bytes object) {
  std::string e(repo::kHeaderSizeWithKey, '\0');
  auto* p = reinterpret_cast<uint8_t*>(e.data());
  StoreLE32(p + 4, static_cast<uint32_t>(repo::kHeaderSizeWithKey + object.size()));
  p[8] = repo::kTagPut;
  std::memcpy(p + 9, id, 32);
  e.append(reinterpret_cast<const char*>(object.data()), object.size());
  p = reinterpret_cast<uint8_t*>(e.data());
  StoreLE32(p, repo::Crc32(AsBytes(e).subspan(4)));
  return e;
}

std::string SealKeyBlob(Bytes inner, std::string_view passphrase, uint32_t iterations) {
  std::array<uint8_t, 32> salt;
  for (size_t i = 0; i < salt.size(); ++i) salt[i] = static_cast<uint8_t>(0x5a ^ i);
  uint8_t kek[32];
  Require(PKCS5_PBKDF2_HMAC(passphrase.data(), static_cast<int>(passphrase.size()), salt.data(),
                            static_cast<int>(salt.size()), static_cast<int>(iterations),
                            EVP_sha256(), sizeof kek, kek) == 1,
          "PBKDF2");
  const uint8_t zero_counter[16] = {};
  const std::string data = AesCtr(Bytes(kek, sizeof kek), zero_counter, inner);
  uint8_t hash[32];
  HmacSha256(Bytes(kek, sizeof kek), inner, hash);

  // borg 1.x: msgpack.packb(dict) with byte strings as msgpack raw (str).
  std::stringstream packed;
  msgpack::packer<std::stringstream> pk(packed);
  auto raw = [&](const void* p, size_t n) {
    pk.pack_str(static_cast<uint32_t>(n));
    pk.pack_str_body(static_cast<const char*>(p), static_cast<uint32_t>(n));
  };
  auto key = [&](std::string_view k) { raw(k.data(), k.size()); };
  pk.pack_map(6);
  key("version");
  pk.pack_uint32(1);
  key("salt");
  raw(salt.data(), salt.size());
  key("iterations");
  pk.pack_uint32(iterations);
  key("algorithm");
  key("sha256");
  key("hash");
  raw(hash, sizeof hash);
  key("data");
  raw(data.data(), data.size());
  const std::string blob = packed.str();
  return Base64Encode(AsBytes(blob));
}

std::string Base64Encode(Bytes data) {
  std::string out((data.size() + 2) / 3 * 4 + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<uint8_t*>(out.data()), data.data(),
                                static_cast<int>(data.size()));
  Require(n >= 0, "base64 encoding");
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace borgcheck::fuzz
