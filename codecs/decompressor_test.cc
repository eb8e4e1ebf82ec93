// Tests for borgcheck::codecs. Inputs are made with the real compression libraries (the same
// ones borg links), then damaged one way per case; the real borg 1.2.4 objects from the shared
// fixtures are decoded last.

#include "codecs/decompressor.h"

#include <lz4.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace borgcheck::codecs {
namespace {

// ---- Building inputs --------------------------------------------------------------------------

std::string ToString(const ByteBuffer& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// Compressible text-like data, deterministic.
std::string MakeText(size_t n, uint32_t seed = 1) {
  static const char* const kWords[] = {"segment ", "chunk ",      "borg ", "archive ", "index ",
                                       "commit\n", "repository ", "0123 ", "verify "};
  std::string s;
  uint32_t x = seed * 2654435761u + 1;
  while (s.size() < n) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s += kWords[x % 9];
  }
  s.resize(n);
  return s;
}

// Incompressible data, deterministic.
std::string MakeRandom(size_t n, uint32_t seed = 7) {
  std::string s(n, '\0');
  uint32_t x = seed;
  for (auto& c : s) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = char(x >> 24);
  }
  return s;
}

const std::string kHdrNone("\x00\x00", 2);
const std::string kHdrLz4("\x01\x00", 2);
const std::string kHdrLzma("\x02\x00", 2);
const std::string kHdrZstd("\x03\x00", 2);
const std::string kHdrObfuscate("\x04\x00", 2);

std::string Lz4Body(const std::string& in) {
  std::string out(size_t(LZ4_compressBound(int(in.size()))), '\0');
  const int n = LZ4_compress_default(in.data(), out.data(), int(in.size()), int(out.size()));
  REQUIRE(n > 0);
  out.resize(size_t(n));
  return out;
}

std::string ZstdBody(const std::string& in, bool checksum = false) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  REQUIRE(cctx != nullptr);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, checksum ? 1 : 0);
  std::string out(ZSTD_compressBound(in.size()), '\0');
  const size_t n = ZSTD_compress2(cctx, out.data(), out.size(), in.data(), in.size());
  ZSTD_freeCCtx(cctx);
  REQUIRE(!ZSTD_isError(n));
  out.resize(n);
  return out;
}

// The whole borg 1.x payload: a zlib stream has no borg header.
std::string ZlibPayload(const std::string& in) {
  uLongf len = compressBound(uLong(in.size()));
  std::string out(len, '\0');
  REQUIRE(compress2(reinterpret_cast<Bytef*>(out.data()), &len,
                    reinterpret_cast<const Bytef*>(in.data()), uLong(in.size()), 6) == Z_OK);
  out.resize(len);
  return out;
}

std::string XzBody(const std::string& in, uint32_t preset = 6) {
  std::string out(lzma_stream_buffer_bound(in.size()), '\0');
  size_t pos = 0;
  REQUIRE(lzma_easy_buffer_encode(
              preset, LZMA_CHECK_NONE, nullptr, reinterpret_cast<const uint8_t*>(in.data()),
              in.size(), reinterpret_cast<uint8_t*>(out.data()), &pos, out.size()) == LZMA_OK);
  out.resize(pos);
  return out;
}

