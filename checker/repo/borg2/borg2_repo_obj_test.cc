// The borg 2 RepoObj layer: splitting, the meta map (real b5 meta maps from the fixture vectors
// and malformed ones), and decoding by meta (every codec, sizes, psize/padding, each failure).
#include "checker/repo/borg2/borg2_repo_obj.h"

#include <catch2/catch.hpp>
#include <lz4.h>
#include <msgpack.hpp>
#include <zlib.h>

#include <string>
#include <vector>

namespace borgcheck::repo {
namespace {

using Vec = std::vector<uint8_t>;

Vec Unhex(const std::string& hex) {
  std::string out;
  REQUIRE(FromHex(hex, out));
  return Vec(out.begin(), out.end());
}

Vec PackMeta(std::initializer_list<std::pair<const char*, uint64_t>> ints, const char* type = nullptr) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(uint32_t(ints.size() + (type ? 1 : 0)));
  for (auto [k, v] : ints) {
    pk.pack(std::string(k));
    pk.pack(v);
  }
  if (type) {
    pk.pack(std::string("type"));
    pk.pack(std::string(type));
  }
  return Vec(buf.data(), buf.data() + buf.size());
}

TEST_CASE("RepoObj v2: split by the u16 meta length", "[repoobj]") {
  RepoObjEnvelopes e;
  std::string why;
  const uint8_t obj[] = {3, 0, 'a', 'b', 'c', 'd', 'e'};
  REQUIRE(SplitRepoObjV2(Bytes(obj, 7), e, &why));
  CHECK(e.meta.size() == 3);
  CHECK(e.meta.data() == obj + 2);
  CHECK(e.data.size() == 2);
  CHECK_FALSE(SplitRepoObjV2(Bytes(obj, 4), e, &why));
  CHECK(why == "meta length 3 runs past the end of the 4-byte object");
  CHECK_FALSE(SplitRepoObjV2(Bytes(obj, 1), e, &why));
  const uint8_t empty_data[] = {1, 0, 'x'};
  REQUIRE(SplitRepoObjV2(Bytes(empty_data, 3), e, &why));
  CHECK(e.data.empty());
}

TEST_CASE("RepoObj meta: real b5 maps parse, malformed ones are refused", "[repoobj]") {
  ObjMeta m;
  std::string why;
  // {'size': 8963, 'ctype': 3, 'clevel': 3, 'csize': 4908} from repokey-chacha20-poly1305.vectors.txt
  REQUIRE(ParseObjMeta(Unhex("84a473697a65cd2303a5637479706503a6636c6576656c03a56373697a65cd132c"), m, &why));
  CHECK(m.ctype == 3);
  CHECK(m.clevel == 3);
  CHECK(m.csize == 4908);
  CHECK(m.size == 8963u);
  CHECK(!m.psize);
  CHECK(!m.type);
  REQUIRE(ParseObjMeta(PackMeta({{"ctype", 1}, {"clevel", 255}, {"csize", 10}, {"psize", 7}, {"olevel", 110}}, "F"),
                       m, &why));
  CHECK(!m.size);
  CHECK(m.psize == 7u);
  CHECK(m.olevel == 110u);
  CHECK(m.type == "F");
  CHECK_FALSE(ParseObjMeta(PackMeta({{"clevel", 255}, {"csize", 10}}), m, &why));
  CHECK(why == "object metadata: `ctype` is missing");
  CHECK_FALSE(ParseObjMeta(Unhex("93010203"), m, &why));  // an array
  CHECK(why == "object metadata: not a msgpack map");
  CHECK_FALSE(ParseObjMeta(Unhex("84a473697a65"), m, &why));  // truncated
  Vec extra = PackMeta({{"ctype", 0}, {"clevel", 255}, {"csize", 1}});
  extra.push_back(0xc0);
  CHECK_FALSE(ParseObjMeta(extra, m, &why));
  CHECK(why.find("extra bytes") != std::string::npos);
  CHECK_FALSE(ParseObjMeta(Vec(), m, &why));
}

TEST_CASE("RepoObj decode: every codec by ctype, with and without size", "[repoobj]") {
  codecs::Decompressor dec;
  ByteBuffer out;
  std::string text;
  for (int i = 0; i < 500; ++i) text += "borg2 b5 RepoObj line " + std::to_string(i % 17) + "\n";
  Bytes plain = AsBytes(text);

  // none
  ObjMeta m;
  m.ctype = 0;
  m.csize = plain.size();
  m.size = plain.size();
  REQUIRE(DecodeObjData(m, plain, dec, out).ok());
  CHECK(std::string(out.view().begin(), out.view().end()) == text);

  // lz4 raw block, with and without size
  Vec lz(size_t(LZ4_compressBound(int(plain.size()))));
  int n = LZ4_compress_default(reinterpret_cast<const char*>(plain.data()), reinterpret_cast<char*>(lz.data()),
                               int(plain.size()), int(lz.size()));
  lz.resize(size_t(n));
  m.ctype = 1;
  m.csize = lz.size();
  REQUIRE(DecodeObjData(m, lz, dec, out).ok());
  CHECK(out.size() == plain.size());
  m.size.reset();
  REQUIRE(DecodeObjData(m, lz, dec, out).ok());
  CHECK(out.size() == plain.size());
  m.size = plain.size() + 1;
  ObjDecodeResult r = DecodeObjData(m, lz, dec, out);
  CHECK(r.error == ObjDecodeError::kDecompression);

  // zlib stream
  Vec z(compressBound(uLong(plain.size())));
  uLongf zl = uLongf(z.size());
  REQUIRE(compress2(z.data(), &zl, plain.data(), uLong(plain.size()), 6) == Z_OK);
  z.resize(zl);
  m = ObjMeta();
  m.ctype = 5;
  m.clevel = 6;
  m.csize = z.size();
  m.size = plain.size();
  REQUIRE(DecodeObjData(m, z, dec, out).ok());
  z[z.size() / 2] ^= 0x40;
  r = DecodeObjData(m, z, dec, out);
  CHECK(r.error == ObjDecodeError::kDecompression);
  CHECK(r.message.rfind("zlib: ", 0) == 0);
}

TEST_CASE("RepoObj decode: obfuscation padding, csize and psize rules", "[repoobj]") {
  codecs::Decompressor dec;
  ByteBuffer out;
  Vec data = {'h', 'e', 'l', 'l', 'o', 0, 0, 0, 0};
  ObjMeta m;
  m.ctype = 0;
  m.clevel = 255;
  m.csize = data.size();
  m.psize = 5;
  m.size = 5;
  REQUIRE(DecodeObjData(m, data, dec, out).ok());
  CHECK(out.size() == 5);
  data[7] = 1;
  ObjDecodeResult r = DecodeObjData(m, data, dec, out);
  CHECK(r.error == ObjDecodeError::kNonZeroPadding);
  m.csize = data.size() - 1;
  r = DecodeObjData(m, data, dec, out);
  CHECK(r.error == ObjDecodeError::kCsizeMismatch);
  CHECK(r.message == "csize 8 != len(data) 9");
  m.csize = data.size();
  m.psize = 10;
  CHECK(DecodeObjData(m, data, dec, out).error == ObjDecodeError::kPsizeTooLarge);
  m.psize.reset();
  m.ctype = 4;
  CHECK(DecodeObjData(m, data, dec, out).error == ObjDecodeError::kUnknownCodec);
  m.ctype = 0;
  m.size = uint64_t(1) << 40;
  CHECK(DecodeObjData(m, data, dec, out).error == ObjDecodeError::kDecompression);
  CHECK(CodecFromCtype(2) == codecs::CodecId::kLzma);
  CHECK(CodecFromCtype(3) == codecs::CodecId::kZstd);
}

TEST_CASE("RepoObj: the manifest version", "[repoobj]") {
  CHECK(ManifestVersion(PackMeta({{"version", 1}})) == 1u);
  CHECK(!ManifestVersion(PackMeta({{"other", 1}})));
  CHECK(!ManifestVersion(Vec{0xc1}));
}

}  // namespace
}  // namespace borgcheck::repo
