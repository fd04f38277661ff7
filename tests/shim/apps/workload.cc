// The test workload; see workload.h. Arguments:
//   --image PATH       cubin/fatbin with gd_scale, gd_axpy, gd_reduce (required)
//   --iterations N     training iterations (default 30)
//   --kernels K        launches per iteration on the main thread (default 6)
//   --threads T        worker threads launching on their own until the end (default 0)
//   --sleep-us U       host time per iteration (default 0)
//   --buffers B        cuMemAlloc buffers (default 4), sizes around --buffer-bytes
//   --buffer-bytes S   (default 3 MiB + 1234)
//   --graph            also capture two kernels into a graph launched every iteration
//   --startup-copies C before the loop, C weight-sized copies to the device, each waited
//                      for (as torch's .cuda() does), with a small kernel after every 8th
//   --report PATH      writes expected totals at set-up, call counts at the end
//   --bad-calls        before the loop, calls the driver must refuse (a zero-byte
//                      allocation, a free of memory never allocated, launches of
//                      impossible shapes, a copy to no device memory): each must fail,
//                      and a trace of it recorded on a GPU keeps what the driver refused
// Exit: 0 ok, 2 a driver call failed, 3 device memory contents were wrong at the end.
#include "workload.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

namespace gandiva::testapp {
namespace {

enum FnIndex {
#define GD_INDEX(name, pfn) k_##name,
  GD_APP_DRIVER(GD_INDEX)
#undef GD_INDEX
      kFnCount
};
const char* const kFnNames[] = {
#define GD_NAME(name, pfn) #name,
    GD_APP_DRIVER(GD_NAME)
#undef GD_NAME
};
std::atomic<uint64_t> g_counts[kFnCount];

#define CALL(d, name, ...) (g_counts[k_##name].fetch_add(1), (d).name(__VA_ARGS__))
// A call the driver must refuse (the program goes on).
#define CHECK_REFUSED(expr)                                                           \
  do {                                                                                \
    if ((expr) == CUDA_SUCCESS) {                                                     \
      std::fprintf(stderr, "workload: %s was accepted (line %d)\n", #expr, __LINE__); \
      std::_Exit(2);                                                                  \
    }                                                                                 \
  } while (0)
#define CHECK(expr)                                                                     \
  do {                                                                                  \
    CUresult r_ = (expr);                                                               \
    if (r_ != CUDA_SUCCESS) {                                                           \
      std::fprintf(stderr, "workload: %s failed: %d (line %d)\n", #expr, r_, __LINE__); \
      std::_Exit(2);                                                                    \
    }                                                                                   \
  } while (0)

struct Options {
  const char* image = nullptr;
  int iterations = 30;
  int kernels = 6;
  int threads = 0;
  int sleep_us = 0;
  int buffers = 4;
  size_t buffer_bytes = (3u << 20) + 1234;
  bool graph = false;
  bool bad_calls = false;
  int startup_copies = 0;
  const char* report = nullptr;
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--image")
      o.image = next();
    else if (a == "--iterations")
      o.iterations = std::atoi(next());
    else if (a == "--kernels")
      o.kernels = std::atoi(next());
    else if (a == "--threads")
      o.threads = std::atoi(next());
    else if (a == "--sleep-us")
      o.sleep_us = std::atoi(next());
    else if (a == "--buffers")
      o.buffers = std::atoi(next());
    else if (a == "--buffer-bytes")
      o.buffer_bytes = std::strtoull(next(), nullptr, 0);
    else if (a == "--graph")
      o.graph = true;
    else if (a == "--bad-calls")
      o.bad_calls = true;
    else if (a == "--startup-copies")
      o.startup_copies = std::atoi(next());
    else if (a == "--report")
      o.report = next();
  }
  return o;
}

// Word w of buffer b at set-up: a pattern no two buffers share.
uint32_t Pattern(int b, size_t w) {
  return static_cast<uint32_t>(b * 0x9E3779B1u + w * 2654435761u);
}

}  // namespace

int RunWorkload(const Driver& d, int argc, char** argv) {
  const Options o = Parse(argc, argv);
  std::ifstream in(o.image ? o.image : "", std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "workload: cannot read --image\n");
    return 2;
  }
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  CUdevice dev;
  CUcontext ctx;
  CHECK(CALL(d, cuInit, 0));
  CHECK(CALL(d, cuDeviceGet, &dev, 0));
  CHECK(CALL(d, cuDevicePrimaryCtxRetain, &ctx, dev));
  CHECK(CALL(d, cuCtxSetCurrent, ctx));
  CUmodule module;
  CUfunction scale, axpy, reduce;
  CHECK(CALL(d, cuModuleLoadData, &module, image.data()));
  CHECK(CALL(d, cuModuleGetFunction, &scale, module, "gd_scale"));
  CHECK(CALL(d, cuModuleGetFunction, &axpy, module, "gd_axpy"));
  CHECK(CALL(d, cuModuleGetFunction, &reduce, module, "gd_reduce"));

