// Progress lines: the recent-window rate, the ETA, layouts that fit every width.
#include "checker/report/progress_line.h"

#include <catch2/catch.hpp>

#include "checker/report/output.h"

namespace borgcheck::report {
namespace {

Progress At(double t, uint64_t done) {
  Progress p;
  p.elapsed_s = t;
  p.bytes_done = done;
  p.bytes_total = 1000000000;
  p.objects_done = done / 1000;
  p.objects_total = 1000000;
  return p;
}

TEST_CASE("the rate ignores a stall before the first byte (planning)", "[report]") {
  RateWindow w;
  for (int i = 0; i <= 100; ++i) w.Add(i * 0.1, 0);  // 10 s of planning
  CHECK_FALSE(w.Rate());
  w.Add(10.1, 0);
  w.Add(11.1, 50000000);  // 50 MB in the first second of reading
  REQUIRE(w.Rate());
  CHECK(*w.Rate() == Approx(50000000.0));
  CHECK(*EtaSeconds(At(11.1, 50000000), w.Rate()) == Approx(19.0));
}

TEST_CASE("the rate covers only the last 20 seconds", "[report]") {
  RateWindow w;
  for (int i = 0; i <= 600; ++i) w.Add(i * 0.1, uint64_t(i) * 1000000);  // 10 MB/s for 60 s
  for (int i = 1; i <= 400; ++i) w.Add(60 + i * 0.1, 600000000 + uint64_t(i) * 100000);  // then 1 MB/s for 40 s
  REQUIRE(w.Rate());
  CHECK(*w.Rate() == Approx(1000000.0).epsilon(0.01));
}

TEST_CASE("no rate before half a second, or when nothing moved", "[report]") {
  RateWindow w;
  w.Add(1.0, 0);
  w.Add(1.2, 1000);
  CHECK_FALSE(w.Rate());
  CHECK_FALSE(EtaSeconds(At(1.2, 1000), std::nullopt));
  RateWindow still;
  still.Add(1, 500);
  still.Add(5, 500);
  CHECK_FALSE(still.Rate());
}

TEST_CASE("terminal lines never reach the last column, at any width", "[report]") {
  Progress p = At(3723, 512 * 1048576ull);
  for (size_t cols = 1; cols <= 200; ++cols) {
    std::string line = TerminalProgressLine(p, 1.5e9, cols);
    INFO("columns " << cols << ": " << line);
    CHECK(line.size() <= (cols > 1 ? cols - 1 : 1));
    CHECK(!line.empty());
    for (char c : line) CHECK((c >= 0x20 && c < 0x7f));
  }
  CHECK(TerminalProgressLine(p, 1.5e9, 120) ==
        "borgcheck: 53.7% 512.0 MiB of 953.7 MiB, 536,870 of 1,000,000 objects, 1.4 GiB/s, elapsed 1:02:03, ETA 0:00:00");
  CHECK(TerminalProgressLine(p, 1.5e9, 80) == "53.7% 512.0 MiB of 953.7 MiB, 1.4 GiB/s, elapsed 1:02:03, ETA 0:00:00");
  CHECK(TerminalProgressLine(p, std::nullopt, 40) == "53.7% 512.0 MiB of 953.7 MiB, ETA -");
  CHECK(TerminalProgressLine(p, std::nullopt, 20) == "53.7% ETA -");
  CHECK(TerminalProgressLine(p, std::nullopt, 5) == "53.7");
}

TEST_CASE("the plain line for logs", "[report]") {
  CHECK(PlainProgressLine(At(65, 250000000), 25e6) ==
        "borgcheck: progress 25.0% 238.4 MiB of 953.7 MiB, 250,000 of 1,000,000 objects, 23.8 MiB/s, elapsed 0:01:05, "
        "ETA 0:00:30");
}

TEST_CASE("while the archives are walked the line says so and its clock goes on", "[report]") {
  Progress p = At(3760, 1000000000);
  p.phase = "archives";
  for (size_t cols = 1; cols <= 200; ++cols) {
    std::string line = TerminalProgressLine(p, 1.5e9, cols);
    INFO("columns " << cols << ": " << line);
    CHECK(line.size() <= (cols > 1 ? cols - 1 : 1));
    CHECK(!line.empty());
  }
  CHECK(TerminalProgressLine(p, 1.5e9, 120) ==
        "borgcheck: 1,000,000 of 1,000,000 objects done; walking the archives, elapsed 1:02:40");
  CHECK(TerminalProgressLine(p, 1.5e9, 60) == "walking the archives, elapsed 1:02:40");
  CHECK(TerminalProgressLine(p, 1.5e9, 20) == "archives, 1:02:40");
  CHECK(PlainProgressLine(p, 25e6) ==
        "borgcheck: progress 1,000,000 of 1,000,000 objects done; walking the archives, elapsed 1:02:40");
}

TEST_CASE("the resize flag is taken once", "[report]") {
  TakeTerminalResized();
  CHECK_FALSE(TakeTerminalResized());
  NoteTerminalResized();
  CHECK(TakeTerminalResized());
  CHECK_FALSE(TakeTerminalResized());
  CHECK_FALSE(TerminalColumns(-1));
}

}  // namespace
}  // namespace borgcheck::report
