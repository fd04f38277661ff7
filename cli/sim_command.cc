// `gandiva sim`: replay a job trace on a simulated cluster under one or more
// scheduling policies; print a table, write JSON and optionally PNG plots.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "commands.h"
#include "gandiva/common/flags.h"
#include "gandiva/scheduler/policy_flags.h"
#include "gandiva/scheduler/sim_runner.h"

namespace gandiva::cli {
namespace {

using sched::Locality;

constexpr const char* kSimUsage = R"(usage: gandiva sim [options]
Replays a job trace on a simulated GPU cluster (docs/simulator.md).

  --data-dir DIR        the trace data (philly/, alibaba/, colocation/) that the
                        defaults below are read from (default $GANDIVA_DATA_DIR)
  --trace PATH          trace CSV (default DIR/philly/philly_jobs.csv)
  --format F            auto|philly|tiresias|generic (default auto, from the header)
  --policy NAME         fifo|srtf|las|gandiva|reserve-pack|sjf-predicted|sjf-tree|philly (default gandiva)
  --compare A,B,...     run several policies side by side, with ratios against fifo
  --cluster C           philly|pai|uniform:MxG (default philly)
  --machines PATH       machine list (default DIR/philly/cluster_machine_list.csv,
                        or DIR/alibaba/pai_machine_spec.csv for --cluster pai)
  --colocation PATH     co-location table, or 'none' for a neutral model
                        (default DIR/colocation/gavel_simulation_throughputs.json)
  --load X              multiply the arrival rate by X (default 1)
  --seed N              seed for job types (default 1)
  --max-jobs N          only the first N jobs by submit time
  --skip-bad-rows       skip malformed trace rows (counted) instead of failing
  --json PATH           write the JSON report here (default gandiva_sim.json; 'none' to skip)
  --plot                also write PNG plots (needs /usr/bin/python3 with matplotlib)
  --plot-prefix P       path prefix of the PNGs (default gandiva_sim_)
  --threads N           policies simulated in parallel with --compare (default 2)
 model:
  --spread-factor F     speed of a gang spread over extra machines (default 0.75)
  --slice S             time-slice length, seconds (default 60)
  --switch-cost S       suspend+resume cost per slice, seconds (default 0.5)
  --preempt-cost S      restart stall after a stop (checkpoint + restore), seconds (default 10)
  --park-cost S         resume stall after a park (memory kept), seconds (default: --preempt-cost)
  --migrate-fixed S     fixed migration cost, seconds (default 2)
  --state-gb G          checkpoint size per GPU (default 4)
  --net-gbps B          migration bandwidth, GB/s (default 1.25)
  --check               verify allocation invariants at every step (slow)
 fractional-GPU placement on the Alibaba 2023 trace (no time; its own options):
  --alibaba DIR --placement first-fit,best-fit,fgd   see gandiva sim --placement --help
 pack prediction on the co-location table (no time):
  --pack-prediction [--neighbours K]                 see gandiva sim --pack-prediction --help
 failed jobs: retry everything, classify and retry infrastructure, validate first:
  --failures [--validate N]                          see gandiva sim --failures --help
)";

// Where the default trace, machine lists and co-location table live, when
// --data-dir is not given.
constexpr const char* kDataDirEnv = "GANDIVA_DATA_DIR";

// Everything the command line asks for.
struct SimOptions {
  sched::SimSetup setup;
  std::vector<std::string> policies = {"gandiva"};
  std::string colocation;  // empty: the data directory's table
  std::string json_path = "gandiva_sim.json", plot_prefix = "gandiva_sim_";
  bool plot = false;
  int threads = 2;
};

Flags SimFlags() {
  std::set<std::string> valued = {
      "data-dir",    "trace",         "format",        "policy",  "compare",     "cluster",
      "machines",    "colocation",    "load",          "seed",    "max-jobs",    "json",
      "plot-prefix", "threads",       "spread-factor", "slice",   "switch-cost", "preempt-cost",
      "park-cost",   "migrate-fixed", "state-gb",      "net-gbps"};
  std::set<std::string> boolean = {"skip-bad-rows", "plot", "check"};
  valued.merge(sched::PolicyValuedFlags());
  boolean.merge(sched::PolicyBooleanFlags());
  return Flags(std::move(valued), std::move(boolean));
}

// The trace, the cluster, the outputs.
Status ApplyInputFlags(const Flags& f, SimOptions* o) {
  sched::SimSetup& s = o->setup;
  s.trace_path = f.Get("trace");
  s.cluster = f.Get("cluster", s.cluster);
  s.machines_path = f.Get("machines");
  o->colocation = f.Get("colocation");
  GD_RETURN_IF_ERROR(FlagChoice<sched::TraceFormat>(f, "format",
                                                    {{"auto", sched::TraceFormat::kAuto},
                                                     {"philly", sched::TraceFormat::kPhilly},
                                                     {"tiresias", sched::TraceFormat::kTiresias},
                                                     {"generic", sched::TraceFormat::kGeneric}},
                                                    &s.trace.format));
  if (f.Has("policy") && f.Has("compare"))
    return InvalidArgument("--policy and --compare exclude each other");
  if (f.Has("policy")) o->policies = {f.Get("policy")};
  if (f.Has("compare")) o->policies = SplitList(f.Get("compare"));
  GD_RETURN_IF_ERROR(FlagNumber(f, "load", &s.trace.load));
  GD_RETURN_IF_ERROR(FlagCount(f, "seed", &s.sim.seed, 0));
  s.policy.seed = s.sim.seed;
  GD_RETURN_IF_ERROR(FlagCount(f, "max-jobs", &s.trace.max_jobs, 0));
  s.trace.skip_bad_rows = f.Has("skip-bad-rows");
  o->json_path = f.Get("json", o->json_path);
  o->plot = f.Has("plot");
  o->plot_prefix = f.Get("plot-prefix", o->plot_prefix);
  return FlagCount(f, "threads", &o->threads, 1);
}

// The cost model of the simulated cluster.
Status ApplyModelFlags(const Flags& f, sched::SimConfig* c) {
  GD_RETURN_IF_ERROR(FlagNumber(f, "spread-factor", &c->spread_factor));
  GD_RETURN_IF_ERROR(FlagNumber(f, "slice", &c->slice_seconds, 0, /*or_equal=*/false));
  GD_RETURN_IF_ERROR(FlagNumber(f, "switch-cost", &c->switch_seconds));
  GD_RETURN_IF_ERROR(FlagNumber(f, "preempt-cost", &c->preempt_seconds));
  if (f.Has("park-cost")) {
    double park = 0;
    GD_RETURN_IF_ERROR(FlagNumber(f, "park-cost", &park));
    c->park_seconds = park;
  }
  GD_RETURN_IF_ERROR(FlagNumber(f, "migrate-fixed", &c->migrate_fixed_seconds));
  GD_RETURN_IF_ERROR(FlagNumber(f, "state-gb", &c->state_gb_per_gpu));
  c->check_invariants = f.Has("check");
  return FlagNumber(f, "net-gbps", &c->migrate_gb_per_second, 0, /*or_equal=*/false);
}

// A default input under the data directory; a clear error when there is none.
StatusOr<std::string> DataFile(const std::string& data_dir, const std::string& flag,
                               const std::string& relative) {
  const std::string hint = "pass --data-dir DIR or set " + std::string(kDataDirEnv) +
                           " to the trace data (philly/, alibaba/, colocation/), or give " + flag +
                           " PATH";
  if (data_dir.empty())
    return InvalidArgument("no data directory for the default " + flag + ": " + hint);
  const std::string path = data_dir + "/" + relative;
  if (!std::filesystem::exists(path)) return NotFound(path + " does not exist: " + hint);
  return path;
}

// Fills the inputs the command line left out from the data directory
// (--data-dir, else $GANDIVA_DATA_DIR).
Status ResolveDataFiles(const Flags& f, SimOptions* o) {
  const char* env = std::getenv(kDataDirEnv);
  const std::string dir = f.Get("data-dir", env ? env : "");
  sched::SimSetup& s = o->setup;
  if (s.trace_path.empty()) {
    GD_ASSIGN_OR_RETURN(s.trace_path, DataFile(dir, "--trace", "philly/philly_jobs.csv"));
  }
  if (s.machines_path.empty() && (s.cluster == "philly" || s.cluster == "pai")) {
    GD_ASSIGN_OR_RETURN(s.machines_path,
                        DataFile(dir, "--machines",
                                 s.cluster == "pai" ? "alibaba/pai_machine_spec.csv"
                                                    : "philly/cluster_machine_list.csv"));
  }
  if (o->colocation.empty()) {
    GD_ASSIGN_OR_RETURN(o->colocation, DataFile(dir, "--colocation",
                                                "colocation/gavel_simulation_throughputs.json"));
  }
  if (o->colocation != "none") s.colocation_path = o->colocation;
  return Status::Ok();
}

Status ParseSimArgs(const Args& args, SimOptions* o) {
  Flags f = SimFlags();
  GD_RETURN_IF_ERROR(f.Parse(args));
  if (!f.positionals().empty())
    return InvalidArgument("unexpected argument '" + f.positionals()[0] +
                           "' (see gandiva sim --help)");
  GD_RETURN_IF_ERROR(ApplyInputFlags(f, o));
  GD_RETURN_IF_ERROR(ApplyModelFlags(f, &o->setup.sim));
  GD_RETURN_IF_ERROR(sched::ApplyPolicyFlags(f, &o->setup.policy));
  if (o->policies.empty()) return InvalidArgument("no policy given");
  for (const auto& p : o->policies) {
    auto made = sched::MakePolicy(p, o->setup.policy);
    if (!made.ok()) return made.status();
  }
  return ResolveDataFiles(f, o);
}

// Runs every policy on `loaded`, `threads` at a time; in the order given.
StatusOr<std::vector<sched::Report>> RunPolicies(const sched::LoadedSim& loaded,
                                                 const SimOptions& o) {
  const std::vector<std::string>& policies = o.policies;
  // Runs are independent and deterministic, so they may run side by side.
  std::vector<StatusOr<sched::Report>> results(policies.size(),
                                               Status(StatusCode::kInternal, "not run"));
  std::mutex mu;
  size_t next = 0;
  auto worker = [&] {
    while (true) {
      size_t k;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= policies.size()) return;
        k = next++;
      }
      results[k] = sched::RunPolicy(loaded, policies[k], o.setup.sim, o.setup.policy);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::min<int>(o.threads, policies.size()); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  std::vector<sched::Report> reports;
  for (size_t k = 0; k < policies.size(); ++k) {
    if (!results[k].ok())
      return Status(results[k].status().code(),
                    policies[k] + ": " + results[k].status().ToString());
    reports.push_back(std::move(results[k]).value());
    std::fprintf(stderr, "  %-14s simulated in %.2f s (%lld events)\n", policies[k].c_str(),
                 reports.back().sim_seconds, static_cast<long long>(reports.back().events));
  }
  return reports;
}

// The JSON report (a file, stdout or nothing) and the PNG plots.
Status WriteOutputs(const std::vector<sched::Report>& reports, const sched::LoadedSim& loaded,
                    const SimOptions& o) {
  const sched::SimSetup& s = o.setup;
  std::string trace_name = s.trace_path.substr(s.trace_path.find_last_of('/') + 1);
  if (s.trace.load != 1) trace_name += " at load x" + std::to_string(s.trace.load).substr(0, 4);
  std::string json = sched::ReportsToJson(reports, trace_name, loaded.cluster_name);
  GD_RETURN_IF_ERROR(WriteJsonReport(json, o.json_path));
  if (!o.plot) return Status::Ok();
  std::string src = o.json_path;
  if (o.json_path == "-" || o.json_path == "none") {
    src = o.plot_prefix + "report.json";
    std::ofstream out(src);
    out << json;
  }
  if (Status s = sched::WritePlots(src, o.plot_prefix); !s.ok())
    return Status(s.code(), s.ToString());  // the code's name says what failed
  std::fprintf(stderr, "wrote %sjct_cdf.png and %sutilisation.png\n", o.plot_prefix.c_str(),
               o.plot_prefix.c_str());
  return Status::Ok();
}

}  // namespace

