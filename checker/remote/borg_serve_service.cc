#include "checker/remote/borg_serve_service.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "checker/base/msgpack_util.h"
#include "checker/base/text_escape.h"

namespace borgcheck::remote {
namespace {

// borg's own batch for list and scan (LIST_SCAN_LIMIT): about 3.5 MB of ids per reply.
constexpr int64_t kListBatch = 100'000;
// More ids than a repository holds (2 GiB of ids): a server whose list or scan never ends.
constexpr size_t kMaxIds = 64'000'000;

Raw IdArg(const io::ObjectId& id) { return Raw{std::string(reinterpret_cast<const char*>(id.data()), id.size())}; }

// A 32-byte id out of a reply element: a str/bin value, or (a server that pairs ids with
// flags) an array whose first element is one.
bool AsId(const msgpack::object& o, io::ObjectId& out) {
  const msgpack::object* v = &o;
  if (o.type == msgpack::type::ARRAY && o.via.array.size >= 1) v = &o.via.array.ptr[0];
  Bytes b;
  if (!msgpack_util::AsRaw(v, b) || b.size() != out.size()) return false;
  std::memcpy(out.data(), b.data(), out.size());
  return true;
}

// The ids of a list or scan reply (an array of ids) appended to `out`; false when it is not one.
bool AppendIds(const msgpack::object& arr, std::vector<io::ObjectId>& out, size_t& n) {
  if (arr.type != msgpack::type::ARRAY) return false;
  n = arr.via.array.size;
  for (uint32_t i = 0; i < arr.via.array.size; ++i) {
    io::ObjectId id;
    if (!AsId(arr.via.array.ptr[i], id)) return false;
    out.push_back(id);
  }
  return true;
}

// Whether a list/scan reply's id array is empty (or no array).
bool AppendsNothing(const msgpack::object& arr) { return arr.type != msgpack::type::ARRAY || arr.via.array.size == 0; }

}  // namespace

StatusCode BorgExceptionCode(const std::string& c) {
  if (c == "DoesNotExist" || c == "ParentPathDoesNotExist") return StatusCode::kNotFound;
  if (c == "PathNotAllowed" || c == "PathPermissionDenied") return StatusCode::kInvalidArgument;
  if (c == "LockTimeout" || c == "LockFailed" || c == "LockError" || c == "LockErrorT") return StatusCode::kLockHeld;
  if (c == "InvalidRepository" || c == "AtticRepository" || c == "InvalidRepositoryConfig") {
    return StatusCode::kNotARepository;
  }
  return StatusCode::kIoError;
}

Result<std::vector<std::unique_ptr<BorgRpc>>> ConnectSessions(const BorgServeTarget& target, unsigned count) {
  count = std::clamp(count, 1u, unsigned(BorgServeService::kMaxSessions));
  std::vector<std::optional<Result<std::unique_ptr<BorgRpc>>>> results(count);
  {
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < count; ++i) {
      threads.emplace_back([&, i] { results[i].emplace(BorgRpc::Connect(target)); });
    }
    for (std::thread& t : threads) t.join();
  }
  std::vector<std::unique_ptr<BorgRpc>> sessions;
  for (auto& r : results) {
    if (!r->ok()) return r->status();  // the connected ones close as `sessions` and `results` go
    sessions.push_back(std::move(*r).value());
  }
  return sessions;
}

BorgServeService::BorgServeService(std::vector<std::unique_ptr<BorgRpc>> sessions, std::string path, std::string host)
    : sessions_(std::move(sessions)), rpc_(sessions_.at(0).get()), path_(std::move(path)), host_(std::move(host)) {}

BorgServeService::~BorgServeService() { Close(); }

void BorgServeService::Close() {
  // At once: each waits for its server to end (a round trip and the server's exit).
  std::vector<std::thread> threads;
  for (auto& s : sessions_) threads.emplace_back([rpc = s.get()] { rpc->Close(); });
  for (std::thread& t : threads) t.join();
}

