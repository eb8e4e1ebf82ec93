#include "checker/repo/format_detect.h"

#include <cctype>
#include <filesystem>

#include "checker/repo/config.h"
#include "checker/repo/file.h"

namespace borgcheck::repo {
namespace fs = std::filesystem;

Result<DetectedFormat> DetectFormat(const std::string& path) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    return Status(StatusCode::kNotFound, "repository " + path + " does not exist");
  }
  const std::string expected =
      " (expected a borg repository: a directory with an INI 'config' file and data/ segment "
      "files (borg 1.x, 2.0 betas up to b9), or a borgstore layout with config/version and "
      "packs/ (borg 2 master))";
  if (!fs::is_directory(st)) {
    return Status(StatusCode::kNotARepository, path + " is not a borg repository: not a directory" + expected);
  }
  fs::path cfg = fs::path(path) / "config";
  if (fs::is_directory(cfg, ec)) {
    Result<std::string> v = ReadWholeFile((cfg / "version").string(), 64);
    if (!v.ok()) {
      return Status(StatusCode::kNotARepository,
                    path + " is not a borg repository: config/ has no readable 'version' file" + expected);
    }
    std::string text;
    for (char c : *v) if (!std::isspace(static_cast<unsigned char>(c))) text.push_back(c);
    if (text == "3") return DetectedFormat{RepoFormat::kBorgstoreV3, 3};
    if (text == "4") return DetectedFormat{RepoFormat::kBorgstoreV4, 4};
    return Status(StatusCode::kUnsupported,
                  "unsupported repository version " + text + " at " + path +
                      " (borgcheck knows borgstore versions 3 and 4)");
  }
  Result<std::string> text = ReadWholeFile(cfg.string(), 1 << 20);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return Status(StatusCode::kNotARepository, path + " is not a borg repository: it has no 'config'" + expected);
    }
    return text.status();
  }
  Result<IniFile> ini = ParseIni(*text);
  if (!ini.ok() || !ini->count("repository") || !ini->at("repository").count("version")) {
    return Status(StatusCode::kNotARepository,
                  path + " is not a borg repository: 'config' has no [repository] version" + expected);
  }
  const std::string& version = ini->at("repository").at("version");
  if (version == "1") return DetectedFormat{RepoFormat::kBorg1, 1};
  if (version == "2") return DetectedFormat{RepoFormat::kBorg2Segments, 2};
  return Status(StatusCode::kUnsupported,
                "unsupported repository version " + version + " at " + path +
                    " (borgcheck knows versions 1 and 2 with an INI config)");
}

}  // namespace borgcheck::repo
