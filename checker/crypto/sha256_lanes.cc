// SHA-256 / HMAC-SHA256 lanes: see sha256_lanes.h for the model and the numbers.
//
// Outline (SHA-NI engine):
//   1. Start: the lane's state is SHA-256's initial value, or for HMAC the key's precomputed
//      state after the ipad block (so the inner hash has already absorbed 64 bytes).
//   2. Update: a partial block left from the previous Update is topped up and compressed on
//      its own; the rest stays in the caller's memory as the lane's pending input.
//   3. Run: every open lane is first settled (Settle): a lane with less than one block
//      pending keeps the remainder in its own buffer and then either needs the caller (more
//      input or Finish) or, when finishing, moves on to its padded tail (one or two blocks in
//      the lane's own memory), then for HMAC to the outer block (the inner digest, padded,
//      compressed from the key's outer state), then is done. The tail and outer blocks are
//      ordinary pending input, so they are compressed in lock-step with the other lanes'
//      data like any block. If no lane needs the caller, the busy lanes all compress as many
//      blocks as the shortest of them has: with 13 or more busy and AVX-512, in the 16-lane
//      kernel; otherwise in balanced groups of up to four on the SHA-NI kernels. Then the
//      loop repeats.
// OpenSSL engine: one EVP_MD_CTX per lane; Run hashes each lane's pending input in turn, and
// HMAC is done over EVP SHA-256 with the key's padded blocks (RFC 2104), because EVP cannot
// start from a saved SHA-256 state: two more block compressions per message than SHA-NI.
#include "checker/crypto/sha256_lanes.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>

#include "checker/crypto/sha256_avx512.h"
#include "checker/crypto/sha256_ni.h"
#include "checker/crypto/vector_state.h"

