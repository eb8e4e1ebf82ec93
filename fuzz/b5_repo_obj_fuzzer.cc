// Fuzz target: the RepoObj layer of repository version 2 (borg 2.0.0b5) behind the entry
// checksums, through repo::Borg2b5Verifier as a worker uses it: split meta/data
// (repo::SplitRepoObjV2), open the plain envelopes, msgpack meta (repo::ParseObjMeta), csize /
// psize, decode by ctype (repo::DecodeObjData), id hash (crypto::Borg2IdHasher).
//
// Input: selector byte | chunk id (32 bytes; all zeros = the manifest, whose id is not checked)
// | PUT2 payload (meta_len u16 LE | meta envelope | data envelope). The target wraps it in a
// PUT2 entry with a correct header CRC and xxh64, so the checksum stage always passes.
// selector % 3 picks the key type: 0x02 none (SHA-256 ids), 0x07 authenticated (HMAC-SHA256
// ids) or 0x06 authenticated-blake2 (BLAKE2b ids), with a fixed test key (crypt_key[i] =
// 0x10 + i, id_key[i] = 0xc0 + i; 64/32 bytes, 160/128 for BLAKE2b). These are the key types
// whose envelopes are plain (type | payload), so mutations reach the meta map and the codecs;
// the AEAD types (0x10-0x41) put an authenticated cipher in front of the same code, whose
// mutations would all end at the tag, and are not fuzzed here.
// Invariant:
//   - a failure is at the envelope, decompression or id-hash stage, with a message; never at
//     the entry checksum stage or the authentication stage (plain envelopes carry no tag);
//   - the verifier agrees with the layer functions called directly: the split fails
//     only when the verifier fails at the envelope stage, and a success has a meta map that
//     ParseObjMeta accepts;
//   - a success leaves at most 20971479 plaintext bytes, equal to meta.size when present, and
//     for a non-manifest id an independent Borg2IdHasher gives exactly that id;
//   - the verifier is reusable: after any input, a known-good object of the same type (built
//     at start-up) still verifies, to the same plaintext.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "checker/crypto/borg2_key.h"
#include "checker/repo/borg2b5/borg2b5_segments.h"
#include "checker/repo/borg2/borg2_repo_obj.h"
#include "checker/repo/segment_log/segment_entry.h"
#include "checker/repo/borg2b5/borg2b5_verifier.h"
#include "codecs/decompressor.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using report::Stage;

