// Fuzz target: crypto::Sha256Lanes and crypto::HmacSha256Key (checker/crypto/sha256_lanes.h),
// differential against OpenSSL's one-shot SHA-256 and HMAC, on every path: the default engine
// (SHA-NI, and AVX-512 for 13+ busy lanes, on a CPU that has them), SHA-NI without AVX-512
// (TEST_DisableAvx512) and the OpenSSL fallback (TEST_ForceOpenSsl).
//
// Input: control byte (lanes = 1 + (c & 15)), then up to 24 message records, each
//   key_len u8    0xff: plain SHA-256; else an HMAC key of key_len (0..254) bytes, which follow
//   len LE16      message bytes that follow (fewer if the input ends first)
//   repeat u8     the message is those bytes repeated 1 + (repeat & 15) times, x 64 when bit 7
//                 is set (long messages from a short input), fewer so that all messages of an
//                 input stay within 3 MiB (records past that are dropped)
//   piece u8      0: one Update with the whole message; else Update sizes 0..2 * piece from a
//                 generator seeded with it (empty updates included), at most 64 of them, then
//                 the rest in one Update; Finish comes with the last piece or on its own
// The messages are scheduled onto the lanes in order; a lane that Run() reports done takes
// the next message, so lanes are reused while the others are mid-message.
// Invariant: every digest equals OpenSSL's; Run() returns a non-zero mask while any lane is
// open, only lanes that are open, and 0 once all are idle; the number of Run() calls is
// bounded by the number of Updates and messages (no lane is ever stuck).
// Seeds (fuzz/corpus/sha256_lanes/seed-*, made by hand with the layout above): lengths at block
// and padding boundaries, keys of 0, 1, 64, 65 and 200 bytes, 1 to 16 lanes, a 1 MiB message.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "checker/crypto/sha256_lanes.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using crypto::HmacSha256Key;
using crypto::Sha256Lanes;

namespace {

struct Message {
  std::optional<std::vector<uint8_t>> key;  // nullopt: plain SHA-256
  std::optional<HmacSha256Key> prepared;
  std::vector<uint8_t> bytes;
  uint8_t piece = 0;
  uint8_t expected[32] = {};
};

constexpr size_t kMaxTotal = 3 << 20;

std::vector<Message> Parse(const uint8_t* data, size_t size, size_t& lanes) {
  std::vector<Message> msgs;
  if (size == 0) return msgs;
  lanes = 1 + (data[0] & 15);
  size_t pos = 1, total = 0;
  while (pos < size && msgs.size() < 24) {
    Message m;
    const uint8_t key_len = data[pos++];
    if (key_len != 0xff) {
      const size_t k = std::min<size_t>(key_len, size - pos);
      m.key.emplace(data + pos, data + pos + k);
      pos += k;
    }
    uint8_t hdr[4] = {};
    for (uint8_t& b : hdr) b = pos < size ? data[pos++] : 0;
    const size_t len = std::min<size_t>(size_t(hdr[0]) | size_t(hdr[1]) << 8, size - pos);
    size_t repeat = (1 + (hdr[2] & 15)) * (hdr[2] & 0x80 ? 64 : 1);
    // At most kMaxTotal bytes of messages per input, so that an input costs milliseconds.
    if (len > 0) repeat = std::min(repeat, std::max<size_t>(1, (kMaxTotal - total) / len));
    if (total + len * repeat > kMaxTotal) break;
    total += len * repeat;
    m.piece = hdr[3];
    m.bytes.reserve(len * repeat);
    for (size_t r = 0; r < repeat; ++r) m.bytes.insert(m.bytes.end(), data + pos, data + pos + len);
    pos += len;
    msgs.push_back(std::move(m));
  }
  return msgs;
}

// Feeds a message in the pieces its `piece` byte asks for.
class Feeder {
 public:
  Feeder() = default;
  explicit Feeder(const Message* m) : m_(m), state_(m->piece * 2654435761u + 1) {}
  // Gives the lane its next piece (or Finish); returns the number of Updates made.
  size_t Feed(Sha256Lanes& lanes, size_t lane) {
    const size_t left = m_->bytes.size() - pos_;
    if (finished_) return 0;
    if (left == 0) {
      lanes.Finish(lane);
      finished_ = true;
      return 0;
    }
    size_t n = left;
    if (m_->piece != 0 && updates_ < 64) {
      state_ ^= state_ << 13;
      state_ ^= state_ >> 17;
      state_ ^= state_ << 5;
      n = std::min<size_t>(left, state_ % (2 * size_t(m_->piece) + 1));
    }
    lanes.Update(lane, Bytes(m_->bytes.data() + pos_, n));
    pos_ += n;
    ++updates_;
    if (pos_ == m_->bytes.size() && (state_ & 1)) {
      lanes.Finish(lane);
      finished_ = true;
    }
    return 1;
  }

