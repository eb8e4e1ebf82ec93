// Small msgpack-cxx helpers shared by the crypto and repo layers: bounded unpacking, map lookup
// by a str/bin key, and reading str/bin values as bytes or text.
//
// Every unpack sizes msgpack's limits by the input (a forged length prefix cannot make msgpack
// allocate more than the input could describe) and caps the nesting depth. Stateless and
// thread-safe; the returned objects point into `buf` or into the handle's zone, so `buf` and the
// handle must outlive every object read from them.
#pragma once

#include <cstddef>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "checker/base/bytes.h"

namespace borgcheck::msgpack_util {

// How str/bin/ext payloads end up in the unpacked objects.
enum class Strings {
  kReference,  // pointed to in place in `buf`, never copied into the zone (needed for key
               // material, which a zone copy would let escape our wipe)
  kCopy,       // copied into the handle's zone (msgpack's default)
};

// Unpacks exactly one msgpack object spanning all of `buf` (as borg's unpackb, which rejects
// extra data). On failure returns false and sets `error` to msgpack's message or to
// "extra bytes after the msgpack value".
bool UnpackWhole(Bytes buf, size_t max_depth, msgpack::object_handle& out, std::string& error,
                 Strings strings = Strings::kReference);

// Unpacks the first msgpack object of `buf`; trailing bytes are ignored (as borg's Unpacker
// does). On failure returns false and sets `error` to msgpack's message.
bool UnpackPrefix(Bytes buf, size_t max_depth, msgpack::object_handle& out, std::string& error,
                  Strings strings = Strings::kReference);

// Map lookup by a raw (str or bin) key; `map` must be a MAP. The last match wins, as in the
// Python dict borg builds. nullptr when absent.
const msgpack::object* Find(const msgpack::object& map, std::string_view key);

// As Find, but the first match wins.
const msgpack::object* FindFirst(const msgpack::object& map, std::string_view key);

// A str or bin value as bytes; false for nullptr or any other type.
bool AsRaw(const msgpack::object* o, Bytes& out);

// A str or bin value as text; nullopt for any other type.
std::optional<std::string_view> AsText(const msgpack::object& o);

}  // namespace borgcheck::msgpack_util
