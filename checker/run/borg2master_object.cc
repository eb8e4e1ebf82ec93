#include "checker/run/borg2master_object.h"

#include <algorithm>

#include <fmt/format.h>

namespace borgcheck::run {
using report::Severity;
using report::Stage;

std::optional<codecs::CodecId> CodecFromCtype(uint64_t ctype) {
  switch (ctype) {
    case 0: return codecs::CodecId::kNone;
    case 1: return codecs::CodecId::kLz4;
    case 2: return codecs::CodecId::kLzma;
    case 3: return codecs::CodecId::kZstd;
    case 5: return codecs::CodecId::kZlib;
    default: return std::nullopt;
  }
}

MasterObjectVerifier::MasterObjectVerifier(bool verify_data, const crypto::MasterKeyType* type, Bytes crypt_key,
                                           Bytes id_key)
    : verify_data_(verify_data && type != nullptr) {
  if (verify_data_) {
    crypto_ = std::make_unique<crypto::MasterObjectCrypto>(*type, crypt_key, id_key);
    status_ = crypto_->status();
  }
}

const Status& MasterObjectVerifier::status() const { return status_; }

std::optional<VerifyFailure> MasterObjectVerifier::Verify(Bytes blob, const repo::ChunkId& id) {
  plain_.Clear();
  meta_ = repo::ObjectMeta();

  // 1. Structure.
  repo::BlobHeader h;
  if (std::optional<std::string> bad = repo::CheckBlobStructure(blob, &h)) {
    bool size = blob.size() < repo::kObjHeaderSize || bad->rfind("object size", 0) == 0;
    return VerifyFailure{size ? Stage::kTruncated : Stage::kEnvelope, *bad};
  }
  if (h.chunk_id != id) {
    return VerifyFailure{Stage::kEnvelope, "the object header names another chunk: " +
                                               ToHex(Bytes(h.chunk_id.data(), h.chunk_id.size()))};
  }
  if (!verify_data_) return std::nullopt;
  if (!status_.ok()) return VerifyFailure{Stage::kAuthentication, "internal error: " + status_.message()};

  const bool is_manifest = repo::IsManifestId(id);
  const std::string chunk = "Chunk " + ToHex(Bytes(id.data(), id.size())) + ": ";
  auto open_failure = [&](const crypto::MasterOpenResult& r) {
    return VerifyFailure{r.outcome == crypto::MasterOpenOutcome::kAuthFailed ? Stage::kAuthentication : Stage::kEnvelope,
                         chunk + r.message};
  };
  Bytes header = blob.first(repo::kObjHeaderSize);
  Bytes meta_env = blob.subspan(repo::kObjHeaderSize, h.meta_size);
  Bytes data_env = blob.subspan(repo::kObjHeaderSize + h.meta_size, h.data_size);
  uint8_t aad[repo::kObjHeaderAadSize + 1];

  // 2-3. Meta.
  size_t aad_len = repo::BuildObjectAad(header, repo::kSlotMeta, aad);
  Bytes meta_plain;
  crypto::MasterOpenResult r = crypto_->Open(meta_env, Bytes(aad, aad_len), id.data(), meta_scratch_, meta_plain);
  if (r.outcome != crypto::MasterOpenOutcome::kOk) return open_failure(r);
  std::string why;
  std::optional<repo::ObjectMeta> meta = repo::ParseObjectMeta(meta_plain, &why);
  if (!meta) return VerifyFailure{Stage::kEnvelope, chunk + "invalid object meta: " + why};
  meta_ = *meta;

  // 4. Data.
  aad_len = repo::BuildObjectAad(header, repo::kSlotData, aad);
  Bytes data;
  r = crypto_->Open(data_env, Bytes(aad, aad_len), id.data(), data_scratch_, data);
  if (r.outcome != crypto::MasterOpenOutcome::kOk) return open_failure(r);

  // 5. Sizes and decompression. borg checks these with asserts (an authenticated object that
  // breaks them crashes borg); here they are findings.
  if (!meta_.csize || *meta_.csize != data.size()) {
    return VerifyFailure{Stage::kDecompression,
                         meta_.csize ? fmt::format("{}meta csize {} does not match the {} data bytes", chunk, *meta_.csize, data.size())
                                     : chunk + "meta has no csize"};
  }
  uint64_t psize = meta_.psize.value_or(*meta_.csize);
  if (psize > data.size()) {
    return VerifyFailure{Stage::kDecompression, fmt::format("{}meta psize {} exceeds csize {}", chunk, psize, data.size())};
  }
  if (!meta_.ctype) return VerifyFailure{Stage::kDecompression, chunk + "meta has no ctype"};
  std::optional<codecs::CodecId> codec = CodecFromCtype(*meta_.ctype);
  if (!codec) return VerifyFailure{Stage::kDecompression, fmt::format("Decompression error: unknown compression type {}", *meta_.ctype)};
  std::optional<size_t> expected;
  if (meta_.size) expected = size_t(*meta_.size);
  codecs::DecodeResult d = decompressor_.DecodeRaw(*codec, data.first(psize), expected, plain_);
  if (!d.ok) return VerifyFailure{Stage::kDecompression, "Decompression error: " + d.error};
  if (meta_.size && plain_.size() != *meta_.size) {
    return VerifyFailure{Stage::kDecompression,
                         fmt::format("{}size {} in meta, {} bytes decompressed", chunk, *meta_.size, plain_.size())};
  }

  // 6. Id.
  if (is_manifest) {
    if (meta_.type != "M") {
      return VerifyFailure{Stage::kEnvelope, fmt::format("{}the manifest's meta type is '{}', not 'M'", chunk, meta_.type)};
    }
  } else {
    uint8_t computed[32];
    crypto_->IdHash(plain_.view(), computed);
    if (!std::equal(computed, computed + 32, id.begin())) {
      return VerifyFailure{Stage::kIdHash, chunk + "id verification failed"};
    }
  }
  Bytes padding = data.subspan(psize);
  if (!std::all_of(padding.begin(), padding.end(), [](uint8_t b) { return b == 0; })) {
    // Authenticated, so borg wrote it: borg always pads with zeros; it does not check them.
    return VerifyFailure{Stage::kDecompression, chunk + "obfuscation padding is not all zero bytes (borg does not check this)",
                         Severity::kWarning};
  }
  return std::nullopt;
}

}  // namespace borgcheck::run
