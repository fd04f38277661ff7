// Shim benchmark on the stand-in driver: (1) added cost of a hooked call against a
// direct call to the same stand-in function, through the exported symbol and through
// cuGetProcAddress; (2) the launch gate alone; (3) swap-out/in throughput against a
// plain memcpy of the same bytes. Prints a table; writes JSON to argv[1]
// (default bench_shim.json).
#include <dlfcn.h>
#include <sys/mman.h>

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

}  // namespace

int main(int argc, char** argv) {
  const char* json_path = argc > 1 ? argv[1] : "bench_shim.json";
  setenv("GD_STANDIN_KERNEL_NS", "0", 1);             // a launch costs only its bookkeeping
  setenv("GANDIVA_SHIM_LIBCUDA", GD_STANDIN_LIB, 1);  // the shims load the stand-in
  setenv("GANDIVA_LOG", "error", 1);

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
  const double direct_ns = BestNsPerCall(launch_with(direct_launch), kCalls);
  const double export_ns = BestNsPerCall(launch_with(shim_launch), kCalls);
  const double direct_proc_ns = BestNsPerCall(launch_with(direct_proc_launch), kCalls);
  const double proc_ns = BestNsPerCall(launch_with(shim_proc_launch), kCalls);
  const double direct_ptsz_ns = BestNsPerCall(launch_with(direct_ptsz), kCalls);
  const double ptsz_ns = BestNsPerCall(launch_with(shim_ptsz), kCalls);

  // The gate alone, on this binary's copy of the shim core, attached (unmanaged).
  if (!gandiva::shim::LoadDriver()) Die("core: cannot load the stand-in");
  const double gate_ns = BestNsPerCall([] { gandiva::shim::Gate(); }, 50'000'000);

  // Swap: 4 x 64 MiB VMM-backed allocations, out and back in, against memcpy.
  using gandiva::shim::HookId;
  using gandiva::shim::Real;
  const size_t kEach = 64ull << 20, kCount = 4, kTotal = kEach * kCount;
  std::vector<CUdeviceptr> ptrs(kCount);
  for (auto& ptr : ptrs) {
    if (gandiva::shim::MemoryTracker::Get().Alloc(&ptr, kEach) != CUDA_SUCCESS) Die("alloc failed");
    Real<HookId::cuMemsetD8_v2>::Get()(ptr, 0x5a, kEach);
  }
  setenv("GANDIVA_SHIM_SWAP_VERIFY", "sample", 1);
  double out_best = 1e30, in_best = 1e30, in_full_best = 1e30;
  for (int r = 0; r < 3; ++r) {
    auto out = gandiva::shim::SwapOutAll();
    auto back = gandiva::shim::SwapInAll();
    if (out.status || back.status || out.bytes != kTotal) Die("swap failed");
    out_best = std::min(out_best, out.ns / 1e9);
    in_best = std::min(in_best, back.ns / 1e9);
  }
  setenv("GANDIVA_SHIM_SWAP_VERIFY", "full", 1);
  for (int r = 0; r < 2; ++r) {
    gandiva::shim::SwapOutAll();
    auto back = gandiva::shim::SwapInAll();
    in_full_best = std::min(in_full_best, back.ns / 1e9);
  }
  double memcpy_fresh = 1e30, memcpy_warm = 1e30;
  std::vector<char> src(kTotal, 1);
  std::vector<char> warm(kTotal, 0);
  for (int r = 0; r < 3; ++r) {
    void* dst = mmap(nullptr, kTotal, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t t0 = MonotonicNowNs();
    std::memcpy(dst, src.data(), kTotal);
    memcpy_fresh = std::min(memcpy_fresh, (MonotonicNowNs() - t0) / 1e9);
    munmap(dst, kTotal);
    t0 = MonotonicNowNs();
    std::memcpy(warm.data(), src.data(), kTotal);
    memcpy_warm = std::min(memcpy_warm, (MonotonicNowNs() - t0) / 1e9);
  }
  const double gib = kTotal / double(1ull << 30);

  std::printf("%-44s %10s %10s %10s\n", "hooked call (cuLaunchKernel, stand-in)", "direct ns",
              "shim ns", "added ns");
  std::printf("%-44s %10.2f %10.2f %10.2f\n", "exported symbol (direct link)", direct_ns, export_ns,
              export_ns - direct_ns);
  std::printf("%-44s %10.2f %10.2f %10.2f\n", "cuGetProcAddress (cudart's path)", direct_proc_ns,
              proc_ns, proc_ns - direct_proc_ns);
  std::printf("%-44s %10.2f %10.2f %10.2f\n", "cuGetProcAddress, per-thread stream (_ptsz)",
              direct_ptsz_ns, ptsz_ns, ptsz_ns - direct_ptsz_ns);
  std::printf("%-44s %10.2f\n", "launch gate alone (ns)", gate_ns);
  std::printf("%-44s %10s %10s %10s\n", "swap 256 MiB (4 x 64 MiB)", "s", "GiB/s", "vs memcpy");
  std::printf("%-44s %10.4f %10.2f %10.2f\n", "swap-out", out_best, gib / out_best,
              memcpy_fresh / out_best);
  std::printf("%-44s %10.4f %10.2f %10.2f\n", "swap-in (sample verify)", in_best, gib / in_best,
              memcpy_fresh / in_best);
  std::printf("%-44s %10.4f %10.2f %10.2f\n", "swap-in (full verify)", in_full_best,
              gib / in_full_best, memcpy_fresh / in_full_best);
  std::printf("%-44s %10.4f %10.2f\n", "memcpy, fresh destination", memcpy_fresh,
              gib / memcpy_fresh);
  std::printf("%-44s %10.4f %10.2f\n", "memcpy, warm destination", memcpy_warm, gib / memcpy_warm);

  FILE* f = std::fopen(json_path, "w");
  if (f) {
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
        "  \"swap_out_vs_memcpy\": %.3f,\n  \"swap_in_vs_memcpy\": %.3f\n}\n",
        direct_ns, export_ns, direct_proc_ns, proc_ns, direct_ptsz_ns, ptsz_ns,
        export_ns - direct_ns, proc_ns - direct_proc_ns, gate_ns, kTotal, out_best, in_best,
        in_full_best, memcpy_fresh, memcpy_warm, memcpy_fresh / out_best, memcpy_fresh / in_best);
    std::fclose(f);
  }
  return 0;
}
