// A worker's hash lanes fed from a sequence of items (stored objects): each item, once decoded,
// gives up to kMaxJobsPerItem messages to hash (borg 1.x repokey: the MAC over IV||ciphertext
// and the id over the plaintext), and the pipeline keeps the lanes (sha256_lanes.h,
// blake2b_lanes.h) busy with the messages of several items at once.
//
// Why: one SHA-256 stream runs at the SHA-NI round instruction's latency; two to four
// independent messages in lock-step are 1.45-1.8x faster, sixteen in AVX-512 2.1x, eight
// BLAKE2b messages 3x (bench/RESULTS.md, 2026-12-01). A verifier alone sees one object at a
// time; this is where the objects of a batch meet.
//
// The schedule (the previous helper's, measured in bench/RESULTS.md): whenever a lane is free,
// start the oldest ready message there; if none is ready, decode the next item (which makes its
// messages ready) if the caller has room for it. Items are decoded in order; they finish in any
// order (a short item's digests may be taken before a long one's). The caller owns the memory
// the messages live in and says, per item, whether it has room to decode it now: so the number
// of plaintexts held at once, and with it the memory, stays the caller's decision.
//
// LaneHash: one hash function as the lanes compute it (plain SHA-256, HMAC-SHA256 under a key,
// borg's BLAKE2b-256(prefix || m)). Made once per run from the key, const afterwards.
//
// Thread contract: a LaneHash is const after creation and safe for concurrent use by any number
// of pipelines (they only read it); it must outlive every Run that uses it. A HashPipeline is a
// per-worker object (it owns lane state) and requires external synchronisation; make it once per
// worker and reuse it. Key material lives in the LaneHash (SecureBytes, wiped on destruction) and
// in lane state wiped when each digest is taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/crypto/blake2b_lanes.h"
#include "checker/crypto/sha256_lanes.h"

namespace borgcheck::crypto {

class LaneHash {
 public:
  enum class Kind : uint8_t { kSha256, kHmacSha256, kBlake2b256 };

  static LaneHash Sha256();
  // kInternal only if OpenSSL cannot hash a key longer than 64 bytes (HmacSha256Key::Create).
  static Result<LaneHash> HmacSha256(Bytes key);
  // borg's BLAKE2b-256(prefix || message): the 128-byte key as the message's first block.
  static LaneHash Blake2b256(Bytes prefix);

  Kind kind() const { return kind_; }

 private:
  friend class HashPipeline;
  LaneHash() = default;

  Kind kind_ = Kind::kSha256;
  std::optional<HmacSha256Key> hmac_;
  std::optional<Blake2bPrefix> prefix_;
};

class HashPipeline {
 public:
  static constexpr size_t kMaxJobsPerItem = 3;

  // One message: `first` then `second` (either may be empty; a message with a separately built
  // prefix, such as borg 2's tagged envelope, needs no copy). Both are borrowed until the item's
  // Done. `out` receives the 32-byte digest.
  struct Job {
    const LaneHash* hash = nullptr;
    Bytes first;
    Bytes second;
    uint8_t* out = nullptr;
  };

  // What Run asks of the caller.
  class Items {
   public:
    virtual ~Items() = default;
    // Decodes item i and writes its messages to jobs[0..k), returning k (0..kMaxJobsPerItem);
    // or returns -1 when it has no room for the item now (the pipeline asks again after an
    // earlier item is done). `must` is true when no other item is in flight: then -1 is not
    // allowed (the item must be taken, whatever its size). Called for i = 0, 1, ... in order.
    virtual int Decode(size_t i, Job* jobs, bool must) = 0;
    // Every digest of item i is written (at once when Decode gave it no message).
    virtual void Done(size_t i) = 0;
  };

  HashPipeline() = default;
  HashPipeline(const HashPipeline&) = delete;
  HashPipeline& operator=(const HashPipeline&) = delete;

  // The lanes' status (Sha256Lanes::status(): kInternal only on the OpenSSL fallback when a
  // context could not be made). Check once after construction.
  const Status& status() const { return sha_.status(); }

  // Runs items 0..n-1 through Decode, the lanes and Done. Returns when every item is done.
  void Run(size_t n, Items& items);

  // Tests: the lane engines (to force the OpenSSL fallback or a narrower BLAKE2b kernel).
  Sha256Lanes& TEST_sha() { return sha_; }
  Blake2b256Lanes& TEST_blake2b() { return b2_; }

