// Replay driver: a main() that runs a fuzz target's LLVMFuzzerTestOneInput once on every file
// it is given, so that each target also builds with g++ (no libFuzzer) and its corpus replays
// in the ordinary test suite (under ASan/UBSan in the asan-ubsan preset).
//
//   <target>_fuzzer FILE_OR_DIR...
//
// Directories are read one level deep, files in name order (deterministic output). Each input
// is copied into a heap buffer of exactly its size, so that an overread is a sanitizer error
// as it would be under libFuzzer. Exit status: 0 when every input ran; 1 when an argument
// could not be read or no input was found at all (an empty or misspelt corpus must not pass
// silently). A failed invariant aborts (FUZZ_CHECK), which fails the test.
//
// Thread contract: single-threaded, like libFuzzer's own driver.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

bool RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot open %s\n", path.c_str());
    return false;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  // Exactly-sized copy (new[] of 0 bytes is a valid, unreadable pointer).
  std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), exact.get());
  LLVMFuzzerTestOneInput(exact.get(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 1;
  }
  bool ok = true;
  size_t ran = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(arg, ec)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      if (ec) {
        std::fprintf(stderr, "replay: cannot list %s: %s\n", argv[i], ec.message().c_str());
        ok = false;
        continue;
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        if (RunFile(f)) ++ran;
        else ok = false;
      }
    } else if (std::filesystem::is_regular_file(arg, ec)) {
      if (RunFile(arg)) ++ran;
      else ok = false;
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a directory\n", argv[i]);
      ok = false;
    }
  }
  std::fprintf(stderr, "replay: %zu input(s) ran\n", ran);
  if (ran == 0) {
    std::fprintf(stderr, "replay: no input found\n");
    return 1;
  }
  return ok ? 0 : 1;
}
