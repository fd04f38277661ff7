// See trace_cost.h. The recording-on figure times batches of 1024 launches and lets the
// writer drain between batches (untimed), as a real job's calls leave it time: what is
// timed is the launch path's own cost, never a ring that is full (records dropped,
// which would be cheaper). The writer runs on its own thread, off the launch path.
#include "trace_cost.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "gandiva/common/clock.h"
#include "interpose/hook_table.h"
#include "interpose/policies.h"
#include "trace/trace_reader.h"
#include "trace/trace_recorder.h"

namespace {

using gandiva::MonotonicNowNs;
using gandiva::shim::HookId;
namespace trace = gandiva::shim::trace;

constexpr int kBatch = 1024, kBatches = 256, kRounds = 5;

template <typename F>
double BestBatchedNs(F launch, bool drain) {
  double best = 1e30;
  for (int r = 0; r < kRounds; ++r) {
    uint64_t timed = 0;
    for (int b = 0; b < kBatches; ++b) {
      const uint64_t t0 = MonotonicNowNs();
      for (int i = 0; i < kBatch; ++i) launch();
      timed += MonotonicNowNs() - t0;
      if (trace::Ring* ring = drain ? trace::ThreadRing() : nullptr) {
        while (ring->tail.load() != ring->head.load()) usleep(100);
      }
    }
    best = std::min(best, static_cast<double>(timed) / (kBatch * kBatches));
  }
  return best;
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

}  // namespace

TraceCost MeasureTraceCost(const std::string& work, const std::string& direct_app,
                           const std::string& standin_dir, const std::string& shim_lib,
                           const std::string& cubin) {
  TraceCost c;
  // The stand-in as this binary's core loaded it (the context is current already).
  void* h = gandiva::shim::DriverHandle();
  auto load = reinterpret_cast<PFN_cuModuleLoadData_v2000>(dlsym(h, "cuModuleLoadData"));
  auto get_fn = reinterpret_cast<PFN_cuModuleGetFunction_v2000>(dlsym(h, "cuModuleGetFunction"));
  std::ifstream in(cubin, std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CUmodule module;
  CUfunction fn = nullptr;
  if (!load || !get_fn || load(&module, image.data()) || get_fn(&fn, module, "gd_scale")) {
    std::fprintf(stderr, "shim_bench: trace cost: stand-in set-up failed\n");
    return c;
  }
  auto direct = gandiva::shim::Real<HookId::cuLaunchKernel>::Get();
  auto hooked = &gandiva::shim::Wrapper<HookId::cuLaunchKernel, gandiva::shim::policy::Launch>::Fn;
  c.direct_ns =
      BestBatchedNs([&] { direct(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr); }, false);
  c.off_ns =
      BestBatchedNs([&] { hooked(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr); }, false);
  int n = 0;
  const gandiva::shim::HookEntry* hooks = gandiva::shim::HookEntries(&n);
  std::vector<const char*> names;
  for (int i = 0; i < n; ++i) names.push_back(hooks[i].name);
  trace::Options o;
  o.path = work + "/launches.gdtrace";
  o.max_bytes = 1ull << 34;
  o.hook_names = names.data();
  o.hooks = n;
  o.command = "shim_bench";
  if (trace::Start(o)) {
    c.on_ns =
        BestBatchedNs([&] { hooked(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr); }, true);
    trace::Stop();
    const trace::Stats s = trace::CurrentStats();
    c.recorded = s.records_written;
    c.dropped = s.records_dropped;
  }
  unlink(o.path.c_str());

  // A stand-in job recorded from start to end: the trace it leaves per minute.
  const std::string job_trace = work + "/job.gdtrace";
  const uint64_t t0 = MonotonicNowNs();
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("LD_PRELOAD", shim_lib.c_str(), 1);
    setenv("LD_LIBRARY_PATH", standin_dir.c_str(), 1);
    setenv("GANDIVA_SHIM_TRACE", job_trace.c_str(), 1);
    setenv("GD_STANDIN_KERNEL_NS", "2000", 1);
    unsetenv("GANDIVA_SHIM_LIBCUDA");
    execl(direct_app.c_str(), direct_app.c_str(), "--image", cubin.c_str(), "--iterations", "2000",
          "--threads", "2", "--sleep-us", "1000", "--graph", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  c.job_s = (MonotonicNowNs() - t0) / 1e9;
  auto read = trace::ReadTrace(job_trace);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && read.ok()) {
    c.job_bytes = FileSize(job_trace);
    c.job_records = read.value().records.size();
    c.job_bytes_per_min = c.job_bytes / c.job_s * 60;
    c.job_calls_per_s = c.job_records / c.job_s;
  } else {
    std::fprintf(stderr, "shim_bench: the recorded stand-in job failed\n");
  }
  unlink(job_trace.c_str());
  return c;
}
