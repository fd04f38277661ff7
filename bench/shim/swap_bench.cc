// Swap bandwidth against the copy floor measured in the same run: swap-out and
// swap-in of N MiB of VMM-backed allocations, for each host mode (staged ring,
// pinned image, synchronous), against pinned and pageable copies of the same bytes.
// Runs on the real driver (libcuda.so.1) or, with --standin, on the CPU stand-in
// (a test double: there every figure is a CPU memcpy figure, not a GPU one).
// Prints a table; writes JSON (--json PATH, default bench_swap.json).
// Usage: swap_bench [--standin] [--mib N] [--rounds R] [--json PATH]
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gandiva/common/clock.h"
#include "interpose/driver.h"
#include "memory/memory_tracker.h"
#include "memory/swap.h"

namespace {

using gandiva::MonotonicNowNs;
using gandiva::shim::HookId;
using gandiva::shim::Real;

void Die(const char* what, int rc = 0) {
  std::fprintf(stderr, "swap_bench: %s (%d)\n", what, rc);
  std::exit(1);
}

template <typename T>
T Fn(const char* name) {
  void* p = gandiva::shim::RealDlsym(gandiva::shim::DriverHandle(), name);
  if (!p) Die(name);
  return reinterpret_cast<T>(p);
}

double Seconds(uint64_t ns) { return ns / 1e9; }

// Word w of allocation i: differs between chunks, so a chunk copied to the wrong
// place is seen.
uint32_t Pattern(size_t i, size_t w) {
  return static_cast<uint32_t>(i * 0x9E3779B1u + w * 2654435761u);
}

struct Row {
  std::string mode;
  double out_cold_s = 0, out_s = 1e30, in_s = 1e30;
  double host_alloc_s = 0;  // of the cold swap-out: making the host image
};

}  // namespace

int main(int argc, char** argv) {
  bool standin = false;
  size_t mib = 0;
  int rounds = 3;
  std::string json = "bench_swap.json";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--standin")
      standin = true;
    else if (a == "--mib" && i + 1 < argc)
      mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--rounds" && i + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc)
      json = argv[++i];
    else
      Die("usage: swap_bench [--standin] [--mib N] [--rounds R] [--json PATH]");
  }
#ifdef GD_STANDIN_LIB
  if (standin) setenv("GANDIVA_SHIM_LIBCUDA", GD_STANDIN_LIB, 1);
