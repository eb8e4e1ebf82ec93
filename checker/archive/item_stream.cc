#include "checker/archive/item_stream.h"

#include <cstring>
#include <string_view>

namespace borgcheck::archive {
namespace {

std::string TooLarge(const StreamOptions& o) {
  return "item larger than " + std::to_string(o.max_item_bytes) + " bytes";
}

std::string ScanReason(ScanStatus s) {
  return s == ScanStatus::kTooDeep ? "msgpack nesting too deep" : "invalid msgpack byte 0xc1";
}

// The step's state and helpers; one per DecodeStep call.
class Step {
 public:
  Step(StreamCarry& carry, Bytes chunk, const StreamOptions& options, ItemRecord& item,
       ItemSink& sink)
      : carry_(carry), chunk_(chunk), options_(options), item_(item), sink_(sink) {}

  StepOutcome Run();

 private:
  void Issue(IssueKind kind, size_t offset, bool in_carry, std::string reason, uint64_t len = 0) {
    StepIssue issue;
    issue.kind = kind;
    issue.offset = uint32_t(offset);
    issue.length = len;
    issue.started_in_carry = in_carry;
    issue.reason = std::move(reason);
    sink_.OnIssue(issue);
  }
  void EmitItem(Bytes value, size_t begin, size_t end, bool in_carry) {
    std::string reason;
    if (DecodeItem(value, options_.item, item_, reason)) {
      ItemPlace place;
      place.ordinal = out_.items++;
      place.begin = uint32_t(begin);
      place.end = uint32_t(end);
      place.started_in_carry = in_carry;
      sink_.OnItem(item_, place);
    } else {
      Issue(IssueKind::kInvalidItem, end, in_carry, std::move(reason));
    }
  }
  // Step 1: the item carried in from earlier chunks. Returns false when the step is over.
  bool ResumeCarried();
  // Step 3/4: searches from `from` for an item start; false when none is in this chunk.
  bool Resync(size_t from);

