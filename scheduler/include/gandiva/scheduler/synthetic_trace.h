// A seeded synthetic job trace of any size: what the simulator's scale bench
// (bench_sim --synthetic) and the decision-digest test replay when the real
// traces are too small or absent. Philly-like shape: mostly single-GPU jobs,
// log-uniform durations with a long tail, Poisson arrivals at a rate that
// offers a chosen share of the cluster's GPU-seconds.
#ifndef GANDIVA_SCHED_SYNTHETIC_TRACE_H_
#define GANDIVA_SCHED_SYNTHETIC_TRACE_H_

#include <cstdint>

#include "gandiva/scheduler/trace.h"

namespace gandiva::sched {

struct SyntheticTraceOptions {
  int64_t jobs = 1000;
  uint64_t seed = 1;
  // GPUs of the cluster it is meant for, and the share of their GPU-seconds
  // the jobs ask for on average (1 = the cluster is exactly full on average;
  // above it a queue builds up for the whole trace).
  int cluster_gpus = 16000;
  double offered_load = 0.9;
  // Largest gang; sizes are powers of two up to it.
  int max_gpus = 32;
};

// The same options give the same trace: the draws come from a fixed integer
// generator through std::log and std::exp only (no std:: distributions, whose
// output differs between standard libraries). Jobs carry no type: BuildJobs
// assigns one from the simulation's seed.
Trace SyntheticTrace(const SyntheticTraceOptions& options);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_SYNTHETIC_TRACE_H_
