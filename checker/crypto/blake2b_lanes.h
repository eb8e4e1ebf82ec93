// BLAKE2b-256 of up to eight independent messages at once, in AVX-512 or AVX2 vector lanes,
// including borg's key-prefixed form BLAKE2b-256(key || message) with the key absorbed once.
//
// Why: BLAKE2b is the MAC and the id hash of borg's blake2 modes (borg 1.x repokey-blake2,
// keyfile-blake2, authenticated-blake2: MAC = BLAKE2b-256(enc_hmac_key(128) || IV||ct), id =
// BLAKE2b-256(id_key(128) || plaintext); borg 2 blake2 ids). One message keeps the scalar
// ALUs busy (crypto::Blake2b, 1.45 GB/s on the benchmark machine), but one 64-bit word of
// each of several messages per vector lane does the same work on several messages at once.
// Measured on the benchmark machine (AMD EPYC Zen 5, single-threaded CPU time, key-prefixed
// BLAKE2b-256 of 1 MiB messages, all lanes summed; bench/RESULTS.md has every size):
// crypto::Blake2b 1.46 GB/s; these lanes: 1 or 2 lanes 1.47 (portable), 3 lanes 2.10, 4 lanes
// 2.79 (AVX-512VL; AVX2 alone 2.40), 8 lanes 4.32 GB/s (AVX-512). A kernel only pays when
// enough lanes are busy: 8-lane with 5 or more, 4-lane with 3 or 4; one or two busy lanes run
// the portable code one after the other (two lanes in a 4-lane kernel would be 1.4 GB/s in
// all, no faster). No Debian library hashes several BLAKE2b messages at once
// (libb2 and libsodium hash one stream; libb2's vector code is the slow path on this CPU).
//
// The model is that of Sha256Lanes (sha256_lanes.h): each lane holds one message, is fed
// independently (Start, Update, Finish), and Run() compresses every lane that has input in
// lock-step until one lane needs the caller (more input, or its digest is ready). A verifier
// keeps the lanes busy the same way, with more jobs in flight: in borg 1.x's blake2 modes each
// object gives a MAC job (ready at once) and an id job (after decrypting and decompressing);
// eight lanes want about four objects decoded ahead, so a worker that decodes a batch of
// small objects into one plaintext arena and calls HashAll() on all their jobs fills them
// best; one large object alone (its MAC and id) runs on the portable code at today's speed.
//
// Thread contract: a Blake2b256Lanes is a per-worker object and requires external
// synchronisation; distinct objects are independent and there is no shared mutable state
// (the CPU check is a constant computed once). A Blake2bPrefix is const after creation and
// safe for concurrent use by any number of lanes objects; it must outlive every message
// started with it, until Take. Data given to Update is borrowed until Run() reports that lane
// (or until Take, Reset or destruction). Prefix states and lane states, which are as good as
// the key, live in SecureBytes or lane memory wiped when a digest is taken and on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "checker/base/bytes.h"
#include "checker/base/secure_bytes.h"
#include "checker/crypto/blake2b_simd.h"

namespace borgcheck::crypto {

inline constexpr size_t kBlake2b256DigestSize = 32;

// A message prefix absorbed once: borg's BLAKE2b-256(key || m) hashes the 128-byte key as the
// first block of the message (plain, unkeyed BLAKE2b-256; not BLAKE2b's keyed mode).
class Blake2bPrefix {
 public:
  // Any length, 0 included (then plain BLAKE2b-256).
  static Blake2bPrefix Create(Bytes prefix);

 private:
  friend class Blake2b256Lanes;
  Blake2bPrefix() = default;

  // kStateA: h after the prefix's blocks that are certainly not the last (all but its last
  // 1..128 bytes); kTail: those last bytes; kStateB: h after the tail too, when the tail is a
  // whole block (so a non-empty message starts there with no work; an empty one finishes from
  // kStateA with the tail as its final block).
  static constexpr size_t kStateA = 0, kStateB = 64, kTail = 128, kSize = 256;
  SecureBytes material_;
  uint64_t counter_a_ = 0;  // bytes compressed into kStateA
  size_t tail_len_ = 0;     // 0..128
};

class Blake2b256Lanes {
 public:
  static constexpr size_t kMaxLanes = 8;
  // Bit i set: lane i needs the caller.
  using LaneMask = uint32_t;

