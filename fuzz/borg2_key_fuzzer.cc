// Fuzz target: borg 2 key blobs (crypto::ParseBorg2KeyBlob, crypto::DecryptBorg2Key with the
// fixed passphrase "test"): argon2 + ChaCha20-Poly1305 keys of every borg 2, and the borg 1.x
// "sha256" (PBKDF2) keys that 2.0.0b5 reads and master refuses.
//
// Input: a key file ("BORG_KEY <hex>" line, then the base64 body on any number of lines) or a
// bare base64 blob (a repokey's config value / keys/<sha256> body). The first line of a key
// file is dropped as the loaders do; the rest goes to the parser twice, once accepting and once
// refusing "sha256" blobs (the b5 and the master loader).
//
// Cost cap. The blob names its own KDF cost, and the parser accepts what borg might write (argon2
// t <= 1000, m <= 4 GiB, p <= 255; PBKDF2 up to 100,000,000 iterations): borg writes t=3,
// m=64 MiB, p=4, about a quarter of a second and 64 MiB per input, and the bounds allow far
// worse; libFuzzer would report timeouts and out-of-memory that are no bugs. So the target
// decrypts only blobs with argon2 t <= 4, m <= 256 KiB, p <= 4, or at most 64 PBKDF2
// iterations (each such input then costs well under a millisecond); everything else is parsed
// only. The parsed values are the parser's own output, so the cap is exact (no second parser).
// The seeds (fuzz/make-corpus) hold the fixtures' real keys (parsed only) and the same inner
// maps re-sealed with t=1, m=8 KiB, p=1 and 1 PBKDF2 iteration, so mutations reach the AEAD
// tag check and, on seeds whose ciphertext is left alone, the inner map.
//
// Invariant:
//   - a parse failure is kCorruptMetadata or kUnsupported with a message; "sha256" blobs are
//     refused (kUnsupported) exactly by the master options, and a blob the b5 options refuse
//     the master options refuse as well;
//   - a parsed blob has the parser's bounds, which lie inside libargon2's own: argon2 salt
//     8..1024 bytes, data >= 16 bytes (the tag), 1 <= t <= 1000, 8 KiB per lane <= m,
//     1 <= p <= 255, type 0..2; sha256 hash 32 bytes, iterations >= 1;
//   - decryption fails only with kWrongPassphrase, kCorruptMetadata or kUnsupported (an inner
//     map of another version; never kInternal within
//     the cap), with a message; a success has a 32-byte repository id, crypt_key of 64 or 160
//     bytes and id_key of 32 or 128.
#include <cstdint>
#include <string>
#include <string_view>

#include "checker/crypto/borg2_key.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;

namespace {

constexpr uint32_t kFuzzMaxTimeCost = 4;
constexpr uint32_t kFuzzMaxMemoryKib = 256;
constexpr uint32_t kFuzzMaxParallelism = 4;
constexpr uint32_t kFuzzMaxIterations = 64;

bool WithinCap(const crypto::Borg2EncryptedKey& k) {
  if (k.algorithm == crypto::Borg2KeyAlgorithm::kPbkdf2Sha256) return k.iterations <= kFuzzMaxIterations;
  return k.argon2_time_cost <= kFuzzMaxTimeCost && k.argon2_memory_cost_kib <= kFuzzMaxMemoryKib &&
         k.argon2_parallelism <= kFuzzMaxParallelism;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (text.rfind("BORG_KEY ", 0) == 0) {
    const size_t nl = text.find('\n');
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }

  crypto::Borg2KeyBlobOptions master;
  master.accept_pbkdf2_sha256 = false;
  const Result<crypto::Borg2EncryptedKey> m = crypto::ParseBorg2KeyBlob(text, master);
  const Result<crypto::Borg2EncryptedKey> k = crypto::ParseBorg2KeyBlob(text);
  if (!k.ok()) {
    const StatusCode c = k.status().code();
    FUZZ_CHECK(c == StatusCode::kCorruptMetadata || c == StatusCode::kUnsupported);
    FUZZ_CHECK(!k.status().message().empty());
    FUZZ_CHECK(!m.ok());
    return 0;
  }
  const bool pbkdf2 = k->algorithm == crypto::Borg2KeyAlgorithm::kPbkdf2Sha256;
  FUZZ_CHECK(m.ok() == !pbkdf2);
  if (!m.ok()) FUZZ_CHECK(m.status().code() == StatusCode::kUnsupported);
  if (pbkdf2) {
    FUZZ_CHECK(k->hash.size() == 32 && k->iterations >= 1);
  } else {
    FUZZ_CHECK(k->salt.size() >= 8 && k->salt.size() <= 1024 && k->data.size() >= 16);
    FUZZ_CHECK(k->argon2_time_cost >= 1 && k->argon2_time_cost <= 1000);
    FUZZ_CHECK(k->argon2_memory_cost_kib >= 8 * uint64_t(k->argon2_parallelism));
    FUZZ_CHECK(k->argon2_parallelism >= 1 && k->argon2_parallelism <= 255);
    FUZZ_CHECK(k->argon2_type >= 0 && k->argon2_type <= 2);
  }
  if (!WithinCap(*k)) return 0;

  const Result<crypto::Borg2KeyMaterial> key = crypto::DecryptBorg2Key(*k, fuzz::kFixedPassphrase);
  if (!key.ok()) {
    const StatusCode c = key.status().code();
    FUZZ_CHECK(c == StatusCode::kWrongPassphrase || c == StatusCode::kCorruptMetadata ||
               c == StatusCode::kUnsupported);
    FUZZ_CHECK(!key.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(key->repository_id.size() == 32);
  FUZZ_CHECK(key->crypt_key.size() == 64 || key->crypt_key.size() == 160);
  FUZZ_CHECK(key->id_key.size() == 32 || key->id_key.size() == 128);
  return 0;
}
