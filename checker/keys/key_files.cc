#include "checker/keys/key_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "checker/crypto/key_blob.h"

namespace borgcheck::keys {
namespace {
constexpr uint64_t kMaxKeyFile = 1 << 20;
}  // namespace

std::string EnvVar(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string KeysDirectory() {
  if (std::string d = EnvVar("BORG_KEYS_DIR"); !d.empty()) return d;
  std::string config_dir = EnvVar("BORG_CONFIG_DIR");
  if (config_dir.empty()) {
    std::string base = EnvVar("BORG_BASE_DIR");
    std::string xdg = EnvVar("XDG_CONFIG_HOME");
    if (base.empty() && !xdg.empty()) {
      config_dir = xdg + "/borg";
    } else {
      if (base.empty()) base = EnvVar("HOME");
      config_dir = base + "/.config/borg";
    }
  }
  return config_dir + "/keys";
}

Result<std::vector<KeyFile>> FindKeyFiles(const std::string& repo_path, const std::string& id_hex,
                                          const std::vector<std::string>& dirs) {
  const io::Env& env = io::Env::Default();
  const std::string want = "BORG_KEY " + id_hex;
  std::vector<KeyFile> out;
  if (std::string file = EnvVar("BORG_KEY_FILE"); !file.empty()) {
    std::error_code ec;
    const std::string path = std::filesystem::absolute(file, ec).string();
    Result<std::string> text = env.ReadWholeFile(ec ? file : path, kMaxKeyFile);
    if (!text.ok()) {
      return Status(StatusCode::kKeyNotFound,
                    "key file " + file + " (from BORG_KEY_FILE) cannot be read: " + text.status().message());
    }
    Result<crypto::KeyFileContents> kf = crypto::ParseKeyFile(*text);
    if (!kf.ok()) {
      return Status(StatusCode::kKeyFileInvalid,
                    "key file " + file + " (from BORG_KEY_FILE) is not a borg key file: " + kf.status().message());
    }
    if (kf->repository_id_hex != id_hex) {
      return Status(StatusCode::kKeyFileMismatch, "key file " + file + " (from BORG_KEY_FILE) belongs to repository " +
                                                      kf->repository_id_hex + ", not to " + repo_path + " (" +
                                                      id_hex + ")");
    }
    out.push_back({file, std::move(text).value()});
    return out;
  }
  for (const std::string& dir : dirs) {
    Result<std::vector<io::DirEntry>> entries = env.List(dir);
    if (!entries.ok()) continue;  // an absent keys directory holds no keys
    std::vector<std::string> names;
    for (const io::DirEntry& e : *entries) {
      if (e.type == io::EntryType::kRegular) names.push_back(e.name);
    }
    std::sort(names.begin(), names.end());  // deterministic choice if two match
    for (const std::string& n : names) {
      const std::string p = dir + "/" + n;
      Result<std::string> text = env.ReadWholeFile(p, kMaxKeyFile);
      if (!text.ok() || text->rfind(want, 0) != 0) continue;
      out.push_back({p, std::move(text).value()});
    }
  }
  return out;
}

Result<KeyText> LocateKey(const std::string& repo_path, const std::string& id_hex,
                          const std::vector<std::string>& dirs, bool in_key_file, const std::string& repokey_base64,
                          std::string_view mode_name) {
  if (!in_key_file) {
    if (repokey_base64.empty()) {
      return Status(StatusCode::kRepoKeyNotFound, "No key entry found in the config of repository " + repo_path +
                                                      " (its objects say mode " + std::string(mode_name) + ")");
    }
    return KeyText{"config", repokey_base64};
  }
  Result<std::vector<KeyFile>> files = FindKeyFiles(repo_path, id_hex, dirs);
  if (!files.ok()) return files.status();
  if (files->empty()) return NoKeyFile(repo_path, id_hex, dirs);
  const KeyFile& file = files->front();  // borg takes the first match too
  Result<crypto::KeyFileContents> kf = crypto::ParseKeyFile(file.text);
  if (!kf.ok()) return Status(StatusCode::kKeyFileInvalid, "key file " + file.where + ": " + kf.status().message());
  return KeyText{file.where, kf->base64};
}

Status NoKeyFile(const std::string& repo_path, const std::string& id_hex, const std::vector<std::string>& dirs) {
  std::string searched;
  for (const std::string& d : dirs) searched += (searched.empty() ? "" : " or ") + d;
  // The id is what a key file must name (its first line, "BORG_KEY <id>"): with it the user can
  // tell a missing key file from a config whose id was changed.
  return Status(StatusCode::kKeyNotFound,
                "No key file for repository " + repo_path + " (id " + id_hex + ") found in " + searched +
                    ". Set BORG_KEY_FILE to the key file, or BORG_KEYS_DIR to the folder that holds it.");
}

}  // namespace borgcheck::keys
