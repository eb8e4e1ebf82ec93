#include "checker/base/msgpack_util.h"

#include <exception>

namespace borgcheck::msgpack_util {
namespace {

bool ReferenceAll(msgpack::type::object_type, std::size_t, void*) { return true; }

// One object from the start of `buf`, with every limit sized by the input; `off` is set to the
// end of the object.
bool Unpack(Bytes buf, size_t max_depth, Strings strings, msgpack::object_handle& out,
            size_t& off, std::string& error) {
  try {
    const size_t n = buf.size();
    msgpack::unpack_limit limit(n, n, n, n, n, max_depth);
    bool referenced = false;
    out = msgpack::unpack(reinterpret_cast<const char*>(buf.data()), n, off, referenced,
                          strings == Strings::kReference ? &ReferenceAll : nullptr, nullptr,
                          limit);
    return true;
  } catch (const std::exception& e) {  // msgpack reports malformed input by throwing
    error = e.what();
    return false;
  }
}

}  // namespace

bool UnpackWhole(Bytes buf, size_t max_depth, msgpack::object_handle& out, std::string& error,
                 Strings strings) {
  size_t off = 0;
  if (!Unpack(buf, max_depth, strings, out, off, error)) return false;
  if (off != buf.size()) {
    error = "extra bytes after the msgpack value";
    return false;
  }
  return true;
}

bool UnpackPrefix(Bytes buf, size_t max_depth, msgpack::object_handle& out, std::string& error,
                  Strings strings) {
  size_t off = 0;
  return Unpack(buf, max_depth, strings, out, off, error);
}

const msgpack::object* Find(const msgpack::object& map, std::string_view key) {
  const msgpack::object* found = nullptr;
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    std::optional<std::string_view> k = AsText(map.via.map.ptr[i].key);
    if (k && *k == key) found = &map.via.map.ptr[i].val;
  }
  return found;
}

const msgpack::object* FindFirst(const msgpack::object& map, std::string_view key) {
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    std::optional<std::string_view> k = AsText(map.via.map.ptr[i].key);
    if (k && *k == key) return &map.via.map.ptr[i].val;
  }
  return nullptr;
}

bool AsRaw(const msgpack::object* o, Bytes& out) {
  if (o == nullptr) return false;
  std::optional<std::string_view> t = AsText(*o);
  if (!t) return false;
  out = AsBytes(*t);
  return true;
}

std::optional<std::string_view> AsText(const msgpack::object& o) {
  if (o.type == msgpack::type::STR) return std::string_view(o.via.str.ptr, o.via.str.size);
  if (o.type == msgpack::type::BIN) return std::string_view(o.via.bin.ptr, o.via.bin.size);
  return std::nullopt;
}

}  // namespace borgcheck::msgpack_util
