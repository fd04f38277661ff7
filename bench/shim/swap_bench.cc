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

struct Options {
  bool standin = false;
  size_t mib = 0;
  int rounds = 3;
  std::string json = "bench_swap.json";
};

// The copy floor: pinned and pageable copies of the same bytes, same driver, same run.
struct Floor {
  double pinned_d2h = 1e30, pinned_h2d = 1e30, pageable_d2h = 1e30, pageable_h2d = 1e30;
  double pin_s = 0;  // pinning the whole image
};

// The job's memory: allocations of up to 256 MiB, patterned.
struct Memory {
  std::vector<CUdeviceptr> ptrs;
  std::vector<size_t> sizes;
  size_t total = 0;
};

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--standin")
      o.standin = true;
    else if (a == "--mib" && i + 1 < argc)
      o.mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--rounds" && i + 1 < argc)
      o.rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc)
      o.json = argv[++i];
    else
      Die("usage: swap_bench [--standin] [--mib N] [--rounds R] [--json PATH]");
  }
  if (o.mib == 0) o.mib = o.standin ? 256 : 1024;
  return o;
}

// Loads the driver (or the stand-in), makes device 0's primary context current;
// returns the device's name.
std::string OpenDevice(bool standin) {
#ifdef GD_STANDIN_LIB
  if (standin) setenv("GANDIVA_SHIM_LIBCUDA", GD_STANDIN_LIB, 1);
#endif
  setenv("GANDIVA_LOG", "error", 0);
  if (!gandiva::shim::LoadDriver()) Die("cannot load the driver");
  auto init = Fn<PFN_cuInit_v2000>("cuInit");
  auto retain = Fn<PFN_cuDevicePrimaryCtxRetain_v7000>("cuDevicePrimaryCtxRetain");
  auto set_ctx = Fn<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent");
  auto name = Fn<PFN_cuDeviceGetName_v2000>("cuDeviceGetName");
  CUcontext ctx;
  if (CUresult r = init(0); r) Die("cuInit", r);
  if (CUresult r = retain(&ctx, 0); r) Die("cuDevicePrimaryCtxRetain", r);
  set_ctx(ctx);
  char device[128] = "?";
  name(device, sizeof(device), 0);
  return standin ? "stand-in (CPU test double)" : device;
}

Memory AllocatePatterned(size_t mib) {
  Memory m;
  m.total = mib << 20;
  const size_t each = std::min<size_t>(m.total, 256ull << 20);
  for (size_t left = m.total; left > 0;) {
    const size_t n = std::min(each, left);
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

// Times `copy(host + offset, i)` over every allocation; the best of `rounds`.
template <typename Copy>
double BestOf(int rounds, const Memory& m, char* host, Copy copy) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    size_t off = 0;
    const uint64_t t0 = MonotonicNowNs();
    for (size_t i = 0; i < m.ptrs.size(); off += m.sizes[i], ++i) copy(host + off, i);
    best = std::min(best, Seconds(MonotonicNowNs() - t0));
  }
  return best;
}

