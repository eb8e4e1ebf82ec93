// The key-type probe's two rules, with the exact choice, the bytes read (Settled) and the note.
#include "checker/repo/key_type_probe.h"

#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace borgcheck::repo {
namespace {

bool Known(uint8_t t) { return t == 0x01 || t == 0x02 || t == 0x10 || t == 0x11; }

TEST_CASE("key-type probe, first known: the manifest's known type, no sample read", "[keytype]") {
  KeyTypeProbe p(KeyTypeRule::kFirstKnown, Known);
  p.Manifest(0x02);
  CHECK(p.Settled());
  std::vector<std::string> notes;
  CHECK(p.Choose(notes) == std::optional<uint8_t>(0x02));
  CHECK(notes.empty());
}

TEST_CASE("key-type probe, first known: past an unknown manifest and unreadable objects, the first known sampled",
          "[keytype]") {
  KeyTypeProbe p(KeyTypeRule::kFirstKnown, Known);
  p.Manifest(0x99);
  CHECK_FALSE(p.Settled());
  p.Sample(std::nullopt);
  p.Sample(0x42);
  CHECK_FALSE(p.Settled());
  p.Sample(0x01);
  CHECK(p.Settled());
  std::vector<std::string> notes;
  CHECK(p.Choose(notes) == std::optional<uint8_t>(0x01));
  CHECK(p.last_seen() == std::optional<uint8_t>(0x01));
}

TEST_CASE("key-type probe, first known: none known after 16 samples, the last byte seen is named", "[keytype]") {
  KeyTypeProbe p(KeyTypeRule::kFirstKnown, Known);
  p.Manifest(std::nullopt);
  for (size_t i = 0; i + 1 < kKeyTypeSamples; ++i) {
    p.Sample(i % 2 ? std::optional<uint8_t>(0x60) : std::nullopt);
    CHECK_FALSE(p.Settled());
  }
  p.Sample(0x50);
  CHECK(p.Settled());
  std::vector<std::string> notes;
  CHECK(p.Choose(notes) == std::nullopt);
  CHECK(p.last_seen() == std::optional<uint8_t>(0x50));
}

TEST_CASE("key-type probe, manifest unless outvoted: a majority of the sample outvotes the manifest, with a note",
          "[keytype]") {
  KeyTypeProbe p(KeyTypeRule::kManifestUnlessOutvoted, Known);
  p.Manifest(0x10);
  CHECK_FALSE(p.Settled());  // this rule samples whatever the manifest says
  for (int i = 0; i < 9; ++i) p.Sample(0x11);
  for (int i = 0; i < 7; ++i) p.Sample(0x10);
  CHECK(p.Settled());
  std::vector<std::string> notes;
  CHECK(p.Choose(notes) == std::optional<uint8_t>(0x11));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] ==
        "the manifest's data envelope says type 0x10, but 9 of 16 sampled objects say 0x11: the repository is "
        "checked as 0x11");
}

TEST_CASE("key-type probe, manifest unless outvoted: half of the sample does not outvote it", "[keytype]") {
  KeyTypeProbe p(KeyTypeRule::kManifestUnlessOutvoted, Known);
  p.Manifest(0x10);
  for (int i = 0; i < 8; ++i) p.Sample(0x11);
  for (int i = 0; i < 8; ++i) p.Sample(std::nullopt);
  std::vector<std::string> notes;
  CHECK(p.Choose(notes) == std::optional<uint8_t>(0x10));
  CHECK(notes.empty());
}

TEST_CASE("key-type probe, manifest unless outvoted: no known manifest type, a majority or the lowest known byte",
          "[keytype]") {
  std::vector<std::string> notes;
  KeyTypeProbe majority(KeyTypeRule::kManifestUnlessOutvoted, Known);
  majority.Manifest(0x99);  // unknown: as if unreadable
  majority.Sample(0x11);
  majority.Sample(0x11);
  majority.Sample(0x10);
  CHECK(majority.Choose(notes) == std::optional<uint8_t>(0x11));
  KeyTypeProbe lowest(KeyTypeRule::kManifestUnlessOutvoted, Known);
  lowest.Sample(0x11);
  lowest.Sample(0x10);
  lowest.Sample(std::nullopt);
  lowest.Sample(0x42);
  CHECK(lowest.Choose(notes) == std::optional<uint8_t>(0x10));
  CHECK(notes.empty());  // no manifest type was outvoted
  KeyTypeProbe none(KeyTypeRule::kManifestUnlessOutvoted, Known);
  none.Sample(0x42);
  CHECK(none.Choose(notes) == std::nullopt);
}

}  // namespace
}  // namespace borgcheck::repo