  StreamCarry& carry_;
  Bytes chunk_;
  const StreamOptions& options_;
  ItemRecord& item_;
  ItemSink& sink_;
  StepOutcome out_;
  size_t pos_ = 0;
};

bool Step::ResumeCarried() {
  const size_t n = chunk_.size();
  size_t used = 0;
  const ScanStatus st = carry_.scanner.Scan(chunk_, used);
  if (st == ScanStatus::kIncomplete) {
    if (carry_.bytes.size() + n > options_.max_item_bytes) {
      Issue(IssueKind::kMalformed, 0, true, TooLarge(options_));
      carry_.Clear(StreamCarry::Mode::kResync);
      return Resync(0);
    }
    const size_t old = carry_.bytes.size();
    carry_.bytes.Resize(old + n);
    if (n) std::memcpy(carry_.bytes.data() + old, chunk_.data(), n);
    out_.carry_out = CarryOut::kExtended;
    return false;
  }
  if (st != ScanStatus::kComplete) {
    Issue(IssueKind::kMalformed, used, true, ScanReason(st));
    carry_.Clear(StreamCarry::Mode::kResync);
    return Resync(0);
  }
  if (carry_.bytes.size() + used > options_.max_item_bytes) {
    // Complete, so the stream is still in sync after it.
    Issue(IssueKind::kMalformed, used, true, TooLarge(options_));
  } else {
    const size_t old = carry_.bytes.size();
    carry_.bytes.Resize(old + used);
    if (used) std::memcpy(carry_.bytes.data() + old, chunk_.data(), used);
    EmitItem(carry_.bytes.view(), 0, used, true);
  }
  carry_.Clear(StreamCarry::Mode::kNormal);
  pos_ = used;
  return true;
}

// A map header whose first key is a known item key, as borg's valid_msgpacked_dict asks:
// fixmap or map16, then a str-family key naming an item key.
bool LooksLikeItemStart(Bytes c, size_t q, const ItemKeySet& keys) {
  const uint8_t b = c[q];
  size_t off;
  if (b >= 0x80 && b <= 0x8f) {
    off = q + 1;
  } else if (b == 0xde) {
    off = q + 3;
  } else {
    return false;
  }
  if (off >= c.size()) return false;
  const uint8_t k = c[off];
  size_t len;
  size_t hdr;
  if (k >= 0xa0 && k <= 0xbf) {
    len = k & 0x1f;
    hdr = 1;
  } else if (k == 0xd9 && off + 1 < c.size()) {
    len = c[off + 1];
    hdr = 2;
  } else {
    return false;  // str16/str32 keys are longer than any item key
  }
  if (off + hdr + len > c.size()) return false;
  return keys.Contains(std::string_view(reinterpret_cast<const char*>(c.data() + off + hdr), len));
}

// For a candidate that runs past the end of the chunk: its entries so far must be item keys
// with well-formed values. This rejects the false starts borg-shaped data is full of: a
// timestamp whose last byte is 0x80-0x8f followed by the next key ("path") looks like a map
// header and an item key, but a few entries later the next item's map header sits where a key
// should be.
bool ConsistentPrefix(Bytes tail, const ItemKeySet& keys, uint32_t max_depth) {
  Reader head(tail);
  uint32_t n = 0;
  if (!head.ReadMapHeader(n)) return true;  // the header itself is cut
  size_t at = head.offset();
  ValueScanner value(max_depth);
  for (uint32_t i = 0; i < n; ++i) {
    if (at >= tail.size()) return true;
    Reader r(tail.subspan(at));
    const uint8_t lead = r.peek();
    const bool str_like = (lead >= 0xa0 && lead <= 0xbf) || (lead >= 0xd9 && lead <= 0xdb) ||
                          (lead >= 0xc4 && lead <= 0xc6);
    if (!str_like) return false;
    Bytes key;
    if (!r.ReadRaw(key)) return true;  // cut inside the key
    if (!keys.Contains(std::string_view(reinterpret_cast<const char*>(key.data()), key.size()))) {
      return false;
    }
    at += r.offset();
    value.Reset();
    size_t used = 0;
    const ScanStatus st = value.Scan(tail.subspan(at), used);
    if (st == ScanStatus::kIncomplete) return true;
    if (st != ScanStatus::kComplete) return false;
    at += used;
  }
  return true;
}

bool Step::Resync(size_t from) {
  const size_t n = chunk_.size();
  ValueScanner& sc = carry_.scanner;
  for (size_t q = from; q < n; ++q) {
    if (!LooksLikeItemStart(chunk_, q, *options_.item.item_keys)) continue;
    sc.Reset();
    size_t used = 0;
    const ScanStatus st = sc.Scan(chunk_.subspan(q), used);
    if (st == ScanStatus::kIncomplete) {
      if (n - q > options_.max_item_bytes ||
          !ConsistentPrefix(chunk_.subspan(q), *options_.item.item_keys, options_.item.max_depth)) {
        continue;
      }
      // Runs past the chunk: take it as the item start (borg would see it complete once the
      // next chunk arrives); the next step decodes it like any carried item.
      if (q > from) Issue(IssueKind::kResyncSkipped, from, false, "resynchronising", q - from);
      carry_.mode = StreamCarry::Mode::kNormal;
      carry_.bytes.Assign(chunk_.subspan(q));
      out_.carry_out = CarryOut::kStartsInChunk;
      out_.carry_offset = uint32_t(q);
      return false;
    }
    if (st != ScanStatus::kComplete) continue;
    std::string reason;
    if (!DecodeItem(chunk_.subspan(q, used), options_.item, item_, reason)) continue;
    if (q > from) Issue(IssueKind::kResyncSkipped, from, false, "resynchronising", q - from);
    sc.Reset();
    carry_.mode = StreamCarry::Mode::kNormal;
    pos_ = q;  // the main loop decodes it again: the item is reported once, in order
    return true;
  }
  if (n > from) Issue(IssueKind::kResyncSkipped, from, false, "resynchronising", n - from);
  carry_.Clear(StreamCarry::Mode::kResync);
  out_.carry_out = CarryOut::kResync;
  return false;
}

StepOutcome Step::Run() {
  const size_t n = chunk_.size();
  if (carry_.mode == StreamCarry::Mode::kResync) {
    if (!Resync(0)) return out_;
  } else if (!carry_.bytes.empty()) {
    if (!ResumeCarried()) return out_;
  }
  ValueScanner& sc = carry_.scanner;
  while (pos_ < n) {
    sc.Reset();
    size_t used = 0;
    const ScanStatus st = sc.Scan(chunk_.subspan(pos_), used);
    if (st == ScanStatus::kComplete) {
      if (used > options_.max_item_bytes) {
        Issue(IssueKind::kMalformed, pos_, false, TooLarge(options_));
      } else {
        EmitItem(chunk_.subspan(pos_, used), pos_, pos_ + used, false);
      }
      pos_ += used;
      continue;
    }
    if (st == ScanStatus::kIncomplete) {
      if (n - pos_ > options_.max_item_bytes) {
        Issue(IssueKind::kMalformed, pos_, false, TooLarge(options_));
        carry_.Clear(StreamCarry::Mode::kResync);
        out_.carry_out = CarryOut::kResync;
        return out_;
      }
      carry_.mode = StreamCarry::Mode::kNormal;
      carry_.bytes.Assign(chunk_.subspan(pos_));  // the scanner is at its end already
      out_.carry_out = CarryOut::kStartsInChunk;
      out_.carry_offset = uint32_t(pos_);
      return out_;
    }
    Issue(IssueKind::kMalformed, pos_ + used, false, ScanReason(st));
    if (!Resync(pos_ + 1)) return out_;
  }
  carry_.Clear(StreamCarry::Mode::kNormal);
  out_.carry_out = CarryOut::kEmpty;
  return out_;
}

}  // namespace

std::string_view IssueKindName(IssueKind k) {
  switch (k) {
    case IssueKind::kMalformed: return "malformed";
    case IssueKind::kInvalidItem: return "invalid-item";
    case IssueKind::kResyncSkipped: return "resync-skipped";
  }
  return "malformed";
}

StepOutcome DecodeStep(StreamCarry& carry, Bytes chunk, const StreamOptions& options,
                       ItemRecord& item_scratch, ItemSink& sink) {
  return Step(carry, chunk, options, item_scratch, sink).Run();
}

ItemStreamDecoder::ItemStreamDecoder(const StreamOptions& options)
    : options_(options), carry_(options.item.max_depth) {}

StepOutcome ItemStreamDecoder::Feed(Bytes chunk, ItemSink& sink) {
  return DecodeStep(carry_, chunk, options_, item_, sink);
}

bool ItemStreamDecoder::Skip() {
  const bool cut = EndsInsideItem();
  carry_.Clear(StreamCarry::Mode::kResync);
  return cut;
}

}  // namespace borgcheck::archive
