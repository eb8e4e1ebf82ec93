// The borg 2 RepoObj layer around the envelopes (spec borg2-format.md §A.4-A.5, §B.4-B.5):
// splitting a stored object into its meta and data envelopes, the msgpack meta map, and
// turning a decrypted data envelope into the plaintext (obfuscation padding, codec, sizes).
// Decryption itself is the caller's (checker/crypto/aead.h): this layer never sees keys.
//
//   repository version 2 (b5) payload = meta_len u16 LE | meta envelope | data envelope
//   meta = msgpack map, str keys: ctype, clevel, csize, [size], [psize, olevel] (obfuscation),
//          [type] (b8 and later: "M" manifest, "A", "C", "S", "F")
//   data = decrypted data envelope: csize bytes; the first psize (default csize) are the
//          compressed payload of codec ctype (0 none, 1 lz4, 2 lzma, 3 zstd, 5 zlib), the rest is
//          zero padding; the plaintext has `size` bytes when meta says so.
//
// Thread contract: pure functions except DecodeObjData, which uses the caller's per-worker
// Decompressor and output buffer (so it requires the same external synchronisation as they do).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checker/base/bytes.h"
#include "checker/engine/object_verifier.h"
#include "codecs/decompressor.h"

namespace borgcheck::repo {

struct RepoObjEnvelopes {
  Bytes meta;  // views into the payload
  Bytes data;
};

// Repository version 2: false (and *why) when the payload is shorter than 2 bytes or meta_len
// runs past its end.
bool SplitRepoObjV2(Bytes payload, RepoObjEnvelopes& out, std::string* why);

struct ObjMeta {
  uint64_t ctype = 0;
  uint64_t clevel = 0;
  uint64_t csize = 0;
  std::optional<uint64_t> size;    // absent with `auto,…` compression
  std::optional<uint64_t> psize;   // obfuscation only
  std::optional<uint64_t> olevel;  // obfuscation only
  std::optional<std::string> type; // ro_type, b8 and later
};

// Parses the decrypted meta map. false (and *why) when it is not exactly one msgpack map, when
// ctype, clevel or csize is missing or not a non-negative integer, or a present size, psize,
// olevel or type has the wrong type. Unknown keys are ignored (borg ignores them too).
bool ParseObjMeta(Bytes msgpack, ObjMeta& out, std::string* why);

// ctype -> codec (kUnknown for anything but 0, 1, 2, 3, 5).
codecs::CodecId CodecFromCtype(uint64_t ctype);

enum class ObjDecodeError {
  kNone,
  kCsizeMismatch,   // meta.csize != the decrypted data length
  kPsizeTooLarge,   // meta.psize > meta.csize
  kUnknownCodec,    // ctype names no codec
  kDecompression,   // the codec failed, or the plaintext size differs from meta.size
  kNonZeroPadding,  // the obfuscation padding is not all zero bytes (borg writes zeros)
};

struct ObjDecodeResult {
  ObjDecodeError error = ObjDecodeError::kNone;
  std::string message;
  bool ok() const { return error == ObjDecodeError::kNone; }
};

// Decodes the data envelope's plaintext `data` into `out` following `meta`. The padding check
// comes last, after a successful decode, so a caller can still tell it apart.
ObjDecodeResult DecodeObjData(const ObjMeta& meta, Bytes data, codecs::Decompressor& decompressor,
                              ByteBuffer& out);

// The finding of a failed DecodeObjData, the same in every borg 2 generation: sizes in the meta
// map that do not fit the data are an envelope problem, an unknown codec or a failed
// decompression a decompression one. None for kNone and kNonZeroPadding (the padding is judged
// after the id, the stronger statement: engine::PaddingVerdict).
std::optional<engine::Verdict> DecodeVerdict(const ObjDecodeResult& d);

// The manifest plaintext's `version` (1 for b5/b6, 2 from b7 on), if it is a msgpack map with one.
std::optional<uint64_t> ManifestVersion(Bytes manifest_plaintext);

}  // namespace borgcheck::repo