  // Memory: B buffers of uneven sizes with a pattern, a step log written every
  // iteration, a loss word, a pitched buffer, and one VMM allocation of the program's own.
  uint64_t expected_bytes = 0, expected_allocs = 0, expected_vmm = 0;
  // What the shim charges against a memory cap (GANDIVA_GPU_MEMORY_BYTES): VMM-backed
  // buffers (>= 1 MiB) at their 2 MiB-granular mapped size, the rest as asked.
  uint64_t expected_cap = 0;
  const auto cap_charge = [](size_t n) -> uint64_t {
    constexpr size_t kGranularity = 2u << 20;
    return n >= (1u << 20) ? (n + kGranularity - 1) / kGranularity * kGranularity : n;
  };
  std::vector<CUdeviceptr> bufs(o.buffers);
  std::vector<size_t> sizes(o.buffers);
  for (int b = 0; b < o.buffers; ++b) {
    sizes[b] = (o.buffer_bytes + b * 4099) & ~size_t{3};
    CHECK(CALL(d, cuMemAlloc_v2, &bufs[b], sizes[b]));
    std::vector<uint32_t> host(sizes[b] / 4);
    for (size_t w = 0; w < host.size(); ++w) host[w] = Pattern(b, w);
    CHECK(CALL(d, cuMemcpyHtoD_v2, bufs[b], host.data(), sizes[b]));
    expected_bytes += sizes[b];
    expected_vmm += sizes[b] >= (1u << 20) ? sizes[b] : 0;
    expected_cap += cap_charge(sizes[b]);
    ++expected_allocs;
  }
  const size_t step_bytes = 4 * static_cast<size_t>(o.iterations);
  CUdeviceptr steps, loss, pitched;
  CHECK(CALL(d, cuMemAlloc_v2, &steps, step_bytes));
  CHECK(CALL(d, cuMemsetD32_v2, steps, 0, o.iterations));
  CHECK(CALL(d, cuMemAlloc_v2, &loss, 4));
  size_t pitch = 0;
  CHECK(CALL(d, cuMemAllocPitch_v2, &pitched, &pitch, 1000, 16, 4));
  expected_bytes += step_bytes + 4 + pitch * 16;
  expected_cap += cap_charge(step_bytes) + 4 + pitch * 16;
  expected_allocs += 3;
  // The kernels' own buffer: they really run on a GPU, and must not touch the
  // patterned buffers (x * 1.0f is not x for every bit pattern: NaNs).
  constexpr int kWorkFloats = 4096;
  CUdeviceptr work;
  CHECK(CALL(d, cuMemAlloc_v2, &work, kWorkFloats * 4));
  CHECK(CALL(d, cuMemsetD32_v2, work, 0, kWorkFloats));
  expected_bytes += kWorkFloats * 4;
  expected_cap += kWorkFloats * 4;
  expected_allocs += 1;
  CUdeviceptr scratch;  // stream-ordered, freed before the loop
  CHECK(CALL(d, cuMemAllocAsync, &scratch, 65536, nullptr));
  CHECK(CALL(d, cuMemFreeAsync, scratch, nullptr));

  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  const size_t own_vmm = 2u << 20;
  CUmemGenericAllocationHandle handle;
  CUdeviceptr own;
  CHECK(CALL(d, cuMemAddressReserve, &own, own_vmm, 0, 0, 0));
  CHECK(CALL(d, cuMemCreate, &handle, own_vmm, &prop, 0));
  CHECK(CALL(d, cuMemMap, own, own_vmm, 0, handle, 0));
  CUmemAccessDesc access;
  std::memset(&access, 0, sizeof(access));
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK(CALL(d, cuMemSetAccess, own, own_vmm, &access, 1));
  expected_bytes += own_vmm;
  expected_cap += own_vmm;  // the peak: the 64 KiB scratch was freed before it
  expected_allocs += 1;

