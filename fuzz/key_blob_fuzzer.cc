// Fuzz target: borg 1.x key text as it is read from disk: a key file (crypto::ParseKeyFile) or
// the base64 blob of the config `key` value (crypto::Base64Decode, crypto::DecryptKeyBlob with
// the fixed passphrase "test").
//
// Input: the text of a key file, or a bare base64 key blob.
//
// Cost cap. The blob names its own PBKDF2 iteration count, and DecryptKeyBlob accepts up to
// 100,000,000 (borg writes 100,000): one such input would take minutes and libFuzzer would
// report a timeout that is no bug. So before calling DecryptKeyBlob the target reads the
// blob's outer map itself, with the same msgpack call and limits DecryptKeyBlob uses, and
// skips the call when any `iterations` value exceeds kFuzzMaxIterations. Inputs msgpack cannot
// parse are passed on (DecryptKeyBlob rejects them before PBKDF2 as well). The seeds
// (fuzz/make-corpus) carry authentic blobs with 1 iteration, so mutations reach the AES/HMAC
// step; everything behind a valid HMAC (the inner map) is fuzzed by key_inner_fuzzer, which
// builds authentic blobs around its input.
//
// Invariant:
//   - ParseKeyFile: a success has a 64-character lowercase hex repository id and a body that
//     is base64 of at least 20 bytes with no whitespace left in it;
//   - Base64Decode never yields more than 3 bytes per 4 input characters;
//   - DecryptKeyBlob fails only with kCorruptMetadata, kUnsupported or kWrongPassphrase, and a
//     success has key fields of the sizes borg writes (32; 32 or 128).
#include <cstdint>
#include <exception>
#include <msgpack.hpp>
#include <string>
#include <string_view>

#include "checker/crypto/key_blob.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;

namespace {

constexpr uint64_t kFuzzMaxIterations = 64;

bool ReferenceAll(msgpack::type::object_type, std::size_t, void*) { return true; }

// False when the blob's outer map names more PBKDF2 iterations than the cap (any `iterations`
// key counts, whichever DecryptKeyBlob would pick).
bool IterationsWithinCap(std::string_view base64) {
  std::string raw;
  if (!crypto::Base64Decode(base64, raw)) return true;  // rejected before PBKDF2
  msgpack::object_handle oh;
  try {
    const size_t n = raw.size();
    msgpack::unpack_limit limit(n, n, n, n, n, 32);
    size_t off = 0;
    bool referenced = false;
    oh = msgpack::unpack(raw.data(), n, off, referenced, &ReferenceAll, nullptr, limit);
  } catch (const std::exception&) {
    return true;  // DecryptKeyBlob's identical unpack fails the same way
  }
  const msgpack::object& map = oh.get();
  if (map.type != msgpack::type::MAP) return true;
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    const msgpack::object& k = map.via.map.ptr[i].key;
    const msgpack::object& v = map.via.map.ptr[i].val;
    if ((k.type == msgpack::type::STR || k.type == msgpack::type::BIN) &&
        std::string_view(k.via.str.ptr, k.via.str.size) == "iterations" &&
        v.type == msgpack::type::POSITIVE_INTEGER && v.via.u64 > kFuzzMaxIterations) {
      return false;
    }
  }
  return true;
}

void CheckDecrypt(std::string_view base64) {
  if (!IterationsWithinCap(base64)) return;
  Result<crypto::KeyMaterial> k = crypto::DecryptKeyBlob(base64, fuzz::kFixedPassphrase);
  if (!k.ok()) {
    const StatusCode c = k.status().code();
    FUZZ_CHECK(c == StatusCode::kCorruptMetadata || c == StatusCode::kUnsupported ||
               c == StatusCode::kWrongPassphrase);
    FUZZ_CHECK(!k.status().message().empty());
    return;
  }
  FUZZ_CHECK(k->repository_id.size() == 32);
  FUZZ_CHECK(k->enc_key.size() == 32);
  FUZZ_CHECK(k->enc_hmac_key.size() == 32 || k->enc_hmac_key.size() == 128);
  FUZZ_CHECK(k->id_key.size() == 32 || k->id_key.size() == 128);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  std::string decoded;
  if (crypto::Base64Decode(text, decoded)) FUZZ_CHECK(decoded.size() <= size / 4 * 3);

  Result<crypto::KeyFileContents> kf = crypto::ParseKeyFile(text);
  if (kf.ok()) {
    FUZZ_CHECK(kf->repository_id_hex.size() == 64);
    for (char c : kf->repository_id_hex) {
      FUZZ_CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    }
    for (char c : kf->base64) FUZZ_CHECK(c != ' ' && c != '\t' && c != '\n' && c != '\r');
    std::string body;
    FUZZ_CHECK(crypto::Base64Decode(kf->base64, body) && body.size() >= 20);
    CheckDecrypt(kf->base64);
  } else {
    FUZZ_CHECK(kf.status().code() == StatusCode::kCorruptMetadata);
    CheckDecrypt(text);  // a config `key` value: the blob itself
  }
  return 0;
}
