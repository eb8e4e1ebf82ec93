// BLAKE3, written from the BLAKE3 specification (Aumasson, Neves, O'Connor, Wilcox-O'Hearn,
// "BLAKE3: one function, fast everywhere", 2020) because Debian 12 ships no C BLAKE3 library.
//
// borg repository version 4 uses it for chunk ids and MACs (spec borg2-format.md §B.3):
//   * key types 0x30/0x40/0x70: chunk id = keyed_hash(id_key, plaintext), 32 bytes
//     (Blake3Keyed below); 0x70's envelope tag = keyed_hash(tag_key, prefix || payload);
//   * key type 0x90 (none-blake3): plain hash, 32 bytes.
// borg hashes large inputs with several threads; BLAKE3's tree makes that give the same digest,
// so one sequential hasher per worker verifies them all.
//
// All three modes and extendable output are supported. On x86-64 CPUs with AVX2 the hasher
// compresses eight 1 KiB chunks at once (chosen at run time); the portable path gives the same
// bytes everywhere else.
//
// Thread contract: a Blake3Hasher is a per-worker value and requires external synchronisation
// (it is not safe for concurrent use); distinct hashers are independent. There is no global or
// static mutable state. Blake3Keyed is a pure function, safe for concurrent use. Spans and
// pointers passed in are only read during the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "checker/base/bytes.h"

namespace borgcheck::crypto {

inline constexpr size_t kBlake3KeyLen = 32;
inline constexpr size_t kBlake3OutLen = 32;  // the default digest length (borg's chunk id)

class Blake3Hasher {
 public:
  // The default hash mode.
  static Blake3Hasher Plain();
  // keyed_hash mode with a 32-byte key (borg: the id_key or tag_key).
  static Blake3Hasher Keyed(const uint8_t key[kBlake3KeyLen]);
  // derive_key mode: feed the key material with Update, read the derived key with Finalize.
  // `context` should be a hardcoded, globally unique, application-specific string.
  static Blake3Hasher DeriveKey(std::string_view context);

  // Absorbs more input. Any split of the input into Update calls gives the same digest.
  void Update(Bytes data);

  // Writes `len` bytes of output (any length; the first 32 are the default digest) to `out`.
  // Does not change the state: more Update calls may follow, and Finalize may be repeated.
  void Finalize(uint8_t* out, size_t len) const;

  // Forgets all input, keeping the mode and key, so that a worker can reuse one hasher.
  void Reset();

  // Test-only: turn the AVX2 path off (or back on, where the CPU has it) so tests can compare it
  // with the portable path. Has no effect on CPUs without AVX2.
  void TEST_SetSimdEnabled(bool enabled);
  bool TEST_SimdEnabled() const { return use_avx2_; }

 private:
  static constexpr int kMaxDepth = 54;  // 2^54 chunks of 1 KiB = 2^64 bytes

  Blake3Hasher(const uint32_t key_words[8], uint32_t flags);

  // Hashes whole 1 KiB chunks (the current chunk must be empty) and pushes their chaining values.
  void HashWholeChunks(const uint8_t* data, size_t num_chunks);
  void PushChunkCv(const uint32_t cv[8], uint64_t total_chunks);
  // Appends to the current chunk; `data` must fit in it.
  void ChunkUpdate(const uint8_t* data, size_t len);
  size_t ChunkLen() const { return size_t(blocks_compressed_) * 64 + block_len_; }

  // Const after construction.
  uint32_t key_[8];
  uint32_t flags_;  // KEYED_HASH, DERIVE_KEY_* or 0
  bool use_avx2_;

  // The current (last) chunk: its chaining value so far and its unfinished final block, which
  // is only compressed once more input shows it is not the chunk's last block.
  uint32_t chunk_cv_[8];
  uint64_t chunk_counter_;
  uint8_t block_[64];
  uint8_t block_len_;
  uint8_t blocks_compressed_;

  // Chaining values of completed subtrees, largest first; merged lazily so that the last chunk
  // stays available for the ROOT flag.
  uint32_t cv_stack_[kMaxDepth][8];
  uint8_t cv_stack_len_;
};

// keyed_hash(key, data) with the default 32-byte output: borg's BLAKE3 chunk id.
void Blake3Keyed(const uint8_t key[kBlake3KeyLen], Bytes data, uint8_t out[kBlake3OutLen]);

}  // namespace borgcheck::crypto
