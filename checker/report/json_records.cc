#include "checker/report/json_records.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/report/exit_codes.h"
#include "checker/report/output.h"
#include "checker/report/text_report.h"

namespace borgcheck::report {
namespace {

using nlohmann::json;

// ---- Building ------------------------------------------------------------------------------

json Optional(const auto& v) {
  return v ? json(*v) : json(nullptr);
}
json OptionalText(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}
json OptionalTime(double unix_s) {
  return unix_s > 0 ? json(FormatRfc3339(unix_s)) : json(nullptr);
}

json AffectedJson(const Finding& f) {
  if (!f.affected) return nullptr;
  json uses = json::array();
  for (const AffectedUse& u : f.affected->uses) {
    uses.push_back({{"archive", u.archive},
                    {"archive_id", ChunkIdHex(u.archive_id)},
                    {"use", u.use},
                    {"path", Optional(u.path)},
                    {"begin", Optional(u.begin)},
                    {"end", Optional(u.end)},
                    {"via", Optional(u.via)},
                    {"items_read", Optional(u.items_read)},
                    {"path_before", Optional(u.path_before)},
                    {"path_after", Optional(u.path_after)}});
  }
  return uses;
}

json CoverageJson(const RunSummary& s) {
  if (!s.has_coverage) return nullptr;
  const RunSummary::Coverage& c = s.coverage;
  const double oldest_age =
      c.oldest_verified_at > 0 && s.finished_at > 0 ? std::max(0.0, s.finished_at - c.oldest_verified_at) : -1;
  json cycle = nullptr;
  if (c.cycle_started_at > 0) {
    cycle = {{"started_at", OptionalTime(c.cycle_started_at)},
             {"completed_at", OptionalTime(c.cycle_completed_at)},
             {"units", c.cycle_units},
             {"units_done", c.cycle_units_done},
             {"slices", c.cycle_slices ? json(c.cycle_slices) : json(nullptr)},
             {"slices_done", c.cycle_slices ? json(c.cycle_slices_done) : json(nullptr)}};
  }
  return {{"ratio", c.ratio},
          {"max_age_s", c.max_age_s > 0 ? json(c.max_age_s) : json(nullptr)},
          {"units_verified", c.units_verified},
          {"units_partly_verified", c.units_partly_verified},
          {"units_never_verified", c.units_never_verified},
          {"cycle", cycle},
          {"full_verification_at", OptionalTime(c.full_verification_at)},
          {"oldest_unit_verified_at", OptionalTime(c.oldest_verified_at)},
          {"oldest_unit_age_s", oldest_age >= 0 ? json(oldest_age) : json(nullptr)},
          {"state_file", OptionalText(c.state_file)}};
}

// ---- Reading -------------------------------------------------------------------------------

// Untrusted text in a message: JSON-quoted (so control characters and quotes stay visible),
// at most 40 bytes of it.
std::string Quoted(std::string_view s) {
  const bool clipped = s.size() > 40;
  std::string q = json(std::string(s.substr(0, 40))).dump(-1, ' ', false, json::error_handler_t::replace);
  return clipped ? q + "..." : q;
}

// What a value is, for a message: its JSON type, and a number's value.
std::string Described(const json& v) {
  if (v.is_number()) return "number " + v.dump();
  return v.type_name();
}

bool IsLowerHex64(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

ChunkId ChunkIdFromHex(const std::string& hex) {  // hex: IsLowerHex64
  auto nibble = [](char c) { return uint8_t(c <= '9' ? c - '0' : c - 'a' + 10); };
  ChunkId id{};
  for (size_t i = 0; i < id.size(); ++i)
    id[i] = uint8_t(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  return id;
}

// Whether a field must be there and what null means.
enum class Presence {
  kNonNull,   // present and not null
  kNullable,  // present; null: not set
  kOptional,  // null or missing (a field a later version added): not set
};

// Reads the fields of one JSON object of a record. The first problem is kept in *error (shared
// with the readers of the objects nested in it) and every getter does nothing once there is
// one: a parser reads on and checks failed() at the end. Getters leave `out` unchanged for a
// null (or allowed missing) field. Every access checks the value's type first: nothing here
// throws.
class FieldReader {
 public:
  // `object` (a JSON object) must outlive the reader. `record` names the record type, `path`
  // the object within it ("", "coverage.", "affected[2]."), in messages.
  FieldReader(const json& object, std::string_view record, std::string path, std::string* error)
      : object_(object), record_(record), path_(std::move(path)), error_(error) {}

  bool failed() const { return !error_->empty(); }

  void Fail(std::string_view key, std::string_view problem) {
    if (failed()) return;
    *error_ = fmt::format("{} record: field `{}{}`: {}", record_, path_, key, problem);
  }

  // The field's value; nullptr when it is null or missing (a failure unless `p` allows it).
  const json* Value(std::string_view key, Presence p) {
    if (failed()) return nullptr;
    const auto it = object_.find(std::string(key));
    if (it == object_.end()) {
      if (p != Presence::kOptional) Fail(key, "missing");
      return nullptr;
    }
    if (it->is_null()) {
      if (p == Presence::kNonNull) Fail(key, "null, must not be");
      return nullptr;
    }
    return &*it;
  }

  // A string. kNullable and kOptional read null as "" (how the builders write an empty one).
  void Text(std::string_view key, std::string& out, Presence p = Presence::kNonNull) {
    if (const json* v = Typed(key, p, &json::is_string, "a string")) out = v->get_ref<const std::string&>();
  }
  void OptionalString(std::string_view key, std::optional<std::string>& out) {
    if (const json* v = Typed(key, Presence::kNullable, &json::is_string, "a string or null")) {
      out = v->get_ref<const std::string&>();
    }
  }

  void Bool(std::string_view key, bool& out) {
    if (const json* v = Typed(key, Presence::kNonNull, &json::is_boolean, "a boolean")) out = v->get<bool>();
  }

  // An integer from 0 to T's maximum (an integral JSON number: 8.0 is not one).
  template <typename T>
  void Unsigned(std::string_view key, T& out, Presence p = Presence::kNonNull) {
    uint64_t n;
    if (const json* v = Value(key, p); v && UnsignedOf(key, *v, std::numeric_limits<T>::max(), n)) out = T(n);
  }
  template <typename T>
  void OptionalUnsigned(std::string_view key, std::optional<T>& out) {
    uint64_t n;
    if (const json* v = Value(key, Presence::kNullable); v && UnsignedOf(key, *v, std::numeric_limits<T>::max(), n)) {
      out = T(n);
    }
  }

  // A finite number >= 0; with kNullable, > 0 (the builders write 0 as null).
  void Number(std::string_view key, double& out, Presence p = Presence::kNonNull) {
    const json* v = Typed(key, p, &json::is_number, "a number");
    if (!v) return;
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < 0 || (p != Presence::kNonNull && d == 0)) {
      Fail(key, fmt::format("{} is out of range (a number {})", v->dump(),
                            p == Presence::kNonNull ? ">= 0" : "> 0, or null"));
      return;
    }
    out = d;
  }

  // An RFC 3339 time after 1970-01-01T00:00:00Z, as Unix seconds (null: 0, unknown).
  void Time(std::string_view key, double& out, Presence p) {
    const json* v = Typed(key, p, &json::is_string, "an RFC 3339 time string");
    if (!v) return;
    const std::optional<double> t = ParseRfc3339(v->get_ref<const std::string&>());
    if (!t) return Fail(key, Quoted(v->get_ref<const std::string&>()) + " is no RFC 3339 time");
    if (*t <= 0) return Fail(key, Quoted(v->get_ref<const std::string&>()) + " is not after 1970-01-01T00:00:00Z");
    out = *t;
  }

  // 64 lowercase hex digits.
  void Id(std::string_view key, std::optional<ChunkId>& out, Presence p) {
    const json* v = Typed(key, p, &json::is_string, "a string of 64 lowercase hex digits");
    if (!v) return;
    const std::string& s = v->get_ref<const std::string&>();
    if (!IsLowerHex64(s)) return Fail(key, Quoted(s) + " is not 64 lowercase hex digits");
    out = ChunkIdFromHex(s);
  }

  // One of the names `name_of` gives for 0 .. count-1.
  template <typename E, typename NameOf>
  void Name(std::string_view key, E& out, int count, NameOf name_of, std::string_view what) {
    const json* v = Typed(key, Presence::kNonNull, &json::is_string, "a string");
    if (!v) return;
    const std::string& s = v->get_ref<const std::string&>();
    for (int i = 0; i < count; ++i) {
      if (s == name_of(E(i))) {
        out = E(i);
        return;
      }
    }
    Fail(key, fmt::format("unknown {} {}", what, Quoted(s)));
  }

  // A nested object or array (nullptr: null, missing, or a failure).
  const json* Object(std::string_view key, Presence p) { return Typed(key, p, &json::is_object, "an object"); }
  const json* Array(std::string_view key, Presence p) { return Typed(key, p, &json::is_array, "an array"); }

  // For values that are not fields of this object (array elements, an object's members):
  // `key` is how messages name it.
  bool UnsignedOf(std::string_view key, const json& v, uint64_t max, uint64_t& out) {
    if (!v.is_number_integer()) {
      Fail(key, fmt::format("must be an integer, is {}", Described(v)));
      return false;
    }
    // A non-negative integer read from text is stored unsigned; one built in memory from a
    // signed type is stored signed, whatever its sign.
    const bool negative = !v.is_number_unsigned() && v.get<int64_t>() < 0;
    if (negative || v.get<uint64_t>() > max) {
      Fail(key, fmt::format("{} is out of range (0 to {})", v.dump(), max));
      return false;
    }
    out = v.get<uint64_t>();
    return true;
  }

 private:
  const json* Typed(std::string_view key, Presence p, bool (json::*is)() const noexcept, std::string_view type) {
    const json* v = Value(key, p);
    if (v && !(v->*is)()) {
      Fail(key, fmt::format("must be {}{}, is {}", type, p == Presence::kNonNull ? "" : " or null", Described(*v)));
      return nullptr;
    }
    return v;
  }

  const json& object_;
  const std::string_view record_;
  const std::string path_;
  std::string* const error_;
};

// The record as an object of type `type`, or why it is not one.
Status CheckRecord(const json& j, std::string_view type) {
  if (!j.is_object()) {
    return Status(StatusCode::kInvalidArgument, fmt::format("{} record: not a JSON object ({})", type, Described(j)));
  }
  const auto it = j.find("type");
  if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>() != type) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("{} record: field `type`: must be \"{}\"{}", type, type,
                              it == j.end()     ? ", is missing"
                              : it->is_string() ? ", is " + Quoted(it->get_ref<const std::string&>())
                                                : ", is " + Described(*it)));
  }
  return Status::Ok();
}

