// What a verify-data run does when the key cannot be loaded (no key, wrong passphrase, the mode
// cannot be told, a damaged key blob): it checks the repository layer keyless, so that lost or
// damaged segments and objects are still reported (issue 13: lost data must not hide behind
// "cannot run"). Then:
//   - the keyless check found damage (errors other than io ones): the key's problem becomes one
//     more finding (stage "key", an error) and the run's outcome is its findings: exit 90;
//   - it found none: the key's own status is the outcome, as without the fallback (exit 52 for a
//     wrong passphrase, 42, 44, 50, 51, 15 ...), so an intact repository with a wrong passphrase
//     still exits 52.
// A stop signal while unlocking never falls back.
//
// Thread contract: a value used by the engine's main thread only.
#pragma once

#include <string>
#include <vector>

#include "checker/base/status.h"
#include "checker/base/stop_signal.h"
#include "checker/report/finding.h"

namespace borgcheck::engine {

class KeyFallback {
 public:
  // Whether a LoadKey failure falls back to the keyless check: not when a stop signal came while
  // the key was loaded (whatever the failure says: an interrupted read of BORG_PASSPHRASE_FD).
  static bool FallsBack(const Status& s) {
    return !s.ok() && s.code() != StatusCode::kInterrupted && PendingStopSignal() == 0;
  }

  void Failed(Status s) { status_ = std::move(s); }
  bool active() const { return !status_.ok(); }
  const Status& status() const { return status_; }

  // The summary note of a run that fell back.
  std::string Note() const;

  // After the keyless run, with its sorted findings: Ok (the key's finding was added to
  // `findings`, in order) when they hold damage, else the key's status.
  Status Resolve(std::vector<report::Finding>& findings) const;

 private:
  Status status_;
};

}  // namespace borgcheck::engine
