// Key loading for repository version 4, in steps:
//   1. Candidates: key files (BORG_KEY_FILE, else the keys directory), then keys/<sha256>
//      items; each must start with "BORG_KEY <this repository's id>" and hold an argon2 key
//      blob (master refuses borg 1.x "sha256" blobs). Repokey items are hashed against their
//      names first.
//   2. Passphrase: exactly one environment source, else "" and then the terminal.
//   3. The first candidate the passphrase decrypts wins; its repository_id must match.
//   4. Damaged repokey items become findings (another key unlocked) or the error (none did).
#include "checker/run/borg2master_key_loader.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "checker/crypto/key_blob.h"
#include "checker/repo/file.h"
#include "checker/run/check_run.h"
#include "checker/run/key_loader.h"
#include "checker/run/passphrase.h"

namespace borgcheck::run {
namespace fs = std::filesystem;
using report::Finding;
using report::Severity;
using report::Stage;

namespace {

constexpr uint64_t kMaxKeyFile = 1 << 20;

struct Candidate {
  std::string where;           // "keys/<hex>" or a path
  bool repokey = false;
  bool name_mismatch = false;  // repokey item whose SHA-256 is not its name
  std::optional<crypto::Borg2EncryptedKey> blob;
  std::string problem;         // why it cannot be used, if it cannot
};

bool EnvSet(const char* name, bool empty_counts) {
  const char* v = std::getenv(name);
  return v && (empty_counts || *v);
}

// Reads and parses one candidate's text. Returns false when the text is not a key of this
// repository at all (another repository's key file: silently skipped, as borg does).
bool ParseCandidate(const std::string& text, const std::string& id_hex, Candidate& c) {
  if (text.rfind("BORG_KEY " + id_hex, 0) != 0) {
    if (text.rfind("BORG_KEY ", 0) == 0) return false;
    c.problem = "does not start with \"BORG_KEY <repository id>\"";
    return true;
  }
  Result<crypto::KeyFileContents> kf = crypto::ParseKeyFile(text);
  if (!kf.ok()) {
    c.problem = kf.status().message();
    return true;
  }
  crypto::Borg2KeyBlobOptions opts;
  opts.accept_pbkdf2_sha256 = false;  // master: "unsupported key format"
  Result<crypto::Borg2EncryptedKey> blob = crypto::ParseBorg2KeyBlob(kf->base64, opts);
  if (!blob.ok()) {
    c.problem = blob.status().message();
    return true;
  }
  c.blob = std::move(blob).value();
  return true;
}

Result<std::vector<Candidate>> FindCandidates(const repo::BorgstoreLayout& layout, std::vector<Finding>* findings) {
  std::vector<Candidate> out;
  // Key files.
  if (const char* file = std::getenv("BORG_KEY_FILE"); file && *file) {
    std::string path = fs::absolute(file).string();
    Result<std::string> text = repo::ReadWholeFile(path, kMaxKeyFile);
    if (!text.ok()) {
      return Status(StatusCode::kKeyNotFound,
                    std::string("key file ") + file + " (from BORG_KEY_FILE) cannot be read: " + text.status().message());
    }
    Candidate c;
    c.where = file;
    if (!ParseCandidate(*text, layout.id_hex, c)) {
      return Status(StatusCode::kKeyNotFound, std::string("key file ") + file +
                                                  " (from BORG_KEY_FILE) belongs to another repository, not to " +
                                                  layout.path + " (" + layout.id_hex + ")");
    }
    out.push_back(std::move(c));
  } else {
    std::string dir = KeysDirectory();
    std::error_code ec;
    std::vector<fs::path> files;
    if (fs::is_directory(dir, ec)) {
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& p : files) {
      Result<std::string> text = repo::ReadWholeFile(p.string(), kMaxKeyFile);
      if (!text.ok() || text->rfind("BORG_KEY " + layout.id_hex, 0) != 0) continue;
      Candidate c;
      c.where = p.string();
      ParseCandidate(*text, layout.id_hex, c);
      out.push_back(std::move(c));
    }
  }
  // Repokey items.
  for (const repo::StoreItem& item : layout.keys) {
    Candidate c;
    c.where = "keys/" + item.name;
    c.repokey = true;
    Result<std::string> text = repo::ReadWholeFile(item.path, kMaxKeyFile);
    if (!text.ok()) {
      c.problem = "cannot be read: " + text.status().message();
      out.push_back(std::move(c));
      continue;
    }
    repo::ChunkId want, got;
    if (repo::ParseHexName(item.name, &want)) {
      repo::Sha256(AsBytes(*text), got.data());
      c.name_mismatch = want != got;
    }
    if (!ParseCandidate(*text, layout.id_hex, c)) {
      c.problem = "belongs to another repository";
    }
    out.push_back(std::move(c));
  }
  (void)findings;
  return out;
}

}  // namespace

Result<MasterKey> LoadMasterKey(const repo::BorgstoreLayout& layout, std::vector<Finding>* findings) {
  // 1. Candidates.
  Result<std::vector<Candidate>> found = FindCandidates(layout, findings);
  if (!found.ok()) return found.status();
  std::vector<Candidate>& cands = *found;
  auto report_damaged = [&](const Candidate* used) {
    for (const Candidate& c : cands) {
      if (&c == used || !c.repokey || (!c.name_mismatch && c.problem.empty())) continue;
      Finding f;
      f.severity = Severity::kError;
      f.stage = Stage::kSegment;
      f.location = c.where;
      f.message = c.name_mismatch ? "key item is corrupted: content does not match its name (sha256); whoever "
                                    "unlocks the repository with this key's passphrase is locked out"
                                  : "key item cannot be used: " + c.problem;
      if (findings) findings->push_back(std::move(f));
    }
  };
  std::vector<const Candidate*> usable;
  for (const Candidate& c : cands) {
    if (c.blob) usable.push_back(&c);
  }
  // A repokey item that does not match its name is damaged: no passphrase can help.
  auto corrupted_status = [&]() -> std::optional<Status> {
    for (const Candidate& c : cands) {
      if (c.name_mismatch) {
        return Status(StatusCode::kCorruptMetadata,
                      "the repository key item " + c.where + " is corrupted: its content does not match its name "
                      "(sha256), so no passphrase can unlock it (borg reports this as a wrong passphrase)");
      }
    }
    return std::nullopt;
  };
  if (usable.empty()) {
    if (std::optional<Status> s = corrupted_status()) return *s;
    if (cands.empty()) {
      return Status(StatusCode::kKeyNotFound,
                    "No key found for repository " + layout.path + " (" + layout.id_hex + "): it has no keys/ item and " +
                        "no key file in " + KeysDirectory() +
                        " starts with its id. Set BORG_KEY_FILE to the key file, or BORG_KEYS_DIR to the folder that holds it.");
    }
    std::string why;
    for (const Candidate& c : cands) why += (why.empty() ? "" : "; ") + c.where + ": " + c.problem;
    bool unsupported = std::any_of(cands.begin(), cands.end(), [](const Candidate& c) {
      return c.problem.find("unsupported") != std::string::npos || c.problem.find("algorithm") != std::string::npos;
    });
    return Status(unsupported ? StatusCode::kUnsupported : StatusCode::kCorruptMetadata,
                  "no usable key for repository " + layout.path + ": " + why);
  }

  // 2-3. Passphrase, tried against every usable candidate in order.
  int sources = EnvSet("BORG_PASSPHRASE", true) + EnvSet("BORG_PASSCOMMAND", false) + EnvSet("BORG_PASSPHRASE_FD", false);
  if (sources > 1) {
    return Status(StatusCode::kInvalidArgument,
                  "More than one passphrase environment variable is set (BORG_PASSPHRASE, BORG_PASSCOMMAND, "
                  "BORG_PASSPHRASE_FD): borg 2 refuses that; set only one");
  }
  Result<PassphraseSource> src = PassphraseFromEnvironment();
  if (!src.ok()) return src.status();
  auto try_all = [&](const std::string& pass, const Candidate** winner) -> Result<crypto::Borg2KeyMaterial> {
    Status last(StatusCode::kWrongPassphrase, "");
    for (const Candidate* c : usable) {
      if (PendingStopSignal()) return Status(StatusCode::kInterrupted, "stopped by a signal while unlocking the key");
      Result<crypto::Borg2KeyMaterial> r = crypto::DecryptBorg2Key(*c->blob, pass);
      if (r.ok()) {
        if (r->repository_id != layout.id) {
          last = Status(StatusCode::kKeyNotFound, c->where + " unlocks, but belongs to another repository");
          continue;
        }
        *winner = c;
        return r;
      }
      if (r.status().code() != StatusCode::kWrongPassphrase) last = r.status();
    }
    return last;
  };
  const Candidate* winner = nullptr;
  auto finish = [&](Result<crypto::Borg2KeyMaterial> r, const std::string& source) -> Result<MasterKey> {
    if (r.ok()) {
      report_damaged(winner);
      return MasterKey{std::move(r).value(), winner->where};
    }
    if (r.status().code() != StatusCode::kWrongPassphrase) return r.status();
    // 4. No key unlocked: a damaged repokey item explains it better than "wrong passphrase".
    if (std::optional<Status> s = corrupted_status()) return *s;
    std::string where;
    for (const Candidate* c : usable) where += (where.empty() ? "" : ", ") + c->where;
    return Status(StatusCode::kWrongPassphrase, "the passphrase " + source + " is incorrect for the key(s) " + where +
                                                    " (or those key blobs are damaged: the two cannot be told apart)");
  };
  if (src->passphrase) {
    Result<crypto::Borg2KeyMaterial> r = try_all(*src->passphrase, &winner);
    WipeString(*src->passphrase);
    return finish(std::move(r), "supplied in " + src->source);
  }
  // borg tries the empty passphrase silently before prompting.
  Result<crypto::Borg2KeyMaterial> r = try_all("", &winner);
  if (r.ok() || r.status().code() != StatusCode::kWrongPassphrase) return finish(std::move(r), "");
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::optional<std::string> typed = PromptPassphrase("Enter passphrase for the key of " + layout.path + ": ");
    if (!typed) {
      if (PendingStopSignal()) return Status(StatusCode::kInterrupted, "stopped by a signal while waiting for the passphrase");
      return Status(StatusCode::kInvalidArgument,
                    "the repository key is protected by a passphrase and there is no terminal to ask for it: set "
                    "BORG_PASSPHRASE, BORG_PASSCOMMAND or BORG_PASSPHRASE_FD");
    }
    r = try_all(*typed, &winner);
    WipeString(*typed);
    if (r.ok() || r.status().code() != StatusCode::kWrongPassphrase) return finish(std::move(r), "typed");
  }
  return finish(std::move(r), "typed");
}

}  // namespace borgcheck::run
