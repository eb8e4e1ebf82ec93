// Fuzz target: the SFTP v3 reply codec of the remote Env (checker/remote/sftp_protocol.h), as
// the connection's I/O thread uses it on bytes from an untrusted server.
//
// Input: byte 0 seeds the sizes of the pieces the stream arrives in; the rest is the byte
// stream from the server (length-prefixed packets).
// Invariant:
//   - no crash, no unbounded allocation: PacketReader never holds more than one packet in
//     progress plus one read (kMaxPacket + 4 + kReadChunk), and refuses lengths 0 and over
//     kMaxPacket;
//   - every packet body it yields is 1..kMaxPacket bytes, and the same packets come out
//     whatever the piece sizes (compared with feeding the stream at once);
//   - every decoder either fails or returns views inside the body; a NAME never has more
//     entries than its body has bytes / 12; DATA is never longer than its body.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "checker/remote/sftp_protocol.h"
#include "fuzz/fuzz_support.h"

using namespace borgcheck;
using namespace borgcheck::remote;

namespace {

bool Inside(std::string_view outer, std::string_view inner) {
  return inner.empty() || (inner.data() >= outer.data() && inner.data() + inner.size() <= outer.data() + outer.size());
}

void DecodeAll(std::string_view body) {
  FUZZ_CHECK(!body.empty() && body.size() <= sftp::kMaxPacket);
  (void)sftp::ParseVersion(body);
  (void)sftp::ParseStatus(body);
  Result<std::string> h = sftp::ParseHandle(body);
  if (h.ok()) FUZZ_CHECK(h->size() <= 256);
  Result<std::string_view> d = sftp::ParseData(body);
  if (d.ok()) FUZZ_CHECK(Inside(body, *d) && d->size() + 9 <= body.size());
  (void)sftp::ParseAttrsReply(body);
  Result<std::vector<sftp::NameEntry>> n = sftp::ParseName(body);
  if (n.ok()) FUZZ_CHECK(n->size() <= body.size() / 12);
  sftp::Cursor c(body);
  std::string_view s;
  while (c.String(&s)) FUZZ_CHECK(Inside(body, s));
}

// The packets of `stream` fed in pieces (piece sizes from `seed`; 0 = reads of kReadChunk), and whether
// the stream stopped at a bad length.
std::vector<std::string> Cut(const uint8_t* data, size_t size, uint8_t seed, bool* bad) {
  sftp::PacketReader r;
  std::vector<std::string> out;
  *bad = false;
  uint32_t state = seed;
  size_t at = 0;
  while (at < size && !*bad) {
    size_t piece = std::min(size - at, sftp::PacketReader::kReadChunk);  // one read at most
    if (seed != 0) {
      state = state * 1103515245u + 12345u;
      piece = std::min<size_t>(piece, 1 + (state >> 16) % 97);
    }
    r.Append(data + at, piece);
    at += piece;
    std::string_view body;
    Status error;
    while (r.Next(&body, &error)) {
      DecodeAll(body);
      out.emplace_back(body);
    }
    if (!error.ok()) *bad = true;
    FUZZ_CHECK(r.buffered() <= sftp::kMaxPacket + 4 + sftp::PacketReader::kReadChunk);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t seed = data[0];
  bool bad_whole = false, bad_pieces = false;
  const std::vector<std::string> whole = Cut(data + 1, size - 1, 0, &bad_whole);
  const std::vector<std::string> pieces = Cut(data + 1, size - 1, seed | 1, &bad_pieces);
  FUZZ_CHECK(whole == pieces && bad_whole == bad_pieces);
  return 0;
}
