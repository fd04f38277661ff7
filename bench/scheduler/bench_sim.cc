// Simulator throughput: replays the full Philly trace under each policy and
// prints simulated jobs/s and events/s, and the decision digest (equal
// digests: the same decisions), as a table and JSON; wall and CPU time, best
// of --repeat each. Not a test: no asserts.
//   bench_sim [--data DIR] [--load X] [--repeat N] [--json PATH]
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gandiva/scheduler/sim_digest.h"
#include "gandiva/scheduler/sim_runner.h"

using namespace gandiva::sched;

namespace {
// CPU seconds this thread has used: steadier than wall time on a shared machine.
double ThreadCpuSeconds() {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
}  // namespace

int main(int argc, char** argv) {
  std::string data = GANDIVA_SHARED_DATA_DIR, json_path = "bench_sim.json";
  double load = 1;
  int repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--data")
      data = argv[i + 1];
    else if (a == "--load")
      load = std::atof(argv[i + 1]);
    else if (a == "--repeat")
      repeat = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--json")
      json_path = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: bench_sim [--data DIR] [--load X] [--repeat N] [--json PATH]\n");
      return 2;
    }
  }
  SimSetup s;
  s.trace_path = data + "/philly/philly_jobs.csv";
  s.machines_path = data + "/philly/cluster_machine_list.csv";
  s.colocation_path = data + "/colocation/gavel_simulation_throughputs.json";
  s.trace.load = load;
  auto loaded = LoadSim(s);
  if (!loaded.ok()) {
    std::fprintf(stderr, "bench_sim: %s\n", loaded.status().ToString().c_str());
    return 1;
  }
  std::printf("Philly trace: %zu jobs at load x%g on %s; best of %d runs\n\n", loaded->jobs.size(),
              load, loaded->cluster_name.c_str(), repeat);
  std::printf("%-14s %9s %9s %12s %12s %10s  %s\n", "policy", "wall s", "cpu s", "jobs/s",
              "events/s", "events", "digest");
  std::string json = "{\n  \"trace\": \"philly_jobs.csv\",\n  \"load\": " + std::to_string(load) +
                     ",\n  \"jobs\": " + std::to_string(loaded->jobs.size()) + ",\n  \"runs\": [\n";
  bool first = true;
  for (const auto& name : PolicyNames()) {
    double best = 1e100, best_cpu = 1e100;
    int64_t events = 0;
    std::string digest;
    for (int k = 0; k < repeat; ++k) {
      double cpu0 = ThreadCpuSeconds();
      auto r = RunPolicy(*loaded, name, s.sim, s.policy);
      best_cpu = std::min(best_cpu, ThreadCpuSeconds() - cpu0);
      if (!r.ok()) {
        std::fprintf(stderr, "bench_sim: %s: %s\n", name.c_str(), r.status().ToString().c_str());
        return 1;
      }
      best = std::min(best, r->sim_seconds);
      events = r->events;
      digest = DigestHex(DecisionDigest(r->result));
    }
    double jobs_s = loaded->jobs.size() / best, events_s = events / best;
    std::printf("%-14s %9.3f %9.3f %12.0f %12.0f %10lld  %s\n", name.c_str(), best, best_cpu,
                jobs_s, events_s, static_cast<long long>(events), digest.c_str());
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s    {\"policy\": \"%s\", \"wall_s\": %.4f, \"cpu_s\": %.4f, "
                  "\"jobs_per_s\": %.0f, \"events_per_s\": %.0f, "
                  "\"events\": %lld, \"digest\": \"%s\"}",
                  first ? "" : ",\n", name.c_str(), best, best_cpu, jobs_s, events_s,
                  static_cast<long long>(events), digest.c_str());
    json += buf;
    first = false;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  std::printf("\npeak RSS %.1f MiB\n", ru.ru_maxrss / 1024.0);
  json += "\n  ],\n  \"peak_rss_mib\": " + std::to_string(ru.ru_maxrss / 1024.0) + "\n}\n";
  std::ofstream(json_path) << json;
  std::printf("wrote %s\n", json_path.c_str());
  return 0;
}
