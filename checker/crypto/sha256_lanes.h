// SHA-256 and HMAC-SHA256 of up to sixteen independent messages at once, on the x86 SHA
// extensions (SHA-NI) and, with 13 or more busy lanes, AVX-512; OpenSSL is the fallback on
// CPUs without SHA-NI.
//
// Why: SHA-256 is most of the CPU of a check in the HMAC-SHA256 modes (borg 1.x repokey,
// keyfile, authenticated: the MAC over IV||ciphertext and the id over the plaintext; borg 2
// sha256 ids; SHA-256 ids of mode none). One SHA-NI round instruction waits for the previous
// one, so one message runs at the instruction's latency; blocks of different messages are
// independent, and compressing two to four of them interleaved uses the cycles in between.
// Past four, the SHA unit itself is full; sixteen messages in plain AVX-512 arithmetic
// (sha256_avx512.h) then go further, on the general vector units.
// Measured on the benchmark machine (AMD EPYC Zen 5, single-threaded CPU time, HMAC-SHA256 of
// 1 MiB messages, all lanes summed; bench/RESULTS.md has every size and plain SHA-256):
// OpenSSL 3.0 1.97 GB/s; these lanes: 1 lane 1.96, 2 lanes 2.86, 3 lanes 3.27, 4 lanes 3.60,
// 8 or 12 lanes 3.5-3.6 (SHA-NI groups of four), 16 lanes 4.07 (AVX-512 kernel).
// Written here because no Debian 12 library hashes long messages in lanes: OpenSSL hashes one
// stream, and Intel's multi-buffer library (libipsec-mb 1.3, packaged) has lanes (SHA-NI x2:
// 2.86 GB/s, AVX-512 x16: 6.0 GB/s with 16 jobs of 60,000 bytes, measured here) but refuses
// HMAC-SHA256 messages of 65,535 bytes or more (IMB_ERR_JOB_AUTH_LEN), while borg's chunks
// are mostly 0.5-8 MiB.
//
// The model: a Sha256Lanes has kMaxLanes lanes; each lane holds one message at a time, plain
// SHA-256 or HMAC-SHA256 under an HmacSha256Key. A lane is fed independently of the others
// (Start, any number of Update, Finish), and Run() compresses all lanes that have input in
// lock-step until one of them needs the caller: it ran out of input (give it more, or
// Finish), or its digest is ready (Take it and start the next message there). So a worker
// keeps every lane busy by refilling each lane the moment Run() hands it back, with whatever
// job it has next; messages of different lengths never leave a lane waiting for another.
// Busy lanes run on the kernel that fits their number: one alone single-stream (still
// SHA-NI), two to twelve in balanced SHA-NI groups of up to four, thirteen to sixteen in the
// AVX-512 kernel (on a CPU without AVX-512, SHA-NI groups).
//
// How a verifier keeps lanes busy (borg 1.x repokey: per object a MAC job over the stored
// IV||ciphertext, ready at once, and an id job over the plaintext, ready once the object is
// decrypted and decompressed):
//   - when Run() frees a lane, start the oldest ready id job there; if there is none, start
//     the MAC of the next object and decode that object (AES-CTR, decompress) into a free
//     plaintext buffer, which makes its id job ready (decrypting before the MAC is known is
//     safe with CTR; the verdict still puts a failed MAC first and ignores that plaintext);
//   - an object's verdict is known when both its digests are taken; with L lanes, L
//     plaintext buffers per worker suffice (one per running id job), so two lanes (1.46x)
//     cost one buffer more than today, four lanes (1.8x) three more;
//   - modes with only an id hash (none, authenticated, borg 2) pair the ids of objects;
//   - sixteen lanes (2.1x) pay only when about eight objects are decoded ahead: a worker
//     that decodes a batch of small objects into one plaintext arena and calls HashAll() on
//     all their MAC and id jobs gets them; one large object alone runs its MAC and id as two
//     lanes.
// HashAll() does this scheduling for a list of jobs whose inputs are all in memory.
//
// Thread contract: a Sha256Lanes is a per-worker object and requires external
// synchronisation (it is not safe for concurrent use); distinct objects are independent and
// there is no shared mutable state (the CPU check is a constant computed once). Make it once
// per worker and reuse it: construction fetches OpenSSL objects on the fallback path. An
// HmacSha256Key is const after creation and safe for concurrent use by any number of lanes
// objects (they only read it); it must outlive every message started with it, until Take.
// Data given to Update is borrowed: it must stay unchanged until Run() reports that lane
// (or until Take, Reset or destruction).
//
// Key material (the padded key blocks and the HMAC states derived from them, which are as
// good as the key) lives in SecureBytes or in lane state that is wiped when a digest is taken
// and on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "checker/base/bytes.h"
#include "checker/base/secure_bytes.h"
#include "checker/base/status.h"

