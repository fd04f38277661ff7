// TEST DOUBLE: modules, kernels, streams, events and graphs of the stand-in
// libcuda.so.1. A launch is checked as NVIDIA's driver checks it (context, function
// from a loaded module, stream, grid and block limits, dynamic shared memory,
// kernelParams/extra, parameters read with the image's layout), recorded, and adds
// the modelled kernel time to its stream; syncs wait for the modelled time. The
// test kernels' pointer arguments must be device memory, else the context faults
// (sticky CUDA_ERROR_ILLEGAL_ADDRESS at the next synchronisation), as on a GPU.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "standin.h"

namespace gandiva::standin {
namespace {

Stream g_default_stream;
std::set<Stream*> g_streams;
std::set<Module*> g_modules;
std::set<Function*> g_functions;  // of loaded modules: a launch of anything else is refused
std::atomic<int> g_sticky{CUDA_SUCCESS};

void SleepUntil(uint64_t t) {
  for (uint64_t now = NowNs(); now < t; now = NowNs()) {
    const uint64_t left = t - now;
    if (left > 200'000) {
      timespec ts{0, static_cast<long>(left - 100'000)};
      nanosleep(&ts, nullptr);
    }
  }
}

__attribute__((destructor)) void WriteReport() {
  const char* path = std::getenv("GD_STANDIN_REPORT");
  if (!path || !*path) return;
  FILE* f = std::fopen(path, "w");
  if (!f) return;
  std::fprintf(f, "launches %llu\n",
               static_cast<unsigned long long>(GetCounters().launches.load()));
  for (Module* m : g_modules)
    for (Function* fn : m->functions)
      std::fprintf(f, "kernel.%s %llu\n", fn->info.name.c_str(),
                   static_cast<unsigned long long>(fn->launches.load()));
  std::fclose(f);
}

}  // namespace

void SetStickyError(CUresult e) {
  int expected = CUDA_SUCCESS;
  g_sticky.compare_exchange_strong(expected, e);
}
CUresult StickyError() { return static_cast<CUresult>(g_sticky.load(std::memory_order_relaxed)); }

Stream* ResolveStream(CUstream s) {
  // CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: the (one) default stream here.
  return s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD ? reinterpret_cast<Stream*>(s)
                                                                 : &g_default_stream;
}

bool StreamValid(CUstream s) {
  if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return true;
  std::lock_guard<std::mutex> lock(GlobalMutex());
  return g_streams.count(reinterpret_cast<Stream*>(s)) > 0;
}

uint64_t EnqueueCopy(Stream* s, PendingCopy copy) {
  std::lock_guard<std::mutex> lock(s->copies_mu);
  copy.seq = ++s->enqueued;
  s->copies.push_back(std::move(copy));
  return s->enqueued;
}

void CompleteCopies(Stream* s, uint64_t seq) {
  for (;;) {
    PendingCopy c;
    {
      std::lock_guard<std::mutex> lock(s->copies_mu);
      if (s->copies.empty() || s->copies.front().seq > seq) return;
      c = std::move(s->copies.front());
      s->copies.pop_front();
    }
    // The device side may have been unmapped since the copy was queued: a fault, as on a GPU.
    if ((c.device_dst && !DeviceRangeOk(c.device_dst, c.n)) ||
        (c.device_src && !DeviceRangeOk(c.device_src, c.n))) {
      SetStickyError(CUDA_ERROR_ILLEGAL_ADDRESS);
      continue;
    }
    std::memcpy(c.dst, c.src ? c.src : c.staged.data(), c.n);
  }
}

void WaitStream(Stream* s) {
  SleepUntil(s->busy_until_ns.load(std::memory_order_acquire));
  CompleteCopies(s, UINT64_MAX);
}

static void WaitStreams(bool blocking_only) {
  std::vector<Stream*> streams = {&g_default_stream};
  {
    std::lock_guard<std::mutex> lock(GlobalMutex());
    for (Stream* s : g_streams)
      if (!blocking_only || !s->non_blocking) streams.push_back(s);
  }
  uint64_t latest = 0;
  for (Stream* s : streams) latest = std::max(latest, s->busy_until_ns.load());
  SleepUntil(latest);
  for (Stream* s : streams) CompleteCopies(s, UINT64_MAX);
}

void WaitAllStreams() { WaitStreams(false); }
void WaitLegacyStream() { WaitStreams(true); }

void RecordLaunch(Function* f) {
  f->launches.fetch_add(1, std::memory_order_relaxed);
  GetCounters().launches.fetch_add(1, std::memory_order_relaxed);
}

static void Enqueue(Stream* s, uint64_t ns) {
  uint64_t cur = s->busy_until_ns.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    next = std::max(cur, NowNs()) + ns;
  } while (!s->busy_until_ns.compare_exchange_weak(cur, next, std::memory_order_acq_rel));
}

}  // namespace gandiva::standin

using namespace gandiva::standin;

#define GD_STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

// ---- Modules: kernels named in a real nvcc image.

GD_STANDIN_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  ApiGate gate;
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  std::vector<KernelInfo> kernels;
  if (!KernelsInImage(image, &kernels)) return CUDA_ERROR_INVALID_IMAGE;
  auto* m = new Module();
  std::set<std::string> seen;
  for (const KernelInfo& k : kernels) {
    if (!seen.insert(k.name).second) continue;  // a fatbin holds one ELF per architecture
    auto* f = new Function();
    f->info = k;
    m->functions.push_back(f);
  }
  std::lock_guard<std::mutex> lock(GlobalMutex());
  g_modules.insert(m);
  for (Function* f : m->functions) g_functions.insert(f);
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatbin) {
  return cuModuleLoadData(module, fatbin);
}

