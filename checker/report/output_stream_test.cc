// OutputStream: every write checked, the first error kept, no exception, no abort.
#include "checker/report/output_stream.h"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace borgcheck::report {
namespace {

std::string Drain(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  return out;
}

TEST_CASE("text reaches the descriptor at Flush, in order", "[report]") {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  {
    OutputStream s(p[1]);
    s.Write("one\n");
    s.Write("two\n");
    CHECK(s.Flush());
    CHECK(s.error() == 0);
  }
  ::close(p[1]);
  CHECK(Drain(p[0]) == "one\ntwo\n");
  ::close(p[0]);
}

TEST_CASE("a closed pipe is EPIPE, exit 141, later writes are dropped", "[report]") {
  std::signal(SIGPIPE, SIG_IGN);  // as main does
  int p[2];
  REQUIRE(::pipe(p) == 0);
  ::close(p[0]);
  OutputStream s(p[1]);
  s.Write("lost\n");
  CHECK_FALSE(s.Flush());
  CHECK(s.error() == EPIPE);
  CHECK(s.broken());
  s.Write("also lost\n");
  CHECK_FALSE(s.Flush());
  CHECK(ExitCodeForOutputError(s.error()) == 141);
  ::close(p[1]);
}

TEST_CASE("/dev/full is ENOSPC, exit 2", "[report]") {
  int fd = ::open("/dev/full", O_WRONLY);
  REQUIRE(fd >= 0);
  OutputStream s(fd);
  for (int i = 0; i < 10000; ++i) s.Write("a line of the report\n");  // past the 64 KiB buffer
  CHECK(s.error() == ENOSPC);
  CHECK(ExitCodeForOutputError(s.error()) == 2);
  ::close(fd);
}

TEST_CASE("a descriptor that is not open is EBADF", "[report]") {
  OutputStream s(1000);
  s.Write("x");
  CHECK_FALSE(s.Flush());
  CHECK(s.error() == EBADF);
}

}  // namespace
}  // namespace borgcheck::report
