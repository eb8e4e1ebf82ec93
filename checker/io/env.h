// The file-system seam (leveldb's Env is the model): every byte borgcheck reads from a
// repository, and every directory it lists, goes through an Env. The real one is read-only by
// construction: it opens with O_RDONLY and has no call that writes, so "never modify a
// repository" is checkable here. Tests substitute a FaultEnv (fault_env.h) that fails opens or
// reads, flips a bit on the Nth read only, slows reads down, or makes a file vanish.
//
// Every error message begins with the path and ": " (ErrorReason strips them).
//
// Errors, as the sources classify them:
//   kNotFound        the path does not exist (ENOENT, ENOTDIR)
//   kCorruptMetadata the path exists but is not a regular file (a directory, FIFO, socket or
//                    device where a file should be: that is damage, and it is never opened in a
//                    way that could block)
//   kIoError         it exists and cannot be read: EACCES, EIO, a short read; the message carries
//                    the errno text. "Could not check", never "damaged".
//
// Thread contract: an Env is safe for concurrent use (Default() holds no mutable state;
// MakeLeaveCacheAsFound()'s Env guards its record of paths to read again; FaultEnv guards its
// counters). A File is owned by one thread at a time;
// ReadAt is const and may be called concurrently on one File (pread, and posix_fadvise on
// the pages a read brought in: the record of what was cached is written only at open); only a
// FileCache (file_cache.h) shares one between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checker/base/bytes.h"
#include "checker/base/status.h"

namespace borgcheck::io {

// One open regular file.
class File {
 public:
  virtual ~File() = default;
  // The size when it was opened.
  virtual uint64_t size() const = 0;
  // Reads exactly n bytes at offset into dst; kIoError on a short read or an error.
  virtual Status ReadAt(uint64_t offset, size_t n, uint8_t* dst) const = 0;
};

enum class EntryType { kRegular, kDirectory, kOther };

struct DirEntry {
  std::string name;
  EntryType type = EntryType::kOther;
  // The size, where the listing says it (an sftp READDIR does, a local readdir(3) does not):
  // then EntrySize needs no stat, which over sftp is a round trip per segment or pack.
  std::optional<uint64_t> size;
};

struct FileStat {
  EntryType type = EntryType::kOther;
  uint64_t size = 0;
  int64_t mtime_ns = 0;  // st_mtim, nanoseconds since the epoch
  uint64_t inode = 0;    // st_ino
  int64_t ctime_ns = 0;  // st_ctim: set by the kernel at every change; no copy or restore keeps it
  const char* type_name = "";  // "regular file", "directory", "FIFO", "socket", "block device",
                               // "character device", "symlink"
};

// How far behind a read LeaveCacheAsFound drops pages. Behind, not the read's own range: a
// segment walk reads the entry that a window cut in two again, at the start of the next window,
// and that second read must find it cached (else it goes to the disk twice). More than the
// largest window (a 4 MiB window, or one entry of up to 8 MiB and its header), so every page a
// walk has finished with goes by the next read or two, and a file holds at most this much plus
// the kernel's read-ahead in the cache while it is read.
inline constexpr uint64_t kCacheDropLagBytes = 16ull << 20;

enum class ReadAhead : uint8_t { kParts, kWhole };  // Env::OpenAhead

class Env {
 public:
  virtual ~Env() = default;

