// Helpers shared by the concurrency tests (tests/concurrency/*_test.cc) and by
// shared_scratch_demo: deterministic distinct inputs, borg 1.x payloads made with the real
// compression libraries, envelopes sealed with fresh OpenSSL/libb2 calls (independent of
// checker/crypto), segment entries, the fixture key material, and a way to start N threads
// that all begin work at the same moment.
//
// The concurrency tests all follow one pattern: compute every result once on the main thread
// (the reference), then run the same kind of work from many threads at once, each thread
// owning its own engine object (Decompressor, ObjectOpener, IdHasher, ObjectVerifier: one
// per thread, as the pool workers do in checker/run/check_run.cc), and compare every output
// byte for byte with the reference. Under ThreadSanitizer (ci/tsan) the same tests also let
// TSan watch every access.
//
// Thread contract: the builders are pure functions (safe for concurrent use, though the tests
// call them from the main thread only). The json document returned by FixtureVectors() is
// built once, thread-safely, and is only read afterwards. RunConcurrently() is called from one
// thread; its callable runs on `threads` new threads at once and must synchronise whatever it
// shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checker/base/bytes.h"
#include "checker/crypto/key_blob.h"
#include "checker/crypto/key_mode.h"

namespace borgcheck::concurrency_test {

using Vec = std::vector<uint8_t>;

inline Bytes View(const Vec& v) { return Bytes(v.data(), v.size()); }
inline Vec ToVec(Bytes b) { return Vec(b.begin(), b.end()); }

// ---- Distinct deterministic inputs ----------------------------------------------------------

// Compressible text-like data (words picked by a xorshift generator seeded with `seed`), so
// that two seeds give different plaintexts of the same size.
Vec MakeText(size_t n, uint32_t seed);
// Incompressible data from the same kind of generator.
Vec MakeRandom(size_t n, uint32_t seed);
// Text with a stretch of random bytes in the middle: compresses, but not trivially.
Vec MakeMixed(size_t n, uint32_t seed);

// ---- borg 1.x compressed payloads (spec borg1-format.md §5), header included ----------------

enum class PayloadCodec { kNone, kLz4, kZstd, kZlib, kLzma, kObfuscateZstd, kObfuscateLz4 };
inline constexpr PayloadCodec kAllPayloadCodecs[] = {
    PayloadCodec::kNone, PayloadCodec::kLz4,           PayloadCodec::kZstd,
    PayloadCodec::kZlib, PayloadCodec::kLzma,          PayloadCodec::kObfuscateZstd,
    PayloadCodec::kObfuscateLz4};
std::string PayloadCodecName(PayloadCodec c);

// `00 00` + data, `01 00` + raw LZ4 block, `03 00` + zstd frame (level 3), a zlib stream
// (level 6, no borg header), `02 00` + xz stream (preset 1: the tests want many inputs fast),
// `04 00` + BE32 n + inner payload + `padding` zero bytes.
Vec CompressPayload(PayloadCodec codec, Bytes plain, size_t padding = 17);
Vec Lz4Payload(Bytes plain);

// ---- borg 1.x object envelopes and ids (spec §4.2-4.3), with fresh contexts ------------------

// The seven modes borg 1.x creates (`borg init -e ...`).
inline constexpr crypto::KeyMode kAllModes[] = {
    crypto::KeyMode::kNone,          crypto::KeyMode::kAuthenticated,
    crypto::KeyMode::kAuthenticatedBlake2, crypto::KeyMode::kRepokey,
    crypto::KeyMode::kKeyfile,       crypto::KeyMode::kRepokeyBlake2,
    crypto::KeyMode::kKeyfileBlake2};

// The shared fixture vectors (/work/shared/fixtures/borg1/vectors-v1.2.4.json).
const nlohmann::json& FixtureVectors();
// The decrypted key of the fixture repository whose mode is `mode` (empty for kNone).
crypto::KeyMaterial FixtureKey(crypto::KeyMode mode);
// The vector repository object for `mode` ("repokey", ...), as in the json.
const nlohmann::json& FixtureRepo(crypto::KeyMode mode);

// TYPE | [MAC | IV | AES-CTR(C)] or TYPE | C, sealed with one-shot OpenSSL / libb2 calls.
Vec SealObject(crypto::KeyMode mode, const crypto::KeyMaterial& key, Bytes payload, uint64_t iv);
// SHA-256 / HMAC-SHA256(id_key) / BLAKE2b-256(id_key || P), one-shot.
Vec ChunkIdOf(crypto::KeyMode mode, const crypto::KeyMaterial& key, Bytes plain);

// A PUT segment entry: crc LE32 | size LE32 | 00 | id 32 | object, with a correct CRC.
Vec MakePutEntry(Bytes id, Bytes object);
// Recomputes the CRC of an entry after its bytes were changed.
void FixEntryCrc(Vec& entry);

// ---- Threads ----------------------------------------------------------------------------------

// Starts `threads` threads, releases them together (a latch, so their work overlaps as much
// as the machine allows), runs fn(thread_index) on each and joins them all. An exception
// thrown by fn is rethrown here after the join (the first one).
void RunConcurrently(size_t threads, const std::function<void(size_t)>& fn);

}  // namespace borgcheck::concurrency_test
