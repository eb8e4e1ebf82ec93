// Which borg repository generation is at a path (spec borg2-format.md §0)?
//
//   INI `config` with version = 1               -> borg 1.x               (kBorg1)
//   INI `config` with version = 2               -> borg 2.0.0b1..b9       (kBorg2Segments)
//   borgstore, config/version "3"               -> borg 2.0.0b10..b21     (kBorgstoreV3)
//   borgstore, config/version "4", packs/       -> borg 2.0.0b22..master  (kBorgstoreV4)
//
// Thread contract: a pure function over the file system; called once before planning.
#pragma once

#include <optional>
#include <string>

#include "checker/base/status.h"
#include "checker/io/env.h"

namespace borgcheck::repo {

enum class RepoFormat { kBorg1, kBorg2Segments, kBorgstoreV3, kBorgstoreV4 };

struct DetectedFormat {
  RepoFormat format = RepoFormat::kBorg1;
  int version = 0;  // the repository version number found on disk
  // Versions 1 and 2: the INI `config` as read here, so that the generation's plan reads it no
  // more (over sftp the directory's STAT and the config's read are three round trips).
  std::optional<std::string> config_text = std::nullopt;
};

// kNotFound: no such path; kNotARepository: exists but is none of the above (the message
// says what was expected); kUnsupported: a borg repository of an unknown version.
Result<DetectedFormat> DetectFormat(const io::Env& env, const std::string& path);

}  // namespace borgcheck::repo
