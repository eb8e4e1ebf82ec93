// Key loading for repository version 4, in steps:
//   1. Candidates: key files, then keys/<sha256> items; each must start with "BORG_KEY <this
//      repository's id>" and hold an argon2 key blob (master refuses borg 1.x "sha256" blobs).
//      Repokey items are hashed against their names first.
//   2-3. keys::Unlock: the first candidate the passphrase decrypts wins; its repository_id
//      must match.
//   4. Damaged repokey items become findings (another key unlocked) or the error (none did).
#include "checker/repo/borgstore/borgstore_key.h"

#include <algorithm>
#include <optional>

#include "checker/crypto/key_blob.h"
#include "checker/keys/key_files.h"
#include "checker/keys/key_identity.h"
#include "checker/keys/unlock.h"

namespace borgcheck::repo {
using report::Finding;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;

namespace {

constexpr uint64_t kMaxKeyFile = 1 << 20;

struct Candidate {
  std::string where;           // "keys/<hex>" or a path
  bool repokey = false;
  bool name_mismatch = false;  // repokey item whose SHA-256 is not its name
  std::string other_id_hex;    // a repokey item that names another repository id than config/id
  std::optional<crypto::Borg2EncryptedKey> blob;
  Status problem;              // why it cannot be used, if it cannot
};

// Parses one candidate's text. Returns false when the text is another repository's key (a
// repokey item of another id: skipped).
bool ParseCandidate(const std::string& text, const std::string& id_hex, Candidate& c) {
  if (text.rfind("BORG_KEY " + id_hex, 0) != 0) {
    if (text.rfind("BORG_KEY ", 0) == 0) {
      // Another id. A key item of this repository's own keys/ is still a candidate
      // (keys/key_identity.h): config/id may have been changed. A key file of another id is not.
      if (!c.repokey || text.size() < 9 + 64 || !ParseHexName(std::string_view(text).substr(9, 64), nullptr)) {
        return false;
      }
      c.other_id_hex = text.substr(9, 64);
      return ParseCandidate(text, c.other_id_hex, c);
    }
    c.problem = Status(StatusCode::kCorruptMetadata, "does not start with \"BORG_KEY <repository id>\"");
    return true;
  }
  Result<crypto::KeyFileContents> kf = crypto::ParseKeyFile(text);
  if (!kf.ok()) {
    c.problem = Status(c.repokey ? StatusCode::kCorruptMetadata : StatusCode::kKeyFileInvalid, kf.status().message());
    return true;
  }
  crypto::Borg2KeyBlobOptions opts;
  opts.accept_pbkdf2_sha256 = false;  // master: "unsupported key format"
  Result<crypto::Borg2EncryptedKey> blob = crypto::ParseBorg2KeyBlob(kf->base64, opts);
  if (!blob.ok()) {
    c.problem = blob.status();
    return true;
  }
  c.blob = std::move(blob).value();
  return true;
}

Result<std::vector<Candidate>> FindCandidates(const io::Env& env, const BorgstoreLayout& layout) {
  std::vector<Candidate> out;
  Result<std::vector<keys::KeyFile>> files =
      keys::FindKeyFiles(layout.path, layout.id_hex, {keys::KeysDirectory()});
  if (!files.ok()) return files.status();
  for (const keys::KeyFile& f : *files) {
    Candidate c;
    c.where = f.where;
    ParseCandidate(f.text, layout.id_hex, c);
    out.push_back(std::move(c));
  }
  for (const StoreItem& item : layout.keys) {
    Candidate c;
    c.where = "keys/" + item.name;
    c.repokey = true;
    Result<std::string> text = env.ReadWholeFile(item.path, kMaxKeyFile);
    if (!text.ok()) {
      c.problem = Status(text.status().code(), "cannot be read: " + text.status().message());
      out.push_back(std::move(c));
      continue;
    }
    ChunkId want, got;
    if (ParseHexName(item.name, &want)) {
      Sha256(AsBytes(*text), got.data());
      c.name_mismatch = want != got;
    }
    if (!ParseCandidate(*text, layout.id_hex, c)) {
      c.problem = Status(StatusCode::kCorruptMetadata, "belongs to another repository");
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Result<MasterKey> LoadMasterKey(const io::Env& env, const BorgstoreLayout& layout, std::vector<Finding>& findings) {
  // 1. Candidates.
  Result<std::vector<Candidate>> found = FindCandidates(env, layout);
  if (!found.ok()) return found.status();
  const std::vector<Candidate>& cands = *found;
  // A repokey item that does not match its name is damaged: no passphrase can help.
  std::optional<Status> corrupted;
  for (const Candidate& c : cands) {
    if (c.name_mismatch && !corrupted) {
      corrupted = Status(StatusCode::kCorruptMetadata,
                         "the repository key item " + c.where + " is corrupted: its content does not match its name "
                         "(sha256), so no passphrase can unlock it (borg reports this as a wrong passphrase)");
    }
  }
  // Items of this repository's id first; items of another id only when none of them unlocks.
  std::vector<const Candidate*> usable;
  for (const Candidate& c : cands) {
    if (c.blob && c.other_id_hex.empty()) usable.push_back(&c);
  }
  for (const Candidate& c : cands) {
    if (c.blob && !c.other_id_hex.empty()) usable.push_back(&c);
  }
  if (usable.empty()) {
    if (corrupted) return *corrupted;
    if (cands.empty()) {
      return Status(StatusCode::kKeyNotFound,
                    "No key found for repository " + layout.path + " (" + layout.id_hex + "): it has no keys/ item and " +
                        "no key file in " + keys::KeysDirectory() +
                        " starts with its id. Set BORG_KEY_FILE to the key file, or BORG_KEYS_DIR to the folder that "
                        "holds it.");
    }
    std::string why;
    StatusCode code = StatusCode::kCorruptMetadata;
    for (const Candidate& c : cands) {
      why += (why.empty() ? "" : "; ") + c.where + ": " + c.problem.message();
      // The most specific reason decides: an algorithm master refuses, else a key file that is
      // not one (borg's "invalid key data", 40).
      if (c.problem.code() == StatusCode::kUnsupported) code = StatusCode::kUnsupported;
      else if (c.problem.code() == StatusCode::kKeyFileInvalid && code != StatusCode::kUnsupported) code = c.problem.code();
    }
    return Status(code, "no usable key for repository " + layout.path + ": " + why);
  }

  // 2-3. The passphrase, tried against every usable candidate in order.
  std::optional<crypto::Borg2KeyMaterial> material;
  std::vector<keys::Candidate> unlockable;
  for (const Candidate* c : usable) {
    unlockable.push_back({c->where, [&, c](const std::string& passphrase) -> Status {
                            Result<crypto::Borg2KeyMaterial> r = crypto::DecryptBorg2Key(*c->blob, passphrase);
                            if (!r.ok()) return r.status();
                            const bool own_item_of_other_id =
                                !c->other_id_hex.empty() && ToHex(AsBytes(r->repository_id)) == c->other_id_hex;
                            if (r->repository_id != layout.id && !own_item_of_other_id) {
                              return Status(StatusCode::kKeyFileMismatch,
                                            c->where + " unlocks, but belongs to repository " +
                                                ToHex(AsBytes(r->repository_id)) + ", not to " + layout.id_hex);
                            }
                            material = std::move(r).value();
                            return Status::Ok();
                          }});
  }
  keys::UnlockOptions options;
  options.prompt = "Enter passphrase for the key of " + layout.path + ": ";
  options.one_passphrase_source = true;
  options.repository = layout.path;
  options.instead_of_wrong_passphrase = corrupted;  // 4. a damaged item explains it better
  Result<size_t> won = keys::Unlock(unlockable, options);
  if (!won.ok()) return won.status();
  const Candidate* winner = usable[*won];
  if (!winner->other_id_hex.empty()) {
    findings.push_back(MakeFinding(Severity::kWarning, Stage::kKey, Location::Item("config/id"), nullptr,
                                   keys::RepositoryIdMismatch(winner->where, winner->other_id_hex, "config/id",
                                                              layout.id_hex)));
  }

  // 4. The other damaged key items are findings.
  for (const Candidate& c : cands) {
    if (&c == winner || !c.repokey || (!c.name_mismatch && c.problem.ok())) continue;
    findings.push_back(MakeFinding(Severity::kError, Stage::kSegment, Location::Item(c.where), nullptr,
                                   c.name_mismatch ? "key item is corrupted: content does not match its name (sha256); "
                                                     "whoever unlocks the repository with this key's passphrase is "
                                                     "locked out"
                                                   : "key item cannot be used: " + c.problem.message()));
  }
  return MasterKey{std::move(*material), winner->where};
}

}  // namespace borgcheck::repo
