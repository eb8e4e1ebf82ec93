// Steps 3-5 of main (main.cc): run validated options (RunCheck or RunServedCheck, connecting
// to a remote repository first, --lock-wait), print the report, choose the exit code, write
// --metrics-file. Shared by a check and the merge's final pass (merge.h).
//
// Thread contract: main thread; installs the signal handlers of a run.
#pragma once

#include "checker/cli/cli_args.h"
#include "checker/report/output.h"
#include "checker/report/output_stream.h"

namespace borgcheck::cli {

int RunAndReport(CliOptions& opts, report::Reporter& reporter, report::OutputStream& out, report::OutputStream& err);

}  // namespace borgcheck::cli
