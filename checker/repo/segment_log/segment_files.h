// What borg 1.x and repository version 2 (2.0.0b5) share on disk: the segment files
// data/<D>/<S> (spec borg1-format.md §2, borg2-format.md §A.1), the COMMIT that ends a committed
// segment, index.T and its integrity.T companion (borg's IntegrityCheckedFile framing), and the
// INI `config`. The entry formats differ (segment_entry.h for borg 1.x, borg2b5_segments.h for
// PUT2) and live with their generation.
//
// Thread contract: pure functions, or reads through the given io::Env; called while planning.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"
#include "checker/io/env.h"

namespace borgcheck::repo {

struct SegmentFile {
  uint32_t number = 0;
  std::string path;
  uint64_t size = 0;
};

// data/<D>/<S> (digits only), every regular segment file on disk in numeric order. Names that
// are not digits are ignored; kNotARepository when there is no data/ directory; kIoError when
// a directory cannot be listed. `odd` (optional) collects data/ entries where a segment file
// should be that are not regular files (a directory, FIFO or device named like a segment).
Result<std::vector<SegmentFile>> ListSegmentFiles(const io::Env& env, const std::string& repo,
                                                  std::vector<std::pair<uint32_t, std::string>>* odd = nullptr);

std::string SegmentPath(const std::string& repo, uint32_t segments_per_dir, uint32_t segment);

// The repository folder as one listing saw it: its entries (nullopt: it could not be listed)
// and the highest T of a non-empty regular file index.T among them. A plan lists it once and
// reads its records from it (over sftp a listing is two round trips).
struct RepoFolder {
  std::optional<std::vector<io::DirEntry>> entries;
  std::optional<uint32_t> index_txn;
};
RepoFolder ListRepoFolder(const io::Env& env, const std::string& repo);
// ListRepoFolder's index_txn (a listing of its own: "changed since the start?").
std::optional<uint32_t> FindIndexTransaction(const io::Env& env, const std::string& repo);
// Tells `env` that a plan reads index.T, integrity.T, hints.T and integrity.T again next
// (io::Env::OpenAhead: a remote store opens them at once, while the plan lists the segments).
// Nothing without a T.
void OpenIndexFilesAhead(const io::Env& env, const std::string& repo, std::optional<uint32_t> t);

// Whether the segment's last bytes are `commit` (the COMMIT entry of its generation).
bool EndsWithCommit(const io::Env& env, const SegmentFile& s, Bytes commit);
// The newest of `segments` (numeric order) that ends with `commit`: the log's transaction.
std::optional<uint32_t> NewestCommitted(const io::Env& env, const std::vector<SegmentFile>& segments, Bytes commit);

// The directory and `config` file of a segment-log repository: kNotFound (no such path),
// kNotARepository (not a directory, no config), kIoError; the config's text otherwise.
// `known`: the text format detection read (DetectedFormat::config_text), returned as it is.
Result<std::string> ReadSegmentLogConfig(const io::Env& env, const std::string& path,
                                         const std::optional<std::string>& known = std::nullopt);

enum class IntegrityOutcome {
  kVerified,
  kNoIntegrityFile,  // integrity.T absent: nothing to check against
  kMismatch,         // a digest differs: borg would discard and rebuild the index
  kMalformed,        // integrity.T unreadable
};

// Checks `index_bytes` (the file named `index_name`, e.g. "index.29") against integrity.T's
// msgpack bytes: {index: JSON {algorithm "XXH64", digests {HashHeader, final}}}, XXH64 over the
// framed name, the first `header_size` bytes as the "HashHeader" part, then the rest (18 for
// borg 1.x's HashIndex, 1024 for BORG2IDX).
IntegrityOutcome CheckIndexIntegrity(Bytes index_bytes, const std::string& index_name, size_t header_size,
                                     Bytes integrity_bytes, std::string* why);
// The same for integrity.T's entry `key` ("index" or "hints") over the file `name`;
// header_size 0: no "HashHeader" part (hints.T).
IntegrityOutcome CheckFileIntegrity(Bytes file, const std::string& name, std::string_view key, size_t header_size,
                                    Bytes integrity_bytes, std::string* why);

// Python ConfigParser INI with TAB-indented continuation lines (the base64 `key` value is
// wrapped over them): section (lowercased) -> key (lowercased) -> value (continuation lines
// joined with '\n').
using IniFile = std::map<std::string, std::map<std::string, std::string>>;
Result<IniFile> ParseIni(std::string_view text);

// ConfigParser-style size with optional suffix (K, M, G, T, P; powers of 1000 as borg's
// parse_file_size): "5M" -> 5000000.
bool ParseSize(std::string_view s, uint64_t& out);

}  // namespace borgcheck::repo
