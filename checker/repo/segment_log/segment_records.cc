// The records of what should exist besides the log, and the losses they show (see
// segment_records.h).
#include "checker/repo/segment_log/segment_records.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <msgpack.hpp>

#include "checker/base/msgpack_util.h"

namespace borgcheck::repo {
using report::Finding;
using report::Location;
using report::MakeFinding;
using report::Severity;
using report::Stage;

namespace {

constexpr uint64_t kMaxHintsSize = uint64_t(1) << 30;  // ~10 bytes a segment, plus the shadow index
constexpr uint64_t kMaxIntegritySize = 1 << 20;
constexpr size_t kTransactionsTail = 4096;            // the last lines of the append-only log

bool ParseDigits(std::string_view s, uint32_t& out) {
  if (s.empty() || s.size() > 10 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  if (v > UINT32_MAX) return false;
  out = uint32_t(v);
  return true;
}

std::string Plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

// ---- hints.T ----------------------------------------------------------------------------------

Result<SegmentHints> ParseSegmentHints(Bytes file) {
  auto corrupt = [](std::string m) { return Status(StatusCode::kCorruptMetadata, std::move(m)); };
  msgpack::object_handle oh;
  std::string err;
  if (!msgpack_util::UnpackWhole(file, 8, oh, err)) return corrupt("hints: not msgpack: " + err);
  const msgpack::object& root = oh.get();
  if (root.type != msgpack::type::MAP) return corrupt("hints: not a msgpack map");
  SegmentHints out;
  if (const msgpack::object* v = msgpack_util::Find(root, "version")) {
    if (v->type != msgpack::type::POSITIVE_INTEGER) return corrupt("hints: version is not an integer");
    out.version = v->via.u64;
  }
  const msgpack::object* segs = msgpack_util::Find(root, "segments");
  if (!segs || segs->type != msgpack::type::MAP) return corrupt("hints: no `segments` map");
  for (uint32_t i = 0; i < segs->via.map.size; ++i) {
    const msgpack::object& k = segs->via.map.ptr[i].key;
    const msgpack::object& v = segs->via.map.ptr[i].val;
    if (k.type != msgpack::type::POSITIVE_INTEGER || k.via.u64 > UINT32_MAX ||
        v.type != msgpack::type::POSITIVE_INTEGER) {
      return corrupt("hints: `segments` holds an entry that is not segment number -> count");
    }
    out.live_counts[uint32_t(k.via.u64)] = v.via.u64;
  }
  return out;
}

LoadedHints LoadSegmentHints(const io::Env& env, const std::string& repo, uint32_t t) {
  LoadedHints out;
  out.name = fmt::format("hints.{}", t);
  const std::string integrity_name = fmt::format("integrity.{}", t);
  auto unusable = [&](const std::string& why) {
    out.findings.push_back(MakeFinding(Severity::kWarning, Stage::kIndex, Location::None(), nullptr,
                                       fmt::format("{} cannot be used ({}); borg would rebuild it; the segments it "
                                                   "records are not cross-checked with the log",
                                                   out.name, why)));
  };
  Result<std::string> bytes = env.ReadWholeFile(repo + "/" + out.name, kMaxHintsSize);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound) return out;
    if (bytes.status().code() == StatusCode::kIoError) {
      out.findings.push_back(UnreadableFinding(
          Location::None(), nullptr,
          fmt::format("{} cannot be read ({}): the segments and live counts it records are not cross-checked "
                      "with the log",
                      out.name, bytes.status().message())));
    } else {
      unusable(bytes.status().message());
    }
    return out;
  }
  Result<std::string> integ = env.ReadWholeFile(repo + "/" + integrity_name, kMaxIntegritySize);
  if (integ.ok()) {
    std::string why;
    IntegrityOutcome o = CheckFileIntegrity(AsBytes(*bytes), out.name, "hints", 0, AsBytes(*integ), &why);
    if (o != IntegrityOutcome::kVerified) {
      unusable(o == IntegrityOutcome::kMismatch ? "it fails its integrity check: " + why : why);
      return out;
    }
    out.verified = true;
  } else if (integ.status().code() == StatusCode::kIoError) {
    out.findings.push_back(UnreadableFinding(
        Location::None(), nullptr,
        fmt::format("{} cannot be read ({}): {} is not verified and not used to find lost segments", integrity_name,
                    integ.status().message(), out.name)));
    return out;
  } else if (integ.status().code() != StatusCode::kNotFound) {
    unusable(integ.status().message());
    return out;
  }
  Result<SegmentHints> parsed = ParseSegmentHints(AsBytes(*bytes));
  if (!parsed.ok()) {
    unusable(parsed.status().message());
    return out;
  }
  out.hints = std::move(parsed).value();
  return out;
}

// ---- the transactions the records name -------------------------------------------------------

std::optional<uint32_t> RecordedTransactions::Newest() const {
  std::optional<uint32_t> n;
  for (const std::optional<uint32_t>& t : {index, hints, integrity}) {
    if (t && (!n || *t > *n)) n = t;
  }
  return n;
}

std::string RecordedTransactions::NamesOf(uint32_t t) const {
  std::vector<std::string> names;
  if (index == t) names.push_back(fmt::format("index.{}", t));
  if (hints == t) names.push_back(fmt::format("hints.{}", t));
  if (integrity == t) names.push_back(fmt::format("integrity.{}", t));
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  }
  return out;
}