Status BorgServeService::Lost() const {
  for (const auto& s : sessions_) {
    if (Status l = s->Lost(); !l.ok()) return l;
  }
  return Status::Ok();
}

bool BorgServeService::ServerRebuiltIndex() const {
  for (const auto& s : sessions_) {
    if (s->ServerRebuiltIndex()) return true;
  }
  return false;
}

uint64_t BorgServeService::BytesReceived() const {
  uint64_t n = 0;
  for (const auto& s : sessions_) n += s->BytesReceived();
  return n;
}

std::string BorgServeService::Describe() const {
  return "borg serve " + rpc_->ServerVersionText() + " on " + EscapeText(host_) +
         (sessions_.size() > 1 ? fmt::format(" ({} sessions)", sessions_.size()) : "");
}

Status BorgServeService::SessionError(const char* what, const RpcReply& r) const {
  const StatusCode code = BorgExceptionCode(r.exception_class);
  std::string words = r.exception_message.empty() ? r.exception_class : r.exception_message;
  while (!words.empty() && (words.back() == '\n' || words.back() == ' ')) words.pop_back();
  std::string msg = fmt::format("borg serve on {} refused {}: {}", EscapeText(host_), what, EscapeText(words));
  if (code == StatusCode::kInvalidArgument) {
    msg += " (the server's --restrict-to-path or --restrict-to-repository does not allow this path)";
  }
  return Status(code, std::move(msg));
}

Result<RpcReply> BorgServeService::CallChecked(Method m, std::vector<Arg> args) {
  Result<RpcReply> r = rpc_->Call(m, std::move(args));
  if (!r.ok()) return r.status();
  return r;
}

Result<io::ServedRepository> BorgServeService::Open(bool lock, double lock_wait_seconds) {
  auto args = [&] {
    std::vector<Arg> a;
    a.push_back({"path", std::string(path_)});
    a.push_back({"create", false});
    a.push_back({"lock_wait", int64_t(std::max(1.0, lock_wait_seconds))});
    a.push_back({"lock", lock});
    a.push_back({"exclusive", false});
    a.push_back({"append_only", false});
    a.push_back({"make_parent_dirs", false});
    return a;
  };
  // Every session opens it (each takes its shared lock), all at once; they must agree on what
  // they opened.
  std::vector<uint64_t> ids;
  for (auto& s : sessions_) ids.push_back(s->Post(Method::kOpen, args()));
  io::ServedRepository repo;
  for (size_t i = 0; i < sessions_.size(); ++i) {
    Result<RpcReply> r = sessions_[i]->Wait(ids[i]);
    if (!r.ok()) return r.status();
    if (!r->ok()) return SessionError(("the repository " + EscapeText(path_)).c_str(), *r);
    Bytes id;
    if (!msgpack_util::AsRaw(&r->result, id) || id.size() != repo.id.size()) {
      return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " answered open with no repository id");
    }
    if (i == 0) {
      std::memcpy(repo.id.data(), id.data(), repo.id.size());
    } else if (std::memcmp(repo.id.data(), id.data(), repo.id.size()) != 0) {
      return Status(StatusCode::kIoError, "the sessions to " + EscapeText(host_) + " opened different repositories at " +
                                              EscapeText(path_) + " (it was replaced meanwhile?)");
    }
  }
  repo.version = 1;
  if (rpc_->server_version()[0] >= 2) {
    // 2.0.0b5 opens versions 1 and 2: info says which.
    Result<RpcReply> info = CallChecked(Method::kInfo, {});
    if (!info.ok()) return info.status();
    if (!info->ok()) return SessionError("info", *info);
    const msgpack::object* v =
        info->result.type == msgpack::type::MAP ? msgpack_util::Find(info->result, "version") : nullptr;
    if (!v || v->type != msgpack::type::POSITIVE_INTEGER || v->via.u64 > 1000) {
      return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " answered info without a version");
    }
    repo.version = int(v->via.u64);
  }
  return repo;
}

