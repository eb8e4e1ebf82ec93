#include "checker/crypto/key_inner.h"

#include <string>

namespace borgcheck::crypto {
namespace {
Status Corrupt(std::string msg) { return Status(StatusCode::kCorruptMetadata, std::move(msg)); }
}  // namespace

Status ReadKeyField(const msgpack::object& inner, const char* name, size_t len_a, size_t len_b, SecureBytes& out) {
  Bytes b;
  if (!msgpack_util::AsRaw(msgpack_util::Find(inner, name), b)) {
    return Corrupt(std::string("decrypted key: `") + name + "` is missing or not a byte string");
  }
  if (b.size() != len_a && b.size() != len_b) {
    return Corrupt(std::string("decrypted key: `") + name + "` has " + std::to_string(b.size()) + " bytes, expected " +
                   std::to_string(len_a) + (len_b != len_a ? " or " + std::to_string(len_b) : std::string()));
  }
  out = SecureBytes(b);
  return Status::Ok();
}

Status ReadKeyFlags(const msgpack::object& inner, bool& tam_required) {
  if (const msgpack::object* seed = msgpack_util::Find(inner, "chunk_seed");
      seed != nullptr && seed->type != msgpack::type::POSITIVE_INTEGER && seed->type != msgpack::type::NEGATIVE_INTEGER) {
    return Corrupt("decrypted key: `chunk_seed` is not an integer");
  }
  if (const msgpack::object* tam = msgpack_util::Find(inner, "tam_required"); tam != nullptr) {
    if (tam->type != msgpack::type::BOOLEAN) return Corrupt("decrypted key: `tam_required` is not a boolean");
    tam_required = tam->via.boolean;
  }
  return Status::Ok();
}

}  // namespace borgcheck::crypto
