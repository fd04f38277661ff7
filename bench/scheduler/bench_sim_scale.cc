// Simulator at scale: a seeded synthetic trace (default 1,000,000 jobs on
// 2,000 machines of 8 GPUs) replayed under each policy. Each replay runs in a
// child process forked after the trace is built, so that its peak RSS is its
// own; prints wall time (median of --repeat), jobs/s, events, peak RSS and the
// decision digest (equal digests: the same decisions), with ratios against
// fifo's time, and writes JSON. Not a test: no asserts.
//   bench_sim_scale [--jobs N] [--cluster MxG] [--load X] [--seed S]
//                   [--policies a,b,...] [--repeat N] [--data DIR] [--json PATH]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gandiva/scheduler/sim_digest.h"
#include "gandiva/scheduler/sim_runner.h"
#include "gandiva/scheduler/synthetic_trace.h"

using namespace gandiva::sched;

namespace {

struct Run {
  bool ok = false;
  double wall = 0;  // seconds, RunPolicy's
  long long events = 0;
  double avg_jct = 0;
  unsigned long long digest = 0;
  double cpu = 0;           // seconds of CPU the child used (user + system)
  double peak_rss_mib = 0;  // the child's, the shared trace included
};

// Replays in a child; what it found comes back through a pipe.
Run RunInChild(const LoadedSim& loaded, const std::string& policy, const SimSetup& s) {
  Run out;
  int fds[2];
  if (pipe(fds) != 0) return out;
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    auto r = RunPolicy(loaded, policy, s.sim, s.policy);
    char buf[256];
    int n = r.ok() ? std::snprintf(buf, sizeof buf, "%.6f %lld %.6f %llu\n", r->sim_seconds,
                                   static_cast<long long>(r->events), r->avg_jct,
                                   static_cast<unsigned long long>(DecisionDigest(r->result)))
                   : std::snprintf(buf, sizeof buf, "error %s\n", r.status().ToString().c_str());
    ssize_t w = write(fds[1], buf, static_cast<size_t>(std::min<int>(n, sizeof buf - 1)));
    _exit(w > 0 && r.ok() ? 0 : 1);
  }
  close(fds[1]);
  std::string text;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, n);
  close(fds[0]);
  int status = 0;
  struct rusage ru {};
  if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return out;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench_sim_scale: %s: %s", policy.c_str(), text.c_str());
    return out;
  }
  std::istringstream in(text);
  in >> out.wall >> out.events >> out.avg_jct >> out.digest;
  out.peak_rss_mib = ru.ru_maxrss / 1024.0;
  out.cpu =
      ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  out.ok = static_cast<bool>(in);
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty()      ? 0
         : v.size() % 2 ? v[v.size() / 2]
                        : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double RssMib() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1048576.0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = GANDIVA_SHARED_DATA_DIR, json_path = "bench_sim_scale.json",
              cluster = "2000x8", policies_arg;
  SyntheticTraceOptions t;
  t.jobs = 1000000;
  int repeat = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--jobs")
      t.jobs = std::atoll(v.c_str());
    else if (a == "--cluster")
      cluster = v;
    else if (a == "--load")
      t.offered_load = std::atof(v.c_str());
    else if (a == "--seed")
      t.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--policies")
      policies_arg = v;
    else if (a == "--repeat")
      repeat = std::max(1, std::atoi(v.c_str()));
    else if (a == "--data")
      data = v;
    else if (a == "--json")
      json_path = v;
    else {
      std::fprintf(stderr,
                   "usage: bench_sim_scale [--jobs N] [--cluster MxG] [--load X] [--seed S]\n"
                   "         [--policies a,b,...] [--repeat N] [--data DIR] [--json PATH]\n");
      return 2;
    }
  }
  std::vector<std::string> policies;
  if (policies_arg.empty()) {
    policies = PolicyNames();
  } else {
    std::istringstream in(policies_arg);
    for (std::string p; std::getline(in, p, ',');) policies.push_back(p);
  }
  SimSetup s;
  s.cluster = "uniform:" + cluster;
  s.sim.seed = t.seed;
  // The measured co-location table when the shared data has it (packing
  // decisions need it), else the neutral model.
  std::string table = data + "/colocation/gavel_simulation_throughputs.json";
  bool have_table = std::ifstream(table).good();
  int machines = 0, per = 0;
  if (std::sscanf(cluster.c_str(), "%dx%d", &machines, &per) != 2 || machines < 1 || per < 1) {
    std::fprintf(stderr, "bench_sim_scale: --cluster needs MxG, e.g. 2000x8\n");
    return 2;
  }
  t.cluster_gpus = machines * per;
  t.max_gpus = std::min(t.max_gpus, t.cluster_gpus);

  LoadedSim loaded;
  {
    loaded.topology = Topology::Uniform(machines, per);
    if (have_table) {
      auto perf = PerfModel::Load(table);
      if (!perf.ok()) {
        std::fprintf(stderr, "bench_sim_scale: %s\n", perf.status().ToString().c_str());
        return 1;
      }
      loaded.perf = std::move(perf).value();
    }
    loaded.trace = SyntheticTrace(t);
    auto jobs = BuildJobs(loaded.trace, loaded.topology, loaded.perf, s.sim.seed);
    if (!jobs.ok()) {
      std::fprintf(stderr, "bench_sim_scale: %s\n", jobs.status().ToString().c_str());
      return 1;
    }
    loaded.jobs = std::move(jobs).value();
    loaded.trace = Trace{};  // the replays need only the jobs built from it
    loaded.cluster_name = s.cluster;
  }
  double loaded_rss = RssMib();
  std::printf(
      "synthetic trace: %lld jobs, seed %llu, offered load %.2f, on %s (%d GPUs), %s; "
      "each replay in its own process, median of %d; jobs in memory: %.0f MiB RSS\n\n",
      static_cast<long long>(t.jobs), static_cast<unsigned long long>(t.seed), t.offered_load,
      s.cluster.c_str(), t.cluster_gpus,
      have_table ? "co-location table" : "neutral model (no co-location table)", repeat,
      loaded_rss);
  std::printf("%-14s %9s %9s %9s %8s %11s %10s %9s %9s %10s  %s\n", "policy", "wall s", "min s",
              "cpu s", "vsFIFO", "jobs/s", "events", "peak MiB", "own MiB", "avg JCT h", "digest");
  std::string json = "{\n  \"trace\": \"synthetic\",\n  \"jobs\": " + std::to_string(t.jobs) +
                     ",\n  \"seed\": " + std::to_string(t.seed) +
                     ",\n  \"offered_load\": " + std::to_string(t.offered_load) +
                     ",\n  \"cluster\": \"" + s.cluster +
                     "\",\n  \"colocation_table\": " + (have_table ? "true" : "false") +
                     ",\n  \"repeat\": " + std::to_string(repeat) +
                     ",\n  \"trace_rss_mib\": " + std::to_string(loaded_rss) + ",\n  \"runs\": [\n";
  double fifo_wall = 0;
  bool first = true, failed = false;
  for (const auto& name : policies) {
    std::vector<double> walls, cpus;
    Run last;
    double peak = 0;
    bool same = true;
    for (int k = 0; k < repeat; ++k) {
      Run r = RunInChild(loaded, name, s);
      if (!r.ok) {
        failed = true;
        break;
      }
      if (k > 0 && r.digest != last.digest) same = false;
      walls.push_back(r.wall);
      cpus.push_back(r.cpu);
      peak = std::max(peak, r.peak_rss_mib);
      last = r;
    }
    if (walls.empty()) continue;
    double wall = Median(walls), best = *std::min_element(walls.begin(), walls.end()),
           cpu = Median(cpus);
    if (name == "fifo") fifo_wall = wall;
    std::string digest = DigestHex(last.digest) + (same ? "" : " (differs between repeats!)");
    char ratio[32] = "-";
    if (fifo_wall > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", wall / fifo_wall);
    std::printf("%-14s %9.3f %9.3f %9.3f %8s %11.0f %10lld %9.0f %9.0f %10.2f  %s\n", name.c_str(),
                wall, best, cpu, ratio, t.jobs / wall, last.events, peak, peak - loaded_rss,
                last.avg_jct / 3600, digest.c_str());
    std::fflush(stdout);
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s    {\"policy\": \"%s\", \"wall_s\": %.4f, \"min_wall_s\": %.4f, "
                  "\"cpu_s\": %.4f, \"wall_s_all\": [",
                  first ? "" : ",\n", name.c_str(), wall, best, cpu);
    json += buf;
    for (size_t k = 0; k < walls.size(); ++k) json += (k ? ", " : "") + std::to_string(walls[k]);
    std::snprintf(buf, sizeof buf,
                  "], \"jobs_per_s\": %.0f, \"events\": %lld, \"peak_rss_mib\": %.1f, "
                  "\"own_rss_mib\": %.1f, \"avg_jct_s\": %.3f, \"digest\": \"%s\", "
                  "\"digest_stable\": %s}",
                  t.jobs / wall, last.events, peak, peak - loaded_rss, last.avg_jct,
                  DigestHex(last.digest).c_str(), same ? "true" : "false");
    json += buf;
    first = false;
  }
  json += "\n  ]\n}\n";
  std::ofstream(json_path) << json;
  std::printf(
      "\n(wall s: the replay's own time, median and min; cpu s: the replaying process's\n"
      " CPU time, median, less sensitive to a shared machine's load; vsFIFO: median wall\n"
      " time against fifo's; peak MiB: the replaying process, the jobs it inherited\n"
      " included; own MiB: peak less the parent's RSS at the fork; digest: every\n"
      " decision, equal = same decisions)\n"
      "wrote %s\n",
      json_path.c_str());
  return failed ? 1 : 0;
}
