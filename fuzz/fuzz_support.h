// Helpers shared by the fuzz targets (fuzz/*_fuzzer.cc), the replay driver and the bounds
// tests: the invariant check, the fixed test key, and builders for inputs that must carry a
// valid MAC (key blobs, object envelopes) so that fuzzed bytes reach the layers behind it.
//
// The fixed test key is public and deterministic (see FixedKey): it protects nothing, it only
// lets fuzz/make-corpus (which computes the same bytes in Python) and the targets agree.
//
// Thread contract: every function is safe for concurrent use; FixedKey() returns references
// to objects built once (function-local statics) and only read afterwards. libFuzzer runs a
// target on one thread anyway.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "checker/base/bytes.h"
#include "checker/crypto/key_blob.h"
#include "checker/crypto/key_mode.h"

// A violated invariant is a bug: print where and abort, which libFuzzer reports as a crash
// (and saves the input). Never exit(): libFuzzer treats a clean exit as a harness bug.
#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace borgcheck::fuzz {

// The passphrase the key targets decrypt with (the fixtures use the same one).
inline constexpr std::string_view kFixedPassphrase = "test";

// The fixed key for `mode`: enc_key[i] = 0x10 + i (32 bytes); enc_hmac_key[i] = 0x40 + i and
// id_key[i] = 0xc0 + i (mod 256), 32 bytes for the HMAC-SHA256 modes and 128 for the BLAKE2b
// modes; repository_id[i] = 0x80 + i; tam_required true. Mode none gets the HMAC-sized key
// (ObjectOpener/IdHasher ignore it). The reference lives as long as the process.
const crypto::KeyMaterial& FixedKey(crypto::KeyMode mode);

// The mode a selector byte picks: all eight TYPE values 0x00..0x07 (kPassphrase included,
// which borg treats as repokey).
inline crypto::KeyMode ModeFromSelector(uint8_t selector) {
  return static_cast<crypto::KeyMode>(selector % 8);
}

// A stored object (TYPE | envelope | payload) for `mode` under FixedKey(mode): the AES modes
// get MAC | IV | AES-256-CTR(payload) with a valid MAC, the others TYPE | payload.
std::string SealObject(crypto::KeyMode mode, Bytes payload, uint64_t iv);

// A whole PUT segment entry (crc, size, tag, id, object) with a correct CRC32.
std::string MakePutEntry(const uint8_t id[32], Bytes object);

// An authentic borg 1.x key blob (base64 text, no line breaks) around `inner`: PBKDF2 with
// `iterations` over a fixed salt, AES-256-CTR, HMAC-SHA256, packed as borg packs it.
// `inner` is any byte string: the blob authenticates whatever it carries.
std::string SealKeyBlob(Bytes inner, std::string_view passphrase, uint32_t iterations);

// Standard base64 with padding, no line breaks.
std::string Base64Encode(Bytes data);

}  // namespace borgcheck::fuzz
