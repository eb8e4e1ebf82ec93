// Fuzz target: the reply stream of `borg serve` (checker/remote/borg_rpc.h, ReplyDecoder), as
// the connection's I/O thread decodes the bytes an untrusted server writes to its stdout. No
// process and no thread: the decoder is the I/O thread's whole parsing part.
//
// Input: byte 0 seeds the sizes of the pieces the stream arrives in; the rest is the byte
// stream from the server (msgpack maps {"i": msgid, "r": result} or {"i": msgid,
// "exception_class": ..., "exception_args": [...], "exception_short": [...]}).
// Invariant:
//   - no crash, no unbounded allocation: the unpacker's limits (kMaxReplyArray entries per
//     array, 1000 per map, depth 8, no ext, kMaxReplyBytes per str/bin) and the wire bound;
//   - every reply it yields has a msgid in 1..INT64_MAX and a wire length of 1..kMaxReplyBytes,
//     and the wire lengths add up to no more than the stream; an error reply has a class and a
//     message, a result reply neither;
//   - once it answers kError it answers kError for ever;
//   - the same replies (msgid, wire length, class, message, result) and the same end come out
//     whatever the piece sizes (compared with feeding the stream at once).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "checker/base/msgpack_util.h"
#include "checker/remote/borg_rpc.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using namespace borgcheck::remote;

namespace {

struct Seen {
  uint64_t msgid;
  uint64_t wire_bytes;
  std::string exception_class;
  std::string exception_message;
  std::vector<std::string> exception_args;
  std::string result;  // the result re-packed (what the callers read of it)
  bool operator==(const Seen&) const = default;
};

Seen Summarize(const ReplyDecoder::Decoded& d) {
  Seen s{d.msgid, d.wire_bytes, d.reply.exception_class, d.reply.exception_message, d.reply.exception_args, {}};
  FUZZ_CHECK(d.msgid >= 1 && d.msgid <= uint64_t(INT64_MAX));
  FUZZ_CHECK(d.wire_bytes >= 1 && d.wire_bytes <= kMaxReplyBytes);
  if (d.reply.ok()) {
    FUZZ_CHECK(d.reply.exception_message.empty() && d.reply.exception_args.empty());
    msgpack::sbuffer buf;
    msgpack::pack(buf, d.reply.result);
    s.result.assign(buf.data(), buf.size());
    // What the callers take out of a result: bytes (a get), ids (list, scan).
    Bytes b;
    if (msgpack_util::AsRaw(&d.reply.result, b)) FUZZ_CHECK(b.size() <= kMaxReplyBytes);
    if (d.reply.result.type == msgpack::type::ARRAY) FUZZ_CHECK(d.reply.result.via.array.size <= kMaxReplyArray);
  } else {
    FUZZ_CHECK(!d.reply.exception_message.empty());
    FUZZ_CHECK(d.reply.result.type == msgpack::type::NIL);
    (void)ParseSegmentOffset(d.reply.exception_message);
  }
  return s;
}

// The replies of `stream` fed in pieces (piece sizes from `seed`; 0 = all at once), and whether
// the stream ended in an error.
std::vector<Seen> Decode(const uint8_t* data, size_t size, uint8_t seed, bool* error_end) {
  ReplyDecoder dec;
  std::vector<Seen> out;
  *error_end = false;
  uint32_t state = seed;
  size_t at = 0;
  uint64_t wire = 0;
  std::string error;
  ReplyDecoder::Decoded d;
  do {
    size_t piece = size - at;
    if (seed != 0) {
      state = state * 1103515245u + 12345u;
      piece = std::min<size_t>(piece, 1 + (state >> 16) % 97);
    }
    dec.Feed(reinterpret_cast<const char*>(data + at), piece);
    at += piece;
    ReplyDecoder::Step st;
    while ((st = dec.Next(d, error)) == ReplyDecoder::Step::kReply) {
      out.push_back(Summarize(d));
      wire += d.wire_bytes;
      FUZZ_CHECK(wire <= at);
    }
    if (st == ReplyDecoder::Step::kError) {
      FUZZ_CHECK(!error.empty());
      *error_end = true;
      // Sticky: more bytes change nothing.
      dec.Feed("\x80", 1);
      FUZZ_CHECK(dec.Next(d, error) == ReplyDecoder::Step::kError);
      break;
    }
  } while (at < size);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t seed = data[0];
  bool error_whole = false, error_pieces = false;
  const std::vector<Seen> whole = Decode(data + 1, size - 1, 0, &error_whole);
  const std::vector<Seen> pieces = Decode(data + 1, size - 1, seed | 1, &error_pieces);
  FUZZ_CHECK(whole == pieces && error_whole == error_pieces);
  return 0;
}
