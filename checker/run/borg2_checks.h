// Entry points of the borg 2 check runs, one per repository generation; RunCheck
// (check_run.h) dispatches to them after format detection. Same contract as RunCheck.
#pragma once

#include "checker/run/check_run.h"

namespace borgcheck::run {

// Repository version 2 (borg 2.0.0b5-era segment files): run/borg2b5_check.cc.
CheckOutcome RunBorg2SegmentsCheck(const CheckOptions& options, const ProgressCallback& progress);

// Repository version 4 (borg 2 master: borgstore + packs): run/borg2master_check.cc.
CheckOutcome RunBorgstoreV4Check(const CheckOptions& options, const ProgressCallback& progress);

}  // namespace borgcheck::run
