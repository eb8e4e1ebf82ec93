// Fuzz target: one RepoObj blob of repository version 4 (borg 2 master) through
// repo::BorgstoreVerifier as a worker uses it: structure (repo::CheckBlobStructure), the
// tagged MAC / checksum envelopes (crypto::TaggedEnvelope, via crypto::MasterObjectCrypto),
// the msgpack meta map (repo::ParseObjMeta), csize / psize, decompression by ctype, and the
// id hash, with a fixed test key (crypt_key[i] = 0x10 + i, 64 bytes; id_key[i] = 0xc0 + i,
// 32 bytes).
//
// Input: selector byte | chunk id (32 bytes; all zeros = the manifest) | rest.
//   selector & 3: key type 0x80 none-sha256, 0x90 none-blake3, 0x60 authenticated-sha256,
//                 0x70 authenticated-blake3 (the tagged types; the AEAD types 0x10-0x40 put a
//                 cipher in front of the same meta/data code and are not fuzzed here);
//   selector & 4: object version 1 (no header AAD) instead of 2;
//   selector & 0x80: raw: `rest` is a whole blob, verified as it is (its MACs only verify if the
//                 input carries them);
//   otherwise sealed: `rest` = meta_len u16 LE | meta plaintext | data plaintext, and the target
//                 builds the blob around them (header, both envelopes sealed with
//                 TaggedEnvelope::Seal under the header AAD), so mutations reach the meta map
//                 and the codecs.
// Invariant:
//   - every failure has a message, and a stage among truncated, envelope, authentication,
//     decompression, id hash;
//   - a sealed blob never fails the structure or the authentication stage;
//   - a success leaves at most 20971479 plaintext bytes, equal to meta.size when present; a
//     non-manifest id is the independent id hash of the plaintext; a manifest has meta type "M";
//   - the verifier is reusable: after any input, a known-good blob of the same type (built at
//     start-up) still verifies, to the same plaintext.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "checker/crypto/borg2master_crypto.h"
#include "checker/crypto/tagged_envelope.h"
#include "checker/repo/borgstore/borgstore_layout.h"
#include "checker/repo/borgstore/borgstore_verifier.h"
#include "codecs/decompressor.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using report::Stage;