  CUstream side;
  CUevent mid;
  CHECK(CALL(d, cuStreamCreate, &side, 0));
  CHECK(CALL(d, cuEventCreate, &mid, 0));
  // One kernelParams array per kernel, matching its signature (apps/kernels.cu): the
  // driver reads as many pointers as the kernel has parameters, with their sizes.
  int n = kWorkFloats;
  float a = 1.0f;
  void* scale_args[] = {&work, &a, &n};        // gd_scale(float* x, float a, int n)
  void* axpy_args[] = {&work, &work, &a, &n};  // gd_axpy(float* y, const float* x, float a, int n)
  void* reduce_args[] = {&work, &loss, &n};    // gd_reduce(const float* x, float* out, int n)
  CUgraphExec graph_exec = nullptr;
  if (o.graph) {
    CUgraph graph;
    CHECK(CALL(d, cuStreamBeginCapture_v2, side, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(CALL(d, cuLaunchKernel, scale, 4, 1, 1, 128, 1, 1, 0, side, scale_args, nullptr));
    CHECK(CALL(d, cuLaunchKernel, reduce, 1, 1, 1, 32, 1, 1, 0, side, reduce_args, nullptr));
    CHECK(CALL(d, cuStreamEndCapture, side, &graph));
    CHECK(CALL(d, cuGraphInstantiateWithFlags, &graph_exec, graph, 0));
  }
  // Start-up traffic as a framework loading a model makes: every weight copied to the
  // device and waited for (torch's .cuda(): cudaMemcpyAsync + cudaStreamSynchronize),
  // a small initialisation kernel now and then. None of it is an iteration.
  if (o.startup_copies > 0 && o.buffers > 0 && sizes[0] > 4096) {
    std::vector<uint32_t> weights(sizes[0] / 4);
    for (size_t w = 0; w < weights.size(); ++w) weights[w] = Pattern(0, w);
    for (int c = 0; c < o.startup_copies; ++c) {
      const size_t off = (static_cast<size_t>(c) * 4096) % (sizes[0] - 4096) & ~size_t{3};
      CHECK(CALL(d, cuMemcpyHtoDAsync_v2, bufs[0] + off, weights.data() + off / 4, 4096, nullptr));
      CHECK(CALL(d, cuStreamSynchronize, nullptr));
      if (c % 8 == 7)
        CHECK(CALL(d, cuLaunchKernel, scale, 1, 1, 1, 32, 1, 1, 0, nullptr, scale_args, nullptr));
    }
  }
  CHECK(CALL(d, cuCtxSynchronize));

  if (o.bad_calls) {
    CUdeviceptr none = 0;
    CHECK_REFUSED(CALL(d, cuMemAlloc_v2, &none, 0));
    CHECK_REFUSED(CALL(d, cuMemFree_v2, work + 64));  // inside an allocation, not its start
    CHECK_REFUSED(CALL(d, cuLaunchKernel, scale, 1, 1, 1, 2048, 1, 1, 0, nullptr, scale_args,
                       nullptr));  // more threads per block than any GPU has
    CHECK_REFUSED(CALL(d, cuLaunchKernel, scale, 0, 1, 1, 32, 1, 1, 0, nullptr, scale_args,
                       nullptr));  // an empty grid
    const uint32_t word = 7;
    CHECK_REFUSED(CALL(d, cuMemcpyHtoD_v2, CUdeviceptr{16}, &word, 4));  // no memory there
    CHECK(CALL(d, cuCtxSynchronize));
  }

  if (o.report) {
    FILE* f = std::fopen(o.report, "w");
    std::fprintf(f,
                 "expected_device_bytes %llu\nexpected_allocations %llu\nexpected_vmm_bytes %llu\n"
                 "expected_cap_bytes %llu\n",
                 static_cast<unsigned long long>(expected_bytes),
                 static_cast<unsigned long long>(expected_allocs),
                 static_cast<unsigned long long>(expected_vmm),
                 static_cast<unsigned long long>(expected_cap));
    std::fclose(f);
  }

  // Worker threads: launch on their own (per-thread default stream) and never sync.
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < o.threads; ++t) {
    workers.emplace_back([&] {
      CHECK(CALL(d, cuCtxSetCurrent, ctx));
      do {  // at least once, however short the run
        CHECK(CALL(d, cuLaunchKernel_ptsz, scale, 8, 1, 1, 128, 1, 1, 0, nullptr, scale_args,
                   nullptr));
        usleep(300);
      } while (!stop.load());
      CHECK(CALL(d, cuStreamSynchronize_ptsz, nullptr));
    });
  }

  // The loop: [K launches, Ex launch, graph, event sync] [step write, loss read-back].
  for (int it = 0; it < o.iterations; ++it) {
    for (int k = 0; k < o.kernels; ++k) {
      CHECK(CALL(d, cuLaunchKernel, k % 2 ? axpy : scale, 16, 1, 1, 256, 1, 1, 0, nullptr,
                 k % 2 ? axpy_args : scale_args, nullptr));
    }
    CUlaunchConfig config;
    std::memset(&config, 0, sizeof(config));
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 32;
    config.blockDimY = config.blockDimZ = 1;
    CHECK(CALL(d, cuLaunchKernelEx, &config, reduce, reduce_args, nullptr));
    if (graph_exec) CHECK(CALL(d, cuGraphLaunch, graph_exec, side));
    CHECK(CALL(d, cuEventRecord, mid, nullptr));
    CHECK(CALL(d, cuEventSynchronize, mid));
    const uint32_t step = 1000u + it;
    CHECK(CALL(d, cuMemcpyHtoDAsync_v2, steps + 4 * it, &step, 4, nullptr));
    CHECK(CALL(d, cuStreamSynchronize, side));
    float host_loss = 0;
    if (it % 2)
      CHECK(CALL(d, cuMemcpyDtoH_v2, &host_loss, loss, 4));
    else
      CHECK(CALL(d, cuMemcpyDtoH_v2_ptds, &host_loss, loss, 4));
    if (o.sleep_us) usleep(o.sleep_us);
  }
  stop.store(true);
  for (auto& w : workers) w.join();

  // Contents must be exactly what the program wrote, whatever happened in between.
  int bad = 0;
  for (int b = 0; b < o.buffers; ++b) {
    std::vector<uint32_t> host(sizes[b] / 4);
    CHECK(CALL(d, cuMemcpyDtoH_v2, host.data(), bufs[b], sizes[b]));
    for (size_t w = 0; w < host.size(); ++w)
      if (host[w] != Pattern(b, w)) {
        ++bad;
        break;
      }
  }
  std::vector<uint32_t> logged(o.iterations);
  CHECK(CALL(d, cuMemcpyDtoH_v2, logged.data(), steps, step_bytes));
  for (int it = 0; it < o.iterations; ++it) bad += logged[it] != 1000u + it;

  CHECK(CALL(d, cuMemUnmap, own, own_vmm));
  CHECK(CALL(d, cuMemRelease, handle));
  CHECK(CALL(d, cuMemAddressFree, own, own_vmm));
  for (CUdeviceptr p : bufs) CHECK(CALL(d, cuMemFree_v2, p));
  CHECK(CALL(d, cuMemFree_v2, steps));
  CHECK(CALL(d, cuMemFree_v2, loss));
  CHECK(CALL(d, cuMemFree_v2, pitched));
  CHECK(CALL(d, cuMemFree_v2, work));

  if (o.report) {
    FILE* f = std::fopen(o.report, "a");
    for (int i = 0; i < kFnCount; ++i)
      if (g_counts[i].load())
        std::fprintf(f, "calls.%s %llu\n", kFnNames[i],
                     static_cast<unsigned long long>(g_counts[i].load()));
    std::fprintf(f, "content_errors %d\n", bad);
    std::fclose(f);
  }
  if (bad)
    std::fprintf(stderr, "workload: %d device memory regions differ from what was written\n", bad);
  return bad ? 3 : 0;
}

}  // namespace gandiva::testapp
