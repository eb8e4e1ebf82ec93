// Absurd sizes read from a repository give a clear finding or status, never an allocation of
// that size (GitHub issue 4, item 5). One case per format: an index header claiming 2^31-1
// buckets, a segment entry claiming 0xffffffff bytes, key blobs claiming huge lengths and
// iteration counts, and decompression bombs through the ObjectVerifier.
//
// Allocation probe: records the largest single allocation request made while a
// ScopedAllocationProbe is alive, from any thread (the pool's workers allocate too).
//   - Under AddressSanitizer (the asan-ubsan preset) through ASan's malloc/free hooks, which
//     see every heap allocation: operator new, and malloc from the codec libraries and
//     msgpack-c's zone.
//   - Otherwise by replacing the global operator new/delete. That sees every buffer borgcheck
//     sizes from untrusted data (ByteBuffer, std::vector, std::string), but not malloc in the
//     libraries; their bounds are set where they are used (zstd's content size is checked
//     against the cap before decoding, liblzma runs under a memlimit, every msgpack unpack
//     passes limits sized by the input).
// (Replacing operator new under ASan would trip its alloc-dealloc-mismatch check, hence two
// mechanisms. Both hold the same thresholds.)
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <lz4.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include "checker/repo/segment_log/segment_files.h"
#include "checker/crypto/key_blob.h"
#include "checker/repo/borg1/borg1_hashindex.h"
#include "checker/repo/segment_log/segment_entry.h"
#include "checker/run/check_run.h"
#include "checker/repo/borg1/borg1_verifier.h"
#include "codecs/decompressor.h"
#include "fuzz/codec_fuzz.h"
#include "fuzz/fuzz_support.h"

