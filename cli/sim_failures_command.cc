// `gandiva sim --failures`: GPU time that failed jobs cost under Philly's
// retry-everything, under classify-and-retry-infrastructure, and with a
// validation run before queuing (gandiva/scheduler/failure_sim.h); prints a
// table and writes JSON.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "commands.h"
#include "gandiva/common/flags.h"
#include "gandiva/scheduler/failure_sim.h"
#include "gandiva/scheduler/sim_runner.h"

namespace gandiva::cli {
namespace {

constexpr const char* kFailuresUsage = R"(usage: gandiva sim --failures [options]
Replays the Philly trace with job failures modelled from the Philly study
(Jeon et al., ATC'19, Table 3) and reports the GPU time spent on attempts that
failed, how soon users hear of a failure, and how the jobs that do not fail
queue, under each way of handling failures (docs/simulator.md):
  philly    every failure retried at once, as often as the study counted
  classify  only infrastructure failures retried, with a limit and backoff
  validate  classify, plus the first N iterations run in a short time slice
            on shared GPUs before the job queues

  --data-dir DIR        trace data (default $GANDIVA_DATA_DIR)
  --trace PATH          trace CSV (default DIR/philly/philly_jobs.csv)
  --cluster C           philly|pai|uniform:MxG (default philly)
  --machines PATH       machine list (default DIR/philly/cluster_machine_list.csv)
  --colocation PATH     co-location table: iteration times for validation, job types
                        (default DIR/colocation/gavel_simulation_throughputs.json; 'none')
  --load X              multiply the arrival rate by X (default 1)
  --max-jobs N          only the first N jobs by submit time
  --seed N              seed of job types and failures (default 1)
  --variants A,B,...    philly,classify,validate (default all three; the first is
                        the baseline that savings are measured against)
 failure model:
  --failing-share F     share of jobs whose first run fails (default 0.1826)
  --retry-success P     chance that a retry of a transient failure succeeds (default 0.5)
  --no-clip             a failing run lasts its whole run time to failure, even past
                        the job's trace duration (default: it stops at the duration)
 handling:
  --philly-max-trials T Philly's attempts for a transient failure (default 5)
  --retry-limit L       retries of infrastructure failures (default 3)
  --backoff S           seconds before the first retry, doubling (default 10)
  --max-backoff S       the longest wait before a retry (default 600)
  --validate N          iterations of the validation run, on one GPU (default 100)
  --validate-startup S  seconds to start a job before its first iteration (default 60)
  --json PATH           JSON report (default gandiva_sim_failures.json; '-' for stdout,
                        'none' to skip)
)";

struct Options {
  sched::SimSetup setup;
  sched::FailureModelOptions model;
  sched::FailureSimConfig config;
  std::vector<sched::FailureVariant> variants = {sched::FailureVariant::kPhilly,
                                                 sched::FailureVariant::kClassify,
                                                 sched::FailureVariant::kValidate};
  std::string json_path = "gandiva_sim_failures.json";
};

// A default input under the data directory, or a clear error.
Status Default(const std::string& dir, const std::string& flag, const std::string& relative,
               std::string* path) {
  if (!path->empty()) return Status::Ok();
  if (dir.empty())
    return InvalidArgument("no " + flag + ": pass " + flag +
                           " PATH, or --data-dir DIR or GANDIVA_DATA_DIR");
  *path = dir + "/" + relative;
  if (!std::filesystem::exists(*path)) return NotFound(*path + " does not exist");
  return Status::Ok();
}

Status ParseArgs(const Args& args, Options* o) {
  Flags f({"data-dir", "trace", "cluster", "machines", "colocation", "load", "max-jobs", "seed",
           "variants", "failing-share", "retry-success", "philly-max-trials", "retry-limit",
           "backoff", "max-backoff", "validate", "validate-startup", "json"},
          {"failures", "skip-bad-rows", "no-clip"});
  GD_RETURN_IF_ERROR(f.Parse(args));
  if (!f.positionals().empty())
    return InvalidArgument("unexpected argument '" + f.positionals()[0] +
                           "' (see gandiva sim --failures --help)");
  sched::SimSetup& s = o->setup;
  s.trace_path = f.Get("trace");
  s.cluster = f.Get("cluster", s.cluster);
  s.machines_path = f.Get("machines");
  std::string colocation = f.Get("colocation");
  GD_RETURN_IF_ERROR(FlagNumber(f, "load", &s.trace.load, 0, /*or_equal=*/false));
  GD_RETURN_IF_ERROR(FlagCount(f, "max-jobs", &s.trace.max_jobs, 0));
  GD_RETURN_IF_ERROR(FlagCount(f, "seed", &s.sim.seed, 0));
  s.trace.skip_bad_rows = f.Has("skip-bad-rows");
  o->model.seed = s.sim.seed;
  if (f.Has("variants")) {
    o->variants.clear();
    for (const auto& name : SplitList(f.Get("variants"))) {
      GD_ASSIGN_OR_RETURN(auto v, sched::ParseFailureVariant(name));
      o->variants.push_back(v);
    }
    if (o->variants.empty()) return InvalidArgument("--variants: none given");
  }
  GD_RETURN_IF_ERROR(FlagNumber(f, "failing-share", &o->model.failing_share, 0));
  GD_RETURN_IF_ERROR(FlagNumber(f, "retry-success", &o->model.retry_success, 0));
  sched::FailureSimConfig& c = o->config;
  GD_RETURN_IF_ERROR(FlagCount(f, "philly-max-trials", &c.philly_max_trials, 1));
  GD_RETURN_IF_ERROR(FlagCount(f, "retry-limit", &c.retry_limit, 0));
  GD_RETURN_IF_ERROR(FlagNumber(f, "backoff", &c.backoff_seconds, 0));
  GD_RETURN_IF_ERROR(FlagNumber(f, "max-backoff", &c.max_backoff_seconds, 0));
  GD_RETURN_IF_ERROR(FlagCount(f, "validate", &c.validate_iterations, 0));
  GD_RETURN_IF_ERROR(FlagNumber(f, "validate-startup", &c.validate_startup_seconds, 0));
  c.clip_to_duration = !f.Has("no-clip");
  o->json_path = f.Get("json", o->json_path);

  const char* env = std::getenv("GANDIVA_DATA_DIR");
  const std::string dir = f.Get("data-dir", env ? env : "");
  GD_RETURN_IF_ERROR(Default(dir, "--trace", "philly/philly_jobs.csv", &s.trace_path));
  if (s.cluster == "philly" || s.cluster == "pai")
    GD_RETURN_IF_ERROR(Default(
        dir, "--machines",
        s.cluster == "pai" ? "alibaba/pai_machine_spec.csv" : "philly/cluster_machine_list.csv",
        &s.machines_path));
  GD_RETURN_IF_ERROR(
      Default(dir, "--colocation", "colocation/gavel_simulation_throughputs.json", &colocation));
  if (colocation != "none") s.colocation_path = colocation;
  return Status::Ok();
}

}  // namespace

bool IsFailureExperiment(const Args& args) {
  return std::find(args.begin(), args.end(), "--failures") != args.end();
}

int SimFailuresCommand(const Args& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::fputs(kFailuresUsage, stdout);
      return 0;
    }
  Options o;
  if (Status s = ParseArgs(args, &o); !s.ok()) return SimFail(s.message());
  auto loaded = sched::LoadSim(o.setup);
  if (!loaded.ok()) return SimFail(loaded.status().ToString());
  auto model = sched::FailureModel::Make(sched::PhillyFailureReasons(), o.model);
  if (!model.ok()) return SimFail(model.status().ToString());
  std::fprintf(stderr, "trace %s: %zu jobs, cluster %s\n", o.setup.trace_path.c_str(),
               loaded->jobs.size(), loaded->cluster_name.c_str());
  sched::FailureReport report;
  report.trace = o.setup.trace_path.substr(o.setup.trace_path.find_last_of('/') + 1);
  report.cluster = loaded->cluster_name;
  report.load = o.setup.trace.load;
  report.model = o.model;
  report.config = o.config;
  for (auto v : o.variants) {
    sched::FailureSimConfig c = o.config;
    c.variant = v;
    auto run = sched::RunFailureSim(loaded->topology, loaded->perf, loaded->jobs, *model, c);
    if (!run.ok()) return SimFail(run.status().ToString());
    std::fprintf(stderr, "  %-9s replayed in %.2f s\n", run->variant.c_str(), run->sim_seconds);
    report.runs.push_back(std::move(run).value());
  }
  std::fputs(sched::FormatFailureTable(report).c_str(), stdout);
  if (Status s = WriteJsonReport(sched::FailureReportToJson(report), o.json_path); !s.ok())
    return SimFail(s.message());
  return 0;
}

}  // namespace gandiva::cli
