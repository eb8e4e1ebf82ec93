// Repository version 2 (borg 2.0.0b5). Not implemented yet: refuses with a clear message.
#include "checker/run/borg2_checks.h"

namespace borgcheck::run {

CheckOutcome RunBorg2SegmentsCheck(const CheckOptions& options, const ProgressCallback&) {
  CheckOutcome out;
  out.status = Status(StatusCode::kUnsupported,
                      "unsupported repository version 2 (borg 2.0 beta) at " + options.repository +
                          ": this borgcheck verifies borg 1.x repositories only");
  return out;
}

}  // namespace borgcheck::run