namespace borgcheck::crypto {
namespace {

constexpr size_t kBlock = 64;

constexpr uint32_t kInitialState[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

void StoreBE32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}

void StateToDigest(const uint32_t h[8], uint8_t out[kSha256DigestSize]) {
  for (int i = 0; i < 8; ++i) StoreBE32(out + 4 * i, h[i]);
}

// Writes the SHA-256 padding of a message of `length` bytes whose last `rest` (< 64) bytes
// are at `rest_data` into `tail`; returns the padded size, 64 or 128.
size_t Pad(const uint8_t* rest_data, size_t rest, uint64_t length, uint8_t tail[128]) {
  const size_t size = rest < kBlock - 8 ? kBlock : 2 * kBlock;
  std::memcpy(tail, rest_data, rest);
  tail[rest] = 0x80;
  std::memset(tail + rest + 1, 0, size - rest - 1 - 8);
  const uint64_t bits = length * 8;
  for (int i = 0; i < 8; ++i) tail[size - 1 - i] = uint8_t(bits >> (8 * i));
  return size;
}

}  // namespace

// ---- HmacSha256Key ------------------------------------------------------------------------

Result<HmacSha256Key> HmacSha256Key::Create(Bytes key) {
  uint8_t k[kBlock] = {};
  if (key.size() > kBlock) {
    unsigned int n = 0;
    if (EVP_Digest(key.data(), key.size(), k, &n, EVP_sha256(), nullptr) != 1 ||
        n != kSha256DigestSize) {
      OPENSSL_cleanse(k, sizeof k);
      return Status(StatusCode::kInternal, "OpenSSL could not hash the HMAC-SHA256 key");
    }
  } else if (!key.empty()) {
    std::memcpy(k, key.data(), key.size());
  }
  HmacSha256Key prepared;
  prepared.material_ = SecureBytes(kSize);
  uint8_t* m = prepared.material_.data();
  for (size_t i = 0; i < kBlock; ++i) {
    m[kIpadOffset + i] = k[i] ^ 0x36;
    m[kOpadOffset + i] = k[i] ^ 0x5c;
  }
  OPENSSL_cleanse(k, sizeof k);
  if (sha256_ni::CpuHasShaNi()) {
    uint32_t h[8];
    std::memcpy(h, kInitialState, sizeof h);
    sha256_ni::Blocks1(h, m + kIpadOffset, 1);
    std::memcpy(m + kInnerOffset, h, sizeof h);
    std::memcpy(h, kInitialState, sizeof h);
    sha256_ni::Blocks1(h, m + kOpadOffset, 1);
    std::memcpy(m + kOuterOffset, h, sizeof h);
    OPENSSL_cleanse(h, sizeof h);
    prepared.has_states_ = true;
  }
  return prepared;
}

// ---- Sha256Lanes: construction ----------------------------------------------------------

Sha256Lanes::Sha256Lanes()
    : engine_(sha256_ni::CpuHasShaNi() ? Engine::kShaNi : Engine::kOpenSsl),
      avx512_(engine_ == Engine::kShaNi && sha256_avx512::CpuHasAvx512Sha()) {
  if (engine_ == Engine::kOpenSsl && !MakeFallbackContexts()) {
    status_ = Status(StatusCode::kInternal, "OpenSSL could not make a SHA-256 context");
  }
}

Sha256Lanes::~Sha256Lanes() {
  for (Lane& lane : lanes_) Wipe(lane);
  OPENSSL_cleanse(scratch_, sizeof scratch_);
  FreeFallbackContexts();
}

bool Sha256Lanes::MakeFallbackContexts() {
  if (md_ == nullptr) md_ = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
  if (md_ == nullptr) return false;
  for (Lane& lane : lanes_) {
    if (lane.md_ctx == nullptr) lane.md_ctx = EVP_MD_CTX_new();
    if (lane.md_ctx == nullptr) return false;
  }
  return true;
}

void Sha256Lanes::FreeFallbackContexts() {
  for (Lane& lane : lanes_) {
    EVP_MD_CTX_free(lane.md_ctx);  // cleanses the SHA-256 state it frees
    lane.md_ctx = nullptr;
  }
  EVP_MD_free(md_);
  md_ = nullptr;
}

void Sha256Lanes::TEST_ForceOpenSsl() {
  engine_ = Engine::kOpenSsl;
  avx512_ = false;
  if (!MakeFallbackContexts()) {
    status_ = Status(StatusCode::kInternal, "OpenSSL could not make a SHA-256 context");
  }
}

// ---- Sha256Lanes: feeding ---------------------------------------------------------------

void Sha256Lanes::Start(size_t lane_index) {
  Lane& lane = lanes_[lane_index];
  Wipe(lane);
  lane.phase = Phase::kData;
  if (engine_ == Engine::kShaNi) {
    std::memcpy(lane.h, kInitialState, sizeof lane.h);
  } else if (!status_.ok() || EVP_DigestInit_ex2(lane.md_ctx, md_, nullptr) != 1) {
    Fail(lane);
  }
}

void Sha256Lanes::Start(size_t lane_index, const HmacSha256Key& key) {
  Lane& lane = lanes_[lane_index];
  Wipe(lane);
  lane.phase = Phase::kData;
  lane.key = &key;
  lane.length = kBlock;  // the ipad block
  const uint8_t* m = key.material_.data();
  if (engine_ == Engine::kShaNi) {  // then the key has its states: the same CPU check
    std::memcpy(lane.h, m + HmacSha256Key::kInnerOffset, sizeof lane.h);
    return;
  }
  if (!status_.ok() || EVP_DigestInit_ex2(lane.md_ctx, md_, nullptr) != 1 ||
      EVP_DigestUpdate(lane.md_ctx, m + HmacSha256Key::kIpadOffset, kBlock) != 1) {
    Fail(lane);
  }
}

void Sha256Lanes::Update(size_t lane_index, Bytes data) {
  Lane& lane = lanes_[lane_index];
  if (lane.phase != Phase::kData || lane.finishing || lane.in_len != 0) return;  // misuse
  lane.length += data.size();
  const uint8_t* p = data.data();
  size_t n = data.size();
  if (engine_ == Engine::kShaNi && lane.buf_len > 0) {
    const size_t take = std::min(n, kBlock - lane.buf_len);
    std::memcpy(lane.buf + lane.buf_len, p, take);
    lane.buf_len += take;
    p += take;
    n -= take;
    if (lane.buf_len < kBlock) return;
    sha256_ni::Blocks1(lane.h, lane.buf, 1);
    lane.buf_len = 0;
  }
  lane.in = n > 0 ? p : nullptr;
  lane.in_len = n;
}

void Sha256Lanes::Finish(size_t lane_index) {
  Lane& lane = lanes_[lane_index];
  if (lane.phase == Phase::kData) lane.finishing = true;
}

void Sha256Lanes::Submit(size_t lane_index, const HmacSha256Key* key, Bytes message) {
  if (key != nullptr) {
    Start(lane_index, *key);
  } else {
    Start(lane_index);
  }
  Update(lane_index, message);
  Finish(lane_index);
}

void Sha256Lanes::Take(size_t lane_index, uint8_t out[kSha256DigestSize]) {
  Lane& lane = lanes_[lane_index];
  if (lane.phase == Phase::kDone) {
    std::memcpy(out, lane.digest, kSha256DigestSize);
  } else {
    std::memset(out, 0, kSha256DigestSize);  // misuse: no digest to take
  }
  Wipe(lane);
}

void Sha256Lanes::Reset() {
  for (Lane& lane : lanes_) Wipe(lane);
}

void Sha256Lanes::Fail(Lane& lane) {
  status_ = Status(StatusCode::kInternal, "OpenSSL SHA-256 failed");
  std::memset(lane.digest, 0, sizeof lane.digest);
  lane.in = nullptr;
  lane.in_len = 0;
  lane.phase = Phase::kDone;
}

void Sha256Lanes::Wipe(Lane& lane) {
  // A fallback context abandoned mid-message holds a key-derived state: restart it, which
  // overwrites that state with SHA-256's initial value. (A finished one holds only the
  // digest, and EVP_MD_CTX_free cleanses what it frees.)
  if (lane.md_ctx != nullptr && lane.phase == Phase::kData) {
    (void)EVP_DigestInit_ex2(lane.md_ctx, nullptr, nullptr);
  }
  evp_md_ctx_st* ctx = lane.md_ctx;
  OPENSSL_cleanse(&lane, sizeof lane);
  lane = Lane();
  lane.md_ctx = ctx;
}

// ---- Sha256Lanes: running ---------------------------------------------------------------

// Moves a lane that has less than one block pending to its next phase; true when it needs
// the caller (starved or done).
bool Sha256Lanes::NeedsCaller(Lane& lane) {
  for (;;) {
    switch (lane.phase) {
      case Phase::kIdle:
        return false;
      case Phase::kDone:
        return true;
      case Phase::kData:
        if (lane.in_len >= kBlock) return false;
        if (lane.in_len > 0) {  // buf is empty whenever input is pending (see Update)
          std::memcpy(lane.buf, lane.in, lane.in_len);
          lane.buf_len = lane.in_len;
        }
        lane.in = nullptr;
        lane.in_len = 0;
        if (!lane.finishing) return true;
        lane.in_len = Pad(lane.buf, lane.buf_len, lane.length, lane.tail);
        lane.in = lane.tail;
        lane.phase = Phase::kTail;
        break;
      case Phase::kTail:
        if (lane.in_len >= kBlock) return false;
        if (lane.key != nullptr) {
          uint8_t inner[kSha256DigestSize];
          StateToDigest(lane.h, inner);
          lane.in_len = Pad(inner, sizeof inner, kBlock + sizeof inner, lane.tail);
          OPENSSL_cleanse(inner, sizeof inner);
          lane.in = lane.tail;
          std::memcpy(lane.h, lane.key->material_.data() + HmacSha256Key::kOuterOffset,
                      sizeof lane.h);
          lane.phase = Phase::kOuter;
          break;
        }
        [[fallthrough]];
      case Phase::kOuter:
        if (lane.in_len >= kBlock) return false;
        StateToDigest(lane.h, lane.digest);
        lane.in = nullptr;
        lane.phase = Phase::kDone;
        return true;
    }
  }
}

Sha256Lanes::LaneMask Sha256Lanes::Run() {
  return engine_ == Engine::kShaNi ? RunShaNi() : RunOpenSsl();
}

Sha256Lanes::LaneMask Sha256Lanes::RunShaNi() {
  // The SHA-NI kernels are SSE-encoded: dirty upper vector halves (left by the caller's last
  // library call) would cost them half their speed (vector_state.h).
  ClearUpperVectorState();
  for (;;) {
    LaneMask ready = 0;
    Lane* busy[kMaxLanes];
    size_t n_busy = 0;
    for (size_t i = 0; i < kMaxLanes; ++i) {
      Lane& lane = lanes_[i];
      if (NeedsCaller(lane)) {
        ready |= LaneMask(1) << i;
      } else if (lane.phase != Phase::kIdle) {
        busy[n_busy++] = &lane;
      }
    }
    if (ready != 0 || n_busy == 0) return ready;
    size_t blocks = busy[0]->in_len / kBlock;
    for (size_t j = 1; j < n_busy; ++j) blocks = std::min(blocks, busy[j]->in_len / kBlock);
    uint32_t* states[kMaxLanes];
    const uint8_t* data[kMaxLanes];
    if (avx512_ && n_busy >= kAvx512MinLanes) {
      // The unused kernel lanes read the first lane's input into scratch states.
      for (size_t j = 0; j < kMaxLanes; ++j) {
        states[j] = j < n_busy ? busy[j]->h : scratch_[j];
        data[j] = j < n_busy ? busy[j]->in : busy[0]->in;
      }
      sha256_avx512::Blocks16(states, data, blocks);
    } else {
      // Balanced groups of up to four: a lane alone in a group would run at a single lane's
      // speed while the others wait, so five lanes go as 3 + 2, not 4 + 1.
      const size_t groups = (n_busy + 3) / 4;
      size_t first = 0;
      for (size_t g = 0; g < groups; ++g) {
        const size_t count = (n_busy - first) / (groups - g);
        for (size_t j = 0; j < count; ++j) {
          states[j] = busy[first + j]->h;
          data[j] = busy[first + j]->in;
        }
        switch (count) {
          case 1: sha256_ni::Blocks1(states[0], data[0], blocks); break;
          case 2: sha256_ni::Blocks2(states, data, blocks); break;
          case 3: sha256_ni::Blocks3(states, data, blocks); break;
          default: sha256_ni::Blocks4(states, data, blocks); break;
        }
        first += count;
      }
    }
    for (size_t j = 0; j < n_busy; ++j) {
      busy[j]->in += blocks * kBlock;
      busy[j]->in_len -= blocks * kBlock;
    }
  }
}

Sha256Lanes::LaneMask Sha256Lanes::RunOpenSsl() {
  LaneMask ready = 0;
  for (size_t i = 0; i < kMaxLanes; ++i) {
    Lane& lane = lanes_[i];
    if (lane.phase == Phase::kIdle) continue;
    ready |= LaneMask(1) << i;
    if (lane.phase != Phase::kData) continue;  // done
    if (lane.in_len > 0 && EVP_DigestUpdate(lane.md_ctx, lane.in, lane.in_len) != 1) {
      Fail(lane);
      continue;
    }
    lane.in = nullptr;
    lane.in_len = 0;
    if (!lane.finishing) continue;
    unsigned int n = 0;
    uint8_t inner[kSha256DigestSize];
    bool ok = EVP_DigestFinal_ex(lane.md_ctx, inner, &n) == 1 && n == kSha256DigestSize;
    if (ok && lane.key != nullptr) {
      ok = EVP_DigestInit_ex2(lane.md_ctx, md_, nullptr) == 1 &&
           EVP_DigestUpdate(lane.md_ctx,
                            lane.key->material_.data() + HmacSha256Key::kOpadOffset, kBlock) == 1 &&
           EVP_DigestUpdate(lane.md_ctx, inner, sizeof inner) == 1 &&
           EVP_DigestFinal_ex(lane.md_ctx, lane.digest, &n) == 1 && n == kSha256DigestSize;
    } else if (ok) {
      std::memcpy(lane.digest, inner, sizeof inner);
    }
    OPENSSL_cleanse(inner, sizeof inner);
    if (!ok) {
      Fail(lane);
      continue;
    }
    lane.phase = Phase::kDone;
  }
  return ready;
}

void Sha256Lanes::HashAll(std::span<const Job> jobs, size_t lanes) {
  lanes = std::clamp<size_t>(lanes, 1, kMaxLanes);
  const Job* running[kMaxLanes] = {};
  size_t next = 0;
  for (size_t i = 0; i < lanes && next < jobs.size(); ++i, ++next) {
    Submit(i, jobs[next].key, jobs[next].message);
    running[i] = &jobs[next];
  }
  while (LaneMask ready = Run()) {
    for (size_t i = 0; i < lanes; ++i) {
      if ((ready & (LaneMask(1) << i)) == 0) continue;
      Take(i, running[i]->out);  // every lane holds a whole message: ready means done
      running[i] = nullptr;
      if (next < jobs.size()) {
        Submit(i, jobs[next].key, jobs[next].message);
        running[i] = &jobs[next++];
      }
    }
  }
}

}  // namespace borgcheck::crypto