  // Opens a regular file read-only (see the error classes above). Never blocks on a FIFO.
  virtual Result<std::unique_ptr<File>> Open(const std::string& path) const = 0;
  // The same, for reads that are not the one streaming pass over the file: a planning walk or
  // probe whose pages the data pass reads again (2.0.0b5's walk of every entry header: the
  // kernel's read-ahead brings in the whole segment), single entries, the archive pass's
  // random reads. An Env that leaves the page cache as found (MakeLeaveCacheAsFound) keeps
  // those pages: the path's streaming Open drops them as it reads, and what is left goes when
  // that Env is destroyed. Others: Open.
  virtual Result<std::unique_ptr<File>> OpenToReadAgain(const std::string& path) const { return Open(path); }
  // A hint that `path` will be opened soon (the next segment of a stream, the files a plan reads
  // next), once per Open to come. An Env whose Open costs round trips (sftp) may open it now, in
  // the background, and the next Open (or OpenToReadAgain) of that path then takes that file:
  // the difference is that it was opened (and, for kWhole, its first bytes read) at the hint. A
  // hint that could not be taken (too many pending, a failed open) changes nothing: that Open
  // opens anew and answers what it finds then (except after a lost connection, which fails it
  // either way). Others (a local file system, where an open costs microseconds): nothing. `how`
  // says how it will be read: kWhole (a unit's stream, an index read at once, from 0: a remote
  // store may also open the handles it reads large ranges through) or kParts (single objects:
  // one handle; `from`: where the first of them begins, whose bytes may come with the open).
  virtual void OpenAhead(const std::string& path, ReadAhead how, uint64_t from) const {
    (void)path;
    (void)how;
    (void)from;
  }
  // The entries of a directory except "." and "..", in no particular order. kNotFound,
  // kCorruptMetadata (not a directory), kIoError.
  virtual Result<std::vector<DirEntry>> List(const std::string& dir) const = 0;
  // stat(2), following symlinks. kNotFound, kIoError.
  virtual Result<FileStat> Stat(const std::string& path) const = 0;
  // lstat(2): a symbolic link is reported as one (type kOther, type_name "symlink").
  virtual Result<FileStat> Lstat(const std::string& path) const = 0;
  // How many units (files) may be read at once through this Env: 0 = no limit beyond the
  // worker count (a local file system). A remote store answers the connections it holds, as
  // restic's Backend.Connections(); the engine never reads more units at once.
  virtual unsigned Connections() const { return 0; }
  // Ok while the store can still be reached; a remote store that lost its connection answers
  // why (kIoError). The engine stops reading new units once it is not ok: what is left is
  // "could not check", and the run ends with that status (exit 2), its findings so far kept.
  virtual Status Lost() const { return Status::Ok(); }

  // A whole small file (config, index, key file, manifest) into a string. Refuses files larger
  // than max_size with kCorruptMetadata before allocating (sizes from disk are untrusted).
  Result<std::string> ReadWholeFile(const std::string& path, uint64_t max_size) const;

  // The size of the entry `e` that List(dir) gave, at `path` (dir + "/" + e.name): the
  // listing's where it says it, else Stat's (its errors: kNotFound when it is gone since).
  Result<uint64_t> EntrySize(const std::string& path, const DirEntry& e) const;
  // EntrySize for a walk that takes an entry gone since the listing as never listed: nullopt
  // then. Any other error (EIO, a server's refusal) is the walk's to stop on: an entry left out
  // for it would go unchecked, and nothing would say so.
  Result<std::optional<uint64_t>> SizeUnlessGone(const std::string& path, const DirEntry& e) const;

  // The real, read-only file system. Pages read stay in the page cache (the kernel's default).
  static const Env& Default();
  // The same, leaving the page cache as it found it (borgcheck's default; --keep-cache turns it
  // off): each file's resident pages are noted when it is first opened (mincore on a
  // read-only mapping, no page touched); the pages that were not resident then are dropped
  // (posix_fadvise DONTNEED) behind the reads, kCacheDropLagBytes behind each read's offset,
  // and all of them when the file is closed (the kernel's read-ahead past the last read
  // included); a file opened with OpenToReadAgain drops nothing, its path's later Opens drop
  // by the record of its first opening, and what is left of it goes when this Env does. So a
  // nightly check of a large repository does not evict what the server had cached, and a page
  // cached before the run stays. Pages another process brings in while we hold the file are
  // dropped with ours (they cannot be told apart). Where the question cannot be asked (the
  // mapping is refused), nothing is dropped. One per run: it remembers the paths opened with
  // OpenToReadAgain (guarded by a mutex) until it goes.
  static std::unique_ptr<Env> MakeLeaveCacheAsFound();
};

// A failed call's reason without the path it begins with ("Permission denied").
std::string ErrorReason(const Status& s, const std::string& path);

// What a second read of bytes that failed a check found (the one re-read policy: see
// checker/engine/engine.h).
enum class SecondRead {
  kUnreadable,  // the file could not be opened or read again
  kSame,        // the same bytes
  kDifferent,   // other bytes (now in `scratch`)
};

// Reads first.size() bytes at `offset` of `path` into `scratch` and compares them with `first`.
// Safe for concurrent use (each caller passes its own scratch).
SecondRead ReadAgain(const Env& env, const std::string& path, uint64_t offset, Bytes first,
                     ByteBuffer& scratch);

}  // namespace borgcheck::io
