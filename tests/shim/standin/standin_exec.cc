// TEST DOUBLE: modules, kernels, streams, events and graphs of the stand-in
// libcuda.so.1. A launch checks its kernel came from a loaded image, records it and
// adds the modelled kernel time to its stream; syncs wait for the modelled time.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>

#include "standin.h"

namespace gandiva::standin {
namespace {

Stream g_default_stream;
std::set<Stream*> g_streams;
std::set<Module*> g_modules;

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
      std::fprintf(f, "kernel.%s %llu\n", fn->name.c_str(),
                   static_cast<unsigned long long>(fn->launches.load()));
  std::fclose(f);
}

}  // namespace

Stream* ResolveStream(CUstream s) { return s ? reinterpret_cast<Stream*>(s) : &g_default_stream; }

void WaitStream(Stream* s) { SleepUntil(s->busy_until_ns.load(std::memory_order_acquire)); }

void WaitAllStreams() {
  uint64_t latest = g_default_stream.busy_until_ns.load();
  {
    std::lock_guard<std::mutex> lock(GlobalMutex());
    for (Stream* s : g_streams) latest = std::max(latest, s->busy_until_ns.load());
  }
  SleepUntil(latest);
}

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
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::string> names;
  if (!KernelNamesInImage(image, &names)) return CUDA_ERROR_INVALID_IMAGE;
  auto* m = new Module();
  std::set<std::string> seen;
  for (const std::string& n : names)
    if (seen.insert(n).second) m->functions.push_back(new Function{n, {}});
  std::lock_guard<std::mutex> lock(GlobalMutex());
  g_modules.insert(m);
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
  // Functions stay valid for the report; the module is only forgotten.
  return g_modules.count(reinterpret_cast<Module*>(module)) ? CUDA_SUCCESS
                                                            : CUDA_ERROR_INVALID_HANDLE;
}

GD_STANDIN_EXPORT CUresult cuModuleGetFunction(CUfunction* fn, CUmodule module, const char* name) {
  if (!fn || !module || !name) return CUDA_ERROR_INVALID_VALUE;
  for (Function* f : reinterpret_cast<Module*>(module)->functions) {
    if (f->name == name) {
      *fn = reinterpret_cast<CUfunction>(f);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

// ---- Launches.

static CUresult Launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, CUstream hs) {
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (gx * gy * gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  Stream* s = ResolveStream(hs);
  auto* fn = reinterpret_cast<Function*>(f);
  if (s->capturing) {
    s->capture->kernels.push_back(fn);
    return CUDA_SUCCESS;
  }
  RecordLaunch(fn);
  Enqueue(s, KernelNs());
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                          unsigned bx, unsigned by, unsigned bz, unsigned,
                                          CUstream s, void**, void**) {
  return Launch(f, gx, gy, gz, bx, by, bz, s);
}

GD_STANDIN_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz, unsigned sh,
                                               CUstream s, void** p, void** e) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, e);
}

GD_STANDIN_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void**, void**) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                c->hStream);
}

GD_STANDIN_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** p,
                                                 void** e) {
  return cuLaunchKernelEx(c, f, p, e);
}

// ---- Streams, capture, graphs.

GD_STANDIN_EXPORT CUresult cuStreamCreate(CUstream* s, unsigned int) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  auto* st = new Stream();
  std::lock_guard<std::mutex> lock(GlobalMutex());
  g_streams.insert(st);
  *s = reinterpret_cast<CUstream>(st);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  std::lock_guard<std::mutex> lock(GlobalMutex());
  if (!g_streams.erase(reinterpret_cast<Stream*>(s))) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;  // leaked on purpose: a racing sync may still read it
}

GD_STANDIN_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  Stream* st = ResolveStream(s);
  if (st->capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  WaitStream(st);
  return CUDA_SUCCESS;
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
  if (!exec) return CUDA_ERROR_INVALID_HANDLE;
  auto* g = reinterpret_cast<Graph*>(exec);
  for (Function* f : g->kernels) RecordLaunch(f);
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

GD_STANDIN_EXPORT CUresult cuEventCreate(CUevent* e, unsigned int) {
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  *e = reinterpret_cast<CUevent>(new Event());
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  reinterpret_cast<Event*>(e)->at_ns = std::max(NowNs(), ResolveStream(s)->busy_until_ns.load());
  return CUDA_SUCCESS;
}
GD_STANDIN_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return cuEventRecord(e, s); }

GD_STANDIN_EXPORT CUresult cuEventSynchronize(CUevent e) {
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  SleepUntil(reinterpret_cast<Event*>(e)->at_ns);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  delete reinterpret_cast<Event*>(e);
  return CUDA_SUCCESS;
}
