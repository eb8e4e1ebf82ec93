// BLAKE2b-256 lanes: see blake2b_lanes.h for the model and the numbers.
//
// Outline:
//   1. Start: h is BLAKE2b-256's initial state (parameter block: digest length 32, no key,
//      fanout and depth 1), or the prefix's saved state; a prefix whose last part is shorter
//      than a block leaves that part in the lane's buffer, to be joined by the message.
//   2. Update: BLAKE2b compresses its final block with a flag, so the last 1..128 bytes seen
//      are always held back in the lane's buffer; a buffer that is full when more input
//      arrives is compressed on its own (portable code), the rest stays in the caller's
//      memory as pending input.
//   3. Run: every open lane is settled first: a lane with no whole block to spare keeps the
//      rest of its input in its buffer and needs the caller, unless it is finishing: then its
//      buffer, zero-padded, becomes its final block. If no lane needs the caller, every busy
//      lane compresses as many blocks as the one with the fewest (a final block counts as
//      one), grouped onto the widest kernel that pays (Compress), and the loop repeats.
#include "checker/crypto/blake2b_lanes.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "checker/crypto/blake2b_simd.h"

namespace borgcheck::crypto {
namespace {

constexpr size_t kBlock = 128;
constexpr uint64_t kLast = ~uint64_t(0);

// The initial state of unkeyed BLAKE2b-256 (RFC 7693 §2.5: IV xor parameter word 0).
constexpr uint64_t kInitial[8] = {
    0x6a09e667f3bcc908ULL ^ 0x01010020ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
    0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
    0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};

// Compresses `nblocks` whole blocks at `data`, none of them the last, into h; t counts them.
void CompressOne(uint64_t h[8], uint64_t& t, const uint8_t* data, size_t nblocks) {
  blake2b_simd::Lanes<1> one = {{h}, {data}, {t}, {kBlock}, {0}};
  blake2b_simd::Compress1(one, nblocks);
  t += kBlock * nblocks;
}

void StoreDigest(const uint64_t h[8], uint8_t out[kBlake2b256DigestSize]) {
  for (int i = 0; i < 4; ++i) {
    for (int b = 0; b < 8; ++b) out[8 * i + b] = uint8_t(h[i] >> (8 * b));
  }
}

}  // namespace

// ---- Blake2bPrefix ------------------------------------------------------------------------

Blake2bPrefix Blake2bPrefix::Create(Bytes prefix) {
  Blake2bPrefix p;
  p.material_ = SecureBytes(kSize);
  uint8_t* m = p.material_.data();
  uint64_t h[8];
  std::memcpy(h, kInitial, sizeof h);
  uint64_t t = 0;
  if (!prefix.empty()) {
    const size_t sure = (prefix.size() - 1) / kBlock;  // blocks followed by more prefix
    CompressOne(h, t, prefix.data(), sure);
    p.tail_len_ = prefix.size() - sure * kBlock;
    std::memcpy(m + kTail, prefix.data() + sure * kBlock, p.tail_len_);
  }
  std::memcpy(m + kStateA, h, sizeof h);
  p.counter_a_ = t;
  if (p.tail_len_ == kBlock) {
    CompressOne(h, t, m + kTail, 1);
    std::memcpy(m + kStateB, h, sizeof h);
  }
  OPENSSL_cleanse(h, sizeof h);
  return p;
}

// ---- Blake2b256Lanes ----------------------------------------------------------------------

Blake2b256Lanes::Engine Blake2b256Lanes::BestEngine() {
  const blake2b_simd::CpuFeatures& cpu = blake2b_simd::Cpu();
  return cpu.avx512 ? Engine::kAvx512 : cpu.avx2 ? Engine::kAvx2 : Engine::kPortable;
}

Blake2b256Lanes::Blake2b256Lanes() : engine_(BestEngine()) {}

Blake2b256Lanes::~Blake2b256Lanes() {
  for (Lane& lane : lanes_) Wipe(lane);
  OPENSSL_cleanse(scratch_, sizeof scratch_);
}

bool Blake2b256Lanes::TEST_UseEngine(Engine engine) {
  const Engine best = BestEngine();
  const bool ok = engine == Engine::kPortable ||
                  (engine == Engine::kAvx2 && best != Engine::kPortable) || engine == best;
  if (ok) engine_ = engine;
  return ok;
}

void Blake2b256Lanes::Wipe(Lane& lane) {
  OPENSSL_cleanse(&lane, sizeof lane);
  lane = Lane();
}

void Blake2b256Lanes::Start(size_t lane_index) {
  Lane& lane = lanes_[lane_index];
  Wipe(lane);
  lane.phase = Phase::kData;
  std::memcpy(lane.h, kInitial, sizeof lane.h);
}

void Blake2b256Lanes::Start(size_t lane_index, const Blake2bPrefix& prefix) {
  Lane& lane = lanes_[lane_index];
  Wipe(lane);
  lane.phase = Phase::kData;
  lane.prefix = &prefix;
  const uint8_t* m = prefix.material_.data();
  if (prefix.tail_len_ == kBlock) {
    std::memcpy(lane.h, m + Blake2bPrefix::kStateB, sizeof lane.h);
    lane.t = prefix.counter_a_ + kBlock;
    lane.prefix_pending = true;
  } else {
    std::memcpy(lane.h, m + Blake2bPrefix::kStateA, sizeof lane.h);
    lane.t = prefix.counter_a_;
    std::memcpy(lane.buf, m + Blake2bPrefix::kTail, prefix.tail_len_);
    lane.buf_len = prefix.tail_len_;
  }
}

void Blake2b256Lanes::Update(size_t lane_index, Bytes data) {
  Lane& lane = lanes_[lane_index];
  if (lane.phase != Phase::kData || lane.finishing || lane.in_len != 0) return;  // misuse
  if (data.empty()) return;
  lane.message_len += data.size();
  lane.prefix_pending = false;
  const uint8_t* p = data.data();
  size_t n = data.size();
  if (lane.buf_len > 0) {
    const size_t take = std::min(n, kBlock - lane.buf_len);
    std::memcpy(lane.buf + lane.buf_len, p, take);
    lane.buf_len += take;
    p += take;
    n -= take;
    if (n == 0) return;  // the buffer may hold the final block
    CompressOne(lane.h, lane.t, lane.buf, 1);  // full, and more input follows
    lane.buf_len = 0;
  }
  lane.in = p;
  lane.in_len = n;
}

void Blake2b256Lanes::Finish(size_t lane_index) {
  Lane& lane = lanes_[lane_index];
  if (lane.phase == Phase::kData) lane.finishing = true;
}

void Blake2b256Lanes::Submit(size_t lane_index, const Blake2bPrefix* prefix, Bytes message) {
  if (prefix != nullptr) {
    Start(lane_index, *prefix);
  } else {
    Start(lane_index);
  }
  Update(lane_index, message);
  Finish(lane_index);
}

void Blake2b256Lanes::Take(size_t lane_index, uint8_t out[kBlake2b256DigestSize]) {
  Lane& lane = lanes_[lane_index];
  if (lane.phase == Phase::kDone) {
    std::memcpy(out, lane.digest, kBlake2b256DigestSize);
  } else {
    std::memset(out, 0, kBlake2b256DigestSize);  // misuse: no digest to take
  }
  Wipe(lane);
}

void Blake2b256Lanes::Reset() {
  for (Lane& lane : lanes_) Wipe(lane);
}

// Whole blocks of pending input that are certainly not the last.
size_t Blake2b256Lanes::Available(const Lane& lane) {
  return lane.in_len > kBlock ? (lane.in_len - 1) / kBlock : 0;
}

bool Blake2b256Lanes::NeedsCaller(Lane& lane) {
  switch (lane.phase) {
    case Phase::kIdle:
    case Phase::kFinal:
      return false;
    case Phase::kDone:
      return true;
    case Phase::kData:
      break;
  }
  if (Available(lane) > 0) return false;
  if (lane.in_len > 0) {  // 1..128 bytes; the buffer is empty whenever input is pending
    std::memcpy(lane.buf, lane.in, lane.in_len);
    lane.buf_len = lane.in_len;
  }
  lane.in = nullptr;
  lane.in_len = 0;
  if (!lane.finishing) return true;
  if (lane.prefix_pending) {  // empty message: the prefix's last block is the final one
    const uint8_t* m = lane.prefix->material_.data();
    std::memcpy(lane.h, m + Blake2bPrefix::kStateA, sizeof lane.h);
    lane.t = lane.prefix->counter_a_;
    std::memcpy(lane.buf, m + Blake2bPrefix::kTail, kBlock);
    lane.buf_len = kBlock;
    lane.prefix_pending = false;
  }
  std::memset(lane.buf + lane.buf_len, 0, kBlock - lane.buf_len);
  lane.phase = Phase::kFinal;
  return false;
}

// Kernel arguments for `count` lanes (count <= N) of `group`; the kernel's unused lanes
// read the first lane's input into scratch states, and their results are ignored.
template <int N>
void Blake2b256Lanes::FillArgs(Lane* const* group, size_t count, blake2b_simd::Lanes<N>& args) {
  for (size_t j = 0; j < size_t{N}; ++j) {
    if (j < count) {
      Lane& lane = *group[j];
      const bool final_block = lane.phase == Phase::kFinal;
      args.h[j] = lane.h;
      args.data[j] = final_block ? lane.buf : lane.in;
      args.t[j] = lane.t;
      args.last_len[j] = final_block ? lane.buf_len : kBlock;
      args.last[j] = final_block ? kLast : 0;
    } else {
      args.h[j] = scratch_[j];
      args.data[j] = args.data[0];
      args.t[j] = 0;
      args.last_len[j] = kBlock;
      args.last[j] = 0;
    }
  }
}

// Compresses nblocks of each of `count` lanes with one kernel call of the width that fits.
void Blake2b256Lanes::Compress(Lane* const* group, size_t count, size_t nblocks) {
  if (count >= 5) {
    blake2b_simd::Lanes<8> args;
    FillArgs(group, count, args);
    blake2b_simd::Compress8Avx512(args, nblocks);
  } else if (count >= 3) {
    blake2b_simd::Lanes<4> args;
    FillArgs(group, count, args);
    if (engine_ == Engine::kAvx512) {
      blake2b_simd::Compress4Avx512(args, nblocks);
    } else {
      blake2b_simd::Compress4Avx2(args, nblocks);
    }
  } else {
    for (size_t j = 0; j < count; ++j) {
      blake2b_simd::Lanes<1> args;
      FillArgs(group + j, 1, args);
      blake2b_simd::Compress1(args, nblocks);
    }
  }
}

Blake2b256Lanes::LaneMask Blake2b256Lanes::Run() {
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
    size_t blocks = SIZE_MAX;
    for (size_t j = 0; j < n_busy; ++j) {
      blocks = std::min(blocks, busy[j]->phase == Phase::kFinal ? size_t{1} : Available(*busy[j]));
    }
    // Groups: up to eight lanes on the 8-lane kernel (AVX-512, five or more busy), else up to
    // four on a 4-lane kernel (three or more), else one lane at a time.
    size_t done = 0;
    while (done < n_busy) {
      const size_t left = n_busy - done;
      size_t take = 1;
      if (engine_ == Engine::kAvx512 && left >= 5) {
        take = std::min<size_t>(left, 8);
      } else if (engine_ != Engine::kPortable && left >= 3) {
        take = std::min<size_t>(left, 4);
      }
      Compress(busy + done, take, blocks);
      done += take;
    }
    for (size_t j = 0; j < n_busy; ++j) {
      Lane& lane = *busy[j];
      if (lane.phase == Phase::kFinal) {
        lane.t += lane.buf_len;
        StoreDigest(lane.h, lane.digest);
        lane.phase = Phase::kDone;
      } else {
        lane.in += blocks * kBlock;
        lane.in_len -= blocks * kBlock;
        lane.t += blocks * kBlock;
      }
    }
  }
}

void Blake2b256Lanes::HashAll(std::span<const Job> jobs, size_t lanes) {
  lanes = std::clamp<size_t>(lanes, 1, kMaxLanes);
  const Job* running[kMaxLanes] = {};
  size_t next = 0;
  for (size_t i = 0; i < lanes && next < jobs.size(); ++i, ++next) {
    Submit(i, jobs[next].prefix, jobs[next].message);
    running[i] = &jobs[next];
  }
  while (LaneMask ready = Run()) {
    for (size_t i = 0; i < lanes; ++i) {
      if ((ready & (LaneMask(1) << i)) == 0) continue;
      Take(i, running[i]->out);  // every lane holds a whole message: ready means done
      running[i] = nullptr;
      if (next < jobs.size()) {
        Submit(i, jobs[next].prefix, jobs[next].message);
        running[i] = &jobs[next++];
      }
    }
  }
}

}  // namespace borgcheck::crypto
