// The driver-call recorder's cost (GANDIVA_SHIM_TRACE), measured by shim_bench: ns per
// hooked launch with recording off and on (this binary's copy of the shim core, on the
// stand-in driver), and the trace a stand-in job writes per minute.
#ifndef GANDIVA_BENCH_SHIM_TRACE_COST_H_
#define GANDIVA_BENCH_SHIM_TRACE_COST_H_

#include <cstdint>
#include <string>

struct TraceCost {
  double direct_ns = 0;  // the stand-in's cuLaunchKernel, no shim
  double off_ns = 0;     // through the shim's hook, recording off
  double on_ns = 0;      // through the shim's hook, recording on
  uint64_t recorded = 0, dropped = 0;
  // A stand-in job (gd_shim_direct_app, ~1 ms iterations, 2 launching threads) recorded.
  double job_s = 0;
  uint64_t job_bytes = 0, job_records = 0;
  double job_bytes_per_min = 0, job_calls_per_s = 0;
};

// `work`: a folder for the traces (removed after); `direct_app`, `standin_dir`,
// `shim_lib`, `cubin`: the stand-in job and what it runs with.
TraceCost MeasureTraceCost(const std::string& work, const std::string& direct_app,
                           const std::string& standin_dir, const std::string& shim_lib,
                           const std::string& cubin);

#endif  // GANDIVA_BENCH_SHIM_TRACE_COST_H_
