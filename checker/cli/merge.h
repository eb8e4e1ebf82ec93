// `borgcheck merge FILE...` (docs/distributed.md): one verdict from the JSON Lines of several
// runs. Two kinds of input, never mixed:
//   * the N shards of one repository (--shard K/N): the set must be whole (each K once, all of
//     one repository, transaction, N and options, each finished); then the merge runs the final
//     pass on the repository the shards name (engine/shard.h: the cross-unit checks and the
//     archive pass, with the shards' findings and evidence; no data object read again) and
//     prints the one report an unsharded run prints, with its exit code and --metrics-file;
//   * finished runs of different repositories (a fleet, e.g. a job array over a list): each
//     run's findings and summary again, then one fleet line (JSON: a `fleet` record) with every
//     repository's verdict and one exit code: 90 if any repository has integrity errors, else
//     2 if any could not be checked (any code but 0, 1 and 90), else 1 if any has warnings,
//     else 0.
// Anything else (a shard missing or twice, shards of two repositories, a file that did not
// finish, a record that does not parse) is refused with exit 2 and a message naming the file
// or the shard, never reported as a partial result.
//
// Thread contract: main thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/base/status.h"
#include "checker/engine/shard.h"
#include "checker/report/finding.h"
#include "checker/report/output_stream.h"
#include "checker/report/summary.h"

namespace borgcheck::cli {

// The most bytes merge reads of one file (a shard of a badly damaged repository may hold many
// findings; beyond this the file is refused, not cut).
inline constexpr uint64_t kMaxRunFileBytes = 4ull << 30;
// The deepest nesting of arrays and objects a record may have (ours nest at most 5 deep).
inline constexpr size_t kMaxRecordDepth = 32;

// One file: the JSON Lines of one run.
struct RunFile {
  std::string name;  // as given ("-": standard input)
  std::vector<report::Finding> findings;
  std::optional<engine::ShardResult> shard;
  std::optional<report::RunSummary> summary;
  std::optional<Status> error;  // an error record
  int exit_code = 0;            // the summary's, else the error's
  // Finished: a summary of a run that was not stopped (a signal, a lost connection), and for a
  // shard its shard record.
  bool Finished() const;
};

// Parses one file's text; a record that does not parse names the file and line.
Result<RunFile> ParseRunFile(std::string name, std::string_view text);

// What the files make: one repository's shard set, or a fleet of finished runs.
struct MergeInput {
  std::optional<engine::ShardSet> shards;
  std::vector<RunFile> runs;  // the fleet (empty for shards)
};
Result<MergeInput> PlanMerge(std::vector<RunFile> files);

// The fleet's exit code by the rule above.
int FleetExitCode(const std::vector<int>& codes);

// argv after "merge". Returns the exit code.
int MergeMain(std::vector<std::string> args, report::OutputStream& out, report::OutputStream& err);

}  // namespace borgcheck::cli
