// RunCheck: detect the generation, make its source from the format table, run the engine.
// Adding a generation is one folder in checker/repo/ plus one row here.
#include "checker/run/check_run.h"

#include <algorithm>
#include <memory>

#include "checker/repo/borg1/borg1_served_source.h"
#include "checker/repo/borg1/borg1_source.h"
#include "checker/repo/borg2b5/borg2b5_served_source.h"
#include "checker/repo/borg2b5/borg2b5_source.h"
#include "checker/repo/borgstore/borgstore_source.h"
#include "checker/repo/format_detect.h"
#include "checker/schedule/partial_run.h"

namespace borgcheck::run {
namespace {

using MakeSource = std::unique_ptr<engine::ObjectSource> (*)(const CheckOptions&, const io::Env&,
                                                            const repo::DetectedFormat&);

// The format table: every generation borgcheck checks (repo/format_detect.h tells them apart).
struct Generation {
  repo::RepoFormat format;
  MakeSource make;
};
constexpr Generation kGenerations[] = {
    // repository version 1; the config as detection read it
    {repo::RepoFormat::kBorg1,
     [](const CheckOptions& o, const io::Env& env, const repo::DetectedFormat& f) {
       return repo::MakeBorg1Source(o, env, f.config_text);
     }},
    // version 2: 2.0.0b1..b9
    {repo::RepoFormat::kBorg2Segments,
     [](const CheckOptions& o, const io::Env& env, const repo::DetectedFormat& f) {
       return repo::MakeBorg2b5Source(o, env, f.config_text);
     }},
    // version 4: 2.0.0b22..master
    {repo::RepoFormat::kBorgstoreV4,
     [](const CheckOptions& o, const io::Env& env, const repo::DetectedFormat&) {
       return repo::MakeBorgstoreSource(o, env);
     }},
};

}  // namespace

CheckOutcome RunCheck(const CheckOptions& options, const ProgressCallback& progress, const io::Env& env) {
  CheckOutcome out;
  out.summary.repository = options.RepositoryName();
  Result<repo::DetectedFormat> format = repo::DetectFormat(env, options.repository);
  if (!format.ok()) {
    out.status = format.status();
    return out;
  }
  for (const Generation& g : kGenerations) {
    if (g.format == format->format) return schedule::RunScheduled(*g.make(options, env, *format), options, progress);
  }
  out.status = Status(StatusCode::kUnsupported,
                      "unsupported repository version " + std::to_string(format->version) + " at " +
                          options.repository +
                          " (borg 2.0.0b10..b21, one file per object): not supported; borg 2 "
                          "master (version 4) and 2.0.0b5-era (version 2) repositories are");
  return out;
}

CheckOutcome RunServedCheck(const CheckOptions& options, const ProgressCallback& progress,
                            io::ObjectService& service) {
  // Opening takes borg's shared lock (unless --bypass-lock) and says the repository's version,
  // which picks the generation's served source.
  Result<io::ServedRepository> repo = service.Open(!options.bypass_lock, std::max(1u, options.lock_wait_seconds));
  if (!repo.ok()) {
    CheckOutcome out;
    out.status = repo.status();
    out.summary.repository = options.RepositoryName();
    return out;
  }
  if (repo->version == 1) {
    return schedule::RunScheduled(*repo::MakeBorg1ServedSource(options, service, *repo), options, progress);
  }
  if (repo->version == 2) {  // borg 2.0.0b5's segments, through borg2 serve
    return schedule::RunScheduled(*repo::MakeBorg2b5ServedSource(options, service, *repo), options, progress);
  }
  CheckOutcome out;
  out.summary.repository = options.RepositoryName();
  out.status = Status(StatusCode::kUnsupported, "repository version " + std::to_string(repo->version) + " at " +
                                                    options.RepositoryName() + ": not supported through borg serve");
  return out;
}

}  // namespace borgcheck::run