GD_STANDIN_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* path) {
  std::ifstream in(path ? path : "", std::ios::binary);
  if (!in) return CUDA_ERROR_FILE_NOT_FOUND;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.push_back(0);
  return cuModuleLoadData(module, bytes.data());
}

GD_STANDIN_EXPORT CUresult cuModuleUnload(CUmodule module) {
  std::lock_guard<std::mutex> lock(GlobalMutex());
  // Functions stay allocated for the report, but can no longer be launched.
  auto* m = reinterpret_cast<Module*>(module);
  if (!g_modules.erase(m)) return CUDA_ERROR_INVALID_HANDLE;
  for (Function* f : m->functions) g_functions.erase(f);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuModuleGetFunction(CUfunction* fn, CUmodule module, const char* name) {
  if (!fn || !module || !name) return CUDA_ERROR_INVALID_VALUE;
  for (Function* f : reinterpret_cast<Module*>(module)->functions) {
    if (f->info.name == name) {
      *fn = reinterpret_cast<CUfunction>(f);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

// ---- Launches: the driver's checks, in the driver's terms.

namespace {

// H100 (sm_90) limits, as cuDeviceGetAttribute reports them on the driver.
constexpr unsigned kMaxGridX = 0x7fffffffu, kMaxGridYZ = 65535;
constexpr unsigned kMaxBlockXY = 1024, kMaxBlockZ = 64, kMaxThreadsPerBlock = 1024;
constexpr int kMaxDynamicSharedOptin = 227 << 10;

struct LaunchArgs {
  CUfunction f;
  unsigned grid[3], block[3];
  unsigned shared;
  CUstream stream;
  void** params;
  void** extra;
};

bool FunctionLoaded(Function* f) {
  std::lock_guard<std::mutex> lock(GlobalMutex());
  return g_functions.count(f) > 0;
}

// Reads the parameter buffer the way the driver does: from kernelParams[0..N-1]
// (each must be non-null) or from extra's CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE pair
// (its size must be the kernel's parameter size).
CUresult ReadParams(const KernelInfo& k, void** params, void** extra, std::vector<char>* buf) {
  if (params && extra) return CUDA_ERROR_INVALID_VALUE;  // exactly one way, says the API
  buf->assign(k.param_bytes, 0);
  if (params) {
    for (size_t i = 0; i < k.params.size(); ++i) {
      if (!params[i]) return CUDA_ERROR_INVALID_VALUE;
      std::memcpy(buf->data() + k.params[i].offset, params[i], k.params[i].size);
    }
    return CUDA_SUCCESS;
  }
  if (!extra) return k.params.empty() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  const void* pointer = nullptr;
  const size_t* size = nullptr;
  for (int i = 0;; i += 2) {
    if (i >= 64) return CUDA_ERROR_INVALID_VALUE;  // no terminator in sight
    void* key = extra[i];
    if (key == nullptr || key == CU_LAUNCH_PARAM_END) break;
    if (key == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      pointer = extra[i + 1];
    } else if (key == CU_LAUNCH_PARAM_BUFFER_SIZE) {
      size = static_cast<const size_t*>(extra[i + 1]);
      if (!size) return CUDA_ERROR_INVALID_VALUE;
    } else {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (size && *size != 0 && !pointer) return CUDA_ERROR_INVALID_VALUE;
  if (!pointer || !size) return k.params.empty() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  if (*size != static_cast<size_t>(k.param_bytes)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(buf->data(), pointer, *size);
  return CUDA_SUCCESS;
}

template <typename T>
T Param(const KernelInfo& k, const std::vector<char>& buf, size_t i) {
  T v{};
  if (i < k.params.size() && k.params[i].size == sizeof(T))
    std::memcpy(&v, buf.data() + k.params[i].offset, sizeof(T));
  return v;
}

// The test kernels (apps/kernels.cu) touch device memory through their pointer
// arguments: outside device memory, a GPU faults. False if this launch would.
bool TestKernelAccessesOk(const KernelInfo& k, const std::vector<char>& buf, const LaunchArgs& a) {
  const uint64_t threads =
      uint64_t{a.grid[0]} * a.grid[1] * a.grid[2] * a.block[0] * a.block[1] * a.block[2];
  auto touched = [&](int n) { return n <= 0 ? 0 : std::min<uint64_t>(n, threads) * 4; };
  auto ok = [](CUdeviceptr p, uint64_t bytes) { return bytes == 0 || DeviceRangeOk(p, bytes); };
  if (k.name == "gd_scale")  // (float* x, float a, int n)
    return ok(Param<CUdeviceptr>(k, buf, 0), touched(Param<int>(k, buf, 2)));
  if (k.name == "gd_axpy") {  // (float* y, const float* x, float a, int n)
    const uint64_t n = touched(Param<int>(k, buf, 3));
    return ok(Param<CUdeviceptr>(k, buf, 0), n) && ok(Param<CUdeviceptr>(k, buf, 1), n);
  }
  if (k.name == "gd_reduce") {  // (const float* x, float* out, int n): thread 0 of block 0
    const int n = Param<int>(k, buf, 2);
    return ok(Param<CUdeviceptr>(k, buf, 0), n > 0 ? uint64_t(n) * 4 : 0) &&
           ok(Param<CUdeviceptr>(k, buf, 1), 4);
  }
  return true;
}

CUresult Launch(const LaunchArgs& a) {
  ApiGate gate;
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!CurrentContext()) return CUDA_ERROR_INVALID_CONTEXT;
  auto* fn = reinterpret_cast<Function*>(a.f);
  if (!fn || !FunctionLoaded(fn)) return CUDA_ERROR_INVALID_HANDLE;
  if (!StreamValid(a.stream)) return CUDA_ERROR_INVALID_HANDLE;
  for (int d = 0; d < 3; ++d)
    if (a.grid[d] == 0 || a.block[d] == 0) return CUDA_ERROR_INVALID_VALUE;
  if (a.grid[0] > kMaxGridX || a.grid[1] > kMaxGridYZ || a.grid[2] > kMaxGridYZ)
    return CUDA_ERROR_INVALID_VALUE;
  if (a.block[0] > kMaxBlockXY || a.block[1] > kMaxBlockXY || a.block[2] > kMaxBlockZ ||
      uint64_t{a.block[0]} * a.block[1] * a.block[2] > kMaxThreadsPerBlock)
    return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<int64_t>(a.shared) > fn->max_dynamic_shared) return CUDA_ERROR_INVALID_VALUE;
  std::vector<char> buf;
  bool faults = false;
  if (fn->info.params_known) {
    if (const CUresult r = ReadParams(fn->info, a.params, a.extra, &buf); r != CUDA_SUCCESS)
      return r;
    faults = !TestKernelAccessesOk(fn->info, buf, a);
  } else if (a.params && a.extra) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Stream* s = ResolveStream(a.stream);
  if (s->capturing) {
    s->capture->kernels.push_back(fn);
    s->capture->faults |= faults;
    return CUDA_SUCCESS;
  }
  RecordLaunch(fn);
  if (faults) SetStickyError(CUDA_ERROR_ILLEGAL_ADDRESS);
  Enqueue(s, KernelNs());
  return CUDA_SUCCESS;
}

CUresult LaunchEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  if (!c || (c->numAttrs > 0 && !c->attrs)) return CUDA_ERROR_INVALID_VALUE;
  return Launch({f,
                 {c->gridDimX, c->gridDimY, c->gridDimZ},
                 {c->blockDimX, c->blockDimY, c->blockDimZ},
                 c->sharedMemBytes,
                 c->hStream,
                 params,
                 extra});
}

}  // namespace

GD_STANDIN_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                          unsigned bx, unsigned by, unsigned bz, unsigned sh,
                                          CUstream s, void** p, void** e) {
  return Launch({f, {gx, gy, gz}, {bx, by, bz}, sh, s, p, e});
}

GD_STANDIN_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz, unsigned sh,
                                               CUstream s, void** p, void** e) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, e);
}

