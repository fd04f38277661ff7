// Shim benchmark on the stand-in driver: (1) added cost of a hooked call against a
// direct call to the same stand-in function, through the exported symbol and through
// cuGetProcAddress; (2) the launch gate alone; (3) swap-out/in throughput against a
// plain memcpy of the same bytes; (4) the driver-call recorder (GANDIVA_SHIM_TRACE):
// ns per hooked launch recording off and on, and the trace a stand-in job writes per
// minute (trace_cost.h). Prints a table; writes JSON to argv[1] (default bench_shim.json).
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "boundary/job_link.h"
#include "gandiva/common/clock.h"
#include "interpose/driver.h"
#include "memory/memory_tracker.h"
#include "memory/swap.h"
#include "trace/trace_format.h"
#include "trace_cost.h"

namespace {

using gandiva::MonotonicNowNs;

template <typename F>
double BestNsPerCall(F f, int calls, int rounds = 7) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const uint64_t t0 = MonotonicNowNs();
    for (int i = 0; i < calls; ++i) f();
    best = std::min(best, static_cast<double>(MonotonicNowNs() - t0) / calls);
  }
  return best;
}

void Die(const char* what) {
  std::fprintf(stderr, "shim_bench: %s (%s)\n", what, dlerror());
  std::exit(1);
}

// Nanoseconds per cuLaunchKernel call, straight into the stand-in and through
// the shim, on each path a program reaches the driver by.
struct HookTimes {
  double direct_ns, export_ns;     // exported symbol (direct link)
  double direct_proc_ns, proc_ns;  // cuGetProcAddress (cudart's path)
  double direct_ptsz_ns, ptsz_ns;  // cuGetProcAddress, per-thread stream
};

HookTimes MeasureHooks() {
  void* standin = dlopen(GD_STANDIN_LIB, RTLD_NOW | RTLD_LOCAL);
  if (!standin) Die("cannot load the stand-in driver");
  void* shim = dlopen(GD_SHIM_LIB, RTLD_NOW | RTLD_LOCAL);
  if (!shim) Die("cannot load the shim");

  auto direct_getproc =
      reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(standin, "cuGetProcAddress_v2"));
  auto init = reinterpret_cast<PFN_cuInit_v2000>(dlsym(standin, "cuInit"));
  auto retain = reinterpret_cast<PFN_cuDevicePrimaryCtxRetain_v7000>(
      dlsym(standin, "cuDevicePrimaryCtxRetain"));
  auto set_ctx = reinterpret_cast<PFN_cuCtxSetCurrent_v4000>(dlsym(standin, "cuCtxSetCurrent"));
  auto load = reinterpret_cast<PFN_cuModuleLoadData_v2000>(dlsym(standin, "cuModuleLoadData"));
  auto get_fn =
      reinterpret_cast<PFN_cuModuleGetFunction_v2000>(dlsym(standin, "cuModuleGetFunction"));
  auto direct_launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(dlsym(standin, "cuLaunchKernel"));
  auto shim_launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(dlsym(shim, "cuLaunchKernel"));
  auto shim_getproc =
      reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(shim, "cuGetProcAddress_v2"));
  if (!direct_launch || !shim_launch || !shim_getproc || !direct_getproc) Die("missing symbols");

  CUcontext ctx;
  CUmodule module;
  CUfunction fn;
  std::ifstream in(GD_CUBIN, std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (init(0) || retain(&ctx, 0) || set_ctx(ctx) || load(&module, image.data()) ||
      get_fn(&fn, module, "gd_scale"))
    Die("stand-in set-up failed");

  void* p = nullptr;
  direct_getproc("cuLaunchKernel", &p, 12000, 0, nullptr);
  auto direct_proc_launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(p);
  shim_getproc("cuLaunchKernel", &p, 12000, 0, nullptr);
  auto shim_proc_launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(p);
  direct_getproc("cuLaunchKernel", &p, 12000, 2, nullptr);
  auto direct_ptsz = reinterpret_cast<PFN_cuLaunchKernel_v7000_ptsz>(p);
  shim_getproc("cuLaunchKernel", &p, 12000, 2, nullptr);
  auto shim_ptsz = reinterpret_cast<PFN_cuLaunchKernel_v7000_ptsz>(p);
  if (shim_proc_launch == direct_proc_launch || shim_ptsz == direct_ptsz)
    Die("cuGetProcAddress was not hooked");

  const int kCalls = 2'000'000;
  auto launch_with = [&](PFN_cuLaunchKernel_v4000 f) {
    return [f, fn] { f(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr); };
  };
  shim_launch(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);  // loads the driver in the shim
  HookTimes t;
  t.direct_ns = BestNsPerCall(launch_with(direct_launch), kCalls);
  t.export_ns = BestNsPerCall(launch_with(shim_launch), kCalls);
  t.direct_proc_ns = BestNsPerCall(launch_with(direct_proc_launch), kCalls);
  t.proc_ns = BestNsPerCall(launch_with(shim_proc_launch), kCalls);
  t.direct_ptsz_ns = BestNsPerCall(launch_with(direct_ptsz), kCalls);
  t.ptsz_ns = BestNsPerCall(launch_with(shim_ptsz), kCalls);
  return t;
}

