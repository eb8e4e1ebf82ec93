#include "checker/run/passphrase_key.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "checker/crypto/key_blob.h"
#include "checker/repo/file.h"

namespace borgcheck::run {
namespace fs = std::filesystem;

Result<KeyText> FindKeyFileForRepository(const std::string& repo_path, const std::string& id_hex,
                                         const std::vector<std::string>& dirs) {
  if (const char* env = std::getenv("BORG_KEY_FILE"); env && *env) {
    const std::string file = env;
    Result<std::string> text = repo::ReadWholeFile(fs::absolute(file).string(), 1 << 20);
    if (!text.ok()) {
      return Status(StatusCode::kKeyNotFound,
                    "key file " + file + " (from BORG_KEY_FILE) cannot be read: " + text.status().message());
    }
    Result<crypto::KeyFileContents> kf = crypto::ParseKeyFile(*text);
    if (!kf.ok()) return Status(StatusCode::kCorruptMetadata, "key file " + file + ": " + kf.status().message());
    if (kf->repository_id_hex != id_hex) {
      return Status(StatusCode::kKeyNotFound,
                    "key file " + file + " (from BORG_KEY_FILE) belongs to repository " +
                        kf->repository_id_hex + ", not to " + repo_path + " (" + id_hex + ")");
    }
    return KeyText{kf->base64, file};
  }
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());  // deterministic choice if two match
    for (const fs::path& p : files) {
      Result<std::string> text = repo::ReadWholeFile(p.string(), 1 << 20);
      if (!text.ok() || text->rfind("BORG_KEY " + id_hex, 0) != 0) continue;
      Result<crypto::KeyFileContents> kf = crypto::ParseKeyFile(*text);
      if (!kf.ok()) return Status(StatusCode::kCorruptMetadata, "key file " + p.string() + ": " + kf.status().message());
      return KeyText{kf->base64, p.string()};
    }
  }
  std::string searched;
  for (const std::string& d : dirs) searched += (searched.empty() ? "" : " or ") + d;
  return Status(StatusCode::kKeyNotFound,
                "No key file for repository " + repo_path + " found in " + searched +
                    ". Set BORG_KEY_FILE to the key file, or BORG_KEYS_DIR to the folder that holds it.");
}

}  // namespace borgcheck::run