std::string BE32(uint32_t v) {
  return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

std::string Obfuscate(const std::string& inner, size_t padding, char pad_byte = '\0') {
  return kHdrObfuscate + BE32(uint32_t(inner.size())) + inner + std::string(padding, pad_byte);
}

struct Codec {
  CodecId id;
  std::string (*payload)(const std::string&);
};

const Codec kCodecs[] = {
    {CodecId::kNone, [](const std::string& s) { return kHdrNone + s; }},
    {CodecId::kLz4, [](const std::string& s) { return kHdrLz4 + Lz4Body(s); }},
    {CodecId::kZstd, [](const std::string& s) { return kHdrZstd + ZstdBody(s); }},
    {CodecId::kZlib, [](const std::string& s) { return ZlibPayload(s); }},
    {CodecId::kLzma, [](const std::string& s) { return kHdrLzma + XzBody(s); }},
};

DecodeResult Decode(Decompressor& d, const std::string& payload, ByteBuffer& out) {
  return d.DecodeBorg1(AsBytes(payload), out);
}

// ---- Round trips ------------------------------------------------------------------------------

TEST_CASE("CodecName names every codec", "[codecs]") {
  CHECK(CodecName(CodecId::kNone) == "none");
  CHECK(CodecName(CodecId::kLz4) == "lz4");
  CHECK(CodecName(CodecId::kZstd) == "zstd");
  CHECK(CodecName(CodecId::kZlib) == "zlib");
  CHECK(CodecName(CodecId::kLzma) == "lzma");
  CHECK(CodecName(CodecId::kObfuscate) == "obfuscate");
  CHECK(CodecName(CodecId::kUnknown) == "unknown");
}

TEST_CASE("every codec round-trips", "[codecs]") {
  const std::vector<std::string> inputs = {"", "x", MakeText(1000), MakeText(300 * 1024, 3),
                                           MakeRandom(70 * 1024)};
  Decompressor d;
  ByteBuffer out;
  for (const Codec& c : kCodecs) {
    for (const std::string& in : inputs) {
      INFO("codec " << CodecName(c.id) << ", " << in.size() << " bytes");
      const DecodeResult r = Decode(d, c.payload(in), out);
      REQUIRE(r.ok);
      CHECK(r.error.empty());
      CHECK(r.codec == c.id);
      CHECK(r.inner_codec == c.id);
      CHECK_FALSE(r.nonzero_padding);
      CHECK(ToString(out) == in);
    }
  }
}

TEST_CASE("obfuscate wraps every codec", "[codecs]") {
  const std::string in = MakeText(20000, 5);
  Decompressor d;
  ByteBuffer out;
  for (const Codec& c : kCodecs) {
    for (size_t padding : {size_t(0), size_t(1), size_t(4096)}) {
      INFO("inner " << CodecName(c.id) << ", padding " << padding);
      const DecodeResult r = Decode(d, Obfuscate(c.payload(in), padding), out);
      REQUIRE(r.ok);
      CHECK(r.codec == CodecId::kObfuscate);
      CHECK(r.inner_codec == c.id);
      CHECK_FALSE(r.nonzero_padding);
      CHECK(ToString(out) == in);
    }
  }
}

// ---- Damage: one named case per kind ----------------------------------------------------------

TEST_CASE("corrupted lz4 block fails", "[codecs][damage]") {
  // One literal 'a', then a match whose offset (0xffff) points far before the output start.
  const std::string block = std::string{'\x10', 'a', '\xff', '\xff'} + std::string(16, '\x00');
  Decompressor d;
  ByteBuffer out;
  const DecodeResult r = Decode(d, kHdrLz4 + block, out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kLz4);
  CHECK(r.error == "lz4 decompress failed");
}

TEST_CASE("corrupted zstd frame fails", "[codecs][damage]") {
  Decompressor d;
  ByteBuffer out;
  SECTION("checksum mismatch") {
    std::string body = ZstdBody(MakeText(5000), /*checksum=*/true);
    body.back() ^= 0x01;
    const DecodeResult r = Decode(d, kHdrZstd + body, out);
    CHECK_FALSE(r.ok);
    CHECK(r.codec == CodecId::kZstd);
    CHECK(r.error.rfind("zstd decompress failed: ", 0) == 0);
  }
  SECTION("bad magic") {
    std::string body = ZstdBody(MakeText(5000));
    body[0] ^= 0x01;
    const DecodeResult r = Decode(d, kHdrZstd + body, out);
    CHECK_FALSE(r.ok);
    CHECK(r.codec == CodecId::kZstd);
    CHECK(r.error.rfind("zstd decompress failed: ", 0) == 0);
  }
}

TEST_CASE("corrupted zlib stream fails with Python's wording", "[codecs][damage]") {
  std::string payload = ZlibPayload(MakeText(5000));
  payload.back() ^= 0x01;  // the Adler-32
  Decompressor d;
  ByteBuffer out;
  const DecodeResult r = Decode(d, payload, out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kZlib);
  CHECK(r.error == "Error -3 while decompressing data: incorrect data check");
}

TEST_CASE("corrupted xz stream fails", "[codecs][damage]") {
  Decompressor d;
  ByteBuffer out;
  SECTION("footer magic") {
    std::string body = XzBody(MakeText(5000));
    body.back() ^= 0x01;
    const DecodeResult r = Decode(d, kHdrLzma + body, out);
    CHECK_FALSE(r.ok);
    CHECK(r.codec == CodecId::kLzma);
    CHECK(r.error == "lzma decompress failed: corrupt input data");
  }
  SECTION("stream magic") {
    std::string body = XzBody(MakeText(5000));
    body[1] ^= 0x01;
    const DecodeResult r = Decode(d, kHdrLzma + body, out);
    CHECK_FALSE(r.ok);
    CHECK(r.codec == CodecId::kLzma);
    CHECK(r.error == "lzma decompress failed: input format not recognised as xz");
  }
}

TEST_CASE("truncated input fails for every compressing codec", "[codecs][damage]") {
  const std::string in = MakeText(50000, 9);
  Decompressor d;
  ByteBuffer out;
  for (const Codec& c : kCodecs) {
    if (c.id == CodecId::kNone) continue;  // no structure to truncate
    const std::string full = c.payload(in);
    for (size_t cut : {size_t(1), size_t(5), full.size() / 2}) {
      INFO("codec " << CodecName(c.id) << ", cut " << cut);
      const DecodeResult r = Decode(d, full.substr(0, full.size() - cut), out);
      CHECK_FALSE(r.ok);
      CHECK(r.codec == c.id);
      CHECK_FALSE(r.error.empty());
    }
  }
  // The exact wording where the library tells truncation apart.
  const std::string z = ZlibPayload(in);
  CHECK(Decode(d, z.substr(0, z.size() - 5), out).error ==
        "Error -5 while decompressing data: incomplete or truncated stream");
  const std::string x = kHdrLzma + XzBody(in);
  CHECK(Decode(d, x.substr(0, x.size() / 2), out).error ==
        "lzma decompress failed: compressed data ended before the end-of-stream marker was "
        "reached");
}

TEST_CASE("trailing data after a complete stream fails", "[codecs][damage]") {
  const std::string in = MakeText(20000, 11);
  const std::string garbage("\xde\xad\xbe\xef garbage", 12);
  Decompressor d;
  ByteBuffer out;
  DecodeResult r = Decode(d, kHdrZstd + ZstdBody(in) + garbage, out);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "trailing data after zstd stream");
  r = Decode(d, kHdrZstd + ZstdBody(in) + ZstdBody(in), out);  // a second frame is trailing too
  CHECK_FALSE(r.ok);
  CHECK(r.error == "trailing data after zstd stream");
  r = Decode(d, ZlibPayload(in) + garbage, out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kZlib);
  CHECK(r.error == "trailing data after zlib stream");
  r = Decode(d, kHdrLzma + XzBody(in) + garbage, out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kLzma);
  CHECK(r.error == "trailing data after lzma stream");
  // A raw LZ4 block must consume exactly its input.
  r = Decode(d, kHdrLz4 + Lz4Body(in) + garbage, out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kLz4);
  CHECK(r.error == "lz4 decompress failed");
}

