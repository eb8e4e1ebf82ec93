// Operational status values: the first of borgcheck's two error channels.
//
// A Status says that something could not be done at all (no repository, wrong passphrase,
// unsupported version, I/O error). It is propagated up to main(), which alone chooses the
// exit code. Integrity problems in the data are *not* Statuses: they are Findings
// (checker/report/finding.h) handed to the reporter while the run goes on.
//
// Thread contract: values; copy freely; no shared state.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace borgcheck {

// Few codes on purpose: each maps to one exit code in checker/report/exit_codes.h.
enum class StatusCode {
  kOk,
  kInvalidArgument,     // bad command line or option value
  kNotFound,            // repository path does not exist
  kNotARepository,      // path exists but is no borg repository we know
  kUnsupported,         // a borg repository of a version/feature we do not handle
  kInvalidRepositoryConfig,  // the repository config has a value no repository can have (borg's 16)
  kWrongPassphrase,     // key blob MAC failed with the passphrase we were given
  kKeyNotFound,         // no key file for this repository
  kKeyFileInvalid,      // a key file (BORG_KEY_FILE, or one naming this repository) is no key file
  kKeyFileMismatch,     // the key file or key belongs to another repository
  kRepoKeyNotFound,     // repokey mode, but the repository config holds no key
  kNoPassphrase,        // a passphrase is needed, none is set and there is no terminal
  kPasscommandFailed,   // BORG_PASSCOMMAND could not be parsed, run, or exited non-zero
  kPasswordRetriesExceeded,  // three passphrases typed at the prompt were all wrong
  kLockHeld,            // borg's exclusive lock is held by someone else
  kRepositoryChanged,   // the repository changed under us during the run
  kIoError,             // read error on a file we need
  kCorruptMetadata,     // a structure we need to even start (config, key blob) is unreadable
  kInterrupted,         // stopped by a signal before the check finished
  kInternal,            // a bug in borgcheck (keep last: StatusCodeFromName walks up to it)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Result<T>: a T or a non-ok Status (std::expected is C++23; this is the C++20 stand-in).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                 // NOLINT: implicit on purpose
  Result(Status status) : v_(std::move(status)) {}          // NOLINT: implicit on purpose
  Result(StatusCode code, std::string message) : v_(Status(code, std::move(message))) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace borgcheck