GD_STANDIN_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** p,
                                            void** e) {
  return LaunchEx(c, f, p, e);
}

GD_STANDIN_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** p,
                                                 void** e) {
  return LaunchEx(c, f, p, e);
}

// Opt-in to more dynamic shared memory, as kernels that need over 48 KiB must.
GD_STANDIN_EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute attr, int value) {
  auto* fn = reinterpret_cast<Function*>(f);
  if (!fn || !FunctionLoaded(fn)) return CUDA_ERROR_INVALID_HANDLE;
  if (attr != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_ERROR_NOT_SUPPORTED;
  if (value < 0 || value > kMaxDynamicSharedOptin) return CUDA_ERROR_INVALID_VALUE;
  fn->max_dynamic_shared = value;
  return CUDA_SUCCESS;
}

// ---- Streams, capture, graphs.

GD_STANDIN_EXPORT CUresult cuStreamCreate(CUstream* s, unsigned int flags) {
  ApiGate gate;
  if (!s || (flags & ~unsigned{CU_STREAM_NON_BLOCKING})) return CUDA_ERROR_INVALID_VALUE;
  auto* st = new Stream();
  st->non_blocking = flags & CU_STREAM_NON_BLOCKING;
  std::lock_guard<std::mutex> lock(GlobalMutex());
  g_streams.insert(st);
  *s = reinterpret_cast<CUstream>(st);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  {
    std::lock_guard<std::mutex> lock(GlobalMutex());
    if (!g_streams.erase(reinterpret_cast<Stream*>(s))) return CUDA_ERROR_INVALID_HANDLE;
  }
  // The driver finishes a destroyed stream's work; here: now.
  CompleteCopies(reinterpret_cast<Stream*>(s), UINT64_MAX);
  return CUDA_SUCCESS;  // leaked on purpose: a racing sync may still read it
}

GD_STANDIN_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  ApiGate gate;
  Stream* st = ResolveStream(s);
  if (st->capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!s || s == CU_STREAM_LEGACY) {
    WaitLegacyStream();  // the legacy stream waits for every blocking stream
  } else {
    WaitStream(st);
  }
  return StickyError();
}
GD_STANDIN_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) { return cuStreamSynchronize(s); }