RecordedTransactions FindRecordedTransactions(const io::Env& env, const std::string& repo, const RepoFolder& folder) {
  RecordedTransactions out;
  Result<std::vector<io::DirEntry>> entries =
      folder.entries ? Result<std::vector<io::DirEntry>>(*folder.entries) : env.List(repo);
  if (!entries.ok()) return out;
  bool transactions_listed = false;
  for (const io::DirEntry& e : *entries) {
    if (e.name == "transactions") transactions_listed = true;
    std::optional<uint32_t>* slot = nullptr;
    size_t prefix = 0;
    for (auto [name, s] : {std::pair{"index.", &out.index}, {"hints.", &out.hints}, {"integrity.", &out.integrity}}) {
      if (e.name.rfind(name, 0) == 0) {
        slot = s;
        prefix = std::string_view(name).size();
      }
    }
    uint32_t t;
    if (!slot || !ParseDigits(std::string_view(e.name).substr(prefix), t)) continue;
    const std::string path = repo + "/" + e.name;
    if (e.type != io::EntryType::kRegular) {
      std::string what = NotRegularFile(env, path);
      if (!what.empty()) out.not_regular.emplace_back(e.name, what);
      continue;
    }
    Result<uint64_t> size = env.EntrySize(path, e);
    if (!size.ok() || *size == 0) continue;
    if (!*slot || t > **slot) *slot = t;
  }
  std::sort(out.not_regular.begin(), out.not_regular.end());
  // The append-only log: its last "transaction T, UTC time ..." line.
  Result<std::unique_ptr<io::File>> f =
      transactions_listed ? env.Open(repo + "/transactions")
                          : Result<std::unique_ptr<io::File>>(Status(StatusCode::kNotFound, "not listed"));
  if (f.ok()) {
    const uint64_t size = (*f)->size();
    const uint64_t n = std::min<uint64_t>(size, kTransactionsTail);
    std::string tail(n, '\0');
    if (n && (*f)->ReadAt(size - n, n, reinterpret_cast<uint8_t*>(tail.data())).ok()) {
      for (size_t pos = tail.rfind("transaction "); pos != std::string::npos;
           pos = pos ? tail.rfind("transaction ", pos - 1) : std::string::npos) {
        if (pos && tail[pos - 1] != '\n') continue;  // a line start only
        size_t end = tail.find(',', pos);
        uint32_t t;
        if (end != std::string::npos && ParseDigits(std::string_view(tail).substr(pos + 12, end - pos - 12), t)) {
          out.transactions_log = t;
          break;
        }
      }
    }
  }
  return out;
}

// ---- files that cannot be read ----------------------------------------------------------------

std::vector<std::pair<uint32_t, Status>> UnreadableAfter(const io::Env& env, const std::vector<SegmentFile>& segments,
                                                         std::optional<uint32_t> after) {
  std::vector<std::pair<uint32_t, Status>> out;
  for (const SegmentFile& s : segments) {
    if ((after && s.number <= *after) || s.size == 0) continue;
    Result<std::unique_ptr<io::File>> f = env.OpenToReadAgain(s.path);  // a planning read (io/env.h)
    if (!f.ok()) {
      if (f.status().code() == StatusCode::kIoError) out.emplace_back(s.number, f.status());
      continue;
    }
    uint8_t tail[9];
    const uint64_t size = (*f)->size();
    if (size < sizeof tail) continue;
    if (Status r = (*f)->ReadAt(size - sizeof tail, sizeof tail, tail); !r.ok()) {
      out.emplace_back(s.number, Status(r.code(), s.path + ": " + r.message()));
    }
  }
  return out;
}

