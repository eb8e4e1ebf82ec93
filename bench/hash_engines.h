// The lane part of `borgcheck_primitives --engines`: one-stream and lane speeds of SHA-256,
// HMAC-SHA256 and borg's key-prefixed BLAKE2b-256 at the message sizes of borg's chunks
// (60,000 bytes, 1 MiB, 8 MiB), single-threaded. See hash_engines.cc for what is measured.
//
// Thread contract: single-threaded (the benchmark runs nothing else meanwhile).
#pragma once

#include <string>

namespace borgcheck::bench {

// Measures every engine and returns a JSON object (no trailing newline):
//   {"<size>": {"<engine>": MB/s, ...}, ...}
// with MB = 10^6 bytes of message per CPU second (all lanes summed), the median of `repeat`
// timings. Exits 1 if any engine's digest differs from OpenSSL's / libb2's.
std::string MeasureHashLanes(int repeat);

}  // namespace borgcheck::bench
