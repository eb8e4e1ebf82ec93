#include "checker/repo/format_detect.h"

#include <cctype>

#include "checker/repo/segment_log/segment_files.h"

namespace borgcheck::repo {

Result<DetectedFormat> DetectFormat(const io::Env& env, const std::string& path) {
  // An INI config is read below: it may be opened while the folder and it are stat-ed (a hint: a
  // config folder, or no repository at all, only fails that open, which is then forgotten).
  const std::string cfg = path + "/config";
  env.OpenAhead(cfg, io::ReadAhead::kWhole, 0);
  Result<io::FileStat> st = env.Stat(path);
  if (!st.ok()) {
    if (st.status().code() == StatusCode::kNotFound) {
      return Status(StatusCode::kNotFound, "repository " + path + " does not exist");
    }
    return st.status();
  }
  const std::string expected =
      " (expected a borg repository: a directory with an INI 'config' file and data/ segment "
      "files (borg 1.x, 2.0 betas up to b9), or a borgstore layout with config/version and "
      "packs/ (borg 2 master))";
  if (st->type != io::EntryType::kDirectory) {
    return Status(StatusCode::kNotARepository, path + " is not a borg repository: not a directory" + expected);
  }
  if (Result<io::FileStat> c = env.Stat(cfg); c.ok() && c->type == io::EntryType::kDirectory) {
    Result<std::string> v = env.ReadWholeFile(cfg + "/version", 64);
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
  Result<std::string> text = env.ReadWholeFile(cfg, 1 << 20);
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
  if (version == "1") return DetectedFormat{RepoFormat::kBorg1, 1, std::move(text).value()};
  if (version == "2") return DetectedFormat{RepoFormat::kBorg2Segments, 2, std::move(text).value()};
  return Status(StatusCode::kUnsupported,
                "unsupported repository version " + version + " at " + path +
                    " (borgcheck knows versions 1 and 2 with an INI config)");
}

}  // namespace borgcheck::repo