std::string NotRegularFile(const io::Env& env, const std::string& path) {
  Result<io::FileStat> st = env.Stat(path);
  if (!st.ok() || st->type == io::EntryType::kRegular) return "";
  return std::string("a ") + st->type_name;
}

Finding UnreadableFinding(const Location& where, const report::ChunkId* id, std::string message) {
  return MakeFinding(Severity::kError, Stage::kIo, where, id, std::move(message));
}

// ---- the log on disk ---------------------------------------------------------------------------

std::string AbsentSegmentText(bool empty_file, const std::string* not_regular) {
  if (not_regular) return "is " + *not_regular + ", not a segment file";
  return empty_file ? "is empty (0 bytes)" : "is missing";
}

const SegmentFile* SegmentLog::Find(uint32_t n) const {
  auto it = by_number.find(n);
  return it == by_number.end() ? nullptr : &segments[it->second];
}

bool SegmentLog::Absent(uint32_t n) const {
  const SegmentFile* f = Find(n);
  return !f || f->size == 0;
}

std::string SegmentLog::Absence(uint32_t n) const {
  auto odd = not_regular.find(n);
  return AbsentSegmentText(Find(n) != nullptr, odd == not_regular.end() ? nullptr : &odd->second);
}

std::string SegmentLog::PathOf(uint32_t n) const { return SegmentPath(repo, segments_per_dir, n); }

Result<SegmentLog> ListSegmentLog(const io::Env& env, const std::string& repo, uint32_t segments_per_dir,
                                  Bytes commit, const RepoFolder& folder) {
  SegmentLog log;
  log.repo = repo;
  log.segments_per_dir = segments_per_dir;
  std::vector<std::pair<uint32_t, std::string>> odd;  // data/ entries named like segments, not files
  Result<std::vector<SegmentFile>> all = ListSegmentFiles(env, repo, &odd);
  if (!all.ok()) return all.status();
  log.segments = std::move(all).value();
  for (const auto& [n, p] : odd) {
    std::string what = NotRegularFile(env, p);
    if (!what.empty()) log.not_regular[n] = what;
  }
  log.records = FindRecordedTransactions(env, repo, folder);
  log.newest_commit = NewestCommitted(env, log.segments, commit);
  for (size_t i = 0; i < log.segments.size(); ++i) log.by_number[log.segments[i].number] = i;
  return log;
}