Status Invalid(std::string error) {
  return Status(StatusCode::kInvalidArgument, std::move(error));
}

constexpr std::string_view kUseKinds[] = {"chunks", "chunks_healthy", "hardlink", "archive", "item_ptrs", "items"};

void ReadAffectedUse(FieldReader& r, AffectedUse& u) {
  std::optional<ChunkId> archive_id;
  r.Text("archive", u.archive);
  r.Id("archive_id", archive_id, Presence::kNonNull);
  if (archive_id) u.archive_id = *archive_id;
  r.Text("use", u.use);
  if (!r.failed() && std::find(std::begin(kUseKinds), std::end(kUseKinds), u.use) == std::end(kUseKinds)) {
    r.Fail("use", "unknown use " + Quoted(u.use));
  }
  r.OptionalString("path", u.path);
  r.OptionalUnsigned("begin", u.begin);
  r.OptionalUnsigned("end", u.end);
  r.OptionalString("via", u.via);
  r.OptionalUnsigned("items_read", u.items_read);
  r.OptionalString("path_before", u.path_before);
  r.OptionalString("path_after", u.path_after);
}

// The inverse of LocationSuffix, given the finding's segment and offset (already read).
//
// The text alone is ambiguous: an item may itself hold ", offset 5" or "]" (a lock entry, an
// archive name), and "[segment 3]" could be an item named "segment 3". The record's `segment`
// and `offset` fields decide it, so the inverse is exact:
//   * with a segment, the text must be "[segment N]" or "[segment N, offset M]" as the fields
//     say, and the location is "". LocationSuffix does not print the item of a finding that has
//     a segment as well; no finding has both (Location::Segment and Location::Item build one or
//     the other), so nothing real is lost.
//   * without one, "" is no location (an offset without a unit is not printed in the text; it
//     is in `offset`); otherwise the text is "[" + location + "]", with ", offset M" before the
//     "]" exactly when `offset` is M. Whatever lies between is the location, verbatim.
void ReadLocation(FieldReader& r, Finding& f) {
  std::string text;
  r.Text("location", text);
  if (r.failed()) return;
  const std::string offset_part = f.offset ? ", offset " + std::to_string(*f.offset) : "";
  if (f.segment) {
    if (text != "[segment " + std::to_string(*f.segment) + offset_part + "]") {
      r.Fail("location", Quoted(text) + " does not match `segment` and `offset`");
    }
    return;
  }
  if (text.empty()) return;
  if (text.size() < 2 + offset_part.size() + 1 || text.front() != '[' || !text.ends_with(offset_part + "]")) {
    return r.Fail("location",
                  Quoted(text) + (f.offset ? " is not \"[<item>, offset <offset>]\"" : " is not \"[<item>]\""));
  }
  f.location = text.substr(1, text.size() - 2 - offset_part.size());
}

}  // namespace