TEST_CASE("unknown header", "[codecs][damage]") {
  Decompressor d;
  ByteBuffer out;
  for (const std::string& p :
       {std::string(), std::string("\x01", 1), std::string("\x05\x00zz", 4),
        std::string("\xff\xff", 2), std::string("\x01\x01zz", 4), std::string("\x78\x9d", 2)}) {
    INFO("payload " << ToHex(AsBytes(p)));
    const DecodeResult r = Decode(d, p, out);
    CHECK_FALSE(r.ok);
    CHECK(r.codec == CodecId::kUnknown);
    CHECK(r.error == "No decompressor for this data found");
  }
}

TEST_CASE("obfuscate length larger than the remainder fails", "[codecs][damage]") {
  Decompressor d;
  ByteBuffer out;
  const std::string inner = kHdrNone + "hello";
  // Claims one byte more than there is.
  std::string p = kHdrObfuscate + BE32(uint32_t(inner.size() + 1)) + inner;
  DecodeResult r = Decode(d, p, out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kObfuscate);
  CHECK(r.error == "obfuscate inner length 8 exceeds the 7 bytes remaining");
  // An absurd length.
  r = Decode(d, kHdrObfuscate + BE32(0xffffffffu) + inner, out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kObfuscate);
  // Too short for the length field itself.
  r = Decode(d, kHdrObfuscate + std::string("\x00\x00", 2), out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kObfuscate);
}

TEST_CASE("obfuscate inner failure keeps both codecs", "[codecs][damage]") {
  std::string inner = ZlibPayload(MakeText(3000));
  inner.back() ^= 0x01;
  Decompressor d;
  ByteBuffer out;
  const DecodeResult r = Decode(d, Obfuscate(inner, 10), out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kObfuscate);
  CHECK(r.inner_codec == CodecId::kZlib);
  CHECK(r.error == "Error -3 while decompressing data: incorrect data check");
}