namespace {

constexpr uint8_t kTypes[4] = {0x80, 0x90, 0x60, 0x70};
constexpr std::string_view kGoodPlaintext = "known-good borg 2 master object for the reuse check";

std::string Pattern(uint8_t first, size_t n) {
  std::string b(n, '\0');
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<char>(first + i);
  return b;
}

struct TypeState {
  const crypto::MasterKeyType* type = nullptr;
  std::string crypt_key, id_key;
  std::unique_ptr<repo::BorgstoreVerifier> verifier;
  std::unique_ptr<crypto::MasterObjectCrypto> hasher;  // independent id hashes
  std::unique_ptr<crypto::TaggedEnvelope> sealer;
  std::string good_blob;
  repo::ChunkId good_id{};
};

// The blob of `meta` and `data` for chunk `id`: header, then both envelopes sealed under the
// header AAD (object version 2) or none (version 1).
std::string BuildBlob(TypeState& t, uint8_t version, const uint8_t id[32], Bytes meta, Bytes data) {
  std::string blob(repo::kObjMagic);
  blob += static_cast<char>(version);
  blob.append(reinterpret_cast<const char*>(id), 32);
  uint8_t sizes[8];
  StoreLE32(sizes, static_cast<uint32_t>(crypto::kTaggedHeaderSize + meta.size()));
  StoreLE32(sizes + 4, static_cast<uint32_t>(crypto::kTaggedHeaderSize + data.size()));
  blob.append(reinterpret_cast<const char*>(sizes), 8);
  for (const auto& [slot, part] : {std::pair{repo::kSlotMeta, meta}, std::pair{repo::kSlotData, data}}) {
    uint8_t aad[repo::kObjHeaderAadSize + 1];
    const size_t n = repo::BuildObjectAad(AsBytes(blob).first(repo::kObjHeaderSize), slot, aad);
    const std::vector<uint8_t> env = t.sealer->Seal(part, Bytes(aad, n), id);
    blob.append(reinterpret_cast<const char*>(env.data()), env.size());
  }
  return blob;
}

std::array<TypeState, 4>& States() {
  static std::array<TypeState, 4> states = [] {
    std::array<TypeState, 4> s;
    for (size_t i = 0; i < 4; ++i) {
      TypeState& t = s[i];
      t.type = crypto::MasterKeyTypeFromByte(kTypes[i]);
      FUZZ_CHECK(t.type != nullptr && t.type->envelope == crypto::MasterEnvelope::kTagged);
      if (t.type->needs_key) {
        t.crypt_key = Pattern(0x10, 64);
        t.id_key = Pattern(0xc0, 32);
      }
      t.verifier = std::make_unique<repo::BorgstoreVerifier>(true, t.type, AsBytes(t.crypt_key),
                                                               AsBytes(t.id_key));
      FUZZ_CHECK(t.verifier->status().ok());
      t.hasher = std::make_unique<crypto::MasterObjectCrypto>(*t.type, AsBytes(t.crypt_key),
                                                             AsBytes(t.id_key));
      FUZZ_CHECK(t.hasher->status().ok());
      t.sealer = std::make_unique<crypto::TaggedEnvelope>(*crypto::TaggedMacFromType(kTypes[i]),
                                                         AsBytes(t.crypt_key));
      FUZZ_CHECK(t.sealer->status().ok());
      // meta {type "C", ctype 0, clevel 255, csize n, size n}
      const char n = static_cast<char>(kGoodPlaintext.size());
      std::string meta("\x85\xa4type\xa1" "C\xa5" "ctype", 14);
      meta += '\0';
      meta += std::string("\xa6" "clevel" "\xcc\xff" "\xa5" "csize", 15);
      meta += n;
      meta += std::string("\xa4" "size", 5);
      meta += n;
      t.hasher->IdHash(AsBytes(kGoodPlaintext), t.good_id.data());
      t.good_blob = BuildBlob(t, repo::kObjVersionMaster, t.good_id.data(), AsBytes(meta),
                              AsBytes(kGoodPlaintext));
    }
    return s;
  }();
  return states;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 + 32) return 0;
  const uint8_t selector = data[0];
  TypeState& t = States()[selector & 3];
  repo::ChunkId id;
  std::memcpy(id.data(), data + 1, 32);
  const Bytes rest(data + 33, size - 33);
  const bool raw = (selector & 0x80) != 0;

  std::string built;
  Bytes blob = rest;
  if (!raw) {
    if (rest.size() < 2) return 0;
    const size_t meta_len = std::min<size_t>(rest[0] | (size_t(rest[1]) << 8), rest.size() - 2);
    const uint8_t version = (selector & 4) ? repo::kObjVersionB22 : repo::kObjVersionMaster;
    built = BuildBlob(t, version, id.data(), rest.subspan(2, meta_len), rest.subspan(2 + meta_len));
    blob = AsBytes(built);
  }

  const auto failure = t.verifier->VerifyAs(blob, id);
  if (failure) {
    FUZZ_CHECK(!failure->message.empty());
    FUZZ_CHECK(failure->stage == Stage::kTruncated || failure->stage == Stage::kEnvelope ||
               failure->stage == Stage::kAuthentication || failure->stage == Stage::kDecompression ||
               failure->stage == Stage::kIdHash);
    if (!raw) FUZZ_CHECK(failure->stage != Stage::kTruncated && failure->stage != Stage::kAuthentication);
  } else {
    const Bytes plain = t.verifier->plaintext();
    FUZZ_CHECK(plain.size() <= codecs::kBorgMaxDataSize);
    if (t.verifier->meta().size) FUZZ_CHECK(plain.size() == *t.verifier->meta().size);
    const bool manifest = std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
    if (manifest) {
      FUZZ_CHECK(t.verifier->meta().type == "M");
    } else {
      uint8_t again[32];
      t.hasher->IdHash(plain, again);
      FUZZ_CHECK(std::memcmp(again, id.data(), 32) == 0);
    }
  }

  FUZZ_CHECK(!t.verifier->VerifyAs(AsBytes(t.good_blob), t.good_id).has_value());
  const Bytes plain = t.verifier->plaintext();
  FUZZ_CHECK(std::string_view(reinterpret_cast<const char*>(plain.data()), plain.size()) ==
             kGoodPlaintext);
  return 0;
}
