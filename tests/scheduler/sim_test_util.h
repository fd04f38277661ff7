// Helpers for the scheduler tests: hand-made jobs, a tiny co-location table,
// and a one-call replay.
#ifndef GANDIVA_TESTS_SCHED_SIM_TEST_UTIL_H_
#define GANDIVA_TESTS_SCHED_SIM_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gandiva/scheduler/policy.h"
#include "gandiva/scheduler/sim_cluster.h"

namespace gandiva::sched::testing {

struct J {
  double submit;
  double duration;
  int gpus = 1;
  int type = -1;
};

inline std::vector<SimJobSpec> Jobs(const std::vector<J>& js) {
  std::vector<SimJobSpec> out;
  for (size_t i = 0; i < js.size(); ++i) {
    SimJobSpec s;
    s.info.id = static_cast<JobId>(i);
    s.info.submit_time = js[i].submit;
    s.info.num_gpus = js[i].gpus;
    s.info.job_type = js[i].type;
    s.duration = js[i].duration;
    out.push_back(s);
  }
  return out;
}

// Exact costs make hand-computed answers exact.
inline SimConfig ExactConfig() {
  SimConfig c;
  c.preempt_seconds = 0;
  c.switch_seconds = 0;
  c.check_invariants = true;
  return c;
}

inline SimResult Replay(const Topology& topo, const PerfModel& perf,
                        const std::vector<SimJobSpec>& jobs, const std::string& policy,
                        SimConfig config = ExactConfig(), PolicyOptions opt = {},
                        PolicyStats* stats = nullptr) {
  auto p = MakePolicy(policy, opt);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  SimCluster cluster(topo, &perf, jobs, config);
  auto r = cluster.Run(**p);
  EXPECT_TRUE(r.ok()) << policy << ": " << r.status().ToString();
  if (stats) *stats = (*p)->stats();
  return r.ok() ? std::move(r).value() : SimResult{};
}

// A co-location table with model types "A" and "B" (1 GPU): alone 10 steps/s
// on every class; A+A packed run at 8 each (a pack pays), A+B at 3 each
// (packing slows both down), B+B do not fit in memory (0).
// One file per process: CTest runs each test in its own process, two at a
// time, and a shared path let one test read the file while another rewrote it.
inline std::string WriteTinyTable() {
  std::string path =
      ::testing::TempDir() + "/tiny_colocation." + std::to_string(getpid()) + ".json";
  std::ofstream out(path);
  std::string cls = R"JSON({
    "('A', 1)": {"null": 10.0, "('A', 1)": [8.0, 8.0], "('B', 1)": [3.0, 3.0]},
    "('B', 1)": {"null": 10.0, "('A', 1)": [3.0, 3.0], "('B', 1)": [0.0, 0.0]}
  })JSON";
  out << "{\"k80\": " << cls << ", \"p100\": " << cls << ", \"v100\": " << cls << "}";
  return path;
}

inline std::string DataDir() { return GANDIVA_SHARED_DATA_DIR; }
inline bool HaveData(const std::string& rel) { return std::ifstream(DataDir() + "/" + rel).good(); }

}  // namespace gandiva::sched::testing

#endif  // GANDIVA_TESTS_SCHED_SIM_TEST_UTIL_H_
