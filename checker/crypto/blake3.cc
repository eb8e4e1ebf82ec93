// BLAKE3 from the specification. Outline:
//   1. The compression function: a 16-word state (chaining value, four IV words, 64-bit
//      counter, block length, flags) run through 7 rounds of the G mixing function, with the
//      message words permuted between rounds (here as a precomputed per-round schedule).
//   2. Chunks: 1 KiB of input, 16 blocks of 64 bytes chained through one chaining value; the
//      first block has CHUNK_START, the last CHUNK_END, the counter is the chunk index.
//   3. The tree: chunk chaining values are merged pairwise by PARENT compressions. A stack
//      holds the roots of completed subtrees; after chunk number n (1-based) is pushed, one
//      merge happens per trailing zero bit of n. Merging is deferred until more input proves
//      a chunk is not the last one, because the final node is compressed with ROOT.
//   4. Output: the root node's compression, repeated with counter 0, 1, 2, ... for every
//      further 64 bytes of extendable output.
//   5. The AVX2 path (x86-64 only, chosen at run time): eight whole chunks are compressed in
//      parallel, one 32-bit lane per chunk, the message transposed into that layout. It only
//      replaces step 2 for whole chunks that are known not to be the last one; the tree and
//      output steps are shared, so both paths produce identical bytes.
#include "checker/crypto/blake3.h"

#include <algorithm>
#include <array>
#include <cstring>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define BORGCHECK_BLAKE3_AVX2 1
#include <immintrin.h>
#else
#define BORGCHECK_BLAKE3_AVX2 0
#endif

