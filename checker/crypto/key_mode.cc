#include "checker/crypto/key_mode.h"

namespace borgcheck::crypto {

std::optional<KeyMode> KeyModeFromTypeByte(uint8_t type) {
  if (type <= static_cast<uint8_t>(KeyMode::kAuthenticated)) return static_cast<KeyMode>(type);
  return std::nullopt;
}

std::string_view KeyModeName(KeyMode m) {
  switch (m) {
    case KeyMode::kKeyfile:
      return "keyfile";
    case KeyMode::kPassphrase:
      return "passphrase";
    case KeyMode::kNone:
      return "none";
    case KeyMode::kRepokey:
      return "repokey";
    case KeyMode::kKeyfileBlake2:
      return "keyfile-blake2";
    case KeyMode::kRepokeyBlake2:
      return "repokey-blake2";
    case KeyMode::kAuthenticatedBlake2:
      return "authenticated-blake2";
    case KeyMode::kAuthenticated:
      return "authenticated";
  }
  return "unknown";
}

bool AcceptsTypeByte(KeyMode m, uint8_t type) {
  if (type == static_cast<uint8_t>(m)) return true;
  // borg dispatches the dead pre-1.0 passphrase byte to the repokey class (spec §4.0).
  return m == KeyMode::kRepokey && type == static_cast<uint8_t>(KeyMode::kPassphrase);
}

}  // namespace borgcheck::crypto