Result<std::string> BorgServeService::LoadKey() {
  Result<RpcReply> r = CallChecked(Method::kLoadKey, {});
  if (!r.ok()) return r.status();
  if (!r->ok()) return SessionError("load_key", *r);
  if (r->result.type == msgpack::type::NIL) return std::string();
  Bytes b;
  if (!msgpack_util::AsRaw(&r->result, b)) {
    return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " answered load_key with no key");
  }
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

Status BorgServeService::ListIds(std::vector<io::ObjectId>& out) {
  std::optional<io::ObjectId> marker;
  for (;;) {
    std::vector<Arg> args;
    args.push_back({"limit", kListBatch});
    if (marker) args.push_back({"marker", IdArg(*marker)});
    else args.push_back({"marker", Nil{}});
    Result<RpcReply> r = CallChecked(Method::kList, std::move(args));
    if (!r.ok()) return r.status();
    if (!r->ok()) return SessionError("list", *r);
    size_t n = 0;
    if (!AppendIds(r->result, out, n)) {
      return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " answered list with no id list");
    }
    // Only an empty batch ends the list (as borg's own check loop ends it): a server that
    // answers with fewer ids than asked for (a cap of its own) is asked again, one round trip
    // more per run, rather than trusted to have no more. The next batch starts after the last
    // id. The same marker again, or more ids than a repository holds, is a list that never ends.
    if (n == 0) return Status::Ok();
    if (marker && *marker == out.back()) {
      return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " answered list with the same batch again");
    }
    if (out.size() > kMaxIds) {
      return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " listed more ids than a repository holds");
    }
    marker = out.back();
  }
}

Status BorgServeService::ScanIds(std::vector<io::ObjectId>& out) {
  const bool with_state = rpc_->server_version()[0] >= 2;  // 2.0.0b3+: scan(limit, state) -> [ids, state]
  std::optional<io::ObjectId> marker;
  msgpack::object_handle state_handle;
  std::optional<std::vector<int64_t>> state;
  for (;;) {
    std::vector<Arg> args;
    args.push_back({"limit", kListBatch});
    if (with_state) {
      if (state) args.push_back({"state", *state});
      else args.push_back({"state", Nil{}});
    } else if (marker) {
      args.push_back({"marker", IdArg(*marker)});
    } else {
      args.push_back({"marker", Nil{}});
    }
    Result<RpcReply> r = CallChecked(Method::kScan, std::move(args));
    if (!r.ok()) return r.status();
    if (!r->ok()) return SessionError("scan", *r);
    const msgpack::object* ids = &r->result;
    if (with_state) {
      if (r->result.type != msgpack::type::ARRAY || r->result.via.array.size != 2) {
        return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " answered scan with no [ids, state]");
      }
      ids = &r->result.via.array.ptr[0];
      const msgpack::object& st = r->result.via.array.ptr[1];
      std::vector<int64_t> next;
      if (st.type == msgpack::type::ARRAY && st.via.array.size <= 8) {
        for (uint32_t i = 0; i < st.via.array.size; ++i) {
          const msgpack::object& e = st.via.array.ptr[i];
          if (e.type == msgpack::type::POSITIVE_INTEGER && e.via.u64 <= uint64_t(INT64_MAX)) next.push_back(int64_t(e.via.u64));
          else if (e.type == msgpack::type::NEGATIVE_INTEGER) next.push_back(e.via.i64);
          else return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " answered scan with a bad state");
        }
      } else if (st.type != msgpack::type::NIL) {
        return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " answered scan with a bad state");
      }
      if (state && *state == next && !AppendsNothing(*ids)) {
        return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " answered scan with the same state again");
      }
      state = std::move(next);
    }
    size_t n = 0;
    if (!AppendIds(*ids, out, n)) {
      return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " answered scan with no id list");
    }
    if (n == 0) return Status::Ok();  // only an empty batch ends the scan (see ListIds)
    if (!with_state) {
      if (marker && *marker == out.back()) {
        return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " answered scan with the same batch again");
      }
      marker = out.back();
    }
    if (out.size() > kMaxIds) {
      return Status(StatusCode::kIoError, "borg serve on " + EscapeText(host_) + " scanned more ids than a repository holds");
    }
  }
}

