// One check run: detect the repository generation, make its source, run the engine
// (checker/engine/engine.h: plan -> read -> verify -> report).
//
// Thread contract: RunCheck is called once from the main thread; see engine.h for the threads
// it starts and joins.
#pragma once

#include "checker/engine/check_options.h"
#include "checker/engine/engine.h"
#include "checker/io/env.h"
#include "checker/io/object_service.h"

namespace borgcheck::run {

using engine::CheckOptions;
using engine::CheckOutcome;
using engine::ProgressCallback;
using engine::ProgressMode;

// `env`: where the repository's bytes come from (tests inject faults through it).
CheckOutcome RunCheck(const CheckOptions& options, const ProgressCallback& progress,
                      const io::Env& env = io::Env::Default());

// The same for a repository a server hands out by id (borg serve, io/object_service.h): the
// generations that can be read this way (borg 1.x) through their served source.
CheckOutcome RunServedCheck(const CheckOptions& options, const ProgressCallback& progress,
                            io::ObjectService& service);

}  // namespace borgcheck::run
