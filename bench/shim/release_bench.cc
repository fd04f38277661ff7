// The two ways a parked job gives its device memory back, side by side in one
// process on the same memory: the shim's swap (gandivad --release swap: VMM-backed
// allocations copied to host through the staged ring and unmapped) and the driver's
// checkpoint API (--release driver: cuCheckpointProcessLock + ...Checkpoint, then
// ...Restore + ...Unlock on this process). For each: release and bring-back time
// (best of R cycles, after one cold cycle), the device memory still in use while
// released, and the ratio driver / swap. Every byte is checked after the cycles.
// Runs on the real driver (a GPU machine; the GPU suite's `release` row) or, with
// --standin, on the CPU stand-in (a test double: its figures are CPU memcpy figures).
// Prints a table; writes JSON (--json PATH, default bench_release.json).
// Usage: release_bench [--standin] [--mib N] [--rounds R] [--json PATH]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gandiva/common/clock.h"
#include "interpose/driver.h"
#include "memory/driver_release.h"
#include "memory/memory_tracker.h"
#include "memory/swap.h"

namespace {

using gandiva::MonotonicNowNs;
using gandiva::shim::HookId;
using gandiva::shim::Real;

void Die(const char* what, int rc = 0) {
  std::fprintf(stderr, "release_bench: %s (%d)\n", what, rc);
  std::exit(1);
}

template <typename T>
T Fn(const char* name) {
  void* p = gandiva::shim::RealDlsym(gandiva::shim::DriverHandle(), name);
  if (!p) Die(name);
  return reinterpret_cast<T>(p);
}

uint32_t Pattern(size_t i, size_t w) {
  return static_cast<uint32_t>(i * 0x9E3779B1u + w * 2654435761u);
}

struct Options {
  bool standin = false;
  size_t mib = 0;
  int rounds = 3;
  std::string json = "bench_release.json";
};

struct Row {
  std::string mechanism;
  double out_cold_s = 0, out_s = 1e30, in_s = 1e30;
  size_t used_before = 0, used_released = 0;  // device memory in use (cuMemGetInfo)
};

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--standin")
      o.standin = true;
    else if (a == "--mib" && i + 1 < argc)
      o.mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--rounds" && i + 1 < argc)
      o.rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc)
      o.json = argv[++i];
    else
      Die("usage: release_bench [--standin] [--mib N] [--rounds R] [--json PATH]");
  }
  if (o.mib == 0) o.mib = o.standin ? 256 : 1024;
  return o;
}

std::string OpenDevice(bool standin) {
#ifdef GD_STANDIN_LIB
  if (standin) setenv("GANDIVA_SHIM_LIBCUDA", GD_STANDIN_LIB, 1);
#endif
  setenv("GANDIVA_LOG", "error", 0);
  if (!gandiva::shim::LoadDriver()) Die("cannot load the driver");
  CUcontext ctx;
  if (CUresult r = Fn<PFN_cuInit_v2000>("cuInit")(0); r) Die("cuInit", r);
  if (CUresult r = Fn<PFN_cuDevicePrimaryCtxRetain_v7000>("cuDevicePrimaryCtxRetain")(&ctx, 0); r)
    Die("cuDevicePrimaryCtxRetain", r);
  Fn<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent")(ctx);
  char device[128] = "?";
  Fn<PFN_cuDeviceGetName_v2000>("cuDeviceGetName")(device, sizeof(device), 0);
  return standin ? "stand-in (CPU test double)" : device;
}

// Device memory in use (the whole device's, the context included), or kUnknown where
// the driver does not say: cuMemGetInfo fails while the process is checkpointed
// (CUDA_ERROR_OPERATING_SYSTEM on driver 580).
constexpr size_t kUnknown = ~size_t{0};
size_t DeviceUsed() {
  size_t free_bytes = 0, total = 0;
  static auto info = Fn<PFN_cuMemGetInfo_v3020>("cuMemGetInfo_v2");
  if (info(&free_bytes, &total) != CUDA_SUCCESS) return kUnknown;
  return total - free_bytes;
}

double Mib(size_t bytes) { return bytes == kUnknown ? -1 : bytes / 1048576.0; }

struct Memory {
  std::vector<CUdeviceptr> ptrs;
  std::vector<size_t> sizes;
  size_t total = 0;
};

// N MiB in VMM-backed allocations of up to 256 MiB, and one of 512 KiB below the VMM
// threshold (plain cuMemAlloc: what swap leaves on the device, as a framework's small
// allocations and the driver's own would be).
Memory AllocatePatterned(size_t mib) {
  Memory m;
  m.total = (mib << 20) + (512 << 10);
  for (size_t left = m.total; left > 0;) {
    const size_t n =
        left == (512u << 10) ? left : std::min<size_t>(left - (512 << 10), 256ull << 20);
    CUdeviceptr p;
    if (CUresult r = gandiva::shim::MemoryTracker::Get().Alloc(&p, n); r) Die("alloc", r);
    std::vector<uint32_t> pattern(n / 4);
    for (size_t w = 0; w < pattern.size(); ++w) pattern[w] = Pattern(m.ptrs.size(), w);
    if (CUresult r = Real<HookId::cuMemcpyHtoD_v2>::Get()(p, pattern.data(), n); r) Die("fill", r);
    m.ptrs.push_back(p);
    m.sizes.push_back(n);
    left -= n;
  }
  return m;
}