uint64_t BorgServeService::PostGet(const io::ObjectId& id) {
  std::vector<Arg> args;
  args.push_back({"id", IdArg(id)});
  const size_t k = size_t(next_.fetch_add(1, std::memory_order_relaxed) % sessions_.size());
  return sessions_[k]->Post(Method::kGet, std::move(args)) * kMaxSessions + k;
}

io::GetReply BorgServeService::WaitGet(uint64_t ticket, ByteBuffer& payload) {
  payload.Clear();
  if (ticket % kMaxSessions >= sessions_.size()) {
    io::GetReply out;
    out.outcome = io::GetOutcome::kCouldNotRead;
    out.message = "no such get";
    return out;
  }
  BorgRpc& session = *sessions_[ticket % kMaxSessions];
  Result<RpcReply> r = session.Wait(ticket / kMaxSessions);
  return ToGetReply(session, r, payload);
}

io::GetReply BorgServeService::GetUnlessBehind(const io::ObjectId& id, ByteBuffer& payload) {
  payload.Clear();
  std::vector<Arg> args;
  args.push_back({"id", IdArg(id)});
  const size_t k = size_t(next_.fetch_add(1, std::memory_order_relaxed) % sessions_.size());
  BorgRpc& session = *sessions_[k];
  std::optional<Result<RpcReply>> r = session.WaitUnlessBehind(session.Post(Method::kGet, std::move(args)));
  if (!r) {
    io::GetReply out;
    out.outcome = io::GetOutcome::kCouldNotRead;
    out.message = "its reply would wait behind replies read ahead and not yet taken";
    return out;
  }
  return ToGetReply(session, *r, payload);
}

io::GetReply BorgServeService::ToGetReply(const BorgRpc& session, Result<RpcReply>& r, ByteBuffer& payload) const {
  io::GetReply out;
  if (!r.ok()) {
    // The connection's loss, or a stop signal; any other failure of the wait (none is
    // expected) is no loss, but this object was not read all the same.
    const bool lost = !session.Lost().ok();
    out.outcome = r.status().code() == StatusCode::kInterrupted ? io::GetOutcome::kInterrupted
                  : lost                                        ? io::GetOutcome::kLost
                                                                : io::GetOutcome::kCouldNotRead;
    out.message = r.status().message();  // its quoted parts escaped already (borg_rpc.cc)
    return out;
  }
  if (r->ok()) {
    Bytes b;
    if (!msgpack_util::AsRaw(&r->result, b)) {
      out.outcome = io::GetOutcome::kCouldNotRead;
      out.message = "the server's reply to get holds no bytes";
      return out;
    }
    payload.Assign(b);
    out.outcome = io::GetOutcome::kOk;
    return out;
  }
  std::string words = r->exception_message.empty() ? r->exception_class : r->exception_message;
  while (!words.empty() && (words.back() == '\n' || words.back() == ' ')) words.pop_back();
  out.message = EscapeText(words);
  if (r->exception_class == "ObjectNotFound") {
    out.outcome = io::GetOutcome::kNotFound;
  } else if (r->exception_class == "IntegrityError") {
    out.outcome = io::GetOutcome::kIntegrity;
    if (std::optional<SegmentOffset> at = ParseSegmentOffset(words)) {
      out.segment = at->segment;
      out.offset = at->offset;
    }
  } else {
    out.outcome = io::GetOutcome::kCouldNotRead;
  }
  return out;
}

void BorgServeService::Forget(uint64_t ticket) {
  if (ticket % kMaxSessions < sessions_.size()) sessions_[ticket % kMaxSessions]->Forget(ticket / kMaxSessions);
}

}  // namespace borgcheck::remote