namespace {

std::atomic<bool> g_probe_armed{false};
std::atomic<size_t> g_probe_largest{0};

void NoteAllocation(size_t n) {
  if (!g_probe_armed.load(std::memory_order_relaxed)) return;
  size_t cur = g_probe_largest.load(std::memory_order_relaxed);
  while (n > cur && !g_probe_largest.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
  }
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
#define BORGCHECK_BOUNDS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BORGCHECK_BOUNDS_ASAN 1
#endif
#endif

#ifdef BORGCHECK_BOUNDS_ASAN
// Declared here (as in <sanitizer/allocator_interface.h>, which g++ 12 does not install).
extern "C" int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void*, size_t), void (*free_hook)(const volatile void*));
namespace {
void MallocHook(const volatile void*, size_t n) { NoteAllocation(n); }
void FreeHook(const volatile void*) {}
const int kHooksInstalled = __sanitizer_install_malloc_and_free_hooks(MallocHook, FreeHook);
}  // namespace
#else
void* operator new(std::size_t n) {
  NoteAllocation(n);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace {

using namespace borgcheck;
using report::Severity;
using report::Stage;

// Records the largest single operator new request while alive. One at a time.
class ScopedAllocationProbe {
 public:
  ScopedAllocationProbe() {
#ifdef BORGCHECK_BOUNDS_ASAN
    REQUIRE(kHooksInstalled != 0);
#endif
    g_probe_largest.store(0);
    g_probe_armed.store(true);
  }
  ~ScopedAllocationProbe() { g_probe_armed.store(false); }
  size_t largest() const { return g_probe_largest.load(); }
};

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;
// msgpack-c's zone allocates in chunks of 8 KiB (+ its header): the most rejected msgpack
// input may cost, whatever it claims.
constexpr size_t kMsgpackChunk = 8 * kKiB + 64;

std::string IndexHeader(uint32_t num_entries, uint32_t num_buckets) {
  std::string h = "BORG_IDX";
  h.resize(18);
  auto* p = reinterpret_cast<uint8_t*>(h.data());
  StoreLE32(p + 8, num_entries);
  StoreLE32(p + 12, num_buckets);
  p[16] = 32;
  p[17] = 8;
  return h;
}

// A writable copy of a fixture repository, removed again at the end of the test.
class RepoCopy {
 public:
  explicit RepoCopy(const std::string& fixture) {
    const std::filesystem::path src =
        std::filesystem::path(BORGCHECK_SHARED_DIR) / "fixtures/borg1" / fixture;
    REQUIRE(std::filesystem::is_directory(src));
    std::string tmpl = (std::filesystem::temp_directory_path() / "borgcheck-bounds-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    root_ = tmpl;
    path_ = root_ / "repo";
    std::filesystem::copy(src, path_, std::filesystem::copy_options::recursive);
    for (const auto& e : std::filesystem::recursive_directory_iterator(path_)) {
      std::filesystem::permissions(e.path(), std::filesystem::perms::owner_write,
                                   std::filesystem::perm_options::add);
    }
    std::filesystem::permissions(path_, std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::add);
  }
  ~RepoCopy() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  std::string path() const { return path_.string(); }
  std::filesystem::path file(const std::string& rel) const { return path_ / rel; }

  void Write(const std::string& rel, const std::string& bytes) const {
    std::ofstream out(file(rel), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    REQUIRE(out.good());
  }
  void Patch(const std::string& rel, uint64_t offset, const std::string& bytes) const {
    std::fstream f(file(rel), std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(std::streamoff(offset));
    f.write(bytes.data(), std::streamsize(bytes.size()));
    REQUIRE(f.good());
  }

 private:
  std::filesystem::path root_;
  std::filesystem::path path_;
};

run::CheckOutcome CheckKeyless(const std::string& repo) {
  run::CheckOptions o;
  o.repository = repo;
  o.verify_data = false;
  o.threads = 2;
  o.quiet = true;
  o.progress = run::ProgressMode::kNever;
  return run::RunCheck(o, nullptr);
}

report::ChunkId IdFromHex(const std::string& hex) {
  std::string raw;
  REQUIRE(FromHex(hex, raw));
  REQUIRE(raw.size() == 32);
  report::ChunkId id;
  std::memcpy(id.data(), raw.data(), 32);
  return id;
}

// ---------------------------------------------------------------------------------------------
// index.T

TEST_CASE("an index header claiming 2^31-1 buckets in an 18-byte file is refused unallocated",
          "[bounds][index]") {
  const std::string file = IndexHeader(0, 0x7fffffff);
  ScopedAllocationProbe probe;
  Result<repo::HashIndexContents> r = repo::ParseHashIndex(AsBytes(file));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kCorruptMetadata);
  CHECK(r.status().message() == "index: 2147483647 buckets need 85899345898 bytes, file has 18");
  CHECK(probe.largest() < 4 * kKiB);
}

TEST_CASE("an index header claiming 2^31-1 entries for one bucket is refused unallocated",
          "[bounds][index]") {
  std::string file = IndexHeader(0x7fffffff, 1);
  file.append(32, '\x11');
  file.append("\xff\xff\xff\xff\0\0\0\0", 8);  // the one bucket is empty
  ScopedAllocationProbe probe;
  Result<repo::HashIndexContents> r = repo::ParseHashIndex(AsBytes(file));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "index: header says 2147483647 entries, buckets hold 0");
  CHECK(probe.largest() < 4 * kKiB);
}

TEST_CASE("an index header with a negative bucket count is refused", "[bounds][index]") {
  Result<repo::HashIndexContents> r = repo::ParseHashIndex(AsBytes(IndexHeader(0, 0x80000000)));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "index: negative counts in header");
}

TEST_CASE("a run over a repository whose index claims 2^31-1 buckets reports the index and "
          "replays the log", "[bounds][index][fixtures]") {
  RepoCopy repo("v1.2.4/repos/none");
  std::filesystem::remove(repo.file("integrity.29"));
  repo.Write("index.29", IndexHeader(0, 0x7fffffff));
  ScopedAllocationProbe probe;
  const run::CheckOutcome out = CheckKeyless(repo.path());
  REQUIRE(out.status.ok());
  REQUIRE(out.findings.size() == 1);
  const report::Finding& f = out.findings[0];
  CHECK(f.severity == Severity::kWarning);
  CHECK(f.stage == Stage::kIndex);
  CHECK(f.message ==
        "index.29 cannot be used (index: 2147483647 buckets need 85899345898 bytes, file has 18); "
        "borg would discard and rebuild it; the live objects are taken from the log instead");
  CHECK(probe.largest() < 64 * kMiB);  // the reader's windows; nothing near 80 GiB
}

TEST_CASE("an integrity file whose msgpack claims a 2^32-1 element array is malformed, "
          "not allocated", "[bounds][index]") {
  // Found by fuzz/index_fuzzer (corpus/index/crash-integrity-array32-claims-4g): msgpack-c
  // allocated the claimed element count (0xdddddddd objects) before reading any of them.
  const std::string index = IndexHeader(0, 1) + std::string(32, '\0') + std::string(8, '\xff');
  const std::string integrity = std::string("\x81\xa5index\xdd\xff\xff\xff\xff", 12) + "{}";
  std::string why;
  ScopedAllocationProbe probe;
  CHECK(repo::CheckIndexIntegrity(AsBytes(index), "index.1", repo::kIndexHeaderSize, AsBytes(integrity), &why) ==
        repo::IntegrityOutcome::kMalformed);
  CHECK(why == "integrity file: array size overflow");
  CHECK(probe.largest() <= kMsgpackChunk);
}

// ---------------------------------------------------------------------------------------------
// Segment entries

TEST_CASE("a segment entry claiming 0xffffffff bytes is an invalid header", "[bounds][segment]") {
  std::string entry("\0\0\0\0\xff\xff\xff\xff\0", 9);  // crc, size, tag PUT
  entry.resize(41 + 100, 'x');
  for (uint64_t left : {uint64_t{141}, uint64_t{0xffffffff}, uint64_t{1} << 40}) {
    repo::EntryHeader h;
    std::string why;
    CHECK(repo::ParseEntryHeader(AsBytes(entry), left, h, &why) == repo::HeaderParse::kInvalid);
    CHECK(why == "invalid segment entry size 4294967295 - too big");
  }
}

TEST_CASE("a run over a segment whose first entry claims 0xffffffff bytes reports that entry "
          "and reads the rest by the index", "[bounds][segment][fixtures]") {
  RepoCopy repo("v1.2.4/repos/none");
  repo.Patch("data/0/6", 8 + 4, std::string("\xff\xff\xff\xff", 4));
  ScopedAllocationProbe probe;
  const run::CheckOutcome out = CheckKeyless(repo.path());
  REQUIRE(out.status.ok());
  REQUIRE(out.findings.size() == 1);
  const report::Finding& f = out.findings[0];
  CHECK(f.severity == Severity::kError);
  CHECK(f.stage == Stage::kEntryCrc);
  CHECK(f.segment == 6u);
  CHECK(f.offset == 8u);
  CHECK(f.chunk_id == IdFromHex("175dee08e597db2db8f8703d5c41fa370ba969ca7a12837b7a7d266d3565e26e"));
  CHECK(f.message ==
        "invalid entry header: invalid segment entry size 4294967295 - too big; the rest of the "
        "segment cannot be walked, its 13 remaining live object(s) are read at their indexed "
        "offsets");
  CHECK(probe.largest() < 64 * kMiB);  // the reader's windows; nothing near 4 GiB
}

// ---------------------------------------------------------------------------------------------
// Key blobs

std::string Base64(const std::string& raw) { return fuzz::Base64Encode(AsBytes(raw)); }

Status DecryptStatus(const std::string& base64) {
  Result<crypto::KeyMaterial> k = crypto::DecryptKeyBlob(base64, "test");
  REQUIRE_FALSE(k.ok());
  return k.status();
}

// msgpack str: fixstr for short keys.
std::string Str(const std::string& s) { return std::string(1, char(0xa0 | s.size())) + s; }

TEST_CASE("key blobs whose msgpack claims huge lengths are corrupt, not allocated",
          "[bounds][key]") {
  struct Case {
    const char* what;
    std::string raw;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"str32 of 4 GiB - 1 with 3 bytes behind it",
       "\x81" + Str("data") + std::string("\xdb\xff\xff\xff\xff", 5) + "abc",
       "key blob is not valid msgpack (insufficient bytes)"},
      {"bin32 of 4 GiB - 1", "\x81" + Str("salt") + std::string("\xc6\xff\xff\xff\xff", 5) + "abc",
       "key blob is not valid msgpack (insufficient bytes)"},
      {"map32 of 2^32-1 pairs", std::string("\xdf\xff\xff\xff\xff", 5) + Str("a") + Str("b"),
       "key blob is not valid msgpack (map size overflow)"},
      {"array32 of 2^32-1 items", std::string("\xdd\xff\xff\xff\xff", 5) + "\x01\x02",
       "key blob is not valid msgpack (array size overflow)"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    ScopedAllocationProbe probe;
    const Status s = DecryptStatus(Base64(c.raw));
    CHECK(s.code() == StatusCode::kCorruptMetadata);
    CHECK(s.message() == c.message);
    CHECK(probe.largest() <= kMsgpackChunk);
  }
}

std::string OuterMap(uint64_t iterations, size_t data_len) {
  std::string m = "\x86" + Str("version") + "\x01" + Str("algorithm") + Str("sha256");
  m += Str("iterations") + "\xcf";
  for (int i = 7; i >= 0; --i) m.push_back(char(iterations >> (8 * i)));
  m += Str("salt") + "\xc4\x20" + std::string(32, 's');
  m += Str("hash") + "\xc4\x20" + std::string(32, 'h');
  m += Str("data") + "\xc6";
  for (int i = 3; i >= 0; --i) m.push_back(char(data_len >> (8 * i)));
  m += std::string(data_len, 'd');
  return m;
}

TEST_CASE("a key blob with a huge iteration count is refused before PBKDF2", "[bounds][key]") {
  for (uint64_t iterations : {uint64_t{100'000'001}, uint64_t{0xffffffff}, ~uint64_t{0}}) {
    INFO(iterations);
    const Status s = DecryptStatus(Base64(OuterMap(iterations, 64)));
    CHECK(s.code() == StatusCode::kCorruptMetadata);
    CHECK(s.message() == "key blob: `iterations` is missing or out of range (1..100000000)");
  }
}

TEST_CASE("a key blob with more than 1 MiB of data is refused before decrypting",
          "[bounds][key]") {
  const std::string b64 = Base64(OuterMap(1, (1 << 20) + 1));
  ScopedAllocationProbe probe;
  const Status s = DecryptStatus(b64);
  CHECK(s.code() == StatusCode::kCorruptMetadata);
  CHECK(s.message() == "key blob: `data` is missing, empty or implausibly large");
  CHECK(probe.largest() < 2 * b64.size());  // the decoded blob itself, nothing beyond
}

TEST_CASE("an authentic key blob whose inner map claims a 4 GiB key is corrupt",
          "[bounds][key]") {
  const std::string inner =
      "\x82" + Str("version") + "\x01" + Str("enc_key") + std::string("\xdb\xff\xff\xff\xff", 5) + "k";
  const std::string b64 = fuzz::SealKeyBlob(AsBytes(inner), "test", 1);
  ScopedAllocationProbe probe;
  const Status s = DecryptStatus(b64);
  CHECK(s.code() == StatusCode::kCorruptMetadata);
  CHECK(s.message() == "decrypted key is not valid msgpack (insufficient bytes)");
  CHECK(probe.largest() <= kMsgpackChunk);
}

// ---------------------------------------------------------------------------------------------
// Decompression bombs through the ObjectVerifier (mode none: the payload is what is stored)

constexpr size_t kBombSize = 24 * kMiB;  // a little over borg's 20971479-byte limit
const std::string kLimitMessage = "Decompression error: decompressed size exceeds limit of 20971479 bytes";

std::optional<engine::Verdict> VerifyStored(const std::string& payload, size_t& largest) {
  repo::Borg1Verifier verifier(true, crypto::KeyMode::kNone, nullptr);
  uint8_t id[32];
  std::memset(id, 0x42, sizeof id);
  const std::string entry = fuzz::MakePutEntry(id, AsBytes("\x02" + payload));
  ScopedAllocationProbe probe;
  auto failure = verifier.VerifyAs(AsBytes(entry), id);
  largest = probe.largest();
  return failure;
}

TEST_CASE("decompression bombs are decompression failures at the cap", "[bounds][codecs]") {
  const std::string zeros(kBombSize, '\0');
  struct Bomb {
    const char* what;
    std::string payload;
    size_t max_allocation;
  };
  // The streaming decoders (zlib, lzma) and lz4 write into a ByteBuffer capped at the limit
  // (+1 byte), whose capacity ByteBuffer rounds up to a power of two: 32 MiB for this limit.
  std::vector<Bomb> bombs;
  bombs.push_back({"zstd frame declaring 24 MiB",
                   fuzz::Borg1Payload(codecs::CodecId::kZstd,
                                      AsBytes(fuzz::Compress(codecs::CodecId::kZstd, AsBytes(zeros)))),
                   64 * kKiB});
  {
    // A zstd frame header alone, declaring 2^40 bytes (single segment, 8-byte content size).
    std::string frame("\x28\xb5\x2f\xfd\xe0", 5);
    for (int i = 0; i < 8; ++i) frame.push_back(char((uint64_t{1} << 40) >> (8 * i)));
    frame += std::string(16, '\0');
    bombs.push_back({"zstd frame header declaring 1 TiB",
                     fuzz::Borg1Payload(codecs::CodecId::kZstd, AsBytes(frame)), 64 * kKiB});
  }
  bombs.push_back({"zlib stream of 24 MiB", fuzz::Compress(codecs::CodecId::kZlib, AsBytes(zeros)),
                   32 * kMiB});
  bombs.push_back({"xz stream of 24 MiB",
                   fuzz::Borg1Payload(codecs::CodecId::kLzma,
                                      AsBytes(fuzz::Compress(codecs::CodecId::kLzma, AsBytes(zeros)))),
                   32 * kMiB});
  bombs.push_back({"lz4 block of 24 MiB",
                   fuzz::Borg1Payload(codecs::CodecId::kLz4,
                                      AsBytes(fuzz::Compress(codecs::CodecId::kLz4, AsBytes(zeros)))),
                   32 * kMiB});
  {
    const std::string inner = bombs[0].payload;
    std::string obf("\x04\x00", 2);
    for (int i = 3; i >= 0; --i) obf.push_back(char(inner.size() >> (8 * i)));
    obf += inner + std::string(100, '\0');
    bombs.push_back({"obfuscated zstd frame declaring 24 MiB", obf, 64 * kKiB});
  }
  for (const Bomb& b : bombs) {
    INFO(b.what << " (" << b.payload.size() << " stored bytes)");
    REQUIRE(b.payload.size() < 1 * kMiB);
    size_t largest = 0;
    const auto failure = VerifyStored(b.payload, largest);
    REQUIRE(failure.has_value());
    CHECK(failure->stage == Stage::kDecompression);
    CHECK(failure->message == kLimitMessage);
    CHECK(largest <= b.max_allocation);
  }
}

}  // namespace