void VerifyContents(const Memory& m) {
  auto dtoh = Real<HookId::cuMemcpyDtoH_v2>::Get();
  for (size_t i = 0; i < m.ptrs.size(); ++i) {
    std::vector<uint32_t> back(m.sizes[i] / 4);
    if (CUresult r = dtoh(back.data(), m.ptrs[i], m.sizes[i]); r) Die("read back", r);
    for (size_t w = 0; w < back.size(); ++w)
      if (back[w] != Pattern(i, w)) Die("contents changed across a release");
  }
}

// One cold cycle, then the best of `rounds`; `out` and `in` return the CUresult.
template <typename Out, typename In>
Row Measure(const char* mechanism, int rounds, Out out, In in) {
  Row row;
  row.mechanism = mechanism;
  row.used_before = DeviceUsed();
  for (int r = 0; r <= rounds; ++r) {
    uint64_t t0 = MonotonicNowNs();
    if (CUresult s = out(); s) Die(mechanism, s);
    const double out_s = (MonotonicNowNs() - t0) / 1e9;
    row.used_released = DeviceUsed();
    t0 = MonotonicNowNs();
    if (CUresult s = in(); s) Die(mechanism, s);
    const double in_s = (MonotonicNowNs() - t0) / 1e9;
    if (r == 0) {
      row.out_cold_s = out_s;
    } else {
      row.out_s = std::min(row.out_s, out_s);
    }
    row.in_s = std::min(row.in_s, in_s);
  }
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  const std::string device = OpenDevice(o.standin);
  const Memory m = AllocatePatterned(o.mib);
  setenv("GANDIVA_SHIM_SWAP_VERIFY", "sample", 0);
  std::vector<Row> rows;
  rows.push_back(Measure(
      "swap", o.rounds, [] { return gandiva::shim::SwapOutAll().status; },
      [] { return gandiva::shim::SwapInAll().status; }));
  gandiva::shim::MemoryTracker::Get().WithTable([](auto& table) {
    for (auto& [p, a] : table) gandiva::shim::ReleaseHostImage(&a);  // kept across cycles
    return 0;
  });
  VerifyContents(m);
  if (!gandiva::shim::RealDlsym(gandiva::shim::DriverHandle(), "cuCheckpointProcessLock")) {
    std::printf("the driver has no checkpoint API (cuCheckpointProcessLock: driver >= 570)\n");
    return 77;
  }
  rows.push_back(Measure(
      "driver", o.rounds, [] { return gandiva::shim::DriverReleaseOut().status; },
      [] { return gandiva::shim::DriverReleaseIn().status; }));
  VerifyContents(m);

  const Row& swap = rows[0];
  const double gb = m.total / 1e9;
  std::printf("device: %s; %zu MiB in %zu allocations; best of %d cycles after a cold one\n",
              device.c_str(), o.mib, m.ptrs.size(), o.rounds);
  std::printf("%-8s %11s %9s %9s %9s %9s %9s %14s %14s\n", "release", "out cold s", "out s",
              "out GB/s", "in s", "in GB/s", "x swap", "used MiB", "released MiB");
  for (const Row& r : rows)
    std::printf("%-8s %11.4f %9.4f %9.2f %9.4f %9.2f %9.2f %14.1f %14.1f\n", r.mechanism.c_str(),
                r.out_cold_s, r.out_s, gb / r.out_s, r.in_s, gb / r.in_s,
                (r.out_s + r.in_s) / (swap.out_s + swap.in_s), Mib(r.used_before),
                Mib(r.used_released));
  std::printf(
      "used: the device's memory in use (cuMemGetInfo), -1: the driver does not say "
      "while released\n");
  std::printf("x swap: (out + in) / swap's (out + in), same process, same bytes%s\n",
              o.standin ? "; stand-in: CPU memcpy figures, not a GPU's" : "");

  if (FILE* out = std::fopen(o.json.c_str(), "w")) {
    std::fprintf(out,
                 "{\n  \"device\": \"%s\",\n  \"standin\": %s,\n  \"bytes\": %zu,\n"
                 "  \"rounds\": %d,\n  \"mechanisms\": [",
                 device.c_str(), o.standin ? "true" : "false", m.total, o.rounds);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(out,
                   "%s\n    {\"release\": \"%s\", \"out_cold_s\": %.6f, \"out_s\": %.6f, "
                   "\"in_s\": %.6f, \"x_swap\": %.3f, \"device_used_bytes\": %zu, "
                   "\"device_used_released_mib\": %.1f}",
                   i ? "," : "", r.mechanism.c_str(), r.out_cold_s, r.out_s, r.in_s,
                   (r.out_s + r.in_s) / (swap.out_s + swap.in_s), r.used_before,
                   Mib(r.used_released));
    }
    std::fprintf(out, "\n  ]\n}\n");
    std::fclose(out);
  }
  return 0;
}
