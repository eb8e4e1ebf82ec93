// HashPipeline: see hash_pipeline.h for the schedule.
//
// Outline of Run:
//   1. Fill: while a lane is free, start the oldest queued message there; with none queued,
//      ask the caller to decode the next item (its messages join the queue); stop when no lane
//      is free, every item is decoded, or the caller has no room (Decode returns -1).
//   2. Compress: Run() on the lanes of the engine that has busy lanes (SHA-256 first); it
//      returns the lanes that need the caller: a finished message (Take its digest) or one
//      that consumed its first part (give it the second and finish it).
//   3. An item whose last digest was taken is Done; repeat until nothing is busy or queued.
// A lane holds a whole message (both parts are in memory when it starts), so a lane Run()
// reports is either done or waiting for its second part, never for more of the first.
#include "checker/crypto/hash_pipeline.h"

#include <algorithm>

namespace borgcheck::crypto {

LaneHash LaneHash::Sha256() {
  LaneHash h;
  h.kind_ = Kind::kSha256;
  return h;
}

Result<LaneHash> LaneHash::HmacSha256(Bytes key) {
  Result<HmacSha256Key> k = HmacSha256Key::Create(key);
  if (!k.ok()) return k.status();
  LaneHash h;
  h.kind_ = Kind::kHmacSha256;
  h.hmac_ = std::move(k).value();
  return h;
}

LaneHash LaneHash::Blake2b256(Bytes prefix) {
  LaneHash h;
  h.kind_ = Kind::kBlake2b256;
  h.prefix_ = Blake2bPrefix::Create(prefix);
  return h;
}

int HashPipeline::FreeLane(const Job& job) const {
  if (job.hash->kind() == LaneHash::Kind::kBlake2b256) {
    for (size_t l = 0; l < Blake2b256Lanes::kMaxLanes; ++l) {
      if (!b2_running_[l].busy) return int(l);
    }
    return -1;
  }
  for (size_t l = 0; l < Sha256Lanes::kMaxLanes; ++l) {
    if (!sha_running_[l].busy) return int(l);
  }
  return -1;
}

void HashPipeline::Start(int lane, const Queued& q) {
  const Job& j = q.job;
  // The first part may be empty; then the second is the whole message.
  const Bytes first = j.first.empty() ? j.second : j.first;
  const Bytes second = j.first.empty() ? Bytes() : j.second;
  Running& r = j.hash->kind() == LaneHash::Kind::kBlake2b256 ? b2_running_[lane] : sha_running_[lane];
  r.busy = true;
  r.item = q.item;
  r.job = j;
  r.job.first = first;
  r.job.second = second;
  const size_t l = size_t(lane);
  switch (j.hash->kind()) {
    case LaneHash::Kind::kSha256:
    case LaneHash::Kind::kHmacSha256:
      if (j.hash->kind() == LaneHash::Kind::kSha256) {
        sha_.Start(l);
      } else {
        sha_.Start(l, *j.hash->hmac_);
      }
      if (!first.empty()) sha_.Update(l, first);
      if (second.empty()) sha_.Finish(l);
      ++sha_busy_;
      break;
    case LaneHash::Kind::kBlake2b256:
      b2_.Start(l, *j.hash->prefix_);
      if (!first.empty()) b2_.Update(l, first);
      if (second.empty()) b2_.Finish(l);
      ++b2_busy_;
      break;
  }
}

void HashPipeline::Collect(bool blake2b, uint32_t mask, Items& items) {
  const size_t lanes = blake2b ? Blake2b256Lanes::kMaxLanes : Sha256Lanes::kMaxLanes;
  Running* running = blake2b ? b2_running_ : sha_running_;
  for (size_t l = 0; l < lanes; ++l) {
    if ((mask & (uint32_t(1) << l)) == 0) continue;
    Running& r = running[l];
    const bool done = blake2b ? b2_.IsDone(l) : sha_.IsDone(l);
    if (!done) {
      // The first part is consumed: the second follows, and the message is complete.
      const Bytes second = r.job.second;
      r.job.second = Bytes();
      if (blake2b) {
        if (!second.empty()) b2_.Update(l, second);
        b2_.Finish(l);
      } else {
        if (!second.empty()) sha_.Update(l, second);
        sha_.Finish(l);
      }
      continue;
    }
    if (blake2b) {
      b2_.Take(l, r.job.out);
      --b2_busy_;
    } else {
      sha_.Take(l, r.job.out);
      --sha_busy_;
    }
    r.busy = false;
    if (--pending_[r.item] == 0) {
      --items_in_flight_;
      items.Done(r.item);
    }
  }
}

void HashPipeline::Run(size_t n, Items& items) {
  pending_.assign(n, 0);
  queue_.clear();
  queue_head_ = 0;
  items_in_flight_ = 0;
  size_t next = 0;
  Job jobs[kMaxJobsPerItem];
  for (;;) {
    // 1. Fill.
    for (;;) {
      if (queue_head_ < queue_.size()) {
        const int lane = FreeLane(queue_[queue_head_].job);
        if (lane < 0) break;
        Start(lane, queue_[queue_head_]);
        if (++queue_head_ == queue_.size()) {
          queue_.clear();
          queue_head_ = 0;
        }
        continue;
      }
      if (next >= n) break;
      // Decode ahead only while some lane could take its messages.
      if (sha_busy_ == Sha256Lanes::kMaxLanes || b2_busy_ == Blake2b256Lanes::kMaxLanes) break;
      const bool must = items_in_flight_ == 0;
      int k = items.Decode(next, jobs, must);
      if (k < 0 && !must) break;  // no room: after an item is done
      k = std::clamp(k, 0, int(kMaxJobsPerItem));
      if (k == 0) {
        items.Done(next++);
        continue;
      }
      pending_[next] = uint8_t(k);
      ++items_in_flight_;
      for (int j = 0; j < k; ++j) queue_.push_back({next, jobs[j]});
      ++next;
    }
    // 2. Compress, 3. collect.
    if (sha_busy_ > 0) {
      Collect(false, sha_.Run(), items);
    } else if (b2_busy_ > 0) {
      Collect(true, b2_.Run(), items);
    } else if (next >= n && queue_head_ >= queue_.size()) {
      return;
    }
  }
}

}  // namespace borgcheck::crypto