TEST_CASE("non-zero obfuscate padding is flagged, not failed", "[codecs][damage]") {
  const std::string in = MakeText(4000);
  Decompressor d;
  ByteBuffer out;
  std::string p = Obfuscate(kHdrZstd + ZstdBody(in), 100);
  p[p.size() - 50] = '\x01';
  const DecodeResult r = Decode(d, p, out);
  REQUIRE(r.ok);
  CHECK(r.codec == CodecId::kObfuscate);
  CHECK(r.inner_codec == CodecId::kZstd);
  CHECK(r.nonzero_padding);
  CHECK(ToString(out) == in);
  // The last padding byte counts too.
  p = Obfuscate(kHdrNone + in, 3);
  p.back() = '\x80';
  CHECK(Decode(d, p, out).nonzero_padding);
}

TEST_CASE("obfuscate nesting is bounded", "[codecs][damage]") {
  Decompressor d;
  ByteBuffer out;
  std::string p = kHdrLz4 + Lz4Body("nested");
  for (int i = 0; i < 4; ++i) p = Obfuscate(p, 2);
  DecodeResult r = Decode(d, p, out);
  REQUIRE(r.ok);
  CHECK(r.inner_codec == CodecId::kLz4);
  CHECK(ToString(out) == "nested");
  r = Decode(d, Obfuscate(p, 2), out);  // five levels
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kObfuscate);
  CHECK(r.error == "obfuscate nested deeper than 4 levels");
}

// ---- Bombs and absurd sizes -------------------------------------------------------------------

const std::string& HundredMegabytesOfZeros() {
  static const std::string zeros(100u << 20, '\0');
  return zeros;
}

TEST_CASE("decompression bombs fail at the limit without allocating", "[codecs][limit]") {
  constexpr size_t kCap = 1u << 20;
  const std::string& zeros = HundredMegabytesOfZeros();
  const std::string expected = "decompressed size exceeds limit of 1048576 bytes";
  struct Bomb {
    CodecId id;
    std::string payload;
  };
  const Bomb bombs[] = {
      {CodecId::kLz4, kHdrLz4 + Lz4Body(zeros)},
      {CodecId::kZstd, kHdrZstd + ZstdBody(zeros)},
      {CodecId::kZlib, ZlibPayload(zeros)},
      {CodecId::kLzma, kHdrLzma + XzBody(zeros, 0)},
      {CodecId::kNone, kHdrNone + std::string(kCap + 1, 'a')},
  };
  for (const Bomb& b : bombs) {
    INFO("codec " << CodecName(b.id) << ", " << b.payload.size() << " compressed bytes");
    Decompressor d(kCap);
    ByteBuffer out;
    const DecodeResult r = d.DecodeBorg1(AsBytes(b.payload), out);
    CHECK_FALSE(r.ok);
    CHECK(r.codec == b.id);
    CHECK(r.error == expected);
    // ByteBuffer rounds capacity up to a power of two: at most twice the cap (+1) was asked for.
    CHECK(out.capacity() <= 2 * (kCap + 1));
    // Also through obfuscation.
    const DecodeResult o = d.DecodeBorg1(AsBytes(Obfuscate(b.payload, 0)), out);
    CHECK_FALSE(o.ok);
    CHECK(o.inner_codec == b.id);
    CHECK(o.error == expected);
  }
}

TEST_CASE("output of exactly the limit is accepted", "[codecs][limit]") {
  constexpr size_t kCap = 64 * 1024;
  const std::string in = MakeText(kCap, 13);
  Decompressor d(kCap);
  ByteBuffer out;
  for (const Codec& c : kCodecs) {
    INFO("codec " << CodecName(c.id));
    DecodeResult r = Decode(d, c.payload(in), out);
    CHECK(r.ok);
    CHECK(ToString(out) == in);
    r = Decode(d, c.payload(in + "!"), out);
    CHECK_FALSE(r.ok);
    CHECK(r.error == "decompressed size exceeds limit of 65536 bytes");
  }
}

// A hand-made zstd frame: header with an 8-byte content size (no window descriptor when the
// single-segment flag is set), then one empty last raw block.
std::string ZstdFrameClaiming(uint64_t content_size) {
  std::string f("\x28\xb5\x2f\xfd", 4);
  f += '\xe0';  // FCS field 8 bytes, single segment
  for (int i = 0; i < 8; ++i) f += char(content_size >> (8 * i));
  f += std::string("\x01\x00\x00", 3);  // last block, raw, size 0
  return f;
}