json FindingJson(const Finding& f) {
  return {{"type", "finding"},
          {"affected", AffectedJson(f)},
          {"affected_total", f.affected ? json(f.affected->total) : json(nullptr)},
          {"advice", OptionalText(f.advice)},
          {"severity", SeverityName(f.severity)},
          {"stage", StageName(f.stage)},
          {"chunk_id", f.chunk_id ? json(ChunkIdHex(*f.chunk_id)) : json(nullptr)},
          {"segment", Optional(f.segment)},
          {"offset", Optional(f.offset)},
          {"location", LocationSuffix(f)},
          {"message", f.message},
          {"reread", RereadName(f.reread)}};
}

json SummaryJson(const RunSummary& s, int exit_code) {
  json by_stage = json::object();
  for (int i = 0; i < kStageCount; ++i)
    by_stage[std::string(StageName(Stage(i)))] = s.findings_by_stage[i];
  return {{"type", "summary"},
          {"complete", s.complete},
          {"stopped", OptionalText(s.stopped)},
          {"subset", OptionalText(s.subset)},
          {"shard", OptionalText(s.shard)},
          {"merged_shards", s.merged_shards ? json(s.merged_shards) : json(nullptr)},
          {"sample_fraction", s.sample_fraction > 0 ? json(s.sample_fraction) : json(nullptr)},
          {"sample_seed", s.sample_fraction > 0 ? json(s.sample_seed) : json(nullptr)},
          {"bytes_total", s.bytes_total},
          {"bytes_skipped", s.bytes_skipped},
          {"units_total", s.units_total},
          {"units_not_due", s.units_not_due},
          {"coverage", CoverageJson(s)},
          {"repository", s.repository},
          {"repository_id", OptionalText(s.repository_id)},
          {"format", s.format},
          {"mode", OptionalText(s.mode)},
          {"verify_data", s.verify_data},
          {"transaction", s.transaction},
          {"live_list_source", s.live_list_source},
          {"segments", s.segments},
          {"objects_total", s.objects_total},
          {"objects_verified", s.objects_verified},
          {"stored_bytes", s.stored_bytes},
          {"plaintext_bytes", s.plaintext_bytes},
          {"bytes_read", s.bytes_read},
          {"errors", s.errors},
          {"io_errors", s.io_errors},
          {"warnings", s.warnings},
          {"findings_by_stage", by_stage},
          {"elapsed_s", s.elapsed_s},
          {"throughput_bytes_per_s", s.elapsed_s > 0 ? double(s.bytes_read) / s.elapsed_s : 0.0},
          {"threads", s.threads},
          {"notes", s.notes},
          {"archives_total", Optional(s.archives_total)},
          {"archives_checked", Optional(s.archives_checked)},
          {"archives_not_checked", OptionalText(s.archives_not_checked)},
          {"version", OptionalText(s.version)},
          {"started_at", OptionalTime(s.started_at)},
          {"finished_at", OptionalTime(s.finished_at)},
          {"verdict", s.skipped ? std::string("skipped") : VerdictName(s, exit_code)},
          {"exit_code", exit_code}};
}

