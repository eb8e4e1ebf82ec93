// Repository version 4 (borg 2 master). Not implemented yet: refuses with a clear message.
#include "checker/run/borg2_checks.h"

namespace borgcheck::run {

CheckOutcome RunBorgstoreV4Check(const CheckOptions& options, const ProgressCallback&) {
  CheckOutcome out;
  out.status = Status(StatusCode::kUnsupported,
                      "unsupported repository version 4 (borg 2 master, borgstore) at " + options.repository +
                          ": this borgcheck verifies borg 1.x repositories only");
  return out;
}

}  // namespace borgcheck::run