TEST_CASE("absurd zstd content size fails cleanly", "[codecs][limit]") {
  Decompressor d;
  ByteBuffer out;
  const DecodeResult r = Decode(d, kHdrZstd + ZstdFrameClaiming(uint64_t(1) << 60), out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kZstd);
  CHECK(r.error == "decompressed size exceeds limit of 20971479 bytes");
  CHECK(out.capacity() == 0);
  // A plausible size that the frame does not deliver.
  const DecodeResult s = Decode(d, kHdrZstd + ZstdFrameClaiming(1000), out);
  CHECK_FALSE(s.ok);
  CHECK(s.error.rfind("zstd decompress failed: ", 0) == 0);
}

TEST_CASE("zstd frame without a content size fails as in borg", "[codecs][damage]") {
  // Streaming compression without a pledged size leaves the content size out of the header.
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  REQUIRE(cctx != nullptr);
  const std::string in = MakeText(1000);
  std::string frame(ZSTD_compressBound(in.size()) + 64, '\0');
  ZSTD_outBuffer ob{frame.data(), frame.size(), 0};
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  // A first call with ZSTD_e_end would learn the size; ZSTD_e_continue first does not.
  REQUIRE(!ZSTD_isError(ZSTD_compressStream2(cctx, &ob, &ib, ZSTD_e_continue)));
  REQUIRE(ZSTD_compressStream2(cctx, &ob, &ib, ZSTD_e_end) == 0);
  ZSTD_freeCCtx(cctx);
  frame.resize(ob.pos);
  REQUIRE(ZSTD_getFrameContentSize(frame.data(), frame.size()) == ZSTD_CONTENTSIZE_UNKNOWN);
  Decompressor d;
  ByteBuffer out;
  const DecodeResult r = Decode(d, kHdrZstd + frame, out);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "zstd decompress failed: frame content size unknown");
}

// ---- DecodeRaw (borg 2: codec and size from metadata) -----------------------------------------

TEST_CASE("DecodeRaw decodes every codec with and without an expected size", "[codecs][raw]") {
  const std::string in = MakeText(30000, 17);
  const std::pair<CodecId, std::string> bodies[] = {
      {CodecId::kNone, in},           {CodecId::kLz4, Lz4Body(in)},
      {CodecId::kZstd, ZstdBody(in)}, {CodecId::kZlib, ZlibPayload(in)},
      {CodecId::kLzma, XzBody(in)},
  };
  Decompressor d;
  ByteBuffer out;
  for (const auto& [id, body] : bodies) {
    INFO("codec " << CodecName(id));
    DecodeResult r = d.DecodeRaw(id, AsBytes(body), std::nullopt, out);
    REQUIRE(r.ok);
    CHECK(r.codec == id);
    CHECK(r.inner_codec == id);
    CHECK(ToString(out) == in);

    r = d.DecodeRaw(id, AsBytes(body), in.size(), out);
    REQUIRE(r.ok);
    CHECK(ToString(out) == in);

    r = d.DecodeRaw(id, AsBytes(body), in.size() - 1, out);  // output bigger than promised
    CHECK_FALSE(r.ok);
    CHECK(r.codec == id);
    if (id != CodecId::kLz4) {  // LZ4 cannot tell "too big" from "corrupt" at its exact size
      CHECK(r.error == "decompressed size exceeds expected size of 29999 bytes");
    }

    r = d.DecodeRaw(id, AsBytes(body), in.size() + 1, out);  // output smaller than promised
    CHECK_FALSE(r.ok);
    CHECK(r.error == "decompressed size 30000 does not match expected size 30001");
  }
}

TEST_CASE("DecodeRaw checks the expected size against the limit first", "[codecs][raw]") {
  Decompressor d(1000);
  ByteBuffer out;
  const std::string body = Lz4Body("abc");
  const DecodeResult r = d.DecodeRaw(CodecId::kLz4, AsBytes(body), size_t(1) << 40, out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kLz4);
  CHECK(r.error == "expected size 1099511627776 exceeds limit of 1000 bytes");
  CHECK(out.capacity() == 0);
}

