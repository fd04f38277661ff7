// `gandiva sim`: replay a job trace on a simulated cluster under one or more
// scheduling policies; print a table, write JSON and optionally PNG plots.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "commands.h"
#include "gandiva/scheduler/sim_runner.h"

namespace gandiva::cli {
namespace {

using sched::Locality;

constexpr const char* kUsage = R"(usage: gandiva sim [options]
Replays a job trace on a simulated GPU cluster (docs/simulator.md).

  --trace PATH          trace CSV (default ../shared/data/philly/philly_jobs.csv)
  --format F            auto|philly|tiresias|generic (default auto, from the header)
  --policy NAME         fifo|srtf|las|gandiva|reserve-pack|sjf-predicted|philly (default gandiva)
  --compare A,B,...     run several policies side by side, with ratios against fifo
  --cluster C           philly|pai|uniform:MxG (default philly)
  --machines PATH       machine list (default ../shared/data/philly/cluster_machine_list.csv,
                        or ../shared/data/alibaba/pai_machine_spec.csv for --cluster pai)
  --colocation PATH     co-location table, or 'none' for a neutral model
                        (default ../shared/data/colocation/gavel_simulation_throughputs.json)
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
  --preempt-cost S      restart stall after a preemption, seconds (default 10)
  --migrate-fixed S     fixed migration cost, seconds (default 2)
  --state-gb G          checkpoint size per GPU (default 4)
  --net-gbps B          migration bandwidth, GB/s (default 1.25)
 policies:
  --locality L          best-effort|strict|relaxed (default best-effort; philly: relaxed)
  --locality-delay S    relaxed: wait this long for a consolidated placement (default 300)
  --las-thresholds A,B  Tiresias queue thresholds in GPU-seconds (default 3600,36000)
  --las-starve F        Tiresias starvation guard factor (default 0 = off)
  --interval S          Gandiva introspection interval (default 60)
  --max-share N         jobs time-sliced on one GPU set (default 2)
  --no-grow, --no-migrate  disable Gandiva grow-shrink / migration
  --reserve-min-gpus N  reserve-pack: jobs this big go to high-end GPUs (default 4)
  --check               verify allocation invariants at every step (slow)
)";

bool ParseDouble(const std::string& s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return !s.empty() && end && *end == '\0';
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "gandiva sim: %s\n", msg.c_str());
  return 2;
}

}  // namespace

