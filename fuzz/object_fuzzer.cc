// Fuzz target: one stored object through the whole per-object pipeline, repo::Borg1Verifier:
// envelope (TYPE byte), MAC and AES-256-CTR (crypto::ObjectOpener), decompression
// (codecs::Decompressor::DecodeBorg1), id re-hash (crypto::IdHasher), for every key mode with
// the fixed test key (fuzz::FixedKey).
//
// Input: selector byte (mode = selector % 8, the TYPE value of the mode) | chunk id (32 bytes;
// all zeros = the manifest, whose id is not checked) | the stored object (TYPE byte, envelope,
// payload). The target wraps it in a PUT entry with a correct CRC, so the CRC stage always
// passes. In the fuzz build (BORGCHECK_FUZZING_UNSAFE_SKIP_AUTH) the MAC verdict is ignored so
// that mutated ciphertext reaches the decompressors; in the replay build (g++, normal CI) the
// MAC is checked, and the seeds (fuzz/make-corpus) carry valid MACs under the fixed key.
// Invariant:
//   - a failure is at the envelope, authentication (never in the fuzz build), decompression or
//     id-hash stage, with a message; never at the CRC stage;
//   - a success leaves at most 20971479 plaintext bytes, and for a non-manifest id an
//     independent IdHasher gives exactly that id;
//   - the verifier is reusable: after any input, a known-good object of the same mode (built
//     at start-up) still verifies, to the same plaintext. This is how a worker uses it.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "checker/crypto/object_crypto.h"
#include "checker/repo/borg1/borg1_verifier.h"
#include "codecs/decompressor.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using report::Stage;

namespace {

constexpr std::string_view kGoodPlaintext = "known-good object for the verifier reuse check";

struct ModeState {
  crypto::KeyMode mode;
  std::unique_ptr<repo::Borg1Verifier> verifier;
  std::unique_ptr<crypto::IdHasher> hasher;  // independent of the verifier's own
  std::string good_entry;
};

const crypto::KeyMaterial* KeyFor(crypto::KeyMode mode) {
  return crypto::NeedsKey(mode) ? &fuzz::FixedKey(mode) : nullptr;
}

std::array<ModeState, 8>& States() {
  static std::array<ModeState, 8> states = [] {
    std::array<ModeState, 8> s;
    for (uint8_t sel = 0; sel < 8; ++sel) {
      ModeState& m = s[sel];
      m.mode = fuzz::ModeFromSelector(sel);
      m.verifier = std::make_unique<repo::Borg1Verifier>(true, m.mode, KeyFor(m.mode));
      m.hasher = std::make_unique<crypto::IdHasher>(m.mode, KeyFor(m.mode));
      FUZZ_CHECK(m.hasher->status().ok());
      std::string payload("\x00\x00", 2);  // compression none
      payload += kGoodPlaintext;
      uint8_t id[32];
      m.hasher->Compute(AsBytes(kGoodPlaintext), id);
      m.good_entry = fuzz::MakePutEntry(id, AsBytes(fuzz::SealObject(m.mode, AsBytes(payload), 7)));
    }
    return s;
  }();
  return states;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 + 32) return 0;
  ModeState& m = States()[data[0] % 8];
  const uint8_t* id = data + 1;
  const Bytes object(data + 33, size - 33);
  const std::string entry = fuzz::MakePutEntry(id, object);

  const auto failure = m.verifier->VerifyAs(AsBytes(entry), id);
  if (failure) {
    FUZZ_CHECK(failure->stage == Stage::kEnvelope || failure->stage == Stage::kAuthentication ||
               failure->stage == Stage::kDecompression || failure->stage == Stage::kIdHash);
    FUZZ_CHECK(!failure->message.empty());
#ifdef BORGCHECK_FUZZING_UNSAFE_SKIP_AUTH
    FUZZ_CHECK(failure->stage != Stage::kAuthentication);
#endif
  } else {
    const Bytes plain = m.verifier->plaintext();
    FUZZ_CHECK(plain.size() <= codecs::kBorgMaxDataSize);
    const bool manifest = std::all_of(id, id + 32, [](uint8_t b) { return b == 0; });
    if (!manifest) {
      uint8_t again[32];
      m.hasher->Compute(plain, again);
      FUZZ_CHECK(std::memcmp(again, id, 32) == 0);
    }
  }

  const uint8_t* good_id = reinterpret_cast<const uint8_t*>(m.good_entry.data()) + 9;
  FUZZ_CHECK(!m.verifier->VerifyAs(AsBytes(m.good_entry), good_id).has_value());
  const Bytes plain = m.verifier->plaintext();
  FUZZ_CHECK(std::string_view(reinterpret_cast<const char*>(plain.data()), plain.size()) ==
             kGoodPlaintext);
  return 0;
}
