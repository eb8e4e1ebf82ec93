// SFTP version 3 (draft-ietf-secsh-filexfer-02) packets: pure encoding and decoding, no I/O.
//
// Everything here reads bytes from an untrusted server: every length field is checked against
// the bytes that are really there before it is used, and no allocation is sized by a field
// (a packet is at most kMaxPacket bytes; a NAME's count is bounded by its packet's size).
// Only the requests sftp_env.cc sends exist here, none that writes (see sftp_env.h).
//
// Thread contract: the functions are pure and safe for concurrent use; a PacketReader is
// owned by one thread (the connection's I/O thread, or a fuzz target).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "checker/base/status.h"

namespace borgcheck::remote::sftp {

// Packet types.
inline constexpr uint8_t kInit = 1;
inline constexpr uint8_t kVersion = 2;
inline constexpr uint8_t kOpen = 3;
inline constexpr uint8_t kClose = 4;
inline constexpr uint8_t kRead = 5;
inline constexpr uint8_t kLstat = 7;
inline constexpr uint8_t kFstat = 8;
inline constexpr uint8_t kOpendir = 11;
inline constexpr uint8_t kReaddir = 12;
inline constexpr uint8_t kRealpath = 16;
inline constexpr uint8_t kStat = 17;
inline constexpr uint8_t kStatus = 101;
inline constexpr uint8_t kHandle = 102;
inline constexpr uint8_t kData = 103;
inline constexpr uint8_t kName = 104;
inline constexpr uint8_t kAttrs = 105;

// Status codes.
inline constexpr uint32_t kFxOk = 0;
inline constexpr uint32_t kFxEof = 1;
inline constexpr uint32_t kFxNoSuchFile = 2;
inline constexpr uint32_t kFxPermissionDenied = 3;
inline constexpr uint32_t kFxFailure = 4;

// Attribute flags.
inline constexpr uint32_t kAttrSize = 0x1;
inline constexpr uint32_t kAttrUidGid = 0x2;
inline constexpr uint32_t kAttrPermissions = 0x4;
inline constexpr uint32_t kAttrAcModTime = 0x8;
inline constexpr uint32_t kAttrExtended = 0x80000000u;

// SSH_FXF_READ: the only open flag ever sent.
inline constexpr uint32_t kOpenRead = 0x1;

// The largest reply packet accepted (length field, i.e. without its own 4 bytes): a 255 KiB
// READ's DATA is far below it; anything larger is a protocol error.
inline constexpr uint32_t kMaxPacket = (1u << 20) + 1024;
// The most a READ asks for (OpenSSH's sftp-server answers at most 255 KiB per READ).
inline constexpr uint32_t kMaxReadLength = 255u * 1024;

// Requests, each a whole packet (length prefix included).
std::string EncodeInit(uint32_t version);
// REALPATH, STAT, LSTAT, OPENDIR: type, id, path.
std::string EncodePathRequest(uint8_t type, uint32_t id, std::string_view path);
// CLOSE, FSTAT, READDIR: type, id, handle.
std::string EncodeHandleRequest(uint8_t type, uint32_t id, std::string_view handle);
// OPEN with SSH_FXF_READ and empty attributes.
std::string EncodeOpenRead(uint32_t id, std::string_view path);
std::string EncodeRead(uint32_t id, std::string_view handle, uint64_t offset, uint32_t length);

// A bounds-checked cursor over a packet body. Every getter returns false (and leaves the output
// unspecified) when the bytes are not there; a view points into the body.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : p_(bytes) {}
  bool U8(uint8_t* v);
  bool U32(uint32_t* v);
  bool U64(uint64_t* v);
  bool String(std::string_view* v);  // uint32 length, then that many bytes
  size_t left() const { return p_.size(); }
  std::string_view rest() const { return p_; }

 private:
  std::string_view p_;
};

// File attributes (only the fields borgcheck uses are kept; the rest are parsed and skipped).
struct Attrs {
  uint32_t flags = 0;
  uint64_t size = 0;         // kAttrSize
  uint32_t permissions = 0;  // kAttrPermissions: st_mode, type bits included
  uint32_t mtime = 0;        // kAttrAcModTime
  bool has_size() const { return (flags & kAttrSize) != 0; }
  bool has_permissions() const { return (flags & kAttrPermissions) != 0; }
};
bool ParseAttrs(Cursor& c, Attrs* out);

// The type bits of a permissions field (S_IFMT), as named by io::FileStat::type_name.
const char* TypeName(uint32_t permissions);

// A reply's type and request id (every reply but VERSION carries one). `body` is the packet
// without its length prefix.
struct ReplyHeader {
  uint8_t type = 0;
  uint32_t id = 0;
};
bool ParseReplyHeader(std::string_view body, ReplyHeader* out);

// VERSION: type, version, then (name, data) extension pairs, parsed and ignored.
Result<uint32_t> ParseVersion(std::string_view body);

struct StatusReply {
  uint32_t code = 0;
  std::string message;  // raw server bytes (escape before quoting)
};
// The decoders below take a whole body whose header says their type; a malformed body is a
// kIoError whose message says what is wrong (the connection treats it as a protocol error).
Result<StatusReply> ParseStatus(std::string_view body);  // the language tag may be missing
Result<std::string> ParseHandle(std::string_view body);   // at most 256 bytes (the draft's limit)
// DATA: the payload, a view into `body`.
Result<std::string_view> ParseData(std::string_view body);
Result<Attrs> ParseAttrsReply(std::string_view body);

struct NameEntry {
  std::string name;
  Attrs attrs;
};
// NAME: count, then count (filename, longname, attrs). The count is checked against the bytes
// left before anything is reserved (every entry takes at least 12 bytes).
Result<std::vector<NameEntry>> ParseName(std::string_view body);

// Cuts the byte stream from the server into packets. The bytes of at most one packet in
// progress plus one read are held (at most kMaxPacket + 4 + kReadChunk).
class PacketReader {
 public:
  // One read takes up to a whole 256 KiB DATA reply from ssh's pipe (1 MiB: ssh_process.h):
  // fewer reads and fewer partial packets moved to the front than with 64 KiB (0 ms, one
  // connection: the bench's run 0.48 s -> 0.45 s).
  static constexpr size_t kReadChunk = 256 * 1024;
  // Room for at least kReadChunk bytes to be read into; then Commit what was read.
  uint8_t* Space();
  void Commit(size_t n);
  // Space + copy + Commit, in pieces of kReadChunk (for tests and the fuzz target: call Next
  // until it has no packet between Appends, as the I/O thread does).
  void Append(const uint8_t* data, size_t n);
  // The next whole packet's body (valid until the next call to Space, Append or Next):
  // true with *body set; false with *error ok when more bytes are needed; false with a
  // kIoError in *error when the length field is 0 or over kMaxPacket (the stream is then
  // unusable).
  bool Next(std::string_view* body, Status* error);
  size_t buffered() const { return end_ - begin_; }

 private:
  std::vector<uint8_t> buf_;
  size_t begin_ = 0;  // first unconsumed byte
  size_t end_ = 0;    // one past the last byte read
};

}  // namespace borgcheck::remote::sftp