CommitProbe CheckRecordedCommit(const SegmentLog& log, uint32_t t, const CommitProber& probe,
                                std::vector<Finding>& findings) {
  const std::string by = log.records.NamesOf(t);
  if (log.Absent(t)) {
    findings.push_back(MakeFinding(Severity::kError, Stage::kMissing, Location::Segment(t), nullptr,
                                   fmt::format("segment {} holding the COMMIT of transaction {} (recorded by {}) {}", t,
                                               t, by, log.Absence(t))));
    return {};
  }
  const SegmentFile& s = *log.Find(t);
  CommitProbe p = probe(s);
  // What borg does with a transaction whose COMMIT it does not find intact (repository.py,
  // check_transaction and prepare_txn, 1.2 and 2.0.0b5): the newest segment that ends in an
  // intact COMMIT (its 9 bytes, checksum included) is the last transaction; an index of a
  // newer one is dropped and rebuilt by replaying up to that COMMIT, and the next write
  // deletes every segment after it.
  const std::optional<uint32_t> before = log.newest_commit;
  auto rolled_back = [&](Finding f) {
    f.message += before ? fmt::format("; borg takes transaction {} as the last one when it next opens the repository: "
                                      "what transaction {} wrote (segments {} to {}: a backup, prune, delete or "
                                      "rename) is rolled back, its archives vanish from the archive list, and borg's "
                                      "next write deletes those segments",
                                      *before, t, *before + 1, t)
                        : std::string("; no earlier segment ends in a COMMIT either: borg finds no committed state "
                                      "and asks for borg check --repair");
    if (before) {
      f.advice = fmt::format("this check verified transaction {} as recorded; no borg command repairs a COMMIT: to "
                             "keep that transaction, copy the repository before running borg on it, else let borg "
                             "roll back to transaction {}, run borg check, and make the lost backup again",
                             t, *before);
    }
    findings.push_back(std::move(f));
  };
  if (p.commit_end && *p.commit_end == s.size) {
    // The COMMIT entry is in its place, but the log did not count it: its checksum fails (the
    // object pass reports the entry itself).
    rolled_back(MakeFinding(Severity::kError, Stage::kSegment, Location::Segment(t), nullptr,
                            fmt::format("segment {} ends transaction {} (recorded by {}) with a COMMIT entry that is "
                                        "damaged",
                                        t, t, by)));
  } else if (p.commit_end) {
    findings.push_back(MakeFinding(Severity::kWarning, Stage::kSegment, Location::Segment(t, *p.commit_end), nullptr,
                                   fmt::format("{} stray bytes after the final COMMIT of transaction {} (a crashed or "
                                               "damaged write); the transaction is committed (recorded by {}) and is "
                                               "verified in full; borg would drop this whole transaction",
                                               s.size - *p.commit_end, t, by)));
  } else if (p.unreadable) {
    findings.push_back(UnreadableFinding(
        Location::Segment(t), nullptr,
        fmt::format("segment {} should hold the COMMIT of transaction {} (recorded by {}) and cannot be read ({}): "
                    "not checked",
                    t, t, by, p.why)));
  } else {
    rolled_back(MakeFinding(Severity::kError, Stage::kTruncated, Location::Segment(t), nullptr,
                            fmt::format("segment {} should end transaction {} (recorded by {}) but holds no COMMIT: "
                                        "it is truncated or damaged",
                                        t, t, by)));
  }
  return p;
}

void AppendFindingsAfterTransaction(const io::Env& env, const SegmentLog& log, uint32_t t,
                                    std::vector<Finding>& findings) {
  const RecordedTransactions& records = log.records;
  if (records.transactions_log && *records.transactions_log > t) {
    findings.push_back(MakeFinding(
        Severity::kWarning, Stage::kSegment, Location::None(), nullptr,
        fmt::format("the append-only log `transactions` records transaction {}, newer than transaction {} "
                    "checked: the segments after it were removed (a rollback as borg's documentation describes "
                    "for append-only repositories), or lost",
                    *records.transactions_log, t)));
  }
  for (const auto& [name, what] : records.not_regular) {
    findings.push_back(MakeFinding(Severity::kWarning, Stage::kIndex, Location::None(), nullptr,
                                   fmt::format("{} is {}, not a regular file: ignored", name, what)));
  }
  const std::vector<std::pair<uint32_t, Status>> unreadable_tail = UnreadableAfter(env, log.segments, t);
  for (const auto& [n, st] : unreadable_tail) {
    findings.push_back(UnreadableFinding(
        Location::Segment(n), nullptr,
        fmt::format("cannot read segment {} ({}): whether it holds a newer COMMIT is not known; this check covers "
                    "transaction {}",
                    n, st.message(), t)));
  }
  for (const auto& [n, what] : log.not_regular) {
    if (n > t) {
      findings.push_back(MakeFinding(Severity::kWarning, Stage::kSegment, Location::Segment(n), nullptr,
                                     fmt::format("{} is {}, not a segment file; ignored (after the committed "
                                                 "transaction {})",
                                                 log.PathOf(n), what, t)));
    }
  }
  // The unreadable ones have their finding: the rest are leftovers.
  size_t uncommitted = 0;
  for (const SegmentFile& s : log.segments) {
    uncommitted += s.number > t && std::none_of(unreadable_tail.begin(), unreadable_tail.end(),
                                                [&](const auto& u) { return u.first == s.number; });
  }
  if (uncommitted) {
    findings.push_back(MakeFinding(Severity::kWarning, Stage::kSegment, Location::None(), nullptr,
                                   fmt::format("{} uncommitted segment file(s) after transaction {} ignored (left by "
                                               "an interrupted write; borg deletes them on its next write)",
                                               uncommitted, t)));
  }
}

// ---- the losses the records show ---------------------------------------------------------------