json ErrorJson(const Status& status, int exit_code) {
  return {{"type", "error"},
          {"code", StatusCodeName(status.code())},
          {"exit_code", exit_code},
          {"message", status.message()}};
}

// The parsers below read only through FieldReader, which checks each value's type before it
// reads it. The catch is a backstop for a path that does not: a parser never throws for bad
// input (std::bad_alloc still propagates, as everywhere).

Result<Finding> ParseFindingJson(const json& j) try {
  if (Status st = CheckRecord(j, "finding"); !st.ok()) return st;
  std::string error;
  FieldReader r(j, "finding", "", &error);
  Finding f;
  r.Name("severity", f.severity, 2, SeverityName, "severity");
  r.Name("stage", f.stage, kStageCount, StageName, "stage");
  r.Name("reread", f.reread, 4, RereadName, "reread");
  r.Id("chunk_id", f.chunk_id, Presence::kNullable);
  r.OptionalUnsigned("segment", f.segment);
  r.OptionalUnsigned("offset", f.offset);
  ReadLocation(r, f);
  r.Text("message", f.message);
  r.Text("advice", f.advice, Presence::kNullable);
  const json* uses = r.Array("affected", Presence::kNullable);
  uint64_t total = 0;
  const bool has_total = r.Value("affected_total", Presence::kNullable) != nullptr;
  if (has_total) r.Unsigned("affected_total", total);
  if (!r.failed() && (uses != nullptr) != has_total) {
    r.Fail("affected_total", uses ? "null while `affected` is not" : "not null while `affected` is");
  }
  if (uses && !r.failed()) {
    if (uses->size() > kMaxAffectedUses) {
      r.Fail("affected", fmt::format("{} uses, more than the {} a record holds", uses->size(), kMaxAffectedUses));
    } else if (total < uses->size()) {
      r.Fail("affected_total", fmt::format("{} is less than the {} uses in `affected`", total, uses->size()));
    }
    f.affected.emplace();
    f.affected->total = total;
    for (size_t i = 0; i < uses->size() && !r.failed(); ++i) {
      const json& u = (*uses)[i];
      const std::string path = fmt::format("affected[{}]", i);
      if (!u.is_object()) {
        r.Fail(path, "must be an object, is " + Described(u));
        break;
      }
      FieldReader ur(u, "finding", path + ".", &error);
      ReadAffectedUse(ur, f.affected->uses.emplace_back());
    }
  }
  if (r.failed()) return Invalid(std::move(error));
  return f;
} catch (const json::exception& e) {
  return Invalid(std::string("finding record: ") + e.what());
}