Floor MeasureFloor(const Memory& m, int rounds) {
  Floor f;
  auto host_alloc = Fn<PFN_cuMemHostAlloc_v2020>("cuMemHostAlloc");
  auto free_host = Fn<PFN_cuMemFreeHost_v2000>("cuMemFreeHost");
  auto stream_create = Fn<PFN_cuStreamCreate_v2000>("cuStreamCreate");
  auto dtoh_async = Real<HookId::cuMemcpyDtoHAsync_v2>::Get();
  auto htod_async = Real<HookId::cuMemcpyHtoDAsync_v2>::Get();
  auto sync = Real<HookId::cuStreamSynchronize>::Get();
  auto dtoh = Real<HookId::cuMemcpyDtoH_v2>::Get();
  auto htod = Real<HookId::cuMemcpyHtoD_v2>::Get();
  CUstream stream;
  stream_create(&stream, CU_STREAM_NON_BLOCKING);
  void* pinned = nullptr;
  const uint64_t t0 = MonotonicNowNs();
  if (CUresult r = host_alloc(&pinned, m.total, 0); r) Die("cuMemHostAlloc of the whole image", r);
  f.pin_s = Seconds(MonotonicNowNs() - t0);
  std::memset(pinned, 0, m.total);
  char* p = static_cast<char*>(pinned);
  // An async copy is timed to its stream's sync: the last one of the round waits for all.
  f.pinned_d2h = BestOf(rounds, m, p, [&](char* h, size_t i) {
    dtoh_async(h, m.ptrs[i], m.sizes[i], stream);
    if (i + 1 == m.ptrs.size()) sync(stream);
  });
  f.pinned_h2d = BestOf(rounds, m, p, [&](char* h, size_t i) {
    htod_async(m.ptrs[i], h, m.sizes[i], stream);
    if (i + 1 == m.ptrs.size()) sync(stream);
  });
  free_host(pinned);
  char* pageable = static_cast<char*>(
      mmap(nullptr, m.total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  std::memset(pageable, 0, m.total);  // warm: no first-touch faults in the figure
  f.pageable_d2h =
      BestOf(rounds, m, pageable, [&](char* h, size_t i) { dtoh(h, m.ptrs[i], m.sizes[i]); });
  f.pageable_h2d =
      BestOf(rounds, m, pageable, [&](char* h, size_t i) { htod(m.ptrs[i], h, m.sizes[i]); });
  munmap(pageable, m.total);
  return f;
}

// Swap, per host mode: the first swap-out makes the host image (cold); then the
// best of `rounds` cycles with the image kept (GANDIVA_SHIM_SWAP_KEEP_HOST=1).
std::vector<Row> MeasureSwaps(size_t total, int rounds) {
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
  return rows;
}

// Every byte is still what it was.
void VerifyContents(const Memory& m) {
  auto dtoh = Real<HookId::cuMemcpyDtoH_v2>::Get();
  for (size_t i = 0; i < m.ptrs.size(); ++i) {
    std::vector<uint32_t> back(m.sizes[i] / 4);
    dtoh(back.data(), m.ptrs[i], m.sizes[i]);
    for (size_t w = 0; w < back.size(); ++w)
      if (back[w] != Pattern(i, w)) Die("contents changed across swaps");
  }
}

void PrintTable(const std::string& device, const Options& o, const Memory& m, const Floor& f,
                const std::vector<Row>& rows) {
  const double gb = m.total / 1e9;
  const auto config = gandiva::shim::CurrentSwapConfig();
  std::printf(
      "device: %s; %zu MiB in %zu allocations; chunk %zu KiB x %d pinned buffers, %d threads\n",
      device.c_str(), o.mib, m.ptrs.size(), config.chunk_bytes >> 10, config.ring, config.threads);
  std::printf("%-34s %10s %10s %10s\n", "copy floor", "s", "GB/s", "");
  const std::pair<const char*, double> floor[] = {{"pinned D2H (cuMemcpyDtoHAsync)", f.pinned_d2h},
                                                  {"pinned H2D (cuMemcpyHtoDAsync)", f.pinned_h2d},
                                                  {"pageable D2H (cuMemcpyDtoH)", f.pageable_d2h},
                                                  {"pageable H2D (cuMemcpyHtoD)", f.pageable_h2d},
                                                  {"pinning the whole image", f.pin_s}};
  for (const auto& [what, s] : floor) std::printf("%-34s %10.4f %10.2f\n", what, s, gb / s);
  std::printf("%-10s %10s %10s %10s %10s %10s %10s %8s\n", "swap", "out cold s", "host s", "out s",
              "out x", "in s", "in x", "goal");
  for (const Row& r : rows) {
    const double ox = r.out_s / f.pinned_d2h, ix = r.in_s / f.pinned_h2d;
    std::printf("%-10s %10.4f %10.4f %10.4f %10.2f %10.4f %10.2f %8s\n", r.mode.c_str(),
                r.out_cold_s, r.host_alloc_s, r.out_s, ox, r.in_s, ix,
                ox <= 1.5 && ix <= 1.5 ? "met" : "missed");
  }
  std::printf("x: time / (bytes / pinned rate of the same direction); goal: both <= 1.5%s\n",
              o.standin ? " (stand-in: CPU memcpy figures, not a GPU's)" : "");
}

void WriteJson(const std::string& device, const Options& o, const Memory& m, const Floor& f,
               const std::vector<Row>& rows) {
  FILE* out = std::fopen(o.json.c_str(), "w");
  if (!out) return;
  std::fprintf(out,
               "{\n  \"device\": \"%s\",\n  \"standin\": %s,\n  \"bytes\": %zu,\n"
               "  \"pinned_d2h_s\": %.6f,\n  \"pinned_h2d_s\": %.6f,\n"
               "  \"pageable_d2h_s\": %.6f,\n  \"pageable_h2d_s\": %.6f,\n  \"pin_s\": %.6f,\n"
               "  \"modes\": [",
               device.c_str(), o.standin ? "true" : "false", m.total, f.pinned_d2h, f.pinned_h2d,
               f.pageable_d2h, f.pageable_h2d, f.pin_s);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(out,
                 "%s\n    {\"mode\": \"%s\", \"out_cold_s\": %.6f, \"host_alloc_s\": %.6f, "
                 "\"out_s\": %.6f, \"in_s\": %.6f, \"out_x\": %.3f, \"in_x\": %.3f}",
                 i ? "," : "", r.mode.c_str(), r.out_cold_s, r.host_alloc_s, r.out_s, r.in_s,
                 r.out_s / f.pinned_d2h, r.in_s / f.pinned_h2d);
  }
  std::fprintf(out, "\n  ]\n}\n");
  std::fclose(out);
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseArgs(argc, argv);
  const std::string device = OpenDevice(options.standin);
  const Memory memory = AllocatePatterned(options.mib);
  const Floor floor = MeasureFloor(memory, options.rounds);
  const std::vector<Row> rows = MeasureSwaps(memory.total, options.rounds);
  VerifyContents(memory);
  PrintTable(device, options, memory, floor, rows);
  WriteJson(device, options, memory, floor, rows);
  return 0;
}
