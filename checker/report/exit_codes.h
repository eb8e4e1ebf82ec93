// Exit codes. Only main() chooses one; everything else returns Status or findings.
//
// borg's modern scheme, so wrappers such as borgmatic read ours as they read borg's:
//   0   verified, nothing found
//   1   warnings only: the data is intact (uncommitted or stray bytes, orphans, index notes)
//   90  integrity errors found (corruption)
//   2   could not run or could not finish (generic)
//   13  repository does not exist          15  not a valid / supported repository
//   42  key file not found                 52  wrong passphrase
//   73  borg's exclusive lock is held      128+N killed by signal N
// "Data is bad" (90) never shares a code with "could not check" (2 and the specific codes).
#pragma once

#include "checker/base/status.h"

namespace borgcheck::report {

inline constexpr int kExitOk = 0;
inline constexpr int kExitWarnings = 1;
inline constexpr int kExitCouldNotRun = 2;
inline constexpr int kExitRepoDoesNotExist = 13;
inline constexpr int kExitNotARepository = 15;
inline constexpr int kExitKeyFileNotFound = 42;
inline constexpr int kExitWrongPassphrase = 52;
inline constexpr int kExitLockHeld = 73;
inline constexpr int kExitIntegrityErrors = 90;
inline constexpr int kExitSignalBase = 128;

inline int ExitCodeForStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kNotFound: return kExitRepoDoesNotExist;
    case StatusCode::kNotARepository:
    case StatusCode::kUnsupported: return kExitNotARepository;
    case StatusCode::kKeyNotFound: return kExitKeyFileNotFound;
    case StatusCode::kWrongPassphrase: return kExitWrongPassphrase;
    case StatusCode::kLockHeld: return kExitLockHeld;
    default: return kExitCouldNotRun;
  }
}

// Short machine name of a status code for the JSON `error` record.
inline const char* StatusCodeName(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid-argument";
    case StatusCode::kNotFound: return "repository-not-found";
    case StatusCode::kNotARepository: return "not-a-repository";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kWrongPassphrase: return "wrong-passphrase";
    case StatusCode::kKeyNotFound: return "key-not-found";
    case StatusCode::kLockHeld: return "lock-held";
    case StatusCode::kRepositoryChanged: return "repository-changed";
    case StatusCode::kIoError: return "io-error";
    case StatusCode::kCorruptMetadata: return "corrupt-metadata";
    case StatusCode::kInterrupted: return "interrupted";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace borgcheck::report
