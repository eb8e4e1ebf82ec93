// One check run: plan -> read -> verify -> report.
//
// Thread contract: RunCheck is called once from the main thread. Inside, the main thread
// plans and then reads segments; the pool's workers verify; a progress thread (only when a
// progress callback is given) calls it at most 10 times a second.
#pragma once

#include <functional>
#include <vector>

#include "checker/base/status.h"
#include "checker/report/finding.h"
#include "checker/report/output.h"
#include "checker/report/summary.h"
#include "checker/run/check_options.h"

namespace borgcheck::run {

struct CheckOutcome {
  Status status;                          // non-ok: the run could not start or finish
  report::RunSummary summary;
  std::vector<report::Finding> findings;  // sorted by location
  int stop_signal = 0;                    // the signal that stopped the run, if any
};

using ProgressCallback = std::function<void(const report::Progress&, bool final)>;

CheckOutcome RunCheck(const CheckOptions& options, const ProgressCallback& progress);

// Called from a signal handler: asks a running check to stop soon (async-signal-safe).
void RequestStopFromSignal(int signo);

// The signal that asked the run to stop, or 0. Blocking waits (passphrase reads) poll it
// when a system call returns EINTR.
int PendingStopSignal();

}  // namespace borgcheck::run
