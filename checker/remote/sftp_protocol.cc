#include "checker/remote/sftp_protocol.h"

#include <cstring>

namespace borgcheck::remote::sftp {
namespace {

void PutU8(std::string& s, uint8_t v) { s.push_back(char(v)); }
void PutU32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(char((v >> shift) & 0xff));
}
void PutU64(std::string& s, uint64_t v) {
  PutU32(s, uint32_t(v >> 32));
  PutU32(s, uint32_t(v));
}
void PutString(std::string& s, std::string_view v) {
  PutU32(s, uint32_t(v.size()));
  s.append(v);
}

// Starts a packet: the length is patched by Finish.
std::string Begin(uint8_t type) {
  std::string s(4, '\0');
  PutU8(s, type);
  return s;
}
std::string Finish(std::string s) {
  const uint32_t len = uint32_t(s.size() - 4);
  for (int i = 0; i < 4; ++i) s[size_t(i)] = char((len >> (24 - 8 * i)) & 0xff);
  return s;
}

Status Malformed(const char* what) {
  return Status(StatusCode::kIoError, std::string("malformed ") + what + " reply");
}

}  // namespace

std::string EncodeInit(uint32_t version) {
  std::string s = Begin(kInit);
  PutU32(s, version);
  return Finish(std::move(s));
}

std::string EncodePathRequest(uint8_t type, uint32_t id, std::string_view path) {
  std::string s = Begin(type);
  PutU32(s, id);
  PutString(s, path);
  return Finish(std::move(s));
}

std::string EncodeHandleRequest(uint8_t type, uint32_t id, std::string_view handle) {
  return EncodePathRequest(type, id, handle);  // the same layout: type, id, string
}

std::string EncodeOpenRead(uint32_t id, std::string_view path) {
  std::string s = Begin(kOpen);
  PutU32(s, id);
  PutString(s, path);
  PutU32(s, kOpenRead);
  PutU32(s, 0);  // attrs: no flags
  return Finish(std::move(s));
}

std::string EncodeRead(uint32_t id, std::string_view handle, uint64_t offset, uint32_t length) {
  std::string s = Begin(kRead);
  PutU32(s, id);
  PutString(s, handle);
  PutU64(s, offset);
  PutU32(s, length);
  return Finish(std::move(s));
}

bool Cursor::U8(uint8_t* v) {
  if (p_.size() < 1) return false;
  *v = uint8_t(p_[0]);
  p_.remove_prefix(1);
  return true;
}

bool Cursor::U32(uint32_t* v) {
  if (p_.size() < 4) return false;
  const auto* b = reinterpret_cast<const uint8_t*>(p_.data());
  *v = uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]);
  p_.remove_prefix(4);
  return true;
}

bool Cursor::U64(uint64_t* v) {
  uint32_t hi = 0, lo = 0;
  if (p_.size() < 8 || !U32(&hi) || !U32(&lo)) return false;
  *v = uint64_t(hi) << 32 | lo;
  return true;
}

bool Cursor::String(std::string_view* v) {
  uint32_t len = 0;
  if (p_.size() < 4) return false;
  Cursor probe = *this;
  (void)probe.U32(&len);
  if (len > probe.p_.size()) return false;  // checked before use
  *v = probe.p_.substr(0, len);
  probe.p_.remove_prefix(len);
  *this = probe;
  return true;
}

bool ParseAttrs(Cursor& c, Attrs* out) {
  Attrs a;
  if (!c.U32(&a.flags)) return false;
  if ((a.flags & kAttrSize) && !c.U64(&a.size)) return false;
  uint32_t skip = 0;
  if ((a.flags & kAttrUidGid) && !(c.U32(&skip) && c.U32(&skip))) return false;
  if ((a.flags & kAttrPermissions) && !c.U32(&a.permissions)) return false;
  if ((a.flags & kAttrAcModTime) && !(c.U32(&skip) && c.U32(&a.mtime))) return false;
  if (a.flags & kAttrExtended) {
    uint32_t count = 0;
    if (!c.U32(&count)) return false;
    // Each pair takes at least 8 bytes: a count beyond that cannot be honest; the loop below
    // also stops at the first pair that is not there, so nothing is sized by `count`.
    if (count > c.left() / 8) return false;
    for (uint32_t i = 0; i < count; ++i) {
      std::string_view type, data;
      if (!c.String(&type) || !c.String(&data)) return false;
    }
  }
  *out = a;
  return true;
}

const char* TypeName(uint32_t permissions) {
  switch (permissions & 0170000u) {
    case 0100000u: return "regular file";
    case 0040000u: return "directory";
    case 0010000u: return "FIFO";
    case 0140000u: return "socket";
    case 0060000u: return "block device";
    case 0020000u: return "character device";
    case 0120000u: return "symlink";
    default: return "special file";
  }
}