  enum class Engine {
    kAvx512,    // 8-lane AVX-512 and 4-lane AVX-512VL kernels, portable for 1-2 busy lanes
    kAvx2,      // 4-lane AVX2 kernel, portable for 1-2 busy lanes (and a fifth to eighth)
    kPortable,  // portable code, one lane after the other
  };

  // The widest engine the CPU (and OS) supports. Cannot fail.
  Blake2b256Lanes();
  ~Blake2b256Lanes();
  Blake2b256Lanes(const Blake2b256Lanes&) = delete;
  Blake2b256Lanes& operator=(const Blake2b256Lanes&) = delete;

  Engine engine() const { return engine_; }
  // The widest engine this CPU supports.
  static Engine BestEngine();

  // ---- One lane at a time. `lane` < kMaxLanes. Same contract as Sha256Lanes. ----
  void Start(size_t lane);                               // plain BLAKE2b-256
  void Start(size_t lane, const Blake2bPrefix& prefix);  // BLAKE2b-256(prefix || message)
  // Requires an open, unfinished lane with no unconsumed input.
  void Update(size_t lane, Bytes data);
  void Finish(size_t lane);
  void Submit(size_t lane, const Blake2bPrefix* prefix, Bytes message);  // nullptr: plain

  // Compresses the open lanes in lock-step until at least one needs the caller (it consumed
  // its input without being finished, or its digest is ready) and returns those lanes; at once
  // if one already does. Returns 0 only when no lane is open.
  LaneMask Run();

  bool IsIdle(size_t lane) const { return lanes_[lane].phase == Phase::kIdle; }
  bool IsDone(size_t lane) const { return lanes_[lane].phase == Phase::kDone; }
  // Copies the 32-byte digest of a done lane to `out`, wipes the lane and makes it idle.
  void Take(size_t lane, uint8_t out[kBlake2b256DigestSize]);
  void Reset();

  struct Job {
    const Blake2bPrefix* prefix = nullptr;
    Bytes message;
    uint8_t* out = nullptr;  // 32 bytes
  };
  // Hashes every job in `lanes` (1..kMaxLanes) lanes, refilling each lane as soon as its job
  // is done. Requires all lanes idle; leaves them idle.
  void HashAll(std::span<const Job> jobs, size_t lanes = kMaxLanes);

  // Test only: use a narrower engine than the CPU allows, so that tests cover every kernel on
  // one machine. Returns false (and changes nothing) for an engine this CPU lacks. Requires all
  // lanes idle.
  bool TEST_UseEngine(Engine engine);

 private:
  enum class Phase : uint8_t {
    kIdle,
    kData,   // absorbing the message; `in` is borrowed caller memory
    kFinal,  // the final block, zero-padded, waits in `buf`
    kDone,
  };
  struct Lane {
    Phase phase = Phase::kIdle;
    bool finishing = false;
    bool prefix_pending = false;  // the prefix's last block is still the message's final one
    const Blake2bPrefix* prefix = nullptr;
    const uint8_t* in = nullptr;
    size_t in_len = 0;
    uint64_t message_len = 0;  // bytes of the message given so far (the prefix not counted)
    uint64_t t = 0;            // bytes compressed into h
    uint64_t h[8] = {};
    uint8_t buf[128] = {};     // the last 0..128 bytes seen, held back: they may be the last
    size_t buf_len = 0;
    uint8_t digest[kBlake2b256DigestSize] = {};
  };

  bool NeedsCaller(Lane& lane);
  static size_t Available(const Lane& lane);
  template <int N>
  void FillArgs(Lane* const* group, size_t count, blake2b_simd::Lanes<N>& args);
  void Compress(Lane* const* group, size_t count, size_t nblocks);
  static void Wipe(Lane& lane);

  Engine engine_;
  Lane lanes_[kMaxLanes];
  uint64_t scratch_[kMaxLanes][8] = {};  // states of the unused lanes of a partly filled kernel
};

}  // namespace borgcheck::crypto