int SimCommand(const Args& args) {
  sched::SimSetup setup;
  setup.trace_path = "../shared/data/philly/philly_jobs.csv";
  std::string colocation = "../shared/data/colocation/gavel_simulation_throughputs.json";
  std::vector<std::string> policies = {"gandiva"};
  std::string json_path = "gandiva_sim.json", plot_prefix = "gandiva_sim_";
  bool plot = false;
  int threads = 2;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    auto number = [&](double* out) {
      std::string v;
      return value(&v) && ParseDouble(v, out);
    };
    std::string v;
    double d = 0;
    bool ok = true;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--trace")
      ok = value(&setup.trace_path);
    else if (a == "--format") {
      ok = value(&v);
      if (v == "auto")
        setup.trace.format = sched::TraceFormat::kAuto;
      else if (v == "philly")
        setup.trace.format = sched::TraceFormat::kPhilly;
      else if (v == "tiresias")
        setup.trace.format = sched::TraceFormat::kTiresias;
      else if (v == "generic")
        setup.trace.format = sched::TraceFormat::kGeneric;
      else
        return Fail("unknown --format '" + v + "'");
    } else if (a == "--policy") {
      ok = value(&v);
      policies = {v};
    } else if (a == "--compare") {
      ok = value(&v);
      policies = SplitList(v);
    } else if (a == "--cluster")
      ok = value(&setup.cluster);
    else if (a == "--machines")
      ok = value(&setup.machines_path);
    else if (a == "--colocation")
      ok = value(&colocation);
    else if (a == "--load")
      ok = number(&setup.trace.load);
    else if (a == "--seed") {
      ok = number(&d) && d >= 0;
      setup.sim.seed = setup.policy.seed = static_cast<uint64_t>(d);
    } else if (a == "--max-jobs") {
      ok = number(&d) && d >= 0;
      setup.trace.max_jobs = static_cast<int>(d);
    } else if (a == "--skip-bad-rows")
      setup.trace.skip_bad_rows = true;
    else if (a == "--json")
      ok = value(&json_path);
    else if (a == "--plot")
      plot = true;
    else if (a == "--plot-prefix")
      ok = value(&plot_prefix);
    else if (a == "--threads") {
      ok = number(&d) && d >= 1;
      threads = static_cast<int>(d);
    } else if (a == "--spread-factor")
      ok = number(&setup.sim.spread_factor);
    else if (a == "--slice")
      ok = number(&setup.sim.slice_seconds) && setup.sim.slice_seconds > 0;
    else if (a == "--switch-cost")
      ok = number(&setup.sim.switch_seconds);
    else if (a == "--preempt-cost")
      ok = number(&setup.sim.preempt_seconds);
    else if (a == "--migrate-fixed")
      ok = number(&setup.sim.migrate_fixed_seconds);
    else if (a == "--state-gb")
      ok = number(&setup.sim.state_gb_per_gpu);
    else if (a == "--net-gbps")
      ok = number(&setup.sim.migrate_gb_per_second) && setup.sim.migrate_gb_per_second > 0;
    else if (a == "--locality") {
      ok = value(&v);
      if (v == "best-effort")
        setup.policy.locality = Locality::kBestEffort;
      else if (v == "strict")
        setup.policy.locality = Locality::kStrict;
      else if (v == "relaxed")
        setup.policy.locality = Locality::kRelaxed;
      else
        return Fail("unknown --locality '" + v + "'");
    } else if (a == "--locality-delay")
      ok = number(&setup.policy.locality_delay);
    else if (a == "--las-thresholds") {
      ok = value(&v);
      setup.policy.las_thresholds.clear();
      for (const auto& t : SplitList(v)) {
        if (!ParseDouble(t, &d) || d <= 0) return Fail("bad --las-thresholds '" + v + "'");
        setup.policy.las_thresholds.push_back(d);
      }
    } else if (a == "--las-starve")
      ok = number(&setup.policy.las_starve_factor);
    else if (a == "--interval")
      ok = number(&setup.policy.gandiva_interval) && setup.policy.gandiva_interval > 0;
    else if (a == "--max-share") {
      ok = number(&d) && d >= 1;
      setup.policy.gandiva_max_share = static_cast<int>(d);
    } else if (a == "--no-grow")
      setup.policy.gandiva_grow = false;
    else if (a == "--no-migrate")
      setup.policy.gandiva_migrate = false;
    else if (a == "--reserve-min-gpus") {
      ok = number(&d) && d >= 1;
      setup.policy.reserve_min_gpus = static_cast<int>(d);
    } else if (a == "--check")
      setup.sim.check_invariants = true;
    else
      return Fail("unknown option '" + a + "' (see gandiva sim --help)");
    if (!ok) return Fail("option " + a + " needs a valid value");
  }
  if (policies.empty()) return Fail("no policy given");
  for (const auto& p : policies) {
    auto made = sched::MakePolicy(p, setup.policy);
    if (!made.ok()) return Fail(made.status().message());
  }
  if (setup.machines_path.empty())
    setup.machines_path = setup.cluster == "pai" ? "../shared/data/alibaba/pai_machine_spec.csv"
                                                 : "../shared/data/philly/cluster_machine_list.csv";
  if (colocation != "none") setup.colocation_path = colocation;

  auto loaded = sched::LoadSim(setup);
  if (!loaded.ok()) return Fail(loaded.status().ToString());
  std::fprintf(
      stderr, "trace %s: %zu jobs (%s format%s), cluster %s\n", setup.trace_path.c_str(),
      loaded->jobs.size(), loaded->trace.format.c_str(),
      loaded->trace.skipped_rows
          ? (", " + std::to_string(loaded->trace.skipped_rows) + " bad rows skipped").c_str()
          : "",
      loaded->cluster_name.c_str());

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
      results[k] = sched::RunPolicy(*loaded, policies[k], setup.sim, setup.policy);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::min<int>(threads, policies.size()); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  std::vector<sched::Report> reports;
  for (size_t k = 0; k < policies.size(); ++k) {
    if (!results[k].ok()) return Fail(policies[k] + ": " + results[k].status().ToString());
    reports.push_back(std::move(results[k]).value());
    std::fprintf(stderr, "  %-14s simulated in %.2f s (%lld events)\n", policies[k].c_str(),
                 reports.back().sim_seconds, static_cast<long long>(reports.back().events));
  }
  std::fputs(sched::FormatTable(reports).c_str(), stdout);

  std::string trace_name = setup.trace_path.substr(setup.trace_path.find_last_of('/') + 1);
  if (setup.trace.load != 1)
    trace_name += " at load x" + std::to_string(setup.trace.load).substr(0, 4);
  std::string json = sched::ReportsToJson(reports, trace_name, loaded->cluster_name);
  if (json_path == "-") {
    std::fputs(json.c_str(), stdout);
  } else if (json_path != "none") {
    std::ofstream out(json_path);
    out << json << "\n";
    if (!out) return Fail("cannot write " + json_path);
    std::fprintf(stderr, "wrote %s\n", json_path.c_str());
  }
  if (plot) {
    std::string src = json_path;
    if (json_path == "-" || json_path == "none") {
      src = plot_prefix + "report.json";
      std::ofstream out(src);
      out << json;
    }
    Status s = sched::WritePlots(src, plot_prefix);
    if (!s.ok()) return Fail(s.ToString());
    std::fprintf(stderr, "wrote %sjct_cdf.png and %sutilisation.png\n", plot_prefix.c_str(),
                 plot_prefix.c_str());
  }
  return 0;
}

}  // namespace gandiva::cli
