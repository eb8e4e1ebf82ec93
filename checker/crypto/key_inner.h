// The decrypted inner key map that borg 1.x key blobs and borg 2 key blobs share (spec
// borg1-format.md §4.1, borg2-format.md §A.2): the byte-string key fields and the two flags.
// One reader, used by key_blob.cc (borg 1.x) and borg2_key.cc (borg 2).
//
// Thread contract: pure functions over a msgpack object the caller owns.
#pragma once

#include <cstddef>

#include "checker/base/msgpack_util.h"
#include "checker/base/secure_bytes.h"
#include "checker/base/status.h"

namespace borgcheck::crypto {

// The byte string `name` of the inner map, of `len_a` or `len_b` bytes, copied into wiped
// memory (the msgpack object references the decrypted plaintext in place). kCorruptMetadata
// naming the field when it is missing, not a byte string or of another length.
Status ReadKeyField(const msgpack::object& inner, const char* name, size_t len_a, size_t len_b, SecureBytes& out);

// `chunk_seed` must be an integer if present (only the chunker uses it); `tam_required`, a
// boolean if present (absent in keys older than borg 1.0.9 and in borg 2 master keys: false).
Status ReadKeyFlags(const msgpack::object& inner, bool& tam_required);

}  // namespace borgcheck::crypto
