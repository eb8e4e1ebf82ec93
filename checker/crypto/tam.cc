// Manifest TAM verification (spec borg1-format.md §6.4).
//
//   1. Parse the manifest msgpack; find the `tam` map and check type, salt and hmac.
//   2. Locate the stored hmac bytes in the plaintext. msgpack-cxx is told to reference byte
//      strings in place, so the hmac value's pointer *is* its position in the plaintext: no
//      re-encoding, no guessing. borg itself finds the position with data.index(hmac) (the first
//      occurrence); we also require that the 64 bytes occur nowhere else, so our verdict cannot
//      differ from borg's.
//   3. Zero those 64 bytes in a copy, derive the key, compare HMAC-SHA512 in constant time.
#include "checker/crypto/tam.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <msgpack.hpp>
#include <vector>

#include "checker/base/msgpack_util.h"
#include "checker/base/secure_bytes.h"
#include "checker/crypto/hkdf.h"

namespace borgcheck::crypto {
namespace {

constexpr std::string_view kTamType = "HKDF_HMAC_SHA512";
constexpr std::string_view kInfoPrefix = "borg-metadata-authentication-";
constexpr size_t kTamFieldSize = 64;
constexpr size_t kMsgpackMaxDepth = 64;

using msgpack_util::AsRaw;
using msgpack_util::Find;  // the last match wins, as in borg's Python dict

TamResult Malformed(std::string msg) { return {TamOutcome::kMalformed, std::move(msg)}; }

}  // namespace

TamResult VerifyManifestTam(Bytes manifest_plaintext, KeyMode mode, const KeyMaterial* key) {
  if (!NeedsKey(mode)) return VerifyManifestTamWithIkm(manifest_plaintext, std::nullopt);
  if (key == nullptr) return Malformed("internal error: no key given for a keyed mode");
  SecureBytes ikm(key->id_key.view());
  ikm.Append(key->enc_key.view());
  ikm.Append(key->enc_hmac_key.view());
  return VerifyManifestTamWithIkm(manifest_plaintext, ikm.view());
}

TamResult VerifyManifestTamWithIkm(Bytes manifest_plaintext, std::optional<Bytes> ikm) {
  return VerifyTamWithIkm(manifest_plaintext, ikm, "manifest");
}

TamResult VerifyTamWithIkm(Bytes manifest_plaintext, std::optional<Bytes> ikm, std::string_view context) {
  // The messages name the object: "manifest TAM ...", "archive TAM ...".
  const std::string what(context);
  std::string title = what;
  if (!title.empty()) title[0] = char(title[0] - 'a' + 'A');
  // 1. Parse. Trailing bytes after the map are ignored, as borg's Unpacker does; the HMAC
  //    covers them anyway.
  //    Byte strings are referenced in place: step 2 relies on the hmac's pointer.
  msgpack::object_handle oh;
  std::string err;
  if (!msgpack_util::UnpackPrefix(manifest_plaintext, kMsgpackMaxDepth, oh, err)) {
    return Malformed(what + " is not valid msgpack (" + err + ")");
  }
  const msgpack::object& manifest = oh.get();
  if (manifest.type != msgpack::type::MAP) return Malformed(what + " is not a msgpack map");
  const msgpack::object* tam = Find(manifest, "tam");
  if (tam == nullptr) return {TamOutcome::kAbsent, what + " has no TAM"};
  if (tam->type != msgpack::type::MAP) return Malformed(what + " TAM is not a map");
  Bytes type, salt, hmac;
  if (!AsRaw(Find(*tam, "type"), type)) return Malformed(what + " TAM has no type");
  if (std::string_view(reinterpret_cast<const char*>(type.data()), type.size()) != kTamType) {
    return Malformed(what + " TAM type is not HKDF_HMAC_SHA512");
  }
  if (!AsRaw(Find(*tam, "salt"), salt) || salt.size() != kTamFieldSize) {
    return Malformed(what + " TAM salt is missing or not 64 bytes");
  }
  if (!AsRaw(Find(*tam, "hmac"), hmac) || hmac.size() != kTamFieldSize) {
    return Malformed(what + " TAM hmac is missing or not 64 bytes");
  }

  // 2. Where the hmac sits in the plaintext (see the outline above).
  const uint8_t* begin = manifest_plaintext.data();
  const uint8_t* end = begin + manifest_plaintext.size();
  if (hmac.data() < begin || hmac.data() + kTamFieldSize > end) {
    return Malformed(what + " TAM hmac does not lie in the " + what + " bytes");  // cannot happen
  }
  const size_t offset = static_cast<size_t>(hmac.data() - begin);
  const uint8_t* first = std::search(begin, end, hmac.begin(), hmac.end());
  const uint8_t* again = std::search(begin + offset + 1, end, hmac.begin(), hmac.end());
  if (first != hmac.data() || again != end) {
    return Malformed(what + " TAM hmac bytes occur more than once in the " + what);
  }

  // 3. Key, zeroed copy, HMAC-SHA512.
  SecureBytes tam_key;
  if (!ikm) {
    // Mode none has no secret: borg uses salt || context ("manifest", "archive") as the key.
    tam_key = SecureBytes(salt);
    tam_key.Append(AsBytes(context));
  } else {
    tam_key = SecureBytes(size_t{64});
    const std::string info = std::string(kInfoPrefix) + what;
    if (!HkdfSha512(*ikm, salt, info, tam_key.data(), tam_key.size())) {
      return Malformed("internal error: HKDF-SHA512 failed in OpenSSL");
    }
  }
  std::vector<uint8_t> zeroed(begin, end);
  std::memset(zeroed.data() + offset, 0, kTamFieldSize);
  uint8_t mac[64];
  size_t mac_len = 0;
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA512", nullptr, tam_key.data(), tam_key.size(),
                zeroed.data(), zeroed.size(), mac, sizeof(mac), &mac_len) == nullptr ||
      mac_len != sizeof(mac)) {
    return Malformed("internal error: HMAC-SHA512 failed in OpenSSL");
  }
  if (CRYPTO_memcmp(mac, hmac.data(), sizeof(mac)) != 0) {
    return {TamOutcome::kMismatch, title + " authentication did not verify"};
  }
  return {TamOutcome::kVerified, ""};
}

}  // namespace borgcheck::crypto