bool ParseReplyHeader(std::string_view body, ReplyHeader* out) {
  Cursor c(body);
  return c.U8(&out->type) && c.U32(&out->id);
}

Result<uint32_t> ParseVersion(std::string_view body) {
  Cursor c(body);
  uint8_t type = 0;
  uint32_t version = 0;
  if (!c.U8(&type) || type != kVersion || !c.U32(&version)) return Malformed("VERSION");
  while (c.left() > 0) {  // extension pairs: parsed, ignored
    std::string_view name, data;
    if (!c.String(&name) || !c.String(&data)) return Malformed("VERSION");
  }
  return version;
}

Result<StatusReply> ParseStatus(std::string_view body) {
  Cursor c(body);
  ReplyHeader h;
  if (!ParseReplyHeader(body, &h) || h.type != kStatus) return Malformed("STATUS");
  c = Cursor(body.substr(5));
  StatusReply r;
  if (!c.U32(&r.code)) return Malformed("STATUS");
  // Servers of draft 02 may end here; the message and language tag follow in later drafts.
  std::string_view message, lang;
  if (c.left() > 0) {
    if (!c.String(&message)) return Malformed("STATUS");
    if (c.left() > 0 && !c.String(&lang)) return Malformed("STATUS");
  }
  r.message.assign(message.substr(0, 1024));  // quoted in messages: a sane length
  return r;
}

Result<std::string> ParseHandle(std::string_view body) {
  ReplyHeader h;
  if (!ParseReplyHeader(body, &h) || h.type != kHandle) return Malformed("HANDLE");
  Cursor c(body.substr(5));
  std::string_view handle;
  if (!c.String(&handle) || handle.size() > 256 || c.left() != 0) return Malformed("HANDLE");
  return std::string(handle);
}

Result<std::string_view> ParseData(std::string_view body) {
  ReplyHeader h;
  if (!ParseReplyHeader(body, &h) || h.type != kData) return Malformed("DATA");
  Cursor c(body.substr(5));
  std::string_view data;
  if (!c.String(&data) || c.left() != 0) return Malformed("DATA");
  return data;
}

Result<Attrs> ParseAttrsReply(std::string_view body) {
  ReplyHeader h;
  if (!ParseReplyHeader(body, &h) || h.type != kAttrs) return Malformed("ATTRS");
  Cursor c(body.substr(5));
  Attrs a;
  if (!ParseAttrs(c, &a)) return Malformed("ATTRS");
  return a;
}

Result<std::vector<NameEntry>> ParseName(std::string_view body) {
  ReplyHeader h;
  if (!ParseReplyHeader(body, &h) || h.type != kName) return Malformed("NAME");
  Cursor c(body.substr(5));
  uint32_t count = 0;
  if (!c.U32(&count)) return Malformed("NAME");
  // filename (4+), longname (4+), attrs flags (4): 12 bytes at least per entry.
  if (count > c.left() / 12) return Malformed("NAME");
  std::vector<NameEntry> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    std::string_view name, longname;
    NameEntry e;
    if (!c.String(&name) || !c.String(&longname) || !ParseAttrs(c, &e.attrs)) return Malformed("NAME");
    e.name.assign(name);
    out.push_back(std::move(e));
  }
  return out;
}

uint8_t* PacketReader::Space() {
  if (begin_ == end_) {
    begin_ = end_ = 0;
  } else if (begin_ > 0 && buf_.size() - end_ < kReadChunk) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buf_.size() - end_ < kReadChunk) buf_.resize(end_ + kReadChunk);
  return buf_.data() + end_;
}

void PacketReader::Commit(size_t n) { end_ += n < buf_.size() - end_ ? n : buf_.size() - end_; }

void PacketReader::Append(const uint8_t* data, size_t n) {
  while (n > 0) {
    const size_t k = n < kReadChunk ? n : kReadChunk;
    std::memcpy(Space(), data, k);
    Commit(k);
    data += k;
    n -= k;
  }
}

bool PacketReader::Next(std::string_view* body, Status* error) {
  *error = Status::Ok();
  if (end_ - begin_ < 4) return false;
  const uint8_t* p = buf_.data() + begin_;
  const uint32_t len = uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
  if (len == 0 || len > kMaxPacket) {
    *error = Status(StatusCode::kIoError, "a reply of " + std::to_string(len) + " bytes (at most " +
                                              std::to_string(kMaxPacket) + " are allowed)");
    return false;
  }
  if (end_ - begin_ - 4 < len) return false;
  *body = std::string_view(reinterpret_cast<const char*>(p + 4), len);
  begin_ += 4 + size_t(len);
  return true;
}

}  // namespace borgcheck::remote::sftp