Result<RunSummary> ParseSummaryJson(const json& j, int* exit_code) try {
  if (Status st = CheckRecord(j, "summary"); !st.ok()) return st;
  std::string error;
  FieldReader r(j, "summary", "", &error);
  RunSummary s;
  r.Bool("complete", s.complete);
  r.Text("stopped", s.stopped, Presence::kNullable);
  r.Text("subset", s.subset, Presence::kNullable);
  // Added with --shard and merge (docs/distributed.md): absent in a summary of an older version.
  r.Text("shard", s.shard, Presence::kOptional);
  if (const json* m = r.Value("merged_shards", Presence::kOptional); m && !m->is_null()) {
    r.Unsigned("merged_shards", s.merged_shards);
  }
  r.Number("sample_fraction", s.sample_fraction, Presence::kNullable);
  const bool has_seed = r.Value("sample_seed", Presence::kNullable) != nullptr;
  if (has_seed) r.Unsigned("sample_seed", s.sample_seed);
  if (!r.failed() && has_seed != (s.sample_fraction > 0)) {
    r.Fail("sample_seed", has_seed ? "not null without `sample_fraction`" : "null with `sample_fraction`");
  }
  r.Unsigned("bytes_total", s.bytes_total);
  r.Unsigned("bytes_skipped", s.bytes_skipped);
  r.Unsigned("units_total", s.units_total);
  r.Unsigned("units_not_due", s.units_not_due);

  if (const json* cov = r.Object("coverage", Presence::kNullable)) {
    s.has_coverage = true;
    RunSummary::Coverage& c = s.coverage;
    FieldReader cr(*cov, "summary", "coverage.", &error);
    cr.Number("ratio", c.ratio);
    cr.Number("max_age_s", c.max_age_s, Presence::kNullable);
    cr.Unsigned("units_verified", c.units_verified);
    cr.Unsigned("units_partly_verified", c.units_partly_verified);
    cr.Unsigned("units_never_verified", c.units_never_verified);
    cr.Time("full_verification_at", c.full_verification_at, Presence::kNullable);
    cr.Time("oldest_unit_verified_at", c.oldest_verified_at, Presence::kNullable);
    cr.Text("state_file", c.state_file, Presence::kNullable);
    // `oldest_unit_age_s` is derived from `oldest_unit_verified_at` and `finished_at`: not read.
    if (const json* cycle = cr.Object("cycle", Presence::kNullable)) {
      FieldReader yr(*cycle, "summary", "coverage.cycle.", &error);
      yr.Time("started_at", c.cycle_started_at, Presence::kNonNull);
      yr.Time("completed_at", c.cycle_completed_at, Presence::kNullable);
      yr.Unsigned("units", c.cycle_units);
      yr.Unsigned("units_done", c.cycle_units_done);
      const bool slices = yr.Value("slices", Presence::kNullable) != nullptr;
      const bool slices_done = yr.Value("slices_done", Presence::kNullable) != nullptr;
      if (slices) yr.Unsigned("slices", c.cycle_slices);
      if (slices_done) yr.Unsigned("slices_done", c.cycle_slices_done);
      if (!yr.failed() && slices && c.cycle_slices == 0) yr.Fail("slices", "0, must be > 0 or null");
      if (!yr.failed() && slices != slices_done) {
        yr.Fail(slices ? "slices_done" : "slices", "null while the other of `slices`, `slices_done` is not");
      }
    }
  }

  r.Text("repository", s.repository);
  r.Text("repository_id", s.repository_id, Presence::kOptional);
  r.Text("format", s.format);
  r.Text("mode", s.mode, Presence::kNullable);
  r.Bool("verify_data", s.verify_data);
  r.Unsigned("transaction", s.transaction);
  r.Text("live_list_source", s.live_list_source);
  r.Unsigned("segments", s.segments);
  r.Unsigned("objects_total", s.objects_total);
  r.Unsigned("objects_verified", s.objects_verified);
  r.Unsigned("stored_bytes", s.stored_bytes);
  r.Unsigned("plaintext_bytes", s.plaintext_bytes);
  r.Unsigned("bytes_read", s.bytes_read);
  r.Unsigned("errors", s.errors);
  r.Unsigned("io_errors", s.io_errors);
  r.Unsigned("warnings", s.warnings);

  // Every stage's count; a name this version does not know is refused rather than dropped
  // (its findings could not be read either).
  if (const json* by_stage = r.Object("findings_by_stage", Presence::kNonNull)) {
    FieldReader br(*by_stage, "summary", "findings_by_stage.", &error);
    for (int i = 0; i < kStageCount; ++i)
      br.Unsigned(StageName(Stage(i)), s.findings_by_stage[i]);
    for (auto it = by_stage->begin(); it != by_stage->end(); ++it) {
      const std::string& key = it.key();
      bool known = false;
      for (int i = 0; i < kStageCount && !known; ++i)
        known = key == StageName(Stage(i));
      if (!known) r.Fail("findings_by_stage", "unknown stage " + Quoted(key));
    }
  }

  r.Number("elapsed_s", s.elapsed_s);
  // `throughput_bytes_per_s` is bytes_read / elapsed_s: not read.
  r.Unsigned("threads", s.threads);
  if (const json* notes = r.Array("notes", Presence::kNonNull)) {
    for (size_t i = 0; i < notes->size() && !r.failed(); ++i) {
      const json& n = (*notes)[i];
      if (!n.is_string()) {
        r.Fail(fmt::format("notes[{}]", i), "must be a string, is " + Described(n));
        break;
      }
      s.notes.push_back(n.get_ref<const std::string&>());
    }
  }
  r.OptionalUnsigned("archives_total", s.archives_total);
  r.OptionalUnsigned("archives_checked", s.archives_checked);
  r.Text("archives_not_checked", s.archives_not_checked, Presence::kNullable);
  r.Text("version", s.version, Presence::kOptional);
  r.Time("started_at", s.started_at, Presence::kOptional);
  r.Time("finished_at", s.finished_at, Presence::kOptional);

  // `verdict` is derived from the fields above and the exit code, except for two flags that
  // no other field carries.
  std::string verdict;
  r.Text("verdict", verdict);
  s.skipped = verdict == "skipped";
  s.state_not_saved = verdict == "state-not-saved";
  int code = 0;
  r.Unsigned("exit_code", code);
  if (!r.failed() && code > 255) r.Fail("exit_code", fmt::format("{} is out of range (0 to 255)", code));

  if (r.failed()) return Invalid(std::move(error));
  if (exit_code) *exit_code = code;
  return s;
} catch (const json::exception& e) {
  return Invalid(std::string("summary record: ") + e.what());
}

