// Every codec decoded from many threads at once, each thread with its own
// codecs::Decompressor (as each pool worker owns one), over distinct inputs; every result
// (ok flag, codecs found, error text, output bytes) must equal what one Decompressor on the
// main thread produced for the same input. Damaged inputs are part of the mix: an error must
// be as deterministic as a success.
//
// Catch2 assertions are not thread-safe, so the threads only record mismatches; the main
// thread asserts after joining them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "codecs/decompressor.h"
#include "tests/concurrency/concurrency_support.h"

namespace borgcheck::concurrency_test {
namespace {

using codecs::CodecId;
using codecs::DecodeResult;
using codecs::Decompressor;

constexpr size_t kThreads = 8;

struct CodecCase {
  std::string name;      // for messages: codec, seed, damage
  Vec payload;           // borg 1.x payload (header included) or a raw body
  std::optional<CodecId> raw_codec;  // set: decode with DecodeRaw(raw_codec, payload, size)
  std::optional<size_t> raw_size;
  size_t plain_size = 0;  // plaintext size, where a test needs it
  // The main thread's result, filled by ComputeReference().
  DecodeResult reference;
  Vec reference_out;
};

DecodeResult Decode(Decompressor& d, const CodecCase& c, ByteBuffer& out) {
  if (c.raw_codec) return d.DecodeRaw(*c.raw_codec, View(c.payload), c.raw_size, out);
  return d.DecodeBorg1(View(c.payload), out);
}

bool SameResult(const DecodeResult& a, const DecodeResult& b) {
  return a.ok == b.ok && a.codec == b.codec && a.inner_codec == b.inner_codec &&
         a.nonzero_padding == b.nonzero_padding && a.error == b.error;
}

// Distinct inputs for one codec: sizes from 1 byte to ~192 KiB, text, mixed and random
// plaintexts, plus three damaged payloads: a flipped byte in the middle of the body (which
// a codec may not notice: a changed literal decodes to different bytes), a truncated stream
// and a body of random bytes (both always fail, except for codec none).
std::vector<CodecCase> MakeCases(PayloadCodec codec, uint32_t seed_base, size_t count) {
  std::vector<CodecCase> cases;
  for (size_t i = 0; i < count; ++i) {
    const uint32_t seed = seed_base + uint32_t(i);
    const size_t size = i == 0 ? 1 : (size_t(seed) * 7919u) % (192 * 1024) + 1;
    Vec plain = i % 3 == 0 ? MakeText(size, seed) : i % 3 == 1 ? MakeMixed(size, seed)
                                                                : MakeRandom(size, seed);
    CodecCase c;
    c.name = PayloadCodecName(codec) + " seed " + std::to_string(seed) + " size " +
             std::to_string(size);
    c.payload = CompressPayload(codec, View(plain), i % 5);
    cases.push_back(std::move(c));
  }
  // Damage: a byte in the middle of the compressed body, and a truncated payload.
  CodecCase flipped;
  flipped.name = PayloadCodecName(codec) + " flipped byte";
  flipped.payload = CompressPayload(codec, View(MakeText(50000, seed_base + 999)), 0);
  flipped.payload[flipped.payload.size() / 2] ^= 0x5a;
  cases.push_back(std::move(flipped));
  CodecCase truncated;
  truncated.name = PayloadCodecName(codec) + " truncated";
  truncated.payload = CompressPayload(codec, View(MakeMixed(40000, seed_base + 998)), 0);
  truncated.payload.resize(truncated.payload.size() * 2 / 3);
  cases.push_back(std::move(truncated));
  CodecCase garbage;
  garbage.name = PayloadCodecName(codec) + " garbage";
  garbage.payload = CompressPayload(codec, View(MakeText(1000, seed_base + 997)), 0);
  const Vec noise = MakeRandom(3000, seed_base + 996);
  const size_t keep = codec == PayloadCodec::kZlib ? 0 : codec >= PayloadCodec::kObfuscateZstd ? 8 : 2;
  garbage.payload.resize(keep);
  garbage.payload.insert(garbage.payload.end(), noise.begin(), noise.end());
  cases.push_back(std::move(garbage));
  return cases;
}

// borg 2 path: raw bodies with the size from metadata (DecodeRaw).
std::vector<CodecCase> MakeRawCases(uint32_t seed_base) {
  struct Raw {
    CodecId id;
    PayloadCodec codec;
    size_t header;  // bytes of borg 1 header to strip (zlib has none)
  };
  const Raw kRaw[] = {{CodecId::kNone, PayloadCodec::kNone, 2},
                      {CodecId::kLz4, PayloadCodec::kLz4, 2},
                      {CodecId::kZstd, PayloadCodec::kZstd, 2},
                      {CodecId::kZlib, PayloadCodec::kZlib, 0},
                      {CodecId::kLzma, PayloadCodec::kLzma, 2}};
  std::vector<CodecCase> cases;
  uint32_t seed = seed_base;
  for (const Raw& r : kRaw) {
    for (int i = 0; i < 4; ++i, ++seed) {
      const size_t size = (size_t(seed) * 104729u) % (96 * 1024) + 1;
      Vec plain = MakeMixed(size, seed);
      Vec payload = CompressPayload(r.codec, View(plain));
      CodecCase c;
      c.name = "raw " + PayloadCodecName(r.codec) + " seed " + std::to_string(seed);
      c.payload.assign(payload.begin() + std::ptrdiff_t(r.header), payload.end());
      c.raw_codec = r.id;
      // One in four claims a wrong size: the mismatch must be reported the same everywhere.
      c.raw_size = i == 3 ? size + 1 : size;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

void ComputeReference(std::vector<CodecCase>& cases, size_t max_output = codecs::kBorgMaxDataSize) {
  Decompressor d(max_output);
  ByteBuffer out;
  for (CodecCase& c : cases) {
    c.reference = Decode(d, c, out);
    c.reference_out = c.reference.ok ? ToVec(out.view()) : Vec();
  }
}

// Runs every case `rounds` times on each of kThreads threads (each thread starts at a
// different case, so at any moment the threads work on different inputs) and returns a
// description of every result that differed from the reference.
std::vector<std::string> RunOnThreads(const std::vector<CodecCase>& cases, int rounds,
                                      size_t max_output = codecs::kBorgMaxDataSize) {
  std::vector<std::vector<std::string>> mismatches(kThreads);  // element t: thread t only
  RunConcurrently(kThreads, [&](size_t t) {
    Decompressor d(max_output);  // one per thread, reused for every input, as a worker does
    ByteBuffer out;
    const size_t n = cases.size();
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < n; ++k) {
        const CodecCase& c = cases[(k + t * n / kThreads + size_t(r)) % n];
        const DecodeResult got = Decode(d, c, out);
        if (!SameResult(got, c.reference)) {
          mismatches[t].push_back(c.name + ": result differs (ok " + std::to_string(got.ok) +
                                  ", error '" + got.error + "')");
        } else if (got.ok && (out.size() != c.reference_out.size() ||
                              !std::equal(c.reference_out.begin(), c.reference_out.end(),
                                          out.data()))) {
          mismatches[t].push_back(c.name + ": output bytes differ");
        }
      }
    }
  });
  std::vector<std::string> all;
  for (auto& m : mismatches) all.insert(all.end(), m.begin(), m.end());
  return all;
}

void ExpectNoMismatch(const std::vector<std::string>& mismatches) {
  for (size_t i = 0; i < mismatches.size() && i < 10; ++i) UNSCOPED_INFO(mismatches[i]);
  CHECK(mismatches.empty());
}

TEST_CASE("each codec alone: 8 threads decode distinct inputs exactly as one thread does",
          "[concurrency][codecs]") {
  uint32_t seed_base = 1000;
  for (PayloadCodec codec : kAllPayloadCodecs) {
    DYNAMIC_SECTION(PayloadCodecName(codec)) {
      std::vector<CodecCase> cases = MakeCases(codec, seed_base, 24);
      ComputeReference(cases);
      // The reference itself must be right: intact inputs decode, truncated and garbage
      // bodies fail (except with codec none, which has nothing to check).
      size_t failing = 0;
      for (const CodecCase& c : cases) {
        INFO(c.name);
        if (c.name.find(" seed ") != std::string::npos) REQUIRE(c.reference.ok);
        const bool must_fail = c.name.find("truncated") != std::string::npos ||
                               c.name.find("garbage") != std::string::npos;
        if (must_fail && codec != PayloadCodec::kNone) CHECK(!c.reference.ok);
        if (!c.reference.ok) ++failing;
      }
      CHECK(failing >= (codec == PayloadCodec::kNone ? 0u : 2u));
      ExpectNoMismatch(RunOnThreads(cases, 2));
    }
    seed_base += 100;
  }
}

TEST_CASE("all codecs mixed through one Decompressor per thread, borg 1 and raw paths",
          "[concurrency][codecs]") {
  // A worker's one Decompressor sees every codec in turn: its zstd, lzma and zlib contexts
  // are reused across chunks of different codecs while other workers do the same.
  std::vector<CodecCase> cases;
  uint32_t seed_base = 5000;
  for (PayloadCodec codec : kAllPayloadCodecs) {
    std::vector<CodecCase> one = MakeCases(codec, seed_base, 8);
    std::move(one.begin(), one.end(), std::back_inserter(cases));
    seed_base += 100;
  }
  std::vector<CodecCase> raw = MakeRawCases(9000);
  std::move(raw.begin(), raw.end(), std::back_inserter(cases));
  // Interleave codecs so that consecutive cases use different backends.
  std::vector<CodecCase> mixed;
  for (size_t stride = 0; stride < 8; ++stride) {
    for (size_t i = stride; i < cases.size(); i += 8) mixed.push_back(std::move(cases[i]));
  }
  REQUIRE(mixed.size() == cases.size());
  ComputeReference(mixed);
  size_t raw_ok = 0, raw_bad = 0;
  for (const CodecCase& c : mixed) {
    if (c.raw_codec) (c.reference.ok ? raw_ok : raw_bad)++;
  }
  CHECK(raw_ok == 15);   // 5 codecs x 3 right sizes
  CHECK(raw_bad == 5);   // 5 codecs x 1 wrong size
  ExpectNoMismatch(RunOnThreads(mixed, 2));
}

TEST_CASE("the output cap: inputs over it fail the same way on every thread",
          "[concurrency][codecs]") {
  // The bounded-output paths (LZ4's partial second pass, the streaming decoders' growth
  // limit, zstd's frame size check) under concurrency: half the inputs fit a 64 KiB cap, half
  // do not.
  constexpr size_t kCap = 64 * 1024;
  std::vector<CodecCase> cases;
  uint32_t seed = 30000;
  for (PayloadCodec codec : kAllPayloadCodecs) {
    for (size_t size : {kCap / 2, kCap, kCap + 1, 2 * kCap}) {
      CodecCase c;
      c.name = PayloadCodecName(codec) + " size " + std::to_string(size);
      c.payload = CompressPayload(codec, View(MakeMixed(size, ++seed)));
      c.plain_size = size;
      cases.push_back(std::move(c));
    }
  }
  ComputeReference(cases, kCap);
  for (const CodecCase& c : cases) {
    INFO(c.name);
    const bool fits = c.plain_size <= kCap;
    CHECK(c.reference.ok == fits);
    if (!fits) CHECK(c.reference.error.find("exceeds") != std::string::npos);
  }
  ExpectNoMismatch(RunOnThreads(cases, 3, kCap));
}

}  // namespace
}  // namespace borgcheck::concurrency_test