 private:
  struct Queued {
    size_t item = 0;
    Job job;
  };
  struct Running {
    bool busy = false;
    size_t item = 0;
    Job job;
  };

  // A free lane of the engine `job` runs on, or -1.
  int FreeLane(const Job& job) const;
  void Start(int lane, const Queued& q);
  // Handles the lanes Run() reported: a second part given, or a digest taken (and its item
  // Done if that was its last).
  void Collect(bool blake2b, uint32_t mask, Items& items);

  Sha256Lanes sha_;
  Blake2b256Lanes b2_;
  Running sha_running_[Sha256Lanes::kMaxLanes];
  Running b2_running_[Blake2b256Lanes::kMaxLanes];
  size_t sha_busy_ = 0, b2_busy_ = 0;
  size_t items_in_flight_ = 0;
  std::vector<Queued> queue_;  // ready, not started, oldest first from queue_head_
  size_t queue_head_ = 0;
  std::vector<uint8_t> pending_;  // per item: messages not yet done
};

// The plaintext buffers of a verifier's items in flight (what HashPipeline::Items::Decode needs
// room in): one large slot for objects of kLargeStored stored bytes or more, kept at its
// high-water mark like the one plaintext buffer of a verifier that works on one object at a
// time, and kSmallSlots slots for smaller objects, whose bytes held at once and whose buffers
// kept between objects are both capped. With the engine's batches (engine.h: about 256 KiB of
// objects, or one larger object) a batch is many small objects or one large one, so the small
// slots are where several items are in flight, and the lanes cost about kSmallRetain of memory
// per worker over one object at a time. (A second large slot, which pairs the ids of two large
// objects, saved about 3 % of the CPU for 8 MiB more per worker when the lanes were built; the
// caps' trade-off is measured in bench/RESULTS.md, 2026-12-01 "the engine and hash lanes".)
// Thread contract: part of its verifier, on that verifier's worker only.
class LaneBuffers {
 public:
  static constexpr size_t kSmallSlots = 16;
  static constexpr uint64_t kLargeStored = 256 << 10;
  // Bytes held in small slots at once before an item must wait for another to be done.
  static constexpr uint64_t kSmallBytes = 4 << 20;
  // Bytes the small slots' buffers keep between objects (their high-water marks): a slot
  // released while more is kept frees its buffer.
  static constexpr uint64_t kSmallRetain = 4 << 20;

  LaneBuffers() : slots_(1 + kSmallSlots) {}

  // A free slot for an object of `stored` bytes, or -1 when there is none now; `must` (nothing
  // else in flight: every slot is free) always gives one.
  int Acquire(uint64_t stored, bool must) {
    if (stored >= kLargeStored) {
      if (slots_[0].busy) return -1;  // never with must
      slots_[0].busy = true;
      return 0;
    }
    if (small_held_ >= kSmallBytes && !must) return -1;
    for (size_t s = 1; s < slots_.size(); ++s) {
      if (!slots_[s].busy) {
        slots_[s].busy = true;
        return int(s);
      }
    }
    return -1;  // never with must
  }
  ByteBuffer& buffer(int slot) { return slots_[size_t(slot)].buffer; }
  // The slot's buffer now holds `bytes` that must stay until Release.
  void Hold(int slot, uint64_t bytes) {
    Slot& s = slots_[size_t(slot)];
    s.held = bytes;
    if (slot == 0) return;
    small_held_ += bytes;
    if (bytes > s.high_water) {
      small_retained_ += bytes - s.high_water;
      s.high_water = bytes;
    }
  }
  void Release(int slot) {
    Slot& s = slots_[size_t(slot)];
    if (slot != 0) {
      small_held_ -= s.held;
      if (small_retained_ > kSmallRetain) {
        small_retained_ -= s.high_water;
        s.buffer = ByteBuffer();
        s.high_water = 0;
      }
    }
    s.held = 0;
    s.busy = false;
  }

 private:
  struct Slot {
    ByteBuffer buffer;
    uint64_t held = 0;
    uint64_t high_water = 0;  // small slots: the most bytes this buffer has held
    bool busy = false;
  };
  std::vector<Slot> slots_;
  uint64_t small_held_ = 0;
  uint64_t small_retained_ = 0;
};

}  // namespace borgcheck::crypto
