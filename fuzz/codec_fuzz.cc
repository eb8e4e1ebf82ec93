#include "fuzz/codec_fuzz.h"

#include <lz4.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "fuzz/fuzz_support.h"

namespace borgcheck::fuzz {
namespace {

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "codec fuzz support: %s failed\n", what);
    std::abort();
  }
}

}  // namespace

std::string Borg1Payload(codecs::CodecId codec, Bytes body) {
  std::string p;
  switch (codec) {
    case codecs::CodecId::kNone: p = std::string("\x00\x00", 2); break;
    case codecs::CodecId::kLz4: p = std::string("\x01\x00", 2); break;
    case codecs::CodecId::kLzma: p = std::string("\x02\x00", 2); break;
    case codecs::CodecId::kZstd: p = std::string("\x03\x00", 2); break;
    case codecs::CodecId::kZlib: break;
    case codecs::CodecId::kObfuscate:
    case codecs::CodecId::kUnknown: Require(false, "Borg1Payload of a non-raw codec");
  }
  p.append(reinterpret_cast<const char*>(body.data()), body.size());
  return p;
}

std::string Compress(codecs::CodecId codec, Bytes in) {
  std::string out;
  switch (codec) {
    case codecs::CodecId::kNone:
      out.assign(reinterpret_cast<const char*>(in.data()), in.size());
      break;
    case codecs::CodecId::kLz4: {
      Require(in.size() <= LZ4_MAX_INPUT_SIZE, "lz4 input size");
      out.resize(size_t(LZ4_compressBound(int(in.size()))));
      const int n = LZ4_compress_default(reinterpret_cast<const char*>(in.data()), out.data(),
                                         int(in.size()), int(out.size()));
      Require(n > 0 || in.empty(), "LZ4_compress_default");
      out.resize(size_t(n));
      break;
    }
    case codecs::CodecId::kZstd: {
      out.resize(ZSTD_compressBound(in.size()));
      const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 1);
      Require(!ZSTD_isError(n), "ZSTD_compress");
      out.resize(n);
      break;
    }
    case codecs::CodecId::kZlib: {
      uLongf n = compressBound(uLong(in.size()));
      out.resize(n);
      Require(compress2(reinterpret_cast<Bytef*>(out.data()), &n, in.data(), uLong(in.size()),
                        1) == Z_OK,
              "compress2");
      out.resize(n);
      break;
    }
    case codecs::CodecId::kLzma: {
      // LZMA2 preset 0 with the smallest dictionary: the encoder's match finder tables scale
      // with the dictionary, and clearing megabytes of them on every run would dominate the
      // round trip's cost (the decoder sees the dictionary size in the stream header).
      lzma_options_lzma opt;
      Require(lzma_lzma_preset(&opt, 0) == false, "lzma_lzma_preset");
      opt.dict_size = LZMA_DICT_SIZE_MIN;
      const lzma_filter filters[] = {{LZMA_FILTER_LZMA2, &opt},
                                     {LZMA_VLI_UNKNOWN, nullptr}};
      out.resize(lzma_stream_buffer_bound(in.size()));
      size_t pos = 0;
      Require(lzma_stream_buffer_encode(const_cast<lzma_filter*>(filters), LZMA_CHECK_NONE,
                                        nullptr, in.data(), in.size(),
                                        reinterpret_cast<uint8_t*>(out.data()), &pos,
                                        out.size()) == LZMA_OK,
              "lzma_stream_buffer_encode");
      out.resize(pos);
      break;
    }
    case codecs::CodecId::kObfuscate:
    case codecs::CodecId::kUnknown:
      Require(false, "Compress with a non-raw codec");
  }
  return out;
}

const KnownGood& KnownGoodFor(codecs::CodecId codec) {
  static const std::map<codecs::CodecId, KnownGood> table = [] {
    std::string plain;
    for (int i = 0; i < 200; ++i) plain += "known-good line " + std::to_string(i % 17) + "\n";
    std::map<codecs::CodecId, KnownGood> t;
    for (codecs::CodecId c : {codecs::CodecId::kNone, codecs::CodecId::kLz4,
                              codecs::CodecId::kZstd, codecs::CodecId::kZlib,
                              codecs::CodecId::kLzma}) {
      t[c] = KnownGood{Compress(c, AsBytes(plain)), plain};
    }
    return t;
  }();
  auto it = table.find(codec);
  Require(it != table.end(), "KnownGoodFor a non-raw codec");
  return it->second;
}

namespace {

bool Same(const ByteBuffer& a, Bytes b) {
  return a.size() == b.size() && (b.empty() || std::memcmp(a.data(), b.data(), b.size()) == 0);
}

}  // namespace

void FuzzRawCodec(codecs::CodecId codec, Bytes body) {
  static codecs::Decompressor d(kFuzzCap);
  static ByteBuffer out, check;

  const codecs::DecodeResult r = d.DecodeRaw(codec, body, std::nullopt, out);
  FUZZ_CHECK(r.codec == codec && r.inner_codec == codec && !r.nonzero_padding);
  std::string plain;
  if (!r.ok) {
    FUZZ_CHECK(!r.error.empty());
  } else {
    FUZZ_CHECK(out.size() <= kFuzzCap);
    plain.assign(reinterpret_cast<const char*>(out.data()), out.size());
    FUZZ_CHECK(d.DecodeRaw(codec, body, plain.size(), check).ok);
    FUZZ_CHECK(Same(check, AsBytes(plain)));
    if (plain.size() < kFuzzCap) FUZZ_CHECK(!d.DecodeRaw(codec, body, plain.size() + 1, check).ok);
    if (!plain.empty()) FUZZ_CHECK(!d.DecodeRaw(codec, body, plain.size() - 1, check).ok);
  }

  // The borg 1.x path. For zlib the payload is the body itself, which another codec's header
  // may claim first; the verdicts must agree whenever this codec is the one detected.
  const std::string payload = Borg1Payload(codec, body);
  const codecs::DecodeResult b = d.DecodeBorg1(AsBytes(payload), check);
  if (r.ok) {
    FUZZ_CHECK(b.ok && b.codec == codec && Same(check, AsBytes(plain)));
  } else if (b.codec == codec) {
    FUZZ_CHECK(!b.ok && b.error == r.error);
  }

  const KnownGood& good = KnownGoodFor(codec);
  FUZZ_CHECK(d.DecodeRaw(codec, AsBytes(good.body), std::nullopt, check).ok);
  FUZZ_CHECK(Same(check, AsBytes(good.plaintext)));

  if (body.size() <= kRoundTripMax) {
    const std::string packed = Compress(codec, body);
    FUZZ_CHECK(d.DecodeRaw(codec, AsBytes(packed), body.size(), check).ok);
    FUZZ_CHECK(Same(check, body));
  }
}

}  // namespace borgcheck::fuzz
