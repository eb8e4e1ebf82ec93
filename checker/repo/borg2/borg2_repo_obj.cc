// The borg 2 RepoObj layer (see repo_obj.h).
#include "checker/repo/borg2/borg2_repo_obj.h"

#include <msgpack.hpp>

#include <fmt/format.h>

#include "checker/base/msgpack_util.h"

namespace borgcheck::repo {
namespace {

constexpr size_t kMsgpackMaxDepth = 16;

using msgpack_util::Find;  // the last match wins, as in the Python dict

enum class Field { kAbsent, kOk, kWrongType };

Field GetUint(const msgpack::object& map, const char* key, uint64_t& out) {
  const msgpack::object* o = Find(map, key);
  if (o == nullptr) return Field::kAbsent;
  if (o->type != msgpack::type::POSITIVE_INTEGER) return Field::kWrongType;
  out = o->via.u64;
  return Field::kOk;
}

}  // namespace

bool SplitRepoObjV2(Bytes payload, RepoObjEnvelopes& out, std::string* why) {
  if (payload.size() < 2) {
    if (why) *why = fmt::format("object of {} bytes is too short for its meta length field", payload.size());
    return false;
  }
  size_t meta_len = size_t(payload[0]) | size_t(payload[1]) << 8;
  if (2 + meta_len > payload.size()) {
    if (why) {
      *why = fmt::format("meta length {} runs past the end of the {}-byte object", meta_len, payload.size());
    }
    return false;
  }
  out.meta = payload.subspan(2, meta_len);
  out.data = payload.subspan(2 + meta_len);
  return true;
}

bool ParseObjMeta(Bytes msgpack, ObjMeta& out, std::string* why) {
  auto fail = [&](std::string m) {
    if (why) *why = "object metadata: " + std::move(m);
    return false;
  };
  msgpack::object_handle oh;
  std::string err;
  if (!msgpack_util::UnpackWhole(msgpack, kMsgpackMaxDepth, oh, err, msgpack_util::Strings::kCopy)) {
    return fail("not valid msgpack (" + err + ")");
  }
  const msgpack::object& m = oh.get();
  if (m.type != msgpack::type::MAP) return fail("not a msgpack map");
  out = ObjMeta();
  for (auto [key, dst] : {std::pair<const char*, uint64_t*>{"ctype", &out.ctype},
                          {"clevel", &out.clevel}, {"csize", &out.csize}}) {
    switch (GetUint(m, key, *dst)) {
      case Field::kAbsent: return fail(std::string("`") + key + "` is missing");
      case Field::kWrongType: return fail(std::string("`") + key + "` is not a non-negative integer");
      case Field::kOk: break;
    }
  }
  for (auto [key, dst] : {std::pair<const char*, std::optional<uint64_t>*>{"size", &out.size},
                          {"psize", &out.psize}, {"olevel", &out.olevel}}) {
    uint64_t v = 0;
    switch (GetUint(m, key, v)) {
      case Field::kAbsent: break;
      case Field::kWrongType: return fail(std::string("`") + key + "` is not a non-negative integer");
      case Field::kOk: *dst = v; break;
    }
  }
  if (const msgpack::object* t = Find(m, "type")) {
    if (t->type != msgpack::type::STR && t->type != msgpack::type::BIN) return fail("`type` is not a string");
    out.type.emplace(t->via.str.ptr, t->via.str.size);
  }
  return true;
}

codecs::CodecId CodecFromCtype(uint64_t ctype) {
  switch (ctype) {
    case 0: return codecs::CodecId::kNone;
    case 1: return codecs::CodecId::kLz4;
    case 2: return codecs::CodecId::kLzma;
    case 3: return codecs::CodecId::kZstd;
    case 5: return codecs::CodecId::kZlib;
    default: return codecs::CodecId::kUnknown;
  }
}

ObjDecodeResult DecodeObjData(const ObjMeta& meta, Bytes data, codecs::Decompressor& decompressor,
                              ByteBuffer& out) {
  out.Clear();
  if (meta.csize != data.size()) {
    return {ObjDecodeError::kCsizeMismatch,
            fmt::format("csize {} != len(data) {}", meta.csize, data.size())};
  }
  const uint64_t psize = meta.psize.value_or(meta.csize);
  if (psize > meta.csize) {
    return {ObjDecodeError::kPsizeTooLarge, fmt::format("psize {} > csize {}", psize, meta.csize)};
  }
  const codecs::CodecId codec = CodecFromCtype(meta.ctype);
  if (codec == codecs::CodecId::kUnknown) {
    return {ObjDecodeError::kUnknownCodec, fmt::format("unknown compression type {}", meta.ctype)};
  }
  std::optional<size_t> expected;
  if (meta.size) {
    if (*meta.size > decompressor.max_output()) {
      return {ObjDecodeError::kDecompression,
              fmt::format("size {} exceeds the limit of {} bytes", *meta.size, decompressor.max_output())};
    }
    expected = size_t(*meta.size);
  }
  codecs::DecodeResult r = decompressor.DecodeRaw(codec, data.first(size_t(psize)), expected, out);
  if (!r.ok) {
    return {ObjDecodeError::kDecompression,
            fmt::format("{}: {}", codecs::CodecName(codec), r.error)};
  }
  for (uint8_t b : data.subspan(size_t(psize))) {
    if (b != 0) {
      return {ObjDecodeError::kNonZeroPadding,
              "obfuscation padding is not all zero bytes"};
    }
  }
  return {};
}

std::optional<engine::Verdict> DecodeVerdict(const ObjDecodeResult& d) {
  switch (d.error) {
    case ObjDecodeError::kNone:
    case ObjDecodeError::kNonZeroPadding:
      return std::nullopt;
    case ObjDecodeError::kCsizeMismatch:
    case ObjDecodeError::kPsizeTooLarge:
      return engine::Verdict{report::Stage::kEnvelope, "object metadata does not fit the data: " + d.message};
    case ObjDecodeError::kUnknownCodec:
    case ObjDecodeError::kDecompression:
      return engine::Verdict{report::Stage::kDecompression, "Decompression error: " + d.message};
  }
  return engine::Verdict{report::Stage::kDecompression, "Decompression error: " + d.message};
}

std::optional<uint64_t> ManifestVersion(Bytes manifest_plaintext) {
  msgpack::object_handle oh;
  std::string err;
  if (!msgpack_util::UnpackWhole(manifest_plaintext, kMsgpackMaxDepth, oh, err, msgpack_util::Strings::kCopy) ||
      oh.get().type != msgpack::type::MAP) {
    return std::nullopt;
  }
  uint64_t v = 0;
  if (GetUint(oh.get(), "version", v) != Field::kOk) return std::nullopt;
  return v;
}

}  // namespace borgcheck::repo