int SimFail(const std::string& msg) {
  std::fprintf(stderr, "gandiva sim: %s\n", msg.c_str());
  return 2;
}

int SimCommand(const Args& args) {
  // Placement without time (the fragmentation experiment) is its own mode.
  if (IsPlacementExperiment(args)) return SimPlacementCommand(args);
  if (IsPackPrediction(args)) return SimPackCommand(args);
  if (IsFailureExperiment(args)) return SimFailuresCommand(args);
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::fputs(kSimUsage, stdout);
    std::fputs(sched::kPolicyFlagsUsage, stdout);
    return 0;
  }
  SimOptions o;
  if (Status s = ParseSimArgs(args, &o); !s.ok()) return SimFail(s.message());
  auto loaded = sched::LoadSim(o.setup);
  if (!loaded.ok()) return SimFail(loaded.status().ToString());
  std::fprintf(
      stderr, "trace %s: %zu jobs (%s format%s), cluster %s\n", o.setup.trace_path.c_str(),
      loaded->jobs.size(), loaded->trace.format.c_str(),
      loaded->trace.skipped_rows
          ? (", " + std::to_string(loaded->trace.skipped_rows) + " bad rows skipped").c_str()
          : "",
      loaded->cluster_name.c_str());
  auto reports = RunPolicies(*loaded, o);
  if (!reports.ok()) return SimFail(reports.status().message());
  std::fputs(sched::FormatTable(*reports).c_str(), stdout);
  if (Status s = WriteOutputs(*reports, *loaded, o); !s.ok()) return SimFail(s.message());
  return 0;
}

}  // namespace gandiva::cli