#endif
  if (mib == 0) mib = standin ? 256 : 1024;
  setenv("GANDIVA_LOG", "error", 0);
  if (!gandiva::shim::LoadDriver()) Die("cannot load the driver");
  auto init = Fn<PFN_cuInit_v2000>("cuInit");
  auto retain = Fn<PFN_cuDevicePrimaryCtxRetain_v7000>("cuDevicePrimaryCtxRetain");
  auto set_ctx = Fn<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent");
  auto host_alloc = Fn<PFN_cuMemHostAlloc_v2020>("cuMemHostAlloc");
  auto free_host = Fn<PFN_cuMemFreeHost_v2000>("cuMemFreeHost");
  auto stream_create = Fn<PFN_cuStreamCreate_v2000>("cuStreamCreate");
  auto name = Fn<PFN_cuDeviceGetName_v2000>("cuDeviceGetName");
  CUcontext ctx;
  if (CUresult r = init(0); r) Die("cuInit", r);
  if (CUresult r = retain(&ctx, 0); r) Die("cuDevicePrimaryCtxRetain", r);
  set_ctx(ctx);
  char device[128] = "?";
  name(device, sizeof(device), 0);
  if (standin) std::snprintf(device, sizeof(device), "stand-in (CPU test double)");

  // The job's memory: allocations of up to 256 MiB, patterned.
  const size_t total = mib << 20, each = std::min<size_t>(total, 256ull << 20);
  std::vector<CUdeviceptr> ptrs;
  std::vector<size_t> sizes;
  for (size_t left = total; left > 0;) {
    const size_t n = std::min(each, left);
    CUdeviceptr p;
    if (CUresult r = gandiva::shim::MemoryTracker::Get().Alloc(&p, n); r) Die("alloc", r);
    std::vector<uint32_t> pattern(n / 4);
    for (size_t w = 0; w < pattern.size(); ++w) pattern[w] = Pattern(ptrs.size(), w);
    if (CUresult r = Real<HookId::cuMemcpyHtoD_v2>::Get()(p, pattern.data(), n); r) Die("fill", r);
    ptrs.push_back(p);
    sizes.push_back(n);
    left -= n;
  }

  // The floor: pinned and pageable copies of the same bytes, same driver, same run.
  CUstream stream;
  stream_create(&stream, CU_STREAM_NON_BLOCKING);
  void* pinned = nullptr;
  uint64_t t0 = MonotonicNowNs();
  if (CUresult r = host_alloc(&pinned, total, 0); r) Die("cuMemHostAlloc of the whole image", r);
  const double pin_s = Seconds(MonotonicNowNs() - t0);
  std::memset(pinned, 0, total);
  auto dtoh_async = Real<HookId::cuMemcpyDtoHAsync_v2>::Get();
  auto htod_async = Real<HookId::cuMemcpyHtoDAsync_v2>::Get();
  auto sync = Real<HookId::cuStreamSynchronize>::Get();
  auto dtoh = Real<HookId::cuMemcpyDtoH_v2>::Get();
  auto htod = Real<HookId::cuMemcpyHtoD_v2>::Get();
  double pinned_d2h = 1e30, pinned_h2d = 1e30, pageable_d2h = 1e30, pageable_h2d = 1e30;
  for (int r = 0; r < rounds; ++r) {
    size_t off = 0;
    t0 = MonotonicNowNs();
    for (size_t i = 0; i < ptrs.size(); off += sizes[i], ++i)
      dtoh_async(static_cast<char*>(pinned) + off, ptrs[i], sizes[i], stream);
    sync(stream);
    pinned_d2h = std::min(pinned_d2h, Seconds(MonotonicNowNs() - t0));
    off = 0;
    t0 = MonotonicNowNs();
    for (size_t i = 0; i < ptrs.size(); off += sizes[i], ++i)
      htod_async(ptrs[i], static_cast<char*>(pinned) + off, sizes[i], stream);
    sync(stream);
    pinned_h2d = std::min(pinned_h2d, Seconds(MonotonicNowNs() - t0));
  }
  free_host(pinned);
  {
    char* pageable = static_cast<char*>(
        mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    std::memset(pageable, 0, total);  // warm: no first-touch faults in the figure
    for (int r = 0; r < rounds; ++r) {
      size_t off = 0;
      t0 = MonotonicNowNs();
      for (size_t i = 0; i < ptrs.size(); off += sizes[i], ++i)
        dtoh(pageable + off, ptrs[i], sizes[i]);
      pageable_d2h = std::min(pageable_d2h, Seconds(MonotonicNowNs() - t0));
      off = 0;
      t0 = MonotonicNowNs();
      for (size_t i = 0; i < ptrs.size(); off += sizes[i], ++i)
        htod(ptrs[i], pageable + off, sizes[i]);
      pageable_h2d = std::min(pageable_h2d, Seconds(MonotonicNowNs() - t0));
    }
    munmap(pageable, total);
  }

  // Swap, per host mode: the first swap-out makes the host image (cold); then the
  // best of `rounds` cycles with the image kept (GANDIVA_SHIM_SWAP_KEEP_HOST=1).
  setenv("GANDIVA_SHIM_SWAP_VERIFY", "sample", 0);  // the default, unless set
  std::vector<Row> rows;
  for (const char* mode : {"staged", "pinned", "sync"}) {
    setenv("GANDIVA_SHIM_SWAP_HOST", mode, 1);
    Row row;
    row.mode = mode;
    for (int r = 0; r <= rounds; ++r) {
      const auto out = gandiva::shim::SwapOutAll();
      const auto in = gandiva::shim::SwapInAll();
      if (out.status || in.status || out.bytes != total || in.bytes != total)
        Die("swap failed", out.status ? out.status : in.status);
      if (r == 0) {
        row.out_cold_s = Seconds(out.ns);
        row.host_alloc_s = Seconds(out.host_alloc_ns);
      } else {
        row.out_s = std::min(row.out_s, Seconds(out.ns));
      }
      row.in_s = std::min(row.in_s, Seconds(in.ns));
    }
    // Give the images back before the next mode (they are kept across cycles).
    gandiva::shim::MemoryTracker::Get().WithTable([](auto& table) {
      for (auto& [p, a] : table) gandiva::shim::ReleaseHostImage(&a);
      return 0;
    });
    rows.push_back(row);
  }
  // Every byte is still what it was.
  for (size_t i = 0; i < ptrs.size(); ++i) {
    std::vector<uint32_t> back(sizes[i] / 4);
    dtoh(back.data(), ptrs[i], sizes[i]);
    for (size_t w = 0; w < back.size(); ++w)
      if (back[w] != Pattern(i, w)) Die("contents changed across swaps");
  }

  const double gb = total / 1e9;
  const double ideal_out = pinned_d2h, ideal_in = pinned_h2d;  // bytes / pinned rate
  std::printf(
      "device: %s; %zu MiB in %zu allocations; chunk %zu KiB x %d pinned buffers, %d threads\n",
      device, mib, ptrs.size(), gandiva::shim::CurrentSwapConfig().chunk_bytes >> 10,
      gandiva::shim::CurrentSwapConfig().ring, gandiva::shim::CurrentSwapConfig().threads);
  std::printf("%-34s %10s %10s %10s\n", "copy floor", "s", "GB/s", "");
  std::printf("%-34s %10.4f %10.2f\n", "pinned D2H (cuMemcpyDtoHAsync)", pinned_d2h,
              gb / pinned_d2h);
  std::printf("%-34s %10.4f %10.2f\n", "pinned H2D (cuMemcpyHtoDAsync)", pinned_h2d,
              gb / pinned_h2d);
  std::printf("%-34s %10.4f %10.2f\n", "pageable D2H (cuMemcpyDtoH)", pageable_d2h,
              gb / pageable_d2h);
  std::printf("%-34s %10.4f %10.2f\n", "pageable H2D (cuMemcpyHtoD)", pageable_h2d,
              gb / pageable_h2d);
  std::printf("%-34s %10.4f %10.2f\n", "pinning the whole image", pin_s, gb / pin_s);
  std::printf("%-10s %10s %10s %10s %10s %10s %10s %8s\n", "swap", "out cold s", "host s", "out s",
              "out x", "in s", "in x", "goal");
  for (const Row& r : rows) {
    const double ox = r.out_s / ideal_out, ix = r.in_s / ideal_in;
    std::printf("%-10s %10.4f %10.4f %10.4f %10.2f %10.4f %10.2f %8s\n", r.mode.c_str(),
                r.out_cold_s, r.host_alloc_s, r.out_s, ox, r.in_s, ix,
                ox <= 1.5 && ix <= 1.5 ? "met" : "missed");
  }
  std::printf("x: time / (bytes / pinned rate of the same direction); goal: both <= 1.5%s\n",
              standin ? " (stand-in: CPU memcpy figures, not a GPU's)" : "");

  if (FILE* f = std::fopen(json.c_str(), "w")) {
    std::fprintf(f,
                 "{\n  \"device\": \"%s\",\n  \"standin\": %s,\n  \"bytes\": %zu,\n"
                 "  \"pinned_d2h_s\": %.6f,\n  \"pinned_h2d_s\": %.6f,\n"
                 "  \"pageable_d2h_s\": %.6f,\n  \"pageable_h2d_s\": %.6f,\n  \"pin_s\": %.6f,\n"
                 "  \"modes\": [",
                 device, standin ? "true" : "false", total, pinned_d2h, pinned_h2d, pageable_d2h,
                 pageable_h2d, pin_s);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(f,
                   "%s\n    {\"mode\": \"%s\", \"out_cold_s\": %.6f, \"host_alloc_s\": %.6f, "
                   "\"out_s\": %.6f, \"in_s\": %.6f, \"out_x\": %.3f, \"in_x\": %.3f}",
                   i ? "," : "", r.mode.c_str(), r.out_cold_s, r.host_alloc_s, r.out_s, r.in_s,
                   r.out_s / ideal_out, r.in_s / ideal_in);
    }
    std::fprintf(f, "\n  ]\n}\n");
    std::fclose(f);
  }
  return 0;
}