struct evp_md_st;
struct evp_md_ctx_st;

namespace borgcheck::crypto {

inline constexpr size_t kSha256DigestSize = 32;

// An HMAC-SHA256 key prepared once: both padded key blocks (RFC 2104: a key longer than 64
// bytes is replaced by its SHA-256), and, when the CPU has SHA-NI, the SHA-256 states after
// each of them, so that a message costs no key set-up.
class HmacSha256Key {
 public:
  // Any key length, 0 included. kInternal only if OpenSSL cannot hash a key over 64 bytes.
  static Result<HmacSha256Key> Create(Bytes key);

  HmacSha256Key(const HmacSha256Key&) = default;
  HmacSha256Key& operator=(const HmacSha256Key&) = default;
  HmacSha256Key(HmacSha256Key&&) noexcept = default;
  HmacSha256Key& operator=(HmacSha256Key&&) noexcept = default;

 private:
  friend class Sha256Lanes;
  HmacSha256Key() = default;

  // kIpadOffset: 64 bytes K' ^ 0x36; kOpadOffset: 64 bytes K' ^ 0x5c; kInnerOffset and
  // kOuterOffset: the states h0..h7 (host order) after compressing each block, present
  // (has_states_) exactly when the CPU has SHA-NI, which is when lanes use them.
  static constexpr size_t kIpadOffset = 0, kOpadOffset = 64, kInnerOffset = 128,
                          kOuterOffset = 160, kSize = 192;
  SecureBytes material_;
  bool has_states_ = false;
};

class Sha256Lanes {
 public:
  static constexpr size_t kMaxLanes = 16;
  // From this many busy lanes on (with AVX-512), all of them run in one 16-lane AVX-512
  // kernel; fewer run in balanced groups of up to four on the SHA-NI kernels (see the top).
  static constexpr size_t kAvx512MinLanes = 13;
  // Bit i set: lane i needs the caller.
  using LaneMask = uint32_t;

  enum class Engine {
    kShaNi,    // SHA-NI kernels, lanes in lock-step (and AVX-512 for many lanes, if present)
    kOpenSsl,  // OpenSSL EVP SHA-256, one lane after the other (no SHA-NI on this CPU)
  };

  // SHA-NI when the CPU has it, else OpenSSL. Check status() once: kInternal when the
  // fallback could not make its OpenSSL contexts (then every digest is 32 zero bytes, which
  // no real MAC or id equals by chance).
  Sha256Lanes();
  ~Sha256Lanes();
  Sha256Lanes(const Sha256Lanes&) = delete;
  Sha256Lanes& operator=(const Sha256Lanes&) = delete;

  Engine engine() const { return engine_; }
  // Whether 13 or more busy lanes run on the AVX-512 kernel (SHA-NI engine on a CPU with
  // AVX-512 F and BW).
  bool uses_avx512() const { return avx512_; }
  // Construction's verdict; also becomes kInternal (and stays so) if an OpenSSL call fails
  // later on the fallback path, the digest of that message then being zeros.
  const Status& status() const { return status_; }

