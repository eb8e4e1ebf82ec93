#include "checker/archive/archive_walker.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>

#include "checker/archive/archive_test_util.h"
#include "checker/archive/walker_test_util.h"

namespace borgcheck::archive {
namespace {

using testing::Dir;
using testing::File;
using testing::HexOf;
using testing::PackItem;
using testing::PackItems;
using testing::TestId;
using testing::TestItem;
using namespace testing::walker;

TEST_CASE("30 identical archives cost one: the other 29 are memo hits and mark nothing new") {
  MemoryRepo repo;
  const std::vector<TestItem> items = ManyFiles(200);
  const size_t size = PackItems(items, Generation::kBorg1).size();
  const std::vector<size_t> cuts = EveryNBytes(size, 977);  // cuts fall inside items
  const ChunkId lost = TestId(7);                            // file-7's first chunk
  std::vector<Built> archives;
  for (int i = 0; i < 30; ++i) archives.push_back(BuildArchive(repo, Generation::kBorg1, "a" + std::to_string(i), items, cuts));
  repo.Forget(lost);
  ArchiveWalker w(repo, repo, Options(Generation::kBorg1));
  std::vector<ArchiveResult> results;
  for (uint32_t i = 0; i < 30; ++i) results.push_back(w.WalkArchive(i, archives[i].ref));
  const size_t k = archives[0].stream_chunks.size();
  REQUIRE(k > 10);
  const WalkerStats st = w.stats();
  CHECK(st.steps_decoded == k);
  CHECK(st.memo_hits == 29 * k);
  CHECK(st.memo_entries == k);
  CHECK(st.carry_rebuilds == 0);
  CHECK(results[0].steps_decoded == k);
  for (uint32_t i = 1; i < 30; ++i) {
    CHECK(results[i].steps_decoded == 0);
    CHECK(results[i].memo_hits == k);
  }
  for (uint32_t i = 0; i < 30; ++i) {
    CAPTURE(i);
    REQUIRE(results[i].failure == ArchiveFailure::kNone);
    CHECK(results[i].items == 201);
    CHECK(results[i].references == 400);
    CHECK(results[i].problems.empty());
    REQUIRE(results[i].bad_refs.size() == 1);
    const BadReference& b = results[i].bad_refs[0];
    CHECK(b.chunk == lost);
    CHECK(b.state == RefState::kMissing);
    CHECK(b.archive == i);
    CHECK(b.path == "dir/file-7");
    CHECK(b.begin == 0);
    CHECK(b.end == 1000);
    CHECK(b.list == RefList::kChunks);
  }
  // Each data chunk was marked once (when its step was decoded), each stream chunk and archive
  // object once per archive.
  std::map<ChunkId, int> marks = repo.marks();
  CHECK(marks[TestId(3)] == 1);
  CHECK(marks[lost] == 1);
  CHECK(marks[archives[0].stream_chunks[1]] == 30);
  CHECK(marks[archives[5].ref.id] == 1);
  for (const ChunkId& id : repo.stored()) CHECK(marks.count(id) == 1);  // no orphans

  AffectedIndex affected(10);
  for (const ArchiveResult& r : results) affected.Add(r);
  REQUIRE(affected.by_chunk().size() == 1);
  const AffectedIndex::Entry& e = affected.by_chunk().at(lost);
  CHECK(e.total == 30);
  CHECK(e.uses.size() == 10);
  CHECK(e.uses[9].archive == 9);
}

// Two archives whose second item-stream chunk is byte-identical, but the item straddling into
// it differs: Y_A uses a good chunk, Y_B a missing one, and only their heads (the `chunks`
// key sorts first) differ. A memo keyed by the chunk id alone would give B A's answer.
struct StraddleCase {
  MemoryRepo repo;
  Built a, b;
  ChunkId good = TestId(500), missing = TestId(501);
  StraddleCase() {
    TestItem ya = File("y", {{good, 64}});
    TestItem yb = File("y", {{missing, 64}});
    const std::string pa = PackItem(ya, Generation::kBorg1);
    const std::string pb = PackItem(yb, Generation::kBorg1);
    REQUIRE(pa.size() == pb.size());
    size_t common = 0;
    while (common < pa.size() && pa[pa.size() - 1 - common] == pb[pb.size() - 1 - common]) ++common;
    REQUIRE(common > 10);
    const std::vector<TestItem> head{Dir("x")};
    const size_t x = PackItems(head, Generation::kBorg1).size();
    const size_t cut = x + pa.size() - common + 2;  // inside Y's identical tail
    a = BuildArchive(repo, Generation::kBorg1, "A", {Dir("x"), ya, Dir("z")}, {cut});
    b = BuildArchive(repo, Generation::kBorg1, "B", {Dir("x"), yb, Dir("z")}, {cut}, false);
    repo.AddData(good);
    REQUIRE(a.stream_chunks[1] == b.stream_chunks[1]);
    REQUIRE(a.stream_chunks[0] != b.stream_chunks[0]);
  }
};

TEST_CASE("an item straddling into a shared chunk with a different carry is not skipped") {
  for (bool a_first : {true, false}) {
    CAPTURE(a_first);
    StraddleCase c;
    ArchiveWalker w(c.repo, c.repo, Options(Generation::kBorg1));
    ArchiveResult ra, rb;
    if (a_first) {
      ra = w.WalkArchive(0, c.a.ref);
      rb = w.WalkArchive(1, c.b.ref);
    } else {
      rb = w.WalkArchive(1, c.b.ref);
      ra = w.WalkArchive(0, c.a.ref);
    }
    CHECK(ra.bad_refs.empty());
    CHECK(ra.items == 3);
    REQUIRE(rb.bad_refs.size() == 1);
    CHECK(rb.bad_refs[0].chunk == c.missing);
    CHECK(rb.bad_refs[0].path == "y");
    CHECK(rb.bad_refs[0].archive == 1);
    CHECK(rb.items == 3);
    CHECK(ra.steps_decoded == 2);
    CHECK(rb.steps_decoded == 2);  // the shared chunk is decoded again: its carry differs
    CHECK(w.stats().memo_entries == 4);
  }
}

TEST_CASE("after a memo hit with a carry, a diverging archive rebuilds the carry from the chunks") {
  MemoryRepo repo;
  std::vector<TestItem> items = ManyFiles(60);
  const std::string s = PackItems(items, Generation::kBorg1);
  const std::vector<size_t> cuts = EveryNBytes(s.size(), 1000);
  REQUIRE(cuts.size() > 4);
  const Built a = BuildArchive(repo, Generation::kBorg1, "A", items, cuts);
  // B: the same up to the third chunk, then file-50 has a new first chunk (same length).
  std::vector<TestItem> changed = items;
  changed[51].chunks[0].first = TestId(9999);
  const Built b = BuildArchive(repo, Generation::kBorg1, "B", changed, cuts);
  REQUIRE(a.stream_chunks.size() == b.stream_chunks.size());
  size_t first_diff = 0;
  while (first_diff < a.stream_chunks.size() && a.stream_chunks[first_diff] == b.stream_chunks[first_diff]) ++first_diff;
  REQUIRE(first_diff >= 2);
  REQUIRE(first_diff < a.stream_chunks.size());
  repo.Forget(TestId(9999));
  ArchiveWalker w(repo, repo, Options(Generation::kBorg1));
  const ArchiveResult ra = w.WalkArchive(0, a.ref);
  const ArchiveResult rb = w.WalkArchive(1, b.ref);
  CHECK(ra.bad_refs.empty());
  REQUIRE(rb.bad_refs.size() == 1);
  CHECK(rb.bad_refs[0].path == "dir/file-50");
  CHECK(rb.items == 61);
  CHECK(rb.memo_hits > 0);
  CHECK(rb.steps_decoded > 0);
  CHECK(w.stats().carry_rebuilds == 1);
  // A fresh walker on B alone finds the same.
  MemoryRepo& r2 = repo;
  ArchiveWalker fresh(r2, r2, Options(Generation::kBorg1));
  CHECK(Summary(fresh.WalkArchive(1, b.ref)) == Summary(rb));
}

TEST_CASE("a carried item spanning several chunks is rebuilt along its chain after a divergence") {
  MemoryRepo repo;
  std::vector<std::pair<ChunkId, uint64_t>> many;
  for (uint32_t i = 0; i < 3000; ++i) many.push_back({TestId(20000 + i), 100});
  std::vector<TestItem> items{Dir("a"), File("huge", many), Dir("z")};
  const std::string s = PackItems(items, Generation::kBorg1);
  const std::vector<size_t> cuts = EveryNBytes(s.size(), 4000);
  REQUIRE(cuts.size() > 20);
  const Built a = BuildArchive(repo, Generation::kBorg1, "A", items, cuts);
  std::vector<TestItem> changed = items;
  changed[1].chunks[2500].first = TestId(99999);  // late in the huge item: its carry spans ~25 chunks
  const Built b = BuildArchive(repo, Generation::kBorg1, "B", changed, cuts);
  repo.Forget(TestId(99999));
  size_t first_diff = 0;
  while (a.stream_chunks[first_diff] == b.stream_chunks[first_diff]) ++first_diff;
  REQUIRE(first_diff > 10);
  ArchiveWalker w(repo, repo, Options(Generation::kBorg1));
  const ArchiveResult ra = w.WalkArchive(0, a.ref);
  const ArchiveResult rb = w.WalkArchive(1, b.ref);
  CHECK(ra.bad_refs.empty());
  REQUIRE(rb.bad_refs.size() == 1);
  CHECK(rb.bad_refs[0].path == "huge");
  CHECK(rb.bad_refs[0].begin == 250000);
  CHECK(rb.items == 3);
  CHECK(rb.memo_hits == first_diff);
  CHECK(w.stats().carry_rebuilds == 1);
  // One descriptor per chunk the huge item spans (per archive where they differ), not k^2 ids.
  CHECK(w.stats().carry_descriptors <= a.stream_chunks.size() + b.stream_chunks.size());
  CHECK(repo.fetches(a.stream_chunks[1]) == 2);  // read once to decode, once to rebuild B's carry
}

TEST_CASE("a missing item-stream chunk: how far the stream was read, and the resync after it") {
  MemoryRepo repo;
  const std::vector<TestItem> items = ManyFiles(40);
  const std::string s = PackItems(items, Generation::kBorg1);
  // Item boundaries, to compute the expected numbers.
  std::vector<size_t> starts;
  {
    size_t off = 0;
    for (const TestItem& t : items) {
      starts.push_back(off);
      off += PackItem(t, Generation::kBorg1).size();
    }
  }
  const size_t c1 = starts[10] + 5;   // item 10 (file-9) straddles c1
  const size_t c2 = starts[25] + 9;   // item 25 (file-24) straddles c2
  const Built a = BuildArchive(repo, Generation::kBorg1, "A", items, {c1, c2});
  repo.Remove(a.stream_chunks[1]);
  ArchiveWalker w(repo, repo, Options(Generation::kBorg1));
  const ArchiveResult r = w.WalkArchive(0, a.ref);
  REQUIRE(r.failure == ArchiveFailure::kNone);
  REQUIRE(!r.problems.empty());
  const StreamProblem& p = r.problems[0];
  CHECK(p.kind == StreamProblemKind::kChunkMissing);
  CHECK(p.chunk == a.stream_chunks[1]);
  CHECK(p.chunk_index == 1);
  CHECK(p.chunk_count == 3);
  CHECK(p.items_before == 10);
  CHECK(p.stream_offset == c1);
  CHECK(p.started_in_earlier_chunk);
  // The third chunk resyncs at item 26: items 0..9 and 26..40 are read.
  CHECK(r.items == 10 + 15);
  REQUIRE(r.problems.size() == 2);
  CHECK(r.problems[1].kind == StreamProblemKind::kResyncSkipped);
  CHECK(r.problems[1].length == starts[26] - c2);
  CHECK(r.problems[1].items_before == 10);
  CHECK(r.stream_bytes == s.size() - (c2 - c1));
  CHECK(r.problems_total == 2);
}

TEST_CASE("a damaged item-stream chunk carries the fetcher's stage and message") {
  MemoryRepo repo;
  const std::vector<TestItem> items = ManyFiles(10);
  const Built a = BuildArchive(repo, Generation::kBorg1, "A", items, {200});
  repo.Damage(a.stream_chunks[0]);
  ArchiveWalker w(repo, repo, Options(Generation::kBorg1));
  const ArchiveResult r = w.WalkArchive(0, a.ref);
  REQUIRE(!r.problems.empty());
  CHECK(r.problems[0].kind == StreamProblemKind::kChunkDamaged);
  CHECK(r.problems[0].stage == report::Stage::kAuthentication);
  CHECK(r.problems[0].reason == "MAC Authentication failed");
  CHECK(r.problems[0].items_before == 0);
  CHECK_FALSE(r.problems[0].started_in_earlier_chunk);
}

class TamRejectingRepo : public MemoryRepo {
 public:
  std::optional<FetchProblem> VerifyArchive(const ChunkId&, Bytes, const ArchiveInfo& info) override {
    FetchProblem p;
    p.stage = report::Stage::kAuthentication;
    p.message = "Archive TAM authentication issue for archive " + info.name + ": TAM missing";
    return p;
  }
};

TEST_CASE("archive objects that are missing, damaged, undecodable or fail their TAM") {
  MemoryRepo repo;
  const Built a = BuildArchive(repo, Generation::kBorg1, "A", ManyFiles(3), {});
  const Built b = BuildArchive(repo, Generation::kBorg1, "B", ManyFiles(3, 50), {});
  repo.Remove(a.ref.id);
  repo.Damage(b.ref.id);
  ManifestArchive junk{"J", repo.Put(std::string("\x91\x01", 2)), ""};
  ArchiveWalker w(repo, repo, Options(Generation::kBorg1));
  ArchiveResult r = w.WalkArchive(0, a.ref);
  CHECK(r.failure == ArchiveFailure::kObjectMissing);
  CHECK(r.message == "Archive metadata block " + HexOf(a.ref.id) + " is missing!");
  CHECK(r.name == "A");
  r = w.WalkArchive(1, b.ref);
  CHECK(r.failure == ArchiveFailure::kObjectDamaged);
  CHECK(r.stage == report::Stage::kAuthentication);
  CHECK(r.message == "Archive metadata block " + HexOf(b.ref.id) + " is corrupted: MAC Authentication failed");
  r = w.WalkArchive(2, junk);
  CHECK(r.failure == ArchiveFailure::kObjectUndecodable);
  CHECK(r.message == "Archive metadata block " + HexOf(junk.id) +
                         " does not decode: archive metadata is not a msgpack map");

  TamRejectingRepo tam;
  const Built c = BuildArchive(tam, Generation::kBorg1, "C", ManyFiles(3), {});
  ArchiveWalker wt(tam, tam, Options(Generation::kBorg1));
  r = wt.WalkArchive(0, c.ref);
  CHECK(r.failure == ArchiveFailure::kTamFailed);
  CHECK(r.message == "Archive TAM authentication issue for archive C: TAM missing");
  // Walked all the same: whether its files can be restored does not depend on the TAM.
  CHECK(r.items == 4);  // "." and its three files
  CHECK(tam.marks().count(c.stream_chunks[0]) == 1);
}

TEST_CASE("borg 2 item_ptrs: resolved, cached, and a missing one leaves a gap the stream resyncs over") {
  MemoryRepo repo;
  const std::vector<TestItem> items = ManyFiles(80);
  const std::string s = PackItems(items, Generation::kBorg2b5);
  const std::vector<size_t> cuts = EveryNBytes(s.size(), 500);
  const Built a = BuildArchive(repo, Generation::kBorg2b5, "A", items, cuts);
  const Built b = BuildArchive(repo, Generation::kBorg2b5, "B", items, cuts);
  REQUIRE(a.item_ptrs.size() >= 4);
  REQUIRE(a.item_ptrs == b.item_ptrs);
  ArchiveWalker w(repo, repo, Options(Generation::kBorg2b5));
  ArchiveResult ra = w.WalkArchive(0, a.ref);
  ArchiveResult rb = w.WalkArchive(1, b.ref);
  CHECK(ra.items == 81);
  CHECK(ra.item_ptrs == a.item_ptrs.size());
  CHECK(ra.stream_chunks == a.stream_chunks.size());
  CHECK(Summary(rb).substr(Summary(rb).find('\n')) == Summary(ra).substr(Summary(ra).find('\n')));
  CHECK(repo.fetches(a.item_ptrs[1]) == 1);

  MemoryRepo repo2;
  const Built c = BuildArchive(repo2, Generation::kBorg2b5, "C", items, cuts);
  repo2.Remove(c.item_ptrs[1]);
  ArchiveWalker w2(repo2, repo2, Options(Generation::kBorg2b5));
  const ArchiveResult rc = w2.WalkArchive(0, c.ref);
  REQUIRE(!rc.problems.empty());
  CHECK(rc.problems[0].kind == StreamProblemKind::kItemPtrsMissing);
  CHECK(rc.problems[0].chunk == c.item_ptrs[1]);
  CHECK(rc.problems[0].chunk_index == 1);
  CHECK(rc.problems[0].chunk_count == c.item_ptrs.size());
  CHECK(rc.stream_chunks == c.stream_chunks.size() - 3);
  CHECK(rc.items < 81);
  CHECK(rc.items > 40);
  // The chunks listed by the lost item_ptrs chunk are unknown, so they are not marked.
  CHECK(repo2.marks().count(c.stream_chunks[3]) == 0);
  CHECK(repo2.marks().count(c.stream_chunks[6]) == 1);
}

TEST_CASE("borg 1.x hard links: the slaves of a master with a bad chunk are named too") {
  MemoryRepo repo;
  TestItem master = File("m/master", {{TestId(900), 10}, {TestId(901), 20}});
  master.hardlink_master = true;
  TestItem slave1;
  slave1.path = "s/one";
  slave1.source = "m/master";
  TestItem slave2 = slave1;
  slave2.path = "s/two";
  TestItem link;  // a symlink to the master's path: `source` is its target, not a hard link
  link.path = "s/link";
  link.mode = 0120777;
  link.source = "m/master";
  std::vector<TestItem> items = ManyFiles(20);
  items.insert(items.begin() + 3, master);
  items.push_back(slave1);
  items.push_back(link);
  items.push_back(slave2);
  const std::string s = PackItems(items, Generation::kBorg1);
  const Built a = BuildArchive(repo, Generation::kBorg1, "A", items, EveryNBytes(s.size(), 300));
  repo.Forget(TestId(901));
  ArchiveWalker w(repo, repo, Options(Generation::kBorg1));
  const ArchiveResult r = w.WalkArchive(0, a.ref);
  REQUIRE(r.bad_refs.size() == 3);
  CHECK(r.bad_refs[0].path == "m/master");
  CHECK(r.bad_refs[0].list == RefList::kChunks);
  CHECK(r.bad_refs[0].begin == 10);
  CHECK(r.bad_refs[0].end == 30);
  CHECK(r.bad_refs[1].path == "s/one");
  CHECK(r.bad_refs[1].list == RefList::kHardlinkSlave);
  CHECK(r.bad_refs[1].via == "m/master");
  CHECK(r.bad_refs[1].begin == 10);
  CHECK(r.bad_refs[2].path == "s/two");
  REQUIRE(r.bad_totals.size() == 1);
  CHECK(r.bad_totals[0].uses == 3);
  CHECK(w.stats().hardlink_passes == 1);
}

TEST_CASE("chunks_healthy references are checked and named as such, caps keep exact totals") {
  MemoryRepo repo;
  TestItem repaired = File("r", {{TestId(1), 5}, {TestId(2), 5}});
  repaired.chunks_healthy = {{TestId(1), 5}, {TestId(3), 5}};  // 3 was lost, 2 is its zero stand-in
  std::vector<std::pair<ChunkId, uint64_t>> same(50, {TestId(4), 2});
  TestItem sparse = File("sparse", same);
  const Built a = BuildArchive(repo, Generation::kBorg1, "A", {repaired, sparse}, {});
  repo.Forget(TestId(3));
  repo.Forget(TestId(4));
  WalkOptions o = Options(Generation::kBorg1);
  o.max_refs_per_chunk = 10;
  ArchiveWalker w(repo, repo, o);
  const ArchiveResult r = w.WalkArchive(0, a.ref);
  REQUIRE(r.bad_refs.size() == 11);
  CHECK(r.bad_refs[0].chunk == TestId(3));
  CHECK(r.bad_refs[0].list == RefList::kChunksHealthy);
  CHECK(r.bad_refs[0].begin == 5);
  CHECK(r.bad_refs[10].path == "sparse");
  CHECK(r.bad_refs[10].begin == 18);
  REQUIRE(r.bad_totals.size() == 2);
  const BadRefTotal& t4 = r.bad_totals[0].chunk == TestId(4) ? r.bad_totals[0] : r.bad_totals[1];
  CHECK(t4.uses == 50);
  CHECK(r.references == 54);
}

TEST_CASE("a stream that ends inside an item, and an item whose size disagrees with its chunks") {
  MemoryRepo repo;
  TestItem wrong = File("wrong-size", {{TestId(1), 5}});
  wrong.size = 7;
  std::string s = PackItems({Dir("a"), wrong, Dir("b")}, Generation::kBorg1);
  const ChunkId c1 = repo.Put(s.substr(0, s.size() - 4));
  repo.AddData(TestId(1));
  ManifestArchive ref{"T", repo.Put(PackArchive(Generation::kBorg1, "T", {c1})), ""};
  ArchiveWalker w(repo, repo, Options(Generation::kBorg1));
  const ArchiveResult r = w.WalkArchive(0, ref);
  CHECK(r.items == 2);
  REQUIRE(r.problems.size() == 2);
  CHECK(r.problems[0].kind == StreamProblemKind::kSizeMismatch);
  CHECK(r.problems[0].path == "wrong-size");
  CHECK(r.problems[0].reason == "size 7, chunks size 5");
  CHECK(r.problems[0].items_before == 1);
  CHECK(r.problems[1].kind == StreamProblemKind::kTruncated);
  CHECK(r.problems[1].items_before == 2);
  CHECK(r.problems[1].chunk == c1);
}

}  // namespace
}  // namespace borgcheck::archive
