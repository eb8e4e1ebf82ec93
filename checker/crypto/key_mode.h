// borg 1.x key modes, named by the TYPE byte that starts every stored object
// (spec borg1-format.md §4.0). Pure constants and predicates; no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace borgcheck::crypto {

enum class KeyMode : uint8_t {
  kKeyfile = 0x00,
  kPassphrase = 0x01,  // pre-1.0; borg treats it as repokey
  kNone = 0x02,
  kRepokey = 0x03,
  kKeyfileBlake2 = 0x04,
  kRepokeyBlake2 = 0x05,
  kAuthenticatedBlake2 = 0x06,
  kAuthenticated = 0x07,
};

std::optional<KeyMode> KeyModeFromTypeByte(uint8_t type);
std::string_view KeyModeName(KeyMode m);  // borg's `-e` name: "repokey-blake2", ...

inline bool IsEncrypted(KeyMode m) {  // AES-256-CTR + MAC envelope
  return m == KeyMode::kKeyfile || m == KeyMode::kPassphrase || m == KeyMode::kRepokey ||
         m == KeyMode::kKeyfileBlake2 || m == KeyMode::kRepokeyBlake2;
}
inline bool UsesBlake2(KeyMode m) {
  return m == KeyMode::kKeyfileBlake2 || m == KeyMode::kRepokeyBlake2 ||
         m == KeyMode::kAuthenticatedBlake2;
}
inline bool NeedsKey(KeyMode m) { return m != KeyMode::kNone; }
inline bool KeyInKeyFile(KeyMode m) {
  return m == KeyMode::kKeyfile || m == KeyMode::kKeyfileBlake2;
}
// Whether an object whose TYPE byte is `type` is acceptable in a repository of mode `m`
// (repokey also accepts the legacy passphrase byte 0x01).
bool AcceptsTypeByte(KeyMode m, uint8_t type);

}  // namespace borgcheck::crypto