namespace borgcheck::crypto {
namespace {

constexpr size_t kBlockLen = 64;
constexpr size_t kChunkLen = 1024;
constexpr int kRounds = 7;

// Domain flags (spec §2.1, Table 3).
constexpr uint32_t kChunkStart = 1u << 0;
constexpr uint32_t kChunkEnd = 1u << 1;
constexpr uint32_t kParent = 1u << 2;
constexpr uint32_t kRoot = 1u << 3;
constexpr uint32_t kKeyedHash = 1u << 4;
constexpr uint32_t kDeriveKeyContext = 1u << 5;
constexpr uint32_t kDeriveKeyMaterial = 1u << 6;

// The IV is SHA-256's (spec §2.2).
constexpr uint32_t kIv[8] = {0x6A09E667u, 0xBB67AE85u, 0x3C6EF372u, 0xA54FF53Au,
                             0x510E527Fu, 0x9B05688Cu, 0x1F83D9ABu, 0x5BE0CD19u};

// Message word permutation applied after every round (spec §2.2, Table 2).
constexpr uint8_t kPermutation[16] = {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8};

// kSchedule[r][i]: which original message word is word i in round r, i.e. the permutation
// applied r times. Indexing the original block this way replaces physically permuting it.
constexpr auto kSchedule = [] {
  std::array<std::array<uint8_t, 16>, kRounds> s{};
  for (int i = 0; i < 16; ++i) s[0][i] = uint8_t(i);
  for (int r = 1; r < kRounds; ++r)
    for (int i = 0; i < 16; ++i) s[r][i] = s[r - 1][kPermutation[i]];
  return s;
}();

inline uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// The quarter-round G (spec §2.2).
inline void G(uint32_t* v, int a, int b, int c, int d, uint32_t mx, uint32_t my) {
  v[a] = v[a] + v[b] + mx;
  v[d] = Rotr(v[d] ^ v[a], 16);
  v[c] = v[c] + v[d];
  v[b] = Rotr(v[b] ^ v[c], 12);
  v[a] = v[a] + v[b] + my;
  v[d] = Rotr(v[d] ^ v[a], 8);
  v[c] = v[c] + v[d];
  v[b] = Rotr(v[b] ^ v[c], 7);
}

// Runs the 7 rounds on the state built from (cv, block, counter, block_len, flags) and leaves
// the un-finalised 16-word state in v.
inline void CompressRounds(const uint32_t cv[8], const uint32_t m[16], uint64_t counter,
                           uint32_t block_len, uint32_t flags, uint32_t v[16]) {
  for (int i = 0; i < 8; ++i) v[i] = cv[i];
  for (int i = 0; i < 4; ++i) v[8 + i] = kIv[i];
  v[12] = uint32_t(counter);
  v[13] = uint32_t(counter >> 32);
  v[14] = block_len;
  v[15] = flags;
  for (int r = 0; r < kRounds; ++r) {
    const uint8_t* s = kSchedule[r].data();
    // Columns, then diagonals.
    G(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
    G(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
    G(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
    G(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
    G(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
    G(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
    G(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
    G(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
  }
}

inline void LoadBlockWords(const uint8_t* block, uint32_t m[16]) {
  for (int i = 0; i < 16; ++i) m[i] = LoadLE32(block + 4 * i);
}

// Compresses one block and replaces cv with the new chaining value (the first 8 output words).
inline void CompressInPlace(uint32_t cv[8], const uint8_t block[kBlockLen], uint64_t counter,
                            uint32_t block_len, uint32_t flags) {
  uint32_t m[16], v[16];
  LoadBlockWords(block, m);
  CompressRounds(cv, m, counter, block_len, flags, v);
  for (int i = 0; i < 8; ++i) cv[i] = v[i] ^ v[i + 8];
}

// A node whose compression has not been run yet, so that it can still become the root (with
// ROOT and any output counter) or be reduced to a chaining value for its parent.
struct Node {
  uint32_t cv[8];
  uint32_t block[16];
  uint64_t counter;
  uint32_t block_len;
  uint32_t flags;

  void ChainingValue(uint32_t out[8]) const {
    uint32_t v[16];
    CompressRounds(cv, block, counter, block_len, flags, v);
    for (int i = 0; i < 8; ++i) out[i] = v[i] ^ v[i + 8];
  }

  // Extendable output: block t of the output is the root compression with counter t.
  void RootBytes(uint8_t* out, size_t len) const {
    uint64_t t = 0;
    while (len > 0) {
      uint32_t v[16];
      CompressRounds(cv, block, t, block_len, flags | kRoot, v);
      uint8_t bytes[64];
      for (int i = 0; i < 8; ++i) {
        StoreLE32(bytes + 4 * i, v[i] ^ v[i + 8]);
        StoreLE32(bytes + 32 + 4 * i, v[i + 8] ^ cv[i]);
      }
      const size_t take = std::min(len, sizeof bytes);
      std::memcpy(out, bytes, take);
      out += take;
      len -= take;
      ++t;
    }
  }
};

Node ParentNode(const uint32_t left[8], const uint32_t right[8], const uint32_t key[8],
                uint32_t flags) {
  Node n;
  std::memcpy(n.cv, key, sizeof n.cv);
  std::memcpy(n.block, left, 8 * sizeof(uint32_t));
  std::memcpy(n.block + 8, right, 8 * sizeof(uint32_t));
  n.counter = 0;  // parents always use counter 0
  n.block_len = kBlockLen;
  n.flags = flags | kParent;
  return n;
}

void ParentCv(const uint32_t left[8], const uint32_t right[8], const uint32_t key[8],
              uint32_t flags, uint32_t out[8]) {
  ParentNode(left, right, key, flags).ChainingValue(out);
}

// Chaining value of one whole 1 KiB chunk, which is known not to be the root.
void HashChunkPortable(const uint8_t* chunk, uint64_t counter, const uint32_t key[8],
                       uint32_t flags, uint32_t out[8]) {
  std::memcpy(out, key, 8 * sizeof(uint32_t));
  for (size_t b = 0; b < kChunkLen / kBlockLen; ++b) {
    uint32_t f = flags;
    if (b == 0) f |= kChunkStart;
    if (b == kChunkLen / kBlockLen - 1) f |= kChunkEnd;
    CompressInPlace(out, chunk + b * kBlockLen, counter, kBlockLen, f);
  }
}

#if BORGCHECK_BLAKE3_AVX2

// Eight chunks in parallel: vector i holds state word i of all eight chunks (lane j = chunk
// j). The rotations by 16 and 8 are byte shuffles; 12 and 7 are shift pairs.
#define BORGCHECK_AVX2 __attribute__((target("avx2")))

BORGCHECK_AVX2 inline __m256i Add(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
BORGCHECK_AVX2 inline __m256i Xor(__m256i a, __m256i b) { return _mm256_xor_si256(a, b); }
BORGCHECK_AVX2 inline __m256i Rot16(__m256i x) {
  const __m256i k = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,  //
                                     2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  return _mm256_shuffle_epi8(x, k);
}
BORGCHECK_AVX2 inline __m256i Rot8(__m256i x) {
  const __m256i k = _mm256_setr_epi8(1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12,  //
                                     1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12);
  return _mm256_shuffle_epi8(x, k);
}
BORGCHECK_AVX2 inline __m256i Rot12(__m256i x) {
  return _mm256_or_si256(_mm256_srli_epi32(x, 12), _mm256_slli_epi32(x, 20));
}
BORGCHECK_AVX2 inline __m256i Rot7(__m256i x) {
  return _mm256_or_si256(_mm256_srli_epi32(x, 7), _mm256_slli_epi32(x, 25));
}

BORGCHECK_AVX2 inline void G8(__m256i* v, int a, int b, int c, int d, __m256i mx, __m256i my) {
  v[a] = Add(Add(v[a], v[b]), mx);
  v[d] = Rot16(Xor(v[d], v[a]));
  v[c] = Add(v[c], v[d]);
  v[b] = Rot12(Xor(v[b], v[c]));
  v[a] = Add(Add(v[a], v[b]), my);
  v[d] = Rot8(Xor(v[d], v[a]));
  v[c] = Add(v[c], v[d]);
  v[b] = Rot7(Xor(v[b], v[c]));
}

// In-place transpose of an 8x8 matrix of 32-bit words held as 8 row vectors.
BORGCHECK_AVX2 inline void Transpose8x8(__m256i r[8]) {
  // Interleave pairs of rows as 32-bit, then 64-bit elements within each 128-bit half...
  const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]);
  const __m256i t1 = _mm256_unpackhi_epi32(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(r[2], r[3]);
  const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]);
  const __m256i t5 = _mm256_unpackhi_epi32(r[4], r[5]);
  const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]);
  const __m256i t7 = _mm256_unpackhi_epi32(r[6], r[7]);
  // ...so that u0 holds column 0 (low half) and column 4 (high half) of rows 0-3, etc.
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2);
  const __m256i u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3);
  const __m256i u3 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi64(t4, t6);
  const __m256i u5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi64(t5, t7);
  const __m256i u7 = _mm256_unpackhi_epi64(t5, t7);
  // Then join the halves of rows 0-3 and rows 4-7.
  r[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
  r[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
  r[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
  r[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
  r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
  r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
  r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
  r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

// Chaining values of eight whole chunks; chunk j starts at chunks[j] and has counter
// counter + j. Unused lanes may repeat a pointer; their results are simply ignored.
BORGCHECK_AVX2 void HashEightChunksAvx2(const uint8_t* const chunks[8], uint64_t counter,
                                        const uint32_t key[8], uint32_t flags,
                                        uint32_t out[8][8]) {
  alignas(32) uint32_t lo[8], hi[8];
  for (int j = 0; j < 8; ++j) {
    lo[j] = uint32_t(counter + j);
    hi[j] = uint32_t((counter + j) >> 32);
  }
  const __m256i counter_lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo));
  const __m256i counter_hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi));

  __m256i h[8];
  for (int i = 0; i < 8; ++i) h[i] = _mm256_set1_epi32(int(key[i]));

  for (size_t b = 0; b < kChunkLen / kBlockLen; ++b) {
    // Message words: load 32 bytes of each chunk as rows and transpose into word vectors.
    __m256i m[16];
    for (int half = 0; half < 2; ++half) {
      __m256i* rows = m + 8 * half;
      for (int j = 0; j < 8; ++j)
        rows[j] = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(chunks[j] + b * kBlockLen + 32 * half));
      Transpose8x8(rows);
    }
    uint32_t f = flags;
    if (b == 0) f |= kChunkStart;
    if (b == kChunkLen / kBlockLen - 1) f |= kChunkEnd;

    __m256i v[16];
    for (int i = 0; i < 8; ++i) v[i] = h[i];
    for (int i = 0; i < 4; ++i) v[8 + i] = _mm256_set1_epi32(int(kIv[i]));
    v[12] = counter_lo;
    v[13] = counter_hi;
    v[14] = _mm256_set1_epi32(int(kBlockLen));
    v[15] = _mm256_set1_epi32(int(f));
    for (int r = 0; r < kRounds; ++r) {
      const uint8_t* s = kSchedule[r].data();
      G8(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
      G8(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
      G8(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
      G8(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
      G8(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
      G8(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
      G8(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
      G8(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; ++i) h[i] = Xor(v[i], v[i + 8]);
  }

  // h[i] lane j = word i of chunk j; transpose so row j is chunk j's chaining value.
  Transpose8x8(h);
  for (int j = 0; j < 8; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[j]), h[j]);
}

#undef BORGCHECK_AVX2

bool CpuHasAvx2() { return __builtin_cpu_supports("avx2"); }

#else

bool CpuHasAvx2() { return false; }

#endif  // BORGCHECK_BLAKE3_AVX2

}  // namespace

Blake3Hasher::Blake3Hasher(const uint32_t key_words[8], uint32_t flags)
    : flags_(flags), use_avx2_(CpuHasAvx2()) {
  std::memcpy(key_, key_words, sizeof key_);
  Reset();
}

Blake3Hasher Blake3Hasher::Plain() { return Blake3Hasher(kIv, 0); }

Blake3Hasher Blake3Hasher::Keyed(const uint8_t key[kBlake3KeyLen]) {
  uint32_t words[8];
  for (int i = 0; i < 8; ++i) words[i] = LoadLE32(key + 4 * i);
  return Blake3Hasher(words, kKeyedHash);
}

Blake3Hasher Blake3Hasher::DeriveKey(std::string_view context) {
  // The context string is hashed first, in its own mode; its 32-byte digest keys the hashing
  // of the key material.
  Blake3Hasher context_hasher(kIv, kDeriveKeyContext);
  context_hasher.Update(AsBytes(context));
  uint8_t context_key[kBlake3KeyLen];
  context_hasher.Finalize(context_key, sizeof context_key);
  uint32_t words[8];
  for (int i = 0; i < 8; ++i) words[i] = LoadLE32(context_key + 4 * i);
  return Blake3Hasher(words, kDeriveKeyMaterial);
}

void Blake3Hasher::Reset() {
  std::memcpy(chunk_cv_, key_, sizeof chunk_cv_);
  chunk_counter_ = 0;
  std::memset(block_, 0, sizeof block_);
  block_len_ = 0;
  blocks_compressed_ = 0;
  cv_stack_len_ = 0;
}

void Blake3Hasher::TEST_SetSimdEnabled(bool enabled) { use_avx2_ = enabled && CpuHasAvx2(); }

void Blake3Hasher::PushChunkCv(const uint32_t cv[8], uint64_t total_chunks) {
  // Each trailing zero bit of the chunk count completes one more subtree: merge it with the
  // subtree of the same size below it on the stack.
  uint32_t merged[8];
  std::memcpy(merged, cv, sizeof merged);
  while ((total_chunks & 1) == 0) {
    --cv_stack_len_;
    ParentCv(cv_stack_[cv_stack_len_], merged, key_, flags_, merged);
    total_chunks >>= 1;
  }
  std::memcpy(cv_stack_[cv_stack_len_], merged, sizeof merged);
  ++cv_stack_len_;
}

void Blake3Hasher::ChunkUpdate(const uint8_t* data, size_t len) {
  while (len > 0) {
    // A full buffered block with more input behind it is not the chunk's last block.
    if (block_len_ == kBlockLen) {
      CompressInPlace(chunk_cv_, block_, chunk_counter_, kBlockLen,
                      flags_ | (blocks_compressed_ == 0 ? kChunkStart : 0));
      ++blocks_compressed_;
      block_len_ = 0;
    }
    // Whole blocks that are followed by more input skip the buffer.
    while (block_len_ == 0 && len > kBlockLen) {
      CompressInPlace(chunk_cv_, data, chunk_counter_, kBlockLen,
                      flags_ | (blocks_compressed_ == 0 ? kChunkStart : 0));
      ++blocks_compressed_;
      data += kBlockLen;
      len -= kBlockLen;
    }
    const size_t take = std::min(len, kBlockLen - block_len_);
    std::memcpy(block_ + block_len_, data, take);
    block_len_ = uint8_t(block_len_ + take);
    data += take;
    len -= take;
  }
}

void Blake3Hasher::HashWholeChunks(const uint8_t* data, size_t num_chunks) {
  uint32_t cv[8];
#if BORGCHECK_BLAKE3_AVX2
  // Two or more chunks already pay for the 8-lane kernel (one lane costs about as much as a
  // portable chunk); spare lanes repeat the first chunk and are dropped.
  while (use_avx2_ && num_chunks >= 2) {
    const size_t n = std::min<size_t>(num_chunks, 8);
    const uint8_t* lanes[8];
    for (size_t j = 0; j < 8; ++j) lanes[j] = data + (j < n ? j : 0) * kChunkLen;
    uint32_t cvs[8][8];
    HashEightChunksAvx2(lanes, chunk_counter_, key_, flags_, cvs);
    for (size_t j = 0; j < n; ++j) {
      ++chunk_counter_;
      PushChunkCv(cvs[j], chunk_counter_);
    }
    data += n * kChunkLen;
    num_chunks -= n;
  }
#endif
  for (; num_chunks > 0; --num_chunks, data += kChunkLen) {
    HashChunkPortable(data, chunk_counter_, key_, flags_, cv);
    ++chunk_counter_;
    PushChunkCv(cv, chunk_counter_);
  }
  std::memcpy(chunk_cv_, key_, sizeof chunk_cv_);
}

void Blake3Hasher::Update(Bytes data) {
  const uint8_t* p = data.data();
  size_t len = data.size();
  while (len > 0) {
    // A full current chunk with more input behind it is not the last chunk: finish it.
    if (ChunkLen() == kChunkLen) {
      CompressInPlace(chunk_cv_, block_, chunk_counter_, block_len_,
                      flags_ | kChunkEnd | (blocks_compressed_ == 0 ? kChunkStart : 0));
      ++chunk_counter_;
      PushChunkCv(chunk_cv_, chunk_counter_);
      std::memcpy(chunk_cv_, key_, sizeof chunk_cv_);
      block_len_ = 0;
      blocks_compressed_ = 0;
    }
    // At a chunk boundary, hash whole chunks straight from the input, always leaving at least
    // one byte so that the last chunk goes through the buffered path.
    if (ChunkLen() == 0 && len > kChunkLen) {
      const size_t n = (len - 1) / kChunkLen;
      HashWholeChunks(p, n);
      p += n * kChunkLen;
      len -= n * kChunkLen;
    }
    const size_t take = std::min(len, kChunkLen - ChunkLen());
    ChunkUpdate(p, take);
    p += take;
    len -= take;
  }
}

void Blake3Hasher::Finalize(uint8_t* out, size_t len) const {
  // The current chunk's final block, then one parent per stack entry, from the top down.
  Node node;
  std::memcpy(node.cv, chunk_cv_, sizeof node.cv);
  uint8_t last_block[kBlockLen] = {};
  std::memcpy(last_block, block_, block_len_);
  LoadBlockWords(last_block, node.block);
  node.counter = chunk_counter_;
  node.block_len = block_len_;
  node.flags = flags_ | kChunkEnd | (blocks_compressed_ == 0 ? kChunkStart : 0);
  for (int i = cv_stack_len_ - 1; i >= 0; --i) {
    uint32_t right[8];
    node.ChainingValue(right);
    node = ParentNode(cv_stack_[i], right, key_, flags_);
  }
  node.RootBytes(out, len);
}

void Blake3Keyed(const uint8_t key[kBlake3KeyLen], Bytes data, uint8_t out[kBlake3OutLen]) {
  Blake3Hasher h = Blake3Hasher::Keyed(key);
  h.Update(data);
  h.Finalize(out, kBlake3OutLen);
}

}  // namespace borgcheck::crypto