namespace {

constexpr uint8_t kTypes[3] = {0x02, 0x07, 0x06};
constexpr std::string_view kGoodPlaintext = "known-good borg 2 object for the verifier reuse check";

SecureBytes Pattern(uint8_t first, size_t n) {
  SecureBytes b(n);
  for (size_t i = 0; i < n; ++i) b.data()[i] = static_cast<uint8_t>(first + i);
  return b;
}

// A whole PUT2 entry around `payload` with a correct xxh64 and header CRC.
std::string MakePut2Entry(const uint8_t id[32], Bytes payload) {
  std::string e(repo::kB2Put2HeaderSize, '\0');
  e.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  uint8_t* p = reinterpret_cast<uint8_t*>(e.data());
  StoreLE32(p + 4, static_cast<uint32_t>(e.size()));
  p[8] = repo::kB2TagPut2;
  std::memcpy(p + 9, id, 32);
  const uint64_t h = repo::Put2EntryHash(AsBytes(e));
  for (int i = 0; i < 8; ++i) p[41 + i] = static_cast<uint8_t>(h >> (56 - 8 * i));
  StoreLE32(p, repo::Crc32(Bytes(p + 4, repo::kB2Put2HeaderSize - 4)));
  return e;
}

struct TypeState {
  const crypto::Borg2KeyType* type = nullptr;
  crypto::Borg2KeyMaterial key;
  std::unique_ptr<repo::Borg2b5Verifier> verifier;
  std::unique_ptr<crypto::Borg2IdHasher> hasher;  // independent of the verifier's own
  std::string good_entry;
};

std::array<TypeState, 3>& States() {
  static std::array<TypeState, 3> states = [] {
    std::array<TypeState, 3> s;
    for (size_t i = 0; i < 3; ++i) {
      TypeState& t = s[i];
      t.type = crypto::Borg2b5KeyTypeFromByte(kTypes[i]);
      FUZZ_CHECK(t.type != nullptr);
      const bool blake2 = t.type->id_hash == crypto::Borg2IdHash::kBlake2b256;
      t.key.crypt_key = Pattern(0x10, blake2 ? 160 : 64);
      t.key.id_key = Pattern(0xc0, blake2 ? 128 : 32);
      t.key.repository_id.assign(32, '\x80');
      FUZZ_CHECK(crypto::ValidateBorg2KeyMaterial(*t.type, &t.key).ok());
      t.verifier = std::make_unique<repo::Borg2b5Verifier>(true, t.type, &t.key);
      FUZZ_CHECK(t.verifier->status().ok());
      t.hasher = std::make_unique<crypto::Borg2IdHasher>(t.type->id_hash, t.key.id_key.view());
      FUZZ_CHECK(t.hasher->status().ok());
      // meta {ctype 0, clevel 255, csize n, size n} (msgpack, str keys), data: the plaintext.
      const uint8_t n = static_cast<uint8_t>(kGoodPlaintext.size());
      std::string meta("\x84\xa5" "ctype", 7);
      meta += '\0';
      meta += std::string("\xa6" "clevel" "\xcc\xff" "\xa5" "csize", 15);
      meta += static_cast<char>(n);
      meta += std::string("\xa4" "size", 5);
      meta += static_cast<char>(n);
      std::string payload(2, '\0');
      const uint16_t meta_len = static_cast<uint16_t>(1 + meta.size());
      payload[0] = static_cast<char>(meta_len & 0xff);
      payload[1] = static_cast<char>(meta_len >> 8);
      payload += static_cast<char>(kTypes[i]);
      payload += meta;
      payload += static_cast<char>(kTypes[i]);
      payload += kGoodPlaintext;
      uint8_t id[32];
      t.hasher->Compute(AsBytes(kGoodPlaintext), id);
      t.good_entry = MakePut2Entry(id, AsBytes(payload));
    }
    return s;
  }();
  return states;
}

engine::ObjectRef Planned(const uint8_t id[32], size_t size) {
  engine::ObjectRef r;
  std::memcpy(r.id.data(), id, 32);
  r.size = static_cast<uint32_t>(size);
  r.variant = repo::kB2TagPut2;
  r.role = engine::ObjectRole::kLive;
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 + 32) return 0;
  TypeState& t = States()[data[0] % 3];
  const uint8_t* id = data + 1;
  const Bytes payload(data + 33, size - 33);
  const std::string entry = MakePut2Entry(id, payload);

  repo::RepoObjEnvelopes env;
  std::string split_why;
  const bool split = repo::SplitRepoObjV2(payload, env, &split_why);
  if (!split) FUZZ_CHECK(!split_why.empty());

  const auto failure = t.verifier->Verify(AsBytes(entry), Planned(id, entry.size()));
  if (failure) {
    FUZZ_CHECK(failure->stage == Stage::kEnvelope || failure->stage == Stage::kDecompression ||
               failure->stage == Stage::kIdHash);
    FUZZ_CHECK(!failure->message.empty());
    if (!split) FUZZ_CHECK(failure->stage == Stage::kEnvelope);
  } else {
    FUZZ_CHECK(split);
    // Plain envelopes: the meta map is the meta envelope after its type byte.
    FUZZ_CHECK(!env.meta.empty() && !env.data.empty());
    repo::ObjMeta meta;
    std::string why;
    FUZZ_CHECK(repo::ParseObjMeta(env.meta.subspan(1), meta, &why));
    const Bytes plain = t.verifier->plaintext();
    FUZZ_CHECK(plain.size() <= codecs::kBorgMaxDataSize);
    if (meta.size) FUZZ_CHECK(plain.size() == *meta.size);
    const bool manifest = std::all_of(id, id + 32, [](uint8_t b) { return b == 0; });
    if (!manifest) {
      uint8_t again[32];
      t.hasher->Compute(plain, again);
      FUZZ_CHECK(std::memcmp(again, id, 32) == 0);
    }
  }

  const uint8_t* good_id = reinterpret_cast<const uint8_t*>(t.good_entry.data()) + 9;
  FUZZ_CHECK(!t.verifier->Verify(AsBytes(t.good_entry), Planned(good_id, t.good_entry.size()))
                  .has_value());
  const Bytes plain = t.verifier->plaintext();
  FUZZ_CHECK(std::string_view(reinterpret_cast<const char*>(plain.data()), plain.size()) ==
             kGoodPlaintext);
  return 0;
}
