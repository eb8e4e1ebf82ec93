#include "checker/engine/object_filter.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace borgcheck::engine {
namespace {

uint64_t Prefix(const ObjectFilter::ChunkId& id, size_t at) {
  uint64_t x = 0;
  for (size_t i = 0; i < 8; ++i) x = (x << 8) | id[at + i];
  return x;
}

// splitmix64's finaliser: a bijection that spreads every input bit over the output. Not a
// security measure (a sample is not adversarial); it decorrelates the sample from the slices,
// which use the raw prefix.
uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool IsManifest(const ObjectFilter::ChunkId& id) {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

uint32_t ObjectFilter::SliceOf(const ChunkId& id, uint32_t t) {
  if (t <= 1) return 1;
  // floor(x * t / 2^64) is in 0..t-1 for every x < 2^64.
  return uint32_t((static_cast<unsigned __int128>(Prefix(id, 0)) * t) >> 64) + 1;
}

void ObjectFilter::SetSlice(uint32_t k, uint32_t t) {
  if (t <= 1) {
    slice_.reset();  // 1/1 is everything
    return;
  }
  slice_ = Slice{k, t};
}

void ObjectFilter::SetSample(double fraction, uint64_t seed) {
  if (!(fraction < 1)) {
    sample_.reset();
    return;
  }
  Sample s;
  s.fraction = std::max(0.0, fraction);
  s.seed = seed;
  // 2^64 * fraction, below 2^64 because fraction < 1.
  s.threshold = uint64_t(std::ldexp(s.fraction, 64));
  sample_ = s;
}

void ObjectFilter::SetWantedIds(std::vector<ChunkId> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  ids_ = std::move(ids);
}

bool ObjectFilter::Wants(const ChunkId& id) const {
  if (WantsAll() || IsManifest(id)) return true;
  if (slice_ && SliceOf(id, slice_->t) != slice_->k) return false;
  if (sample_ && Mix(sample_->seed ^ Mix(Prefix(id, 0) ^ Mix(Prefix(id, 8)))) >= sample_->threshold) return false;
  if (ids_ && !std::binary_search(ids_->begin(), ids_->end(), id)) return false;
  return true;
}

std::string ObjectFilter::Describe() const {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : " and ") + s; };
  if (slice_) add(fmt::format("slice {}/{}", slice_->k, slice_->t));
  if (sample_) add(fmt::format("sample {:.4g}% (seed {})", sample_->fraction * 100, sample_->seed));
  if (ids_) add(fmt::format("{} selected ids", ids_->size()));
  return out;
}

}  // namespace borgcheck::engine