Result<std::pair<Status, int>> ParseErrorJson(const json& j) try {
  if (Status st = CheckRecord(j, "error"); !st.ok()) return st;
  std::string error;
  FieldReader r(j, "error", "", &error);
  std::string code_name, message;
  int code = 0;
  r.Text("code", code_name);
  r.Unsigned("exit_code", code);
  if (!r.failed() && code > 255) r.Fail("exit_code", fmt::format("{} is out of range (0 to 255)", code));
  r.Text("message", message);
  std::optional<StatusCode> status_code;
  if (!r.failed()) {
    status_code = StatusCodeFromName(code_name);
    if (!status_code || *status_code == StatusCode::kOk) r.Fail("code", "unknown error code " + Quoted(code_name));
  }
  if (r.failed()) return Invalid(std::move(error));
  return std::pair<Status, int>(Status(*status_code, std::move(message)), code);
} catch (const json::exception& e) {
  return Invalid(std::string("error record: ") + e.what());
}

// Whether the JSON text nests its arrays and objects at most `max` deep (strings skipped). The
// records are read into nlohmann::json, whose copies recurse: a line of a few hundred kilobytes
// of "[[[[" would overflow the stack.
bool JsonNestingWithin(std::string_view text, size_t max) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}


}  // namespace borgcheck::report
