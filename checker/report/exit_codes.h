// Exit codes. Only main() chooses one; everything else returns Status or findings.
//
// borg's modern scheme, so wrappers such as borgmatic read ours as they read borg's:
//   0   verified, nothing found
//   1   warnings only: the data is intact (uncommitted or stray bytes, orphans, index notes)
//   90  integrity errors found (corruption)
//   2   could not run or could not finish (generic); also a run that finished but could not
//       read every file (io findings, and no damage: verdict "could-not-check")
//   13  repository does not exist          15  not a valid / supported repository
//   40  not a key file (invalid key data)  41  key file of another repository
//   42  key file not found                 44  repokey mode, no key in the config
//   50  no passphrase and no terminal      51  BORG_PASSCOMMAND failed
//   52  wrong passphrase                   53  three wrong passphrases typed
//   73  borg's exclusive lock is held      128+N killed by signal N
//   75  --soft-fail: the repository is absent, not mounted, or stayed locked (borgmatic's
//       "soft failure": it skips the repository instead of reporting an error)
//   141 stdout is a closed pipe (EPIPE), as for a program killed by SIGPIPE; any other
//       failed write of the report (ENOSPC, EIO) is 2
// "Data is bad" (90) never shares a code with "could not check" (2 and the specific codes).
#pragma once

#include <optional>
#include <string_view>

#include "checker/base/status.h"
#include "checker/report/summary.h"

namespace borgcheck::report {

inline constexpr int kExitOk = 0;
inline constexpr int kExitWarnings = 1;
inline constexpr int kExitCouldNotRun = 2;
inline constexpr int kExitRepoDoesNotExist = 13;
inline constexpr int kExitNotARepository = 15;
inline constexpr int kExitInvalidRepositoryConfig = 16;
inline constexpr int kExitKeyFileInvalid = 40;
inline constexpr int kExitKeyFileMismatch = 41;
inline constexpr int kExitKeyFileNotFound = 42;
inline constexpr int kExitRepoKeyNotFound = 44;
inline constexpr int kExitNoPassphrase = 50;
inline constexpr int kExitPasscommandFailed = 51;
inline constexpr int kExitWrongPassphrase = 52;
inline constexpr int kExitPasswordRetriesExceeded = 53;
inline constexpr int kExitLockHeld = 73;
inline constexpr int kExitSoftFailure = 75;
inline constexpr int kExitIntegrityErrors = 90;
inline constexpr int kExitSignalBase = 128;

inline int ExitCodeForStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kNotFound: return kExitRepoDoesNotExist;
    case StatusCode::kNotARepository:
    case StatusCode::kUnsupported: return kExitNotARepository;
    case StatusCode::kInvalidRepositoryConfig: return kExitInvalidRepositoryConfig;
    case StatusCode::kKeyNotFound: return kExitKeyFileNotFound;
    case StatusCode::kKeyFileInvalid: return kExitKeyFileInvalid;
    case StatusCode::kKeyFileMismatch: return kExitKeyFileMismatch;
    case StatusCode::kRepoKeyNotFound: return kExitRepoKeyNotFound;
    case StatusCode::kNoPassphrase: return kExitNoPassphrase;
    case StatusCode::kPasscommandFailed: return kExitPasscommandFailed;
    case StatusCode::kWrongPassphrase: return kExitWrongPassphrase;
    case StatusCode::kPasswordRetriesExceeded: return kExitPasswordRetriesExceeded;
    case StatusCode::kLockHeld: return kExitLockHeld;
    default: return kExitCouldNotRun;
  }
}

// The code of a run that finished: 90 when there is damage (errors besides the io ones), else 2
// when some file could not be read (could not check everything: io errors), else 1 for
// warnings only, else 0.
inline int ExitCodeForSummary(const RunSummary& s) {
  if (s.errors > s.io_errors) return kExitIntegrityErrors;
  if (s.io_errors) return kExitCouldNotRun;
  return s.warnings ? kExitWarnings : kExitOk;
}

// Short machine name of a status code for the JSON `error` record.
inline const char* StatusCodeName(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid-argument";
    case StatusCode::kNotFound: return "repository-not-found";
    case StatusCode::kNotARepository: return "not-a-repository";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kInvalidRepositoryConfig: return "invalid-repository-config";
    case StatusCode::kWrongPassphrase: return "wrong-passphrase";
    case StatusCode::kKeyNotFound: return "key-not-found";
    case StatusCode::kKeyFileInvalid: return "key-file-invalid";
    case StatusCode::kKeyFileMismatch: return "key-file-mismatch";
    case StatusCode::kRepoKeyNotFound: return "repo-key-not-found";
    case StatusCode::kNoPassphrase: return "no-passphrase";
    case StatusCode::kPasscommandFailed: return "passcommand-failed";
    case StatusCode::kPasswordRetriesExceeded: return "password-retries-exceeded";
    case StatusCode::kLockHeld: return "lock-held";
    case StatusCode::kRepositoryChanged: return "repository-changed";
    case StatusCode::kIoError: return "io-error";
    case StatusCode::kCorruptMetadata: return "corrupt-metadata";
    case StatusCode::kInterrupted: return "interrupted";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

// The inverse of StatusCodeName: the code named `name`, none for a name StatusCodeName does not
// give ("unknown" included).
inline std::optional<StatusCode> StatusCodeFromName(std::string_view name) {
  for (int i = 0; i <= int(StatusCode::kInternal); ++i) {  // kInternal is the last code
    if (name == StatusCodeName(StatusCode(i))) return StatusCode(i);
  }
  return std::nullopt;
}

}  // namespace borgcheck::report