  // ---- One lane at a time. `lane` < kMaxLanes. ----
  // Starts a SHA-256 (no key) or an HMAC-SHA256 message on an idle lane.
  void Start(size_t lane);
  void Start(size_t lane, const HmacSha256Key& key);
  // Gives an open lane more of its message. Requires that the lane has no unconsumed input
  // (it was just started, or Run() reported it) and is not finished. Any split of a message
  // into Update calls gives the same digest.
  void Update(size_t lane, Bytes data);
  // Declares the message complete: after its pending input, the lane pads and finishes.
  void Finish(size_t lane);
  // Start + Update + Finish. key == nullptr: plain SHA-256.
  void Submit(size_t lane, const HmacSha256Key* key, Bytes message);

  // Compresses the open lanes' input in lock-step until at least one lane needs the caller,
  // and returns those lanes: an open lane that consumed all its input without being finished
  // (Update or Finish it), or a finished lane whose digest is ready (Take it). A lane that
  // needs the caller when Run() is called is returned at once, without work on the others.
  // Returns 0 only when no lane is open.
  LaneMask Run();

  bool IsIdle(size_t lane) const { return lanes_[lane].phase == Phase::kIdle; }
  bool IsDone(size_t lane) const { return lanes_[lane].phase == Phase::kDone; }
  // Copies the digest of a done lane to `out` (32 bytes), wipes the lane and makes it idle.
  void Take(size_t lane, uint8_t out[kSha256DigestSize]);
  // Abandons every lane's message (wiping its state); all lanes are idle afterwards.
  void Reset();

  // A message whose input is all in memory; key == nullptr for plain SHA-256.
  struct Job {
    const HmacSha256Key* key = nullptr;
    Bytes message;
    uint8_t* out = nullptr;  // 32 bytes
  };
  // Hashes every job: starts `lanes` (1..kMaxLanes) of them and starts the next one in a
  // lane as soon as that lane's job is done. Requires all lanes idle; leaves them idle.
  void HashAll(std::span<const Job> jobs, size_t lanes = kMaxLanes);

  // Test only: use the OpenSSL fallback from now on, on a CPU with SHA-NI too, so that tests
  // cover both paths. Requires all lanes idle.
  void TEST_ForceOpenSsl();
  // Test only: never use the AVX-512 kernel, so that many busy lanes run in SHA-NI groups as
  // on a CPU without AVX-512. Requires all lanes idle.
  void TEST_DisableAvx512() { avx512_ = false; }

 private:
  enum class Phase : uint8_t {
    kIdle,
    kData,   // absorbing the message; `in` is borrowed caller memory
    kTail,   // absorbing the padded last block(s), in `tail`
    kOuter,  // HMAC: absorbing the outer block, in `tail`
    kDone,   // digest ready
  };
  struct Lane {
    Phase phase = Phase::kIdle;
    bool finishing = false;
    const HmacSha256Key* key = nullptr;
    const uint8_t* in = nullptr;  // unconsumed input: caller's (kData) or `tail`
    size_t in_len = 0;
    uint64_t length = 0;          // bytes of the inner message so far, ipad block included
    uint32_t h[8] = {};
    uint8_t buf[64] = {};         // partial block (kData)
    size_t buf_len = 0;
    uint8_t tail[128] = {};
    uint8_t digest[kSha256DigestSize] = {};
    evp_md_ctx_st* md_ctx = nullptr;  // fallback only
  };

  bool NeedsCaller(Lane& lane);
  LaneMask RunShaNi();
  LaneMask RunOpenSsl();
  void Settle(Lane& lane);
  bool MakeFallbackContexts();
  void FreeFallbackContexts();
  void Fail(Lane& lane);
  static void Wipe(Lane& lane);

  Engine engine_;
  bool avx512_;
  Status status_;
  evp_md_st* md_ = nullptr;  // fallback only
  Lane lanes_[kMaxLanes];
  uint32_t scratch_[kMaxLanes][8] = {};  // states of the unused lanes of the 16-lane kernel
};

}  // namespace borgcheck::crypto