// Seconds, best of a few rounds.
struct SwapTimes {
  double out_best = 1e30, in_best = 1e30, in_full_best = 1e30;
  double memcpy_fresh = 1e30, memcpy_warm = 1e30;
};

constexpr size_t kSwapEach = 64ull << 20, kSwapCount = 4, kSwapTotal = kSwapEach * kSwapCount;

// Swap: 4 x 64 MiB VMM-backed allocations, out and back in, against memcpy.
SwapTimes MeasureSwap() {
  using gandiva::shim::HookId;
  using gandiva::shim::Real;
  std::vector<CUdeviceptr> ptrs(kSwapCount);
  for (auto& ptr : ptrs) {
    if (gandiva::shim::MemoryTracker::Get().Alloc(&ptr, kSwapEach) != CUDA_SUCCESS)
      Die("alloc failed");
    Real<HookId::cuMemsetD8_v2>::Get()(ptr, 0x5a, kSwapEach);
  }
  SwapTimes t;
  setenv("GANDIVA_SHIM_SWAP_VERIFY", "sample", 1);
  for (int r = 0; r < 3; ++r) {
    auto out = gandiva::shim::SwapOutAll();
    auto back = gandiva::shim::SwapInAll();
    if (out.status || back.status || out.bytes != kSwapTotal) Die("swap failed");
    t.out_best = std::min(t.out_best, out.ns / 1e9);
    t.in_best = std::min(t.in_best, back.ns / 1e9);
  }
  setenv("GANDIVA_SHIM_SWAP_VERIFY", "full", 1);
  for (int r = 0; r < 2; ++r) {
    gandiva::shim::SwapOutAll();
    auto back = gandiva::shim::SwapInAll();
    t.in_full_best = std::min(t.in_full_best, back.ns / 1e9);
  }
  std::vector<char> src(kSwapTotal, 1);
  std::vector<char> warm(kSwapTotal, 0);
  for (int r = 0; r < 3; ++r) {
    void* dst =
        mmap(nullptr, kSwapTotal, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t t0 = MonotonicNowNs();
    std::memcpy(dst, src.data(), kSwapTotal);
    t.memcpy_fresh = std::min(t.memcpy_fresh, (MonotonicNowNs() - t0) / 1e9);
    munmap(dst, kSwapTotal);
    t0 = MonotonicNowNs();
    std::memcpy(warm.data(), src.data(), kSwapTotal);
    t.memcpy_warm = std::min(t.memcpy_warm, (MonotonicNowNs() - t0) / 1e9);
  }
  return t;
}

void PrintTable(const HookTimes& h, double gate_ns, const SwapTimes& s) {
  const double gib = kSwapTotal / double(1ull << 30);
  std::printf("%-44s %10s %10s %10s\n", "hooked call (cuLaunchKernel, stand-in)", "direct ns",
              "shim ns", "added ns");
  std::printf("%-44s %10.2f %10.2f %10.2f\n", "exported symbol (direct link)", h.direct_ns,
              h.export_ns, h.export_ns - h.direct_ns);
  std::printf("%-44s %10.2f %10.2f %10.2f\n", "cuGetProcAddress (cudart's path)", h.direct_proc_ns,
              h.proc_ns, h.proc_ns - h.direct_proc_ns);
  std::printf("%-44s %10.2f %10.2f %10.2f\n", "cuGetProcAddress, per-thread stream (_ptsz)",
              h.direct_ptsz_ns, h.ptsz_ns, h.ptsz_ns - h.direct_ptsz_ns);
  std::printf("%-44s %10.2f\n", "launch gate alone (ns)", gate_ns);
  std::printf("%-44s %10s %10s %10s\n", "swap 256 MiB (4 x 64 MiB)", "s", "GiB/s", "vs memcpy");
  std::printf("%-44s %10.4f %10.2f %10.2f\n", "swap-out", s.out_best, gib / s.out_best,
              s.memcpy_fresh / s.out_best);
  std::printf("%-44s %10.4f %10.2f %10.2f\n", "swap-in (sample verify)", s.in_best, gib / s.in_best,
              s.memcpy_fresh / s.in_best);
  std::printf("%-44s %10.4f %10.2f %10.2f\n", "swap-in (full verify)", s.in_full_best,
              gib / s.in_full_best, s.memcpy_fresh / s.in_full_best);
  std::printf("%-44s %10.4f %10.2f\n", "memcpy, fresh destination", s.memcpy_fresh,
              gib / s.memcpy_fresh);
  std::printf("%-44s %10.4f %10.2f\n", "memcpy, warm destination", s.memcpy_warm,
              gib / s.memcpy_warm);
}

void PrintTraceCost(const TraceCost& t) {
  std::printf("%-44s %10s %10s %10s\n", "recorder (GANDIVA_SHIM_TRACE), cuLaunchKernel", "ns/call",
              "added ns", "vs off");
  std::printf("%-44s %10.2f\n", "stand-in, no shim", t.direct_ns);
  std::printf("%-44s %10.2f %10.2f\n", "shim hook, recording off", t.off_ns,
              t.off_ns - t.direct_ns);
  std::printf("%-44s %10.2f %10.2f %10.2f\n", "shim hook, recording on", t.on_ns,
              t.on_ns - t.direct_ns, t.on_ns - t.off_ns);
  std::printf("%-44s %10llu %10llu\n", "records written, dropped",
              static_cast<unsigned long long>(t.recorded),
              static_cast<unsigned long long>(t.dropped));
  std::printf("%-44s %10.1f %10.0f %10.1f\n", "stand-in job recorded: s, calls/s, MB/min", t.job_s,
              t.job_calls_per_s, t.job_bytes_per_min / 1e6);
  std::printf("%-44s %10.1f\n", "a job making 10,000 driver calls/s: MB/min",
              10000.0 * sizeof(gandiva::shim::trace::TraceRecord) * 60 / 1e6);
}

void WriteJson(const char* path, const HookTimes& h, double gate_ns, const SwapTimes& s,
               const TraceCost& t) {
  FILE* f = std::fopen(path, "w");
  if (!f) return;
  std::fprintf(
      f,
      "{\n  \"driver\": \"stand-in (test double)\",\n"
      "  \"launch_direct_ns\": %.3f,\n  \"launch_shim_export_ns\": %.3f,\n"
      "  \"launch_direct_procaddr_ns\": %.3f,\n  \"launch_shim_procaddr_ns\": %.3f,\n"
      "  \"launch_direct_ptsz_ns\": %.3f,\n  \"launch_shim_ptsz_ns\": %.3f,\n"
      "  \"added_export_ns\": %.3f,\n  \"added_procaddr_ns\": %.3f,\n  \"gate_ns\": %.3f,\n"
      "  \"swap_bytes\": %zu,\n  \"swap_out_s\": %.6f,\n  \"swap_in_sample_verify_s\": %.6f,\n"
      "  \"swap_in_full_verify_s\": %.6f,\n  \"memcpy_fresh_s\": %.6f,\n  \"memcpy_warm_s\": "
      "%.6f,\n"
      "  \"swap_out_vs_memcpy\": %.3f,\n  \"swap_in_vs_memcpy\": %.3f,\n",
      h.direct_ns, h.export_ns, h.direct_proc_ns, h.proc_ns, h.direct_ptsz_ns, h.ptsz_ns,
      h.export_ns - h.direct_ns, h.proc_ns - h.direct_proc_ns, gate_ns, kSwapTotal, s.out_best,
      s.in_best, s.in_full_best, s.memcpy_fresh, s.memcpy_warm, s.memcpy_fresh / s.out_best,
      s.memcpy_fresh / s.in_best);
  std::fprintf(f,
               "  \"trace\": {\"launch_direct_ns\": %.3f, \"launch_recording_off_ns\": %.3f, "
               "\"launch_recording_on_ns\": %.3f, \"added_by_recording_ns\": %.3f, "
               "\"records_written\": %llu, \"records_dropped\": %llu, \"job_s\": %.3f, "
               "\"job_calls_per_s\": %.1f, \"job_trace_bytes\": %llu, "
               "\"job_trace_bytes_per_minute\": %.0f, \"record_bytes\": %zu}\n}\n",
               t.direct_ns, t.off_ns, t.on_ns, t.on_ns - t.off_ns,
               static_cast<unsigned long long>(t.recorded),
               static_cast<unsigned long long>(t.dropped), t.job_s, t.job_calls_per_s,
               static_cast<unsigned long long>(t.job_bytes), t.job_bytes_per_min,
               sizeof(gandiva::shim::trace::TraceRecord));
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  const char* json_path = argc > 1 ? argv[1] : "bench_shim.json";
  setenv("GD_STANDIN_KERNEL_NS", "0", 1);             // a launch costs only its bookkeeping
  setenv("GANDIVA_SHIM_LIBCUDA", GD_STANDIN_LIB, 1);  // the shims load the stand-in
  setenv("GANDIVA_LOG", "error", 1);

  const HookTimes hooks = MeasureHooks();
  // The gate alone, on this binary's copy of the shim core, attached (unmanaged).
  if (!gandiva::shim::LoadDriver()) Die("core: cannot load the stand-in");
  const double gate_ns = BestNsPerCall([] { gandiva::shim::Gate(); }, 50'000'000);
  const SwapTimes swap = MeasureSwap();
  char work[] = "/tmp/gd_shim_bench.XXXXXX";
  const TraceCost trace_cost =
      mkdtemp(work) ? MeasureTraceCost(work, GD_DIRECT_APP, GD_STANDIN_DIR, GD_SHIM_LIB, GD_CUBIN)
                    : TraceCost{};
  rmdir(work);
  PrintTable(hooks, gate_ns, swap);
  PrintTraceCost(trace_cost);
  WriteJson(json_path, hooks, gate_ns, swap, trace_cost);
  return 0;
}