TEST_CASE("DecodeRaw rejects codecs borg 2 does not store", "[codecs][raw]") {
  Decompressor d;
  ByteBuffer out;
  DecodeResult r = d.DecodeRaw(CodecId::kUnknown, AsBytes("abc"), std::nullopt, out);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "No decompressor for this data found");
  r = d.DecodeRaw(CodecId::kObfuscate, AsBytes("abc"), std::nullopt, out);
  CHECK_FALSE(r.ok);
  CHECK(r.codec == CodecId::kObfuscate);
}

// ---- Reuse and the test seam ------------------------------------------------------------------

TEST_CASE("one decompressor reused across many calls of different codecs", "[codecs]") {
  std::vector<std::string> inputs;
  std::vector<std::string> payloads;
  for (int i = 0; i < 60; ++i) {
    const std::string in = (i % 3 == 0) ? MakeRandom(size_t(i) * 997, uint32_t(i) + 1)
                                        : MakeText(size_t(i) * 3001 + 1, uint32_t(i));
    std::string p = kCodecs[i % 5].payload(in);
    if (i % 7 == 0) p = Obfuscate(p, size_t(i));
    inputs.push_back(in);
    payloads.push_back(std::move(p));
  }
  std::string broken = ZlibPayload(MakeText(777));
  broken.back() ^= 0x55;
  Decompressor d;
  ByteBuffer out;
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < payloads.size(); ++i) {
      INFO("round " << round << ", payload " << i);
      const DecodeResult r = Decode(d, payloads[i], out);
      REQUIRE(r.ok);
      CHECK(ToString(out) == inputs[i]);
      if (i % 10 == 0) {  // failures in between must not spoil the reused contexts
        CHECK_FALSE(Decode(d, broken, out).ok);
        CHECK_FALSE(Decode(d, kHdrZstd + ZstdFrameClaiming(1000), out).ok);
        CHECK_FALSE(Decode(d, kHdrLzma + XzBody("x").substr(0, 10), out).ok);
      }
    }
  }
}

TEST_CASE("the shared LZ4 scratch seam still decodes on one thread", "[codecs]") {
  const std::string a = MakeText(100000, 21);
  const std::string b = MakeRandom(5000, 22);
  Decompressor d;
  d.TEST_UseSharedLz4Scratch(true);
  ByteBuffer out;
  REQUIRE(Decode(d, kHdrLz4 + Lz4Body(a), out).ok);
  CHECK(ToString(out) == a);
  REQUIRE(Decode(d, kHdrLz4 + Lz4Body(b), out).ok);
  CHECK(ToString(out) == b);
  d.TEST_UseSharedLz4Scratch(false);
  REQUIRE(Decode(d, kHdrLz4 + Lz4Body(a), out).ok);
  CHECK(ToString(out) == a);
}

// ---- Real borg objects ------------------------------------------------------------------------

TEST_CASE("real borg 1.2.4 objects decode to their plaintext", "[codecs][fixtures]") {
  const std::string path =
      std::string(BORGCHECK_SHARED_DIR) + "/fixtures/borg1/vectors-v1.2.4.json";
  std::ifstream f(path);
  REQUIRE(f.good());
  const nlohmann::json vectors = nlohmann::json::parse(f);
  Decompressor d;
  ByteBuffer out;
  int decoded = 0;
  for (const auto& [repo, info] : vectors.at("repos").items()) {
    for (const auto& obj : info.at("objects")) {
      const std::string compression = obj.at("compression").get<std::string>();
      INFO("repo " << repo << ", object " << obj.at("id").get<std::string>() << ", "
                   << compression);
      std::string payload, plaintext;
      REQUIRE(FromHex(obj.at("compressed_payload").get<std::string>(), payload));
      REQUIRE(FromHex(obj.at("plaintext").get<std::string>(), plaintext));
      const DecodeResult r = Decode(d, payload, out);
      REQUIRE(r.ok);
      CHECK_FALSE(r.nonzero_padding);
      CHECK(ToString(out) == plaintext);
      // "obfuscate(zstd,+46 pad)" names the outer and the inner codec.
      const size_t paren = compression.find('(');
      CHECK(CodecName(r.codec) == compression.substr(0, paren));
      if (paren != std::string::npos) {
        const size_t comma = compression.find(',', paren);
        CHECK(CodecName(r.inner_codec) == compression.substr(paren + 1, comma - paren - 1));
      }
      ++decoded;
    }
  }
  CHECK(decoded >= 40);
}

}  // namespace
}  // namespace borgcheck::codecs
