// The validated options the CLI builds (engine/check_options.h), under the name the CLI uses.
#pragma once

#include "checker/engine/check_options.h"

namespace borgcheck::run {
using engine::CheckOptions;
using engine::ProgressMode;
}  // namespace borgcheck::run