 private:
  const Message* m_ = nullptr;
  uint32_t state_ = 1;
  size_t pos_ = 0;
  size_t updates_ = 0;
  bool finished_ = false;
};

void RunLanes(Sha256Lanes& lanes, size_t n_lanes, std::vector<Message>& msgs) {
  Message* running[Sha256Lanes::kMaxLanes] = {};
  Feeder feeders[Sha256Lanes::kMaxLanes];
  size_t next = 0, done = 0, updates = 0, runs = 0;
  auto start = [&](size_t lane) {
    Message& m = msgs[next++];
    if (m.prepared) {
      lanes.Start(lane, *m.prepared);
    } else {
      lanes.Start(lane);
    }
    running[lane] = &m;
    feeders[lane] = Feeder(&m);
    updates += feeders[lane].Feed(lanes, lane);
  };
  for (size_t lane = 0; lane < n_lanes && next < msgs.size(); ++lane) start(lane);
  while (done < msgs.size()) {
    const Sha256Lanes::LaneMask ready = lanes.Run();
    ++runs;
    // Every Run hands back at least one lane, and each handing-back is answered by an Update,
    // a Finish or a Take: one Run per such event at most.
    FUZZ_CHECK(runs <= updates + 2 * msgs.size());
    FUZZ_CHECK(ready != 0);
    FUZZ_CHECK((ready >> n_lanes) == 0);
    for (size_t lane = 0; lane < n_lanes; ++lane) {
      if ((ready & (1u << lane)) == 0) continue;
      FUZZ_CHECK(running[lane] != nullptr && !lanes.IsIdle(lane));
      if (!lanes.IsDone(lane)) {
        updates += feeders[lane].Feed(lanes, lane);
        continue;
      }
      uint8_t digest[32];
      lanes.Take(lane, digest);
      FUZZ_CHECK(std::memcmp(digest, running[lane]->expected, 32) == 0);
      running[lane] = nullptr;
      ++done;
      if (next < msgs.size()) start(lane);
    }
  }
  FUZZ_CHECK(lanes.Run() == 0);
  for (size_t lane = 0; lane < Sha256Lanes::kMaxLanes; ++lane) FUZZ_CHECK(lanes.IsIdle(lane));
  FUZZ_CHECK(lanes.status().ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t n_lanes = 1;
  std::vector<Message> msgs = Parse(data, size, n_lanes);
  if (msgs.empty()) return 0;
  for (Message& m : msgs) {
    unsigned int n = 0;
    if (m.key) {
      static const uint8_t kEmpty = 0;
      FUZZ_CHECK(HMAC(EVP_sha256(), m.key->empty() ? &kEmpty : m.key->data(), int(m.key->size()),
                      m.bytes.data(), m.bytes.size(), m.expected, &n) != nullptr);
      Result<HmacSha256Key> k = HmacSha256Key::Create(Bytes(m.key->data(), m.key->size()));
      FUZZ_CHECK(k.ok());
      m.prepared.emplace(std::move(*k));
    } else {
      FUZZ_CHECK(EVP_Digest(m.bytes.data(), m.bytes.size(), m.expected, &n, EVP_sha256(),
                            nullptr) == 1);
    }
    FUZZ_CHECK(n == 32);
  }
  Sha256Lanes lanes;
  FUZZ_CHECK(lanes.status().ok());
  RunLanes(lanes, n_lanes, msgs);
  Sha256Lanes shani_only;
  shani_only.TEST_DisableAvx512();
  FUZZ_CHECK(!shani_only.uses_avx512());
  RunLanes(shani_only, n_lanes, msgs);
  Sha256Lanes fallback;
  fallback.TEST_ForceOpenSsl();
  FUZZ_CHECK(fallback.status().ok() && fallback.engine() == Sha256Lanes::Engine::kOpenSsl);
  RunLanes(fallback, n_lanes, msgs);
  return 0;
}