RecordLossInput MakeRecordLossInput(const SegmentLog& log, uint32_t t) {
  RecordLossInput in;
  in.transaction = t;
  for (const SegmentFile& f : log.segments) {
    if (f.number <= t) in.on_disk[f.number] = f.size;
  }
  for (const auto& [n, what] : log.not_regular) {
    if (n <= t) in.not_regular[n] = what;
  }
  in.segment_path = [repo = log.repo, per_dir = log.segments_per_dir](uint32_t n) {
    return SegmentPath(repo, per_dir, n);
  };
  return in;
}

RecordLosses FindRecordLosses(const RecordLossInput& in) {
  RecordLosses out;
  const SegmentHints* hints = in.hints && in.hints->hints ? &*in.hints->hints : nullptr;
  const std::string hints_name = in.hints ? in.hints->name : "";

  // What the damaged index names: lost with a segment that is gone, or beyond a segment's end.
  std::map<uint32_t, std::vector<const RecordedEntry*>> gone_with, beyond_end;
  {
    std::set<report::ChunkId> seen;
    for (const RecordedEntry& e : in.damaged_index) {
      if (e.segment > in.transaction || (in.live_in_log && in.live_in_log(e.id)) || !seen.insert(e.id).second) continue;
      auto disk = in.on_disk.find(e.segment);
      const bool present = disk != in.on_disk.end() && disk->second > 0 && !in.not_regular.count(e.segment);
      if (!present) {
        gone_with[e.segment].push_back(&e);
      } else if (!in.unreadable.count(e.segment) && e.offset >= disk->second) {
        beyond_end[e.segment].push_back(&e);
      }
    }
  }
  const std::string index_ref =
      in.damaged_index_name.empty() ? "" : in.damaged_index_name + ", which fails its integrity check,";

  std::set<uint32_t> segments;
  if (hints) {
    for (const auto& [s, n] : hints->live_counts) {
      if (s <= in.transaction) segments.insert(s);
    }
  }
  for (const auto& [s, v] : gone_with) segments.insert(s);
  for (const auto& [s, v] : beyond_end) segments.insert(s);

  for (uint32_t s : segments) {
    if (in.reported.count(s)) continue;
    // What hints records for the segment: has_k, and then k live objects. (Two plain values,
    // not an optional: g++ 12 at -O3 saw the optional's payload as maybe uninitialized.)
    const auto hinted = hints ? hints->live_counts.find(s) : decltype(hints->live_counts.end()){};
    const bool has_k = hints && hinted != hints->live_counts.end();
    const uint64_t k = has_k ? hinted->second : 0;
    const auto live = in.live_per_segment.find(s);
    const uint64_t j = live == in.live_per_segment.end() ? 0 : live->second;
    const std::string path = in.segment_path ? in.segment_path(s) : fmt::format("segment {}", s);
    auto disk = in.on_disk.find(s);
    auto odd = in.not_regular.find(s);
    const bool present = disk != in.on_disk.end() && disk->second > 0 && odd == in.not_regular.end();
    if (in.unreadable.count(s)) {
      if (in.compare_counts && has_k && k > j) {
        out.unchecked_objects += k - j;
        out.findings.push_back(UnreadableFinding(
            Location::Segment(s), nullptr,
            fmt::format("{} records {} in segment {}, which cannot be read: they are not checked", hints_name,
                        Plural(k - j, "live object", "live objects"), s)));
      }
      continue;
    }
    if (!present) {
      const std::vector<const RecordedEntry*>& named = gone_with[s];
      const uint64_t m = named.size();
      const std::string what =
          AbsentSegmentText(disk != in.on_disk.end(), odd == in.not_regular.end() ? nullptr : &odd->second);
      if ((has_k && k > 0) || m > 0) {
        std::string msg = fmt::format("committed segment file {} {}", path, what);
        if (has_k && k > 0) msg += fmt::format("; {} records {} in it", hints_name, Plural(k, "live object", "live objects"));
        if (m > 0) {
          msg += has_k && k > 0 ? fmt::format("; {} names {} of them", index_ref, m)
                             : fmt::format("; {} names {} in it", index_ref, Plural(m, "live object", "live objects"));
        }
        const uint64_t lost = std::max<uint64_t>(k, m);
        msg += fmt::format(": {} lost", Plural(lost, "object", "objects"));
        if (lost > m) {
          msg += m ? fmt::format(" (the ids of {} are not known)", lost - m)
                   : " (their ids are not known: no usable index names them)";
        }
        out.findings.push_back(MakeFinding(Severity::kError, Stage::kMissing, Location::Segment(s), nullptr, msg));
        for (const RecordedEntry* e : named) {
          out.findings.push_back(MakeFinding(Severity::kError, Stage::kMissing, Location::Segment(s, e->offset), &e->id,
                                             fmt::format("lost with segment {} (named by {}, which fails its integrity "
                                                         "check)",
                                                         s, in.damaged_index_name)));
        }
        out.lost_objects += lost;
      } else if (has_k) {
        out.findings.push_back(MakeFinding(
            Severity::kWarning, Stage::kMissing, Location::Segment(s), nullptr,
            fmt::format("committed segment file {} {}; {} records no live object in it (it held DELETE or COMMIT "
                        "entries only): no object is lost, but objects it deleted may look live to a log replay",
                        path, what, hints_name)));
      }
      continue;
    }
    const std::vector<const RecordedEntry*>& past = beyond_end[s];
    for (const RecordedEntry* e : past) {
      out.findings.push_back(MakeFinding(
          Severity::kError, Stage::kTruncated, Location::Segment(s, e->offset), &e->id,
          // The offset is in the location, not the message: one message for the whole segment,
          // so the text report rolls the segment's lost chunks up into one group.
          fmt::format("{} places this chunk beyond the end of segment {} ({} bytes): lost", index_ref, s,
                      disk->second)));
    }
    out.lost_objects += past.size();
    if (in.compare_counts && has_k && k > j + past.size()) {
      const uint64_t more = k - j - past.size();
      out.lost_objects += more;
      const auto dr = in.damage_reported.find(s);
      const uint64_t accounted = dr == in.damage_reported.end() ? 0 : dr->second;
      if (more <= accounted) continue;  // the damage findings of this segment say it
      out.findings.push_back(MakeFinding(
          Severity::kError, Stage::kMissing, Location::Segment(s), nullptr,
          fmt::format("{} records {} in segment {}; the log gives {}{}: {} lost (in a damaged or truncated part of "
                      "the segment; {})",
                      hints_name, Plural(k, "live object", "live objects"), s, j,
                      past.empty() ? "" : fmt::format(" and {} names {} beyond its end", index_ref, past.size()),
                      Plural(more, past.empty() ? "object is" : "more object is",
                             past.empty() ? "objects are" : "more objects are"),
                      accounted ? fmt::format("the damage reported in this segment accounts for {} of them; the "
                                              "ids of the others are not known",
                                              accounted)
                                : "their ids are not known")));
    }
  }
  // Entries where a committed segment should be that no record accounts for.
  for (const auto& [n, what] : in.not_regular) {
    const bool accounted = in.reported.count(n) || (hints && hints->live_counts.count(n));
    if (!accounted) {
      out.findings.push_back(MakeFinding(
          Severity::kWarning, Stage::kSegment, Location::Segment(n), nullptr,
          fmt::format("{} is {}, not a segment file; ignored (no record says a segment of the log stood there)",
                      in.segment_path ? in.segment_path(n) : fmt::format("segment {}", n), what)));
    }
  }
  return out;
}

uint64_t CheckRecordsOfTransaction(const io::Env& env, const SegmentLog& log, RecordLossInput in,
                                   std::vector<Finding>& findings) {
  const uint32_t t = in.transaction;
  std::optional<LoadedHints> hints;
  if (log.records.hints == t) {
    hints = LoadSegmentHints(env, log.repo, t);
    for (Finding& f : hints->findings) findings.push_back(std::move(f));
    in.hints = &*hints;
  }
  // A missing COMMIT segment that held nothing else: CheckRecordedCommit said so already.
  const bool held_objects = hints && hints->hints && hints->hints->live_counts.count(t) &&
                            hints->hints->live_counts.at(t) > 0;
  if (log.Absent(t) && !held_objects) in.reported.insert(t);
  RecordLosses losses = FindRecordLosses(in);
  for (Finding& f : losses.findings) findings.push_back(std::move(f));
  return losses.lost_objects + losses.unchecked_objects;
}

}  // namespace borgcheck::repo
