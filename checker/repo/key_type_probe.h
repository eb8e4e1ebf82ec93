// The key type of a repository, told by the type bytes of its manifest and of a sample of other
// objects, by its generation's rule: the one probe of every source, local or served (review w3
// §3.5; it was written five times, with three rules). The source reads the bytes (a segment
// entry, a pack's blob, a get from `borg serve`); this keeps the rule.
//
// Thread contract: one per LoadKey call, on the main thread; not shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace borgcheck::repo {

// Objects sampled besides the manifest, at most.
inline constexpr size_t kKeyTypeSamples = 16;

enum class KeyTypeRule : uint8_t {
  // borg 1.x and version 4: the manifest's type when it is known, else the first known type of
  // the sample, in the order sampled (sampling stops at it).
  kFirstKnown,
  // 2.0.0b5: the manifest's known type, outvoted only when more than half of the sample says
  // another known type (a note says so); without one from the manifest, the known type more
  // than half of the sample says, else the lowest known byte sampled.
  kManifestUnlessOutvoted,
};

class KeyTypeProbe {
 public:
  // `known`: whether the generation knows a type byte.
  KeyTypeProbe(KeyTypeRule rule, bool (*known)(uint8_t)) : rule_(rule), known_(known) {}

  // The manifest's type byte; nullopt when it could not be read or has none.
  void Manifest(std::optional<uint8_t> type);
  // Another object's; nullopt when it could not be read (it still counts as sampled).
  void Sample(std::optional<uint8_t> type);
  // Whether sampling may stop: kKeyTypeSamples sampled, or (kFirstKnown) a known type seen.
  bool Settled() const;
  // The type byte to check the repository as (one `known` accepts), nullopt when none was seen;
  // `notes` says when the sample outvoted the manifest.
  std::optional<uint8_t> Choose(std::vector<std::string>& notes) const;
  // The same for kFirstKnown, which writes no note.
  std::optional<uint8_t> Choose() const {
    std::vector<std::string> none;
    return Choose(none);
  }
  // The last type byte seen, known or not (the message when none is known names it).
  std::optional<uint8_t> last_seen() const { return last_seen_; }

 private:
  void Saw(uint8_t type);

  const KeyTypeRule rule_;
  bool (*const known_)(uint8_t);
  std::optional<uint8_t> manifest_type_;  // known only
  std::optional<uint8_t> first_known_;    // manifest's, else the sample's (kFirstKnown)
  std::optional<uint8_t> last_seen_;
  std::map<uint8_t, size_t> votes_;  // known types of the sample
  size_t sampled_ = 0;
};

}  // namespace borgcheck::repo
