// Tests for the BLAKE3 implementation: the official test vectors in all three modes with the
// full extended output, incremental updates, Reset, and the AVX2 path against the portable one.
//
// testdata/blake3_test_vectors.json is test_vectors/test_vectors.json from
// github.com/BLAKE3-team/BLAKE3 (commit 77b257ee), released under CC0-1.0 / Apache-2.0.
#include "checker/crypto/blake3.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "checker/base/bytes.h"

namespace borgcheck::crypto {
namespace {

const nlohmann::json& Vectors() {
  static const nlohmann::json vectors = [] {
    std::ifstream in(BORGCHECK_SOURCE_DIR "/checker/crypto/testdata/blake3_test_vectors.json");
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
  }();
  return vectors;
}

// The vectors' input: the repeating byte sequence 0, 1, ..., 250.
std::vector<uint8_t> VectorInput(size_t len) {
  std::vector<uint8_t> input(len);
  for (size_t i = 0; i < len; ++i) input[i] = uint8_t(i % 251);
  return input;
}

std::vector<uint8_t> RandomInput(size_t len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> input(len);
  for (auto& b : input) b = uint8_t(rng());
  return input;
}

std::string HexOutput(const Blake3Hasher& h, size_t len) {
  std::vector<uint8_t> out(len);
  h.Finalize(out.data(), out.size());
  return ToHex(out);
}

std::string HexDigest(Blake3Hasher h, Bytes data) {
  h.Update(data);
  return HexOutput(h, kBlake3OutLen);
}

const uint8_t* VectorKey() {
  const std::string& key = Vectors()["key"].get_ref<const std::string&>();
  REQUIRE(key.size() == kBlake3KeyLen);
  return reinterpret_cast<const uint8_t*>(key.data());
}

// The three hashers under test, for one mode name of the vector file.
Blake3Hasher MakeHasher(const std::string& mode) {
  if (mode == "hash") return Blake3Hasher::Plain();
  if (mode == "keyed_hash") return Blake3Hasher::Keyed(VectorKey());
  return Blake3Hasher::DeriveKey(Vectors()["context_string"].get<std::string>());
}

const char* const kModes[] = {"hash", "keyed_hash", "derive_key"};

TEST_CASE("BLAKE3 official vectors, one-shot, all modes, full output") {
  const auto& cases = Vectors()["cases"];
  REQUIRE(cases.size() == 35);
  for (const auto& c : cases) {
    const size_t len = c["input_len"].get<size_t>();
    const std::vector<uint8_t> input = VectorInput(len);
    for (const char* mode : kModes) {
      for (bool simd : {true, false}) {
        INFO("input_len " << len << " mode " << mode << " simd " << simd);
        const std::string& expected = c[mode].get_ref<const std::string&>();
        Blake3Hasher h = MakeHasher(mode);
        h.TEST_SetSimdEnabled(simd);
        h.Update(input);
        CHECK(HexOutput(h, expected.size() / 2) == expected);
        // The default-length digest is the extended output's prefix.
        CHECK(HexOutput(h, kBlake3OutLen) == expected.substr(0, 2 * kBlake3OutLen));
      }
    }
  }
}

TEST_CASE("BLAKE3 official vectors cover the chunk and tree boundaries") {
  std::vector<size_t> lens;
  for (const auto& c : Vectors()["cases"]) lens.push_back(c["input_len"].get<size_t>());
  for (size_t want : {0, 1, 1023, 1024, 1025, 2048, 2049, 3072, 3073, 4096, 4097, 5120, 5121,
                      6144, 6145, 7168, 7169, 8192, 8193, 16384, 31744, 102400}) {
    INFO("input_len " << want);
    CHECK(std::find(lens.begin(), lens.end(), want) != lens.end());
  }
}

TEST_CASE("BLAKE3 Blake3Keyed matches the keyed_hash vectors") {
  for (const auto& c : Vectors()["cases"]) {
    const size_t len = c["input_len"].get<size_t>();
    INFO("input_len " << len);
    uint8_t out[kBlake3OutLen];
    Blake3Keyed(VectorKey(), VectorInput(len), out);
    CHECK(ToHex(out) == c["keyed_hash"].get<std::string>().substr(0, 2 * kBlake3OutLen));
  }
}

TEST_CASE("BLAKE3 incremental updates in odd pieces match the vectors") {
  // Piece sizes chosen to straddle block (64) and chunk (1024) boundaries in every phase.
  const std::vector<std::vector<size_t>> patterns = {
      {1}, {7}, {63, 64, 65}, {1023}, {1025, 3}, {2047, 1, 4099}, {13, 1024, 2049, 8191}};
  for (const auto& c : Vectors()["cases"]) {
    const size_t len = c["input_len"].get<size_t>();
    const std::vector<uint8_t> input = VectorInput(len);
    for (const char* mode : kModes) {
      const std::string& expected = c[mode].get_ref<const std::string&>();
      for (size_t p = 0; p < patterns.size(); ++p) {
        INFO("input_len " << len << " mode " << mode << " pattern " << p);
        Blake3Hasher h = MakeHasher(mode);
        size_t pos = 0;
        for (size_t k = 0; pos < len; ++k) {
          const size_t piece = std::min(patterns[p][k % patterns[p].size()], len - pos);
          h.Update(Bytes(input).subspan(pos, piece));
          pos += piece;
        }
        h.Update(Bytes());  // an empty update changes nothing
        CHECK(HexOutput(h, expected.size() / 2) == expected);
      }
    }
  }
}

TEST_CASE("BLAKE3 Finalize does not consume the state") {
  const auto& c = Vectors()["cases"].back();  // 102400 bytes
  const std::vector<uint8_t> input = VectorInput(c["input_len"].get<size_t>());
  Blake3Hasher h = Blake3Hasher::Plain();
  const size_t half = input.size() / 2 + 17;
  h.Update(Bytes(input).first(half));
  const std::string partial = HexOutput(h, kBlake3OutLen);
  CHECK(partial == HexDigest(Blake3Hasher::Plain(), Bytes(input).first(half)));
  h.Update(Bytes(input).subspan(half));
  CHECK(HexOutput(h, 131) == c["hash"].get<std::string>());
}

TEST_CASE("BLAKE3 Reset forgets input and keeps the mode") {
  for (const char* mode : kModes) {
    INFO("mode " << mode);
    const auto& cases = Vectors()["cases"];
    Blake3Hasher h = MakeHasher(mode);
    h.Update(VectorInput(5000));
    h.Reset();
    CHECK(HexOutput(h, kBlake3OutLen) == cases[0][mode].get<std::string>().substr(0, 64));
    for (const auto& c : cases) {
      const size_t len = c["input_len"].get<size_t>();
      h.Reset();
      h.Update(VectorInput(len));
      INFO("input_len " << len);
      CHECK(HexOutput(h, 131) == c[mode].get<std::string>());
    }
  }
}

TEST_CASE("BLAKE3 SIMD and portable paths agree on many sizes and splits") {
  Blake3Hasher probe = Blake3Hasher::Plain();
  if (!probe.TEST_SimdEnabled()) WARN("no AVX2 on this CPU: only the portable path is tested");

  uint8_t key[kBlake3KeyLen];
  for (size_t i = 0; i < sizeof key; ++i) key[i] = uint8_t(0xA0 + i);
  // Every multiple-of-chunk neighbourhood up to 40 chunks (all lane counts of the 8-lane
  // kernel, several tree shapes), and a few large odd sizes.
  std::vector<size_t> sizes;
  for (size_t chunks = 0; chunks <= 40; ++chunks)
    for (long delta : {-1L, 0L, 1L, 511L})
      if (long(chunks * 1024) + delta >= 0) sizes.push_back(size_t(long(chunks * 1024) + delta));
  for (size_t s : {65537u, 262144u + 3, 1048576u, 1048576u + 1024 * 9 + 5, 8388608u + 17})
    sizes.push_back(s);

  const std::vector<uint8_t> data = RandomInput(sizes.back(), 42);
  for (size_t size : sizes) {
    const Bytes input = Bytes(data).first(size);
    for (int mode = 0; mode < 3; ++mode) {
      INFO("size " << size << " mode " << mode);
      auto make = [&] {
        if (mode == 0) return Blake3Hasher::Plain();
        if (mode == 1) return Blake3Hasher::Keyed(key);
        return Blake3Hasher::DeriveKey("borgcheck blake3_test simd");
      };
      Blake3Hasher portable = make();
      portable.TEST_SetSimdEnabled(false);
      portable.Update(input);
      const std::string expected = HexOutput(portable, 80);

      Blake3Hasher simd = make();
      simd.Update(input);
      CHECK(HexOutput(simd, 80) == expected);

      // Split so that the big update starts in the middle of a chunk, and at a chunk boundary.
      for (size_t first : {size_t(1000), size_t(3 * 1024)}) {
        if (first > size) continue;
        Blake3Hasher split = make();
        split.Update(input.first(first));
        split.Update(input.subspan(first));
        CHECK(HexOutput(split, 80) == expected);
      }
    }
  }
}

}  // namespace
}  // namespace borgcheck::crypto