GD_STANDIN_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode) {
  Stream* st = ResolveStream(s);
  if (!s || st->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  st->capture = new Graph();
  st->capturing = true;
  return CUDA_SUCCESS;
}
GD_STANDIN_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode m) {
  return cuStreamBeginCapture_v2(s, m);
}

GD_STANDIN_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph* graph) {
  Stream* st = ResolveStream(s);
  if (!graph || !st->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  st->capturing = false;
  *graph = reinterpret_cast<CUgraph>(st->capture);
  st->capture = nullptr;
  return CUDA_SUCCESS;
}
GD_STANDIN_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) {
  return cuStreamEndCapture(s, g);
}

GD_STANDIN_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                                       unsigned long long) {
  if (!exec || !graph) return CUDA_ERROR_INVALID_VALUE;
  *exec = reinterpret_cast<CUgraphExec>(new Graph(*reinterpret_cast<Graph*>(graph)));
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
  ApiGate gate;
  if (!exec) return CUDA_ERROR_INVALID_HANDLE;
  auto* g = reinterpret_cast<Graph*>(exec);
  for (Function* f : g->kernels) RecordLaunch(f);
  if (g->faults) SetStickyError(CUDA_ERROR_ILLEGAL_ADDRESS);
  Enqueue(ResolveStream(s), KernelNs() * g->kernels.size());
  return CUDA_SUCCESS;
}
GD_STANDIN_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) {
  return cuGraphLaunch(exec, s);
}

GD_STANDIN_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  delete reinterpret_cast<Graph*>(exec);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuGraphDestroy(CUgraph graph) {
  delete reinterpret_cast<Graph*>(graph);
  return CUDA_SUCCESS;
}

// ---- Events: the modelled time at which the stream reaches them.

GD_STANDIN_EXPORT CUresult cuEventCreate(CUevent* e, unsigned int flags) {
  constexpr unsigned kKnown =
      CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (!e || (flags & ~kKnown)) return CUDA_ERROR_INVALID_VALUE;
  // An interprocess event must be created without timing, as the driver requires.
  if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING))
    return CUDA_ERROR_INVALID_VALUE;
  *e = reinterpret_cast<CUevent>(new Event());
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  ApiGate gate;
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (!StreamValid(s)) return CUDA_ERROR_INVALID_HANDLE;
  auto* ev = reinterpret_cast<Event*>(e);
  Stream* st = ResolveStream(s);
  ev->at_ns = std::max(NowNs(), st->busy_until_ns.load());
  ev->stream = st;
  std::lock_guard<std::mutex> lock(st->copies_mu);
  ev->seq = st->enqueued;
  return CUDA_SUCCESS;
}
GD_STANDIN_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return cuEventRecord(e, s); }

GD_STANDIN_EXPORT CUresult cuEventSynchronize(CUevent e) {
  ApiGate gate;
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  auto* ev = reinterpret_cast<Event*>(e);
  SleepUntil(ev->at_ns);
  if (ev->stream) CompleteCopies(ev->stream, ev->seq);  // the copies before it, not after
  return StickyError();
}

GD_STANDIN_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  delete reinterpret_cast<Event*>(e);
  return CUDA_SUCCESS;
}
