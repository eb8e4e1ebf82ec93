#include "checker/archive/item_stream.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "checker/archive/archive_test_util.h"

namespace borgcheck::archive {
namespace {

using testing::Dir;
using testing::File;
using testing::HexOf;
using testing::PackItem;
using testing::PackItems;
using testing::RecordingSink;
using testing::TestId;
using testing::TestItem;

StreamOptions Options(const ItemKeySet& keys, Generation g = Generation::kBorg1) {
  StreamOptions o;
  o.item.generation = g;
  o.item.item_keys = &keys;
  return o;
}

// Decodes `stream` cut at `cuts` (sorted offsets) and returns the recorded lines.
std::vector<std::string> DecodeSplit(const std::string& stream, const std::vector<size_t>& cuts,
                                     const StreamOptions& o, bool* ends_inside = nullptr) {
  ItemStreamDecoder d(o);
  RecordingSink sink;
  size_t prev = 0;
  for (size_t c : cuts) {
    d.Feed(AsBytes(std::string_view(stream).substr(prev, c - prev)), sink);
    prev = c;
  }
  d.Feed(AsBytes(std::string_view(stream).substr(prev)), sink);
  if (ends_inside) *ends_inside = d.EndsInsideItem();
  return sink.lines;
}

std::vector<TestItem> SampleItems() {
  std::vector<TestItem> items;
  items.push_back(Dir("."));
  items.push_back(File("a.txt", {{TestId(1), 6}}));
  std::vector<std::pair<ChunkId, uint64_t>> many;
  for (uint32_t i = 0; i < 40; ++i) many.push_back({TestId(100 + i), 4096});
  items.push_back(File("big/file with spaces.bin", many));
  TestItem slave;
  slave.path = "hl.txt";
  slave.source = "a.txt";
  items.push_back(slave);
  TestItem link;
  link.path = "sym";
  link.mode = 0120777;
  link.source = "a.txt";
  items.push_back(link);
  TestItem master = File("master.txt", {{TestId(2), 10}, {TestId(3), 20}});
  master.hardlink_master = true;
  items.push_back(master);
  items.push_back(File("empty", {}));
  return items;
}

const std::vector<std::string> kSampleLines = {
    "item . directory",
    "item a.txt file " + HexOf(TestId(1)).substr(0, 8) + "@0+6",
    // filled in by the test (40 chunks)
};

TEST_CASE("a whole stream decodes to its items with cumulative byte ranges") {
  const ItemKeySet keys(Generation::kBorg1);
  const std::string stream = PackItems(SampleItems(), Generation::kBorg1);
  const std::vector<std::string> lines = DecodeSplit(stream, {}, Options(keys));
  REQUIRE(lines.size() == 7);
  CHECK(lines[0] == kSampleLines[0]);
  CHECK(lines[1] == kSampleLines[1]);
  std::string big = "item big/file with spaces.bin file";
  for (uint32_t i = 0; i < 40; ++i) big += " " + HexOf(TestId(100 + i)).substr(0, 8) + "@" + std::to_string(4096 * i) + "+4096";
  CHECK(lines[2] == big);
  CHECK(lines[3] == "item hl.txt file source=a.txt");
  CHECK(lines[4] == "item sym symlink source=a.txt");
  CHECK(lines[5] == "item master.txt file master=1 " + HexOf(TestId(2)).substr(0, 8) + "@0+10 " +
                        HexOf(TestId(3)).substr(0, 8) + "@10+20");
  CHECK(lines[6] == "item empty file");
}

TEST_CASE("splitting the stream at every byte boundary gives the same items") {
  for (Generation g : {Generation::kBorg1, Generation::kBorg2b5}) {
    const ItemKeySet keys(g);
    const std::string stream = PackItems(SampleItems(), g);
    const std::vector<std::string> whole = DecodeSplit(stream, {}, Options(keys, g));
    REQUIRE(whole.size() == 7);
    for (size_t cut = 0; cut <= stream.size(); ++cut) {
      CAPTURE(cut);
      bool inside = true;
      CHECK(DecodeSplit(stream, {cut}, Options(keys, g), &inside) == whole);
      CHECK_FALSE(inside);
    }
  }
}

TEST_CASE("every pair of cuts, 1-byte chunks and random layouts give the same items") {
  const ItemKeySet keys(Generation::kBorg1);
  std::vector<TestItem> items = SampleItems();
  items.erase(items.begin() + 2);  // without the 40-chunk file: keeps the pair loop small
  items.resize(5);
  const std::string stream = PackItems(items, Generation::kBorg1);
  const std::vector<std::string> whole = DecodeSplit(stream, {}, Options(keys));
  REQUIRE(whole.size() == 5);
  for (size_t a = 0; a <= stream.size(); ++a) {
    for (size_t b = a; b <= stream.size(); ++b) {
      CAPTURE(a, b);
      REQUIRE(DecodeSplit(stream, {a, b}, Options(keys)) == whole);
    }
  }
  std::vector<size_t> every;
  for (size_t i = 1; i < stream.size(); ++i) every.push_back(i);
  CHECK(DecodeSplit(stream, every, Options(keys)) == whole);

  const std::string full = PackItems(SampleItems(), Generation::kBorg1);
  const std::vector<std::string> full_whole = DecodeSplit(full, {}, Options(keys));
  std::mt19937 rng(12);
  for (int layout = 0; layout < 300; ++layout) {
    std::vector<size_t> cuts;
    size_t pos = 0;
    std::uniform_int_distribution<size_t> step(0, layout % 3 == 0 ? 8 : 400);
    while (true) {
      pos += step(rng);  // steps of 0 give empty chunks
      if (pos >= full.size()) break;
      cuts.push_back(pos);
    }
    CAPTURE(layout, cuts.size());
    REQUIRE(DecodeSplit(full, cuts, Options(keys)) == full_whole);
  }
}

TEST_CASE("a stream that ends inside an item says so") {
  const ItemKeySet keys(Generation::kBorg1);
  const std::string stream = PackItems(SampleItems(), Generation::kBorg1);
  bool inside = false;
  const std::vector<std::string> lines = DecodeSplit(stream.substr(0, stream.size() - 3), {40}, Options(keys), &inside);
  CHECK(inside);
  CHECK(lines.size() == 6);
}

TEST_CASE("DecodeStep reports where the carry starts and how it was extended") {
  const ItemKeySet keys(Generation::kBorg1);
  const StreamOptions o = Options(keys);
  const std::string a = PackItem(Dir("d1"), Generation::kBorg1);
  const std::string b = PackItem(File("f", {{TestId(9), 1}}), Generation::kBorg1);
  const std::string stream = a + b;
  StreamCarry carry;
  ItemRecord scratch;
  RecordingSink sink;
  // Chunk 1: all of a and 5 bytes of b.
  StepOutcome out = DecodeStep(carry, AsBytes(stream.substr(0, a.size() + 5)), o, scratch, sink);
  CHECK(out.items == 1);
  CHECK(out.carry_out == CarryOut::kStartsInChunk);
  CHECK(out.carry_offset == a.size());
  // Chunk 2: 3 more bytes of b: the carry is extended by the whole chunk.
  out = DecodeStep(carry, AsBytes(stream.substr(a.size() + 5, 3)), o, scratch, sink);
  CHECK(out.items == 0);
  CHECK(out.carry_out == CarryOut::kExtended);
  CHECK(carry.bytes.size() == 8);
  // Chunk 3: the rest.
  out = DecodeStep(carry, AsBytes(stream.substr(a.size() + 8)), o, scratch, sink);
  CHECK(out.items == 1);
  CHECK(out.carry_out == CarryOut::kEmpty);
  CHECK(carry.empty());
  REQUIRE(sink.lines.size() == 2);
  CHECK(sink.lines[1] == "item f file " + HexOf(TestId(9)).substr(0, 8) + "@0+1");
}

TEST_CASE("an item spanning many chunks is decoded once it is complete") {
  const ItemKeySet keys(Generation::kBorg2Master);
  std::vector<std::pair<ChunkId, uint64_t>> many;
  for (uint32_t i = 0; i < 5000; ++i) many.push_back({TestId(i), 1000 + i});
  const std::string stream =
      PackItems({Dir("x"), File("huge", many), Dir("y")}, Generation::kBorg2Master);
  REQUIRE(stream.size() > 150000);
  std::vector<size_t> cuts;
  for (size_t c = 1000; c < stream.size(); c += 1000) cuts.push_back(c);
  const StreamOptions o = Options(keys, Generation::kBorg2Master);
  ItemStreamDecoder d(o);
  struct Sink : ItemSink {
    std::vector<uint64_t> sizes;
    uint64_t last_end = 0;
    void OnItem(const ItemRecord& item, const ItemPlace&) override {
      sizes.push_back(item.chunks.size());
      if (!item.chunks.empty()) last_end = item.chunks.back().offset + item.chunks.back().size;
    }
    void OnIssue(const StepIssue&) override { FAIL("unexpected issue"); }
  } sink;
  size_t prev = 0;
  for (size_t c : cuts) {
    d.Feed(AsBytes(std::string_view(stream).substr(prev, c - prev)), sink);
    prev = c;
  }
  d.Feed(AsBytes(std::string_view(stream).substr(prev)), sink);
  CHECK(sink.sizes == std::vector<uint64_t>{0, 5000, 0});
  uint64_t total = 0;
  for (uint32_t i = 0; i < 5000; ++i) total += 1000 + i;
  CHECK(sink.last_end == total);
}

TEST_CASE("invalid items are reported with borg's reasons and skipped, the stream stays in sync") {
  const ItemKeySet keys(Generation::kBorg1);
  TestItem no_mtime = File("no-mtime", {{TestId(1), 1}});
  no_mtime.with_mtime = false;
  TestItem unknown = File("unknown-key", {{TestId(2), 1}});
  unknown.extra["colour"] = "blue";
  TestItem hlid = File("hlid-in-1x", {});
  hlid.hlid = std::string(32, 'h');
  std::string stream = PackItem(Dir("ok1"), Generation::kBorg1) + PackItem(no_mtime, Generation::kBorg1) +
                       PackItem(unknown, Generation::kBorg1) + PackItem(hlid, Generation::kBorg1);
  stream += std::string("\x07", 1);                                   // not a dict
  stream += std::string("\x82\xa4path\x05\xa5mtime\x01", 14);        // path is an int
  // chunks entry with 2 elements: valid in borg 2, not in 1.x
  stream += PackItem(File("two-tuple", {{TestId(3), 4}}), Generation::kBorg2b5);
  stream += PackItem(Dir("ok2"), Generation::kBorg1);
  const std::vector<std::string> lines = DecodeSplit(stream, {}, Options(keys));
  CHECK(lines == std::vector<std::string>{
                     "item ok1 directory",
                     "issue invalid-item: missing required keys: mtime",
                     "issue invalid-item: invalid keys: colour",
                     "issue invalid-item: invalid keys: hlid",
                     "issue invalid-item: not a dictionary",
                     "issue invalid-item: path is not a string",
                     "issue invalid-item: chunks entry 0 is not [id, size, csize]",
                     "item ok2 directory",
                 });
  // The same two-tuple item is valid in borg 2.
  const ItemKeySet keys2(Generation::kBorg2b5);
  const std::vector<std::string> b5 =
      DecodeSplit(PackItem(File("two-tuple", {{TestId(3), 4}}), Generation::kBorg2b5), {}, Options(keys2, Generation::kBorg2b5));
  CHECK(b5 == std::vector<std::string>{"item two-tuple file " + HexOf(TestId(3)).substr(0, 8) + "@0+4"});
}

TEST_CASE("duplicate keys: the last value wins, as in borg's dict") {
  const ItemKeySet keys(Generation::kBorg1);
  const std::string s("\x83\xa4path\xa1" "a\xa5mtime\x01\xa4path\xa1" "b", 22);
  CHECK(DecodeSplit(s, {}, Options(keys)) == std::vector<std::string>{"item b none"});
}

TEST_CASE("malformed bytes are reported at their offset and the stream resyncs after them") {
  const ItemKeySet keys(Generation::kBorg1);
  const StreamOptions o = Options(keys);
  const std::string a = PackItem(File("before", {{TestId(1), 1}}), Generation::kBorg1);
  std::string broken = PackItem(File("broken", {{TestId(2), 2}}), Generation::kBorg1);
  broken[10] = '\xc1';
  const std::string c = PackItem(File("after", {{TestId(3), 3}}), Generation::kBorg1);
  const std::string stream = a + broken + c;
  struct Sink : RecordingSink {
    std::vector<StepIssue> issues;
    void OnIssue(const StepIssue& i) override {
      issues.push_back(i);
      RecordingSink::OnIssue(i);
    }
  } sink;
  sink.record_resync = true;
  StreamCarry carry;
  ItemRecord scratch;
  const StepOutcome out = DecodeStep(carry, AsBytes(stream), o, scratch, sink);
  CHECK(out.items == 2);
  CHECK(out.carry_out == CarryOut::kEmpty);
  REQUIRE(sink.issues.size() == 2);
  CHECK(sink.issues[0].kind == IssueKind::kMalformed);
  CHECK(sink.issues[0].offset == a.size() + 10);
  CHECK(sink.issues[0].reason == "invalid msgpack byte 0xc1");
  CHECK(sink.issues[1].kind == IssueKind::kResyncSkipped);
  CHECK(sink.issues[1].offset == a.size() + 1);
  CHECK(sink.issues[1].length == broken.size() - 1);
  CHECK(sink.lines.front().rfind("item before", 0) == 0);
  CHECK(sink.lines.back().rfind("item after", 0) == 0);
}

TEST_CASE("a missing chunk: the cut item is lost, the next chunk resyncs at the next item") {
  const ItemKeySet keys(Generation::kBorg1);
  const StreamOptions o = Options(keys);
  std::vector<TestItem> items;
  for (int i = 0; i < 30; ++i) items.push_back(File("f" + std::to_string(i), {{TestId(i), 100}}));
  std::vector<std::string> packed;
  std::string stream;
  std::vector<size_t> starts;
  for (auto& t : items) {
    starts.push_back(stream.size());
    stream += PackItem(t, Generation::kBorg1);
  }
  // Three chunks: [0, mid of f9), [mid of f9, mid of f20) (missing), [mid of f20, end).
  const size_t c1 = starts[9] + 17;
  const size_t c2 = starts[20] + 23;
  ItemStreamDecoder d(o);
  RecordingSink sink;
  d.Feed(AsBytes(stream.substr(0, c1)), sink);
  CHECK(d.Skip());  // f9 is cut off
  d.Feed(AsBytes(stream.substr(c2)), sink);
  CHECK_FALSE(d.EndsInsideItem());
  std::vector<std::string> paths;
  for (auto& l : sink.lines) paths.push_back(l.substr(0, l.find(' ', 5)));
  std::vector<std::string> want;
  for (int i = 0; i < 9; ++i) want.push_back("item f" + std::to_string(i));
  for (int i = 21; i < 30; ++i) want.push_back("item f" + std::to_string(i));
  CHECK(paths == want);
}

TEST_CASE("too deep nesting and too large items are malformed, with a bounded carry") {
  const ItemKeySet keys(Generation::kBorg1);
  StreamOptions o = Options(keys);
  o.item.max_depth = 4;
  const std::string ok = PackItem(Dir("ok"), Generation::kBorg1);
  const std::string deep = std::string("\x81\xa4path", 6) + std::string(10, '\x91') + "\x90";
  std::vector<std::string> lines = DecodeSplit(ok + deep + ok, {}, o);
  CHECK(lines == std::vector<std::string>{"item ok directory", "issue malformed: msgpack nesting too deep",
                                          "item ok directory"});

  o.item.max_depth = 16;
  o.max_item_bytes = 200;
  std::vector<std::pair<ChunkId, uint64_t>> many;
  for (uint32_t i = 0; i < 20; ++i) many.push_back({TestId(i), 1});
  const std::string big = PackItem(File("big", many), Generation::kBorg1);
  REQUIRE(big.size() > 200);
  // Whole in one chunk, and carried across 50-byte chunks: the carry never exceeds the limit.
  CHECK(DecodeSplit(ok + big + ok, {}, o) ==
        std::vector<std::string>{"item ok directory", "issue malformed: item larger than 200 bytes", "item ok directory"});
  std::vector<size_t> cuts;
  const std::string s = ok + big + ok;
  for (size_t c = 50; c < s.size(); c += 50) cuts.push_back(c);
  lines = DecodeSplit(s, cuts, o);
  REQUIRE(lines.size() >= 2);
  CHECK(lines.front() == "item ok directory");
  CHECK(lines[1] == "issue malformed: item larger than 200 bytes");
  CHECK(lines.back() == "item ok directory");
}

TEST_CASE("random and mutated bytes never crash, and the carry stays bounded") {
  const ItemKeySet keys(Generation::kBorg2b5);
  StreamOptions o = Options(keys, Generation::kBorg2b5);
  o.max_item_bytes = 4096;
  const std::string base = PackItems(SampleItems(), Generation::kBorg2b5);
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string s = base;
    const int flips = 1 + round % 8;
    for (int f = 0; f < flips; ++f) s[rng() % s.size()] = char(rng());
    if (round % 5 == 0) {
      for (auto& ch : s) ch = char(rng());
    }
    ItemStreamDecoder d(o);
    RecordingSink sink;
    size_t pos = 0;
    while (pos < s.size()) {
      const size_t n = std::min<size_t>(s.size() - pos, 1 + rng() % 300);
      d.Feed(AsBytes(std::string_view(s).substr(pos, n)), sink);
      REQUIRE(d.carry().bytes.size() <= o.max_item_bytes);
      pos += n;
    }
  }
}

}  // namespace
}  // namespace borgcheck::archive
