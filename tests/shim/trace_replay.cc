// The trace replayer: drives the shim (its hooks, linked in) and the stand-in driver
// (test double) with the calls of a recorded trace (GANDIVA_SHIM_TRACE), and checks
// that the shim decides what it decided when the trace was recorded.
//
//   shim_trace_replay TRACE [--keep FILE]
//   (GANDIVA_SHIM_LIBCUDA must name the stand-in libcuda.so.1)
//
// Each recorded call is made again through the shim's own wrapper for that hook, on a
// thread of its own per recorded thread, one call at a time in the recorded order.
// Addresses, handles, streams, kernels and graphs of the recording process are mapped
// to ones made here (kernels: the test cubin's gd_scale, loaded once per recorded
// kernel so that the boundary detector sees as many distinct kernels). The replay is
// itself recorded, and the two traces are compared call by call:
//   - a call the recorded driver refused is refused again (the stand-in refuses what
//     the recorded driver refused), and one it accepted is accepted;
//   - host syncs: the same boundary decision, boundaries counted and period;
//   - memory calls: the same device memory tracked after each;
//   - at every inferred boundary: the same memory tracked, the same bytes a swap-out
//     would move and a checkpoint would write, the same drift;
//   - cuGetProcAddress: the shim answers with its wrapper exactly when it did.
// Not replayable (skipped, listed): calls whose hook this build or the stand-in lacks,
// cuGetProcAddress of a function the stand-in lacks, context creation, the start of a
// stream capture (its end is not hooked); their records are left out of the comparison.
// Exit: 0 the shim decided the same, 1 it did not, 2 the trace cannot be replayed.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "boundary/thread_state.h"
#include "interpose/cuda_api.h"
#include "interpose/driver.h"
#include "interpose/hook_table.h"
#include "trace/trace_reader.h"
#include "trace/trace_recorder.h"

namespace {

namespace trace = gandiva::shim::trace;
using trace::TraceRecord;

constexpr size_t kMaxCopy = 1u << 20;  // copies are clipped: their size decides nothing
constexpr CUdeviceptr kUnmapped = 0xfff0000000000000ull;  // never device memory

std::string BaseName(std::string n) {
  for (const char* tail : {"_ptsz", "_ptds"})
    if (n.size() > 5 && n.compare(n.size() - 5, 5, tail) == 0) n.resize(n.size() - 5);
  return n;
}

// The stand-in's own entry points, for what the replay sets up (never through the shim).
struct Standin {
  PFN_cuInit_v2000 init;
  PFN_cuDevicePrimaryCtxRetain_v7000 retain;
  PFN_cuCtxSetCurrent_v4000 set_current;
  PFN_cuModuleLoadData_v2000 load;
  PFN_cuModuleGetFunction_v2000 get_function;
  PFN_cuFuncSetAttribute_v9000 set_attribute;
  PFN_cuMemAlloc_v3020 alloc;
  PFN_cuStreamCreate_v2000 stream_create;
  PFN_cuEventCreate_v2000 event_create;
  PFN_cuStreamBeginCapture_v10010 begin_capture;
  PFN_cuStreamEndCapture_v10000 end_capture;
  PFN_cuGraphInstantiateWithFlags_v11040 instantiate;
  PFN_cuLaunchKernel_v4000 launch;
  PFN_cuGetProcAddress_v12000 get_proc;
  PFN_cuModuleUnload_v2000 unload;
  PFN_cuStreamDestroy_v4000 stream_destroy;
  PFN_cuEventDestroy_v4000 event_destroy;
  PFN_cuGraphExecDestroy_v10000 exec_destroy;
  PFN_cuGraphDestroy_v10000 graph_destroy;
};

class Replayer {
 public:
  Replayer(const trace::Trace& t, const Standin& d, CUcontext ctx, std::vector<char> cubin)
      : t_(t), d_(d), ctx_(ctx), cubin_(std::move(cubin)), host_(kMaxCopy) {}

  ~Replayer();  // gives back what the replay made on the stand-in
  bool SetUp();
  void Run();

  std::vector<bool> replayed;  // per recorded record (kCall): made again
  std::map<std::string, int> skipped;

 private:
  // Returns false when the call cannot be replayed here.
  bool Replay(const TraceRecord& r);
  CUdeviceptr Dev(uint64_t recorded) const;
  void* DevOrHost(uint64_t recorded) {
    const CUdeviceptr p = Dev(recorded);
    return p == kUnmapped ? host_.data() : reinterpret_cast<void*>(p);
  }
  CUstream Stream(uint64_t recorded);
  CUevent Event(uint64_t recorded);
  CUfunction Function(uint64_t recorded);
  void MapRange(uint64_t recorded, uint64_t size, CUdeviceptr here) {
    if (recorded) ranges_[recorded] = {size ? size : 1, here};
  }
  static size_t Clip(uint64_t n) { return n > kMaxCopy ? kMaxCopy : n; }

  const trace::Trace& t_;
  const Standin& d_;
  CUcontext ctx_;
  std::vector<char> cubin_;
  std::vector<char> host_;
  struct Range {
    uint64_t size;
    CUdeviceptr here;
  };
  std::map<uint64_t, Range> ranges_;  // recorded base -> size, replay base
  std::map<uint64_t, uint64_t> handles_, streams_, events_, functions_, graphs_;
  std::map<uint64_t, uint64_t> max_shared_;  // per recorded kernel
  std::vector<CUmodule> modules_;
  std::vector<CUgraph> graph_sources_;
  std::vector<CUstream> graph_streams_;
  CUdeviceptr work_ = 0;
  float one_ = 1.0f;
  int zero_ = 0;
  void* params_[3] = {&work_, &one_, &zero_};  // gd_scale(float* x, float a, int n): n = 0
};

bool Replayer::SetUp() {
  if (d_.alloc(&work_, 4096) != CUDA_SUCCESS) return false;
  for (const TraceRecord& r : t_.records) {
    if (r.kind != trace::kCall) continue;
    const std::string n = BaseName(t_.HookName(r.hook));
    if (n == "cuLaunchKernel" || n == "cuLaunchCooperativeKernel" || n == "cuLaunchKernelEx")
      max_shared_[r.arg[0]] = std::max(max_shared_[r.arg[0]], r.arg[4]);
    if (n == "cuGraphLaunch" && !graphs_.count(r.arg[0])) {
      // A graph of one kernel, captured straight on the stand-in.
      CUstream s;
      CUgraph g;
      CUgraphExec exec;
      if (d_.stream_create(&s, CU_STREAM_NON_BLOCKING) ||
          d_.begin_capture(s, CU_STREAM_CAPTURE_MODE_RELAXED) ||
          d_.launch(Function(~r.arg[0]), 1, 1, 1, 32, 1, 1, 0, s, params_, nullptr) ||
          d_.end_capture(s, &g) || d_.instantiate(&exec, g, 0))
        return false;
      graph_streams_.push_back(s);
      graph_sources_.push_back(g);
      graphs_[r.arg[0]] = reinterpret_cast<uint64_t>(exec);
    }
  }
  return true;
}

Replayer::~Replayer() {
  for (const auto& [recorded, exec] : graphs_) d_.exec_destroy(reinterpret_cast<CUgraphExec>(exec));
  for (CUgraph g : graph_sources_) d_.graph_destroy(g);
  for (CUstream s : graph_streams_) d_.stream_destroy(s);
  for (const auto& [recorded, s] : streams_) d_.stream_destroy(reinterpret_cast<CUstream>(s));
  for (const auto& [recorded, e] : events_) d_.event_destroy(reinterpret_cast<CUevent>(e));
  for (CUmodule m : modules_) d_.unload(m);
}

CUdeviceptr Replayer::Dev(uint64_t recorded) const {
  if (recorded == 0) return 0;
  auto it = ranges_.upper_bound(recorded);
  if (it == ranges_.begin()) return kUnmapped;
  --it;
  if (recorded - it->first >= it->second.size) return kUnmapped;
  return it->second.here + (recorded - it->first);
}

CUstream Replayer::Stream(uint64_t recorded) {
  if (recorded <= 2) return reinterpret_cast<CUstream>(recorded);  // 0, legacy, per-thread
  auto [it, fresh] = streams_.try_emplace(recorded, 0);
  if (fresh) {
    CUstream s = nullptr;
    d_.stream_create(&s, 0);
    it->second = reinterpret_cast<uint64_t>(s);
  }
  return reinterpret_cast<CUstream>(it->second);
}

CUevent Replayer::Event(uint64_t recorded) {
  auto [it, fresh] = events_.try_emplace(recorded, 0);
  if (fresh) {
    CUevent e = nullptr;
    d_.event_create(&e, 0);
    it->second = reinterpret_cast<uint64_t>(e);
  }
  return reinterpret_cast<CUevent>(it->second);
}

CUfunction Replayer::Function(uint64_t recorded) {
  auto [it, fresh] = functions_.try_emplace(recorded, 0);
  if (fresh) {
    CUmodule m;
    CUfunction f = nullptr;
    if (d_.load(&m, cubin_.data()) == CUDA_SUCCESS) {
      modules_.push_back(m);
      d_.get_function(&f, m, "gd_scale");
    }
    const uint64_t shared = max_shared_.count(recorded) ? max_shared_[recorded] : 0;
    if (f && shared > (48u << 10))
      d_.set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                       static_cast<int>(shared));
    it->second = reinterpret_cast<uint64_t>(f);
  }
  return reinterpret_cast<CUfunction>(it->second);
}

bool Replayer::Replay(const TraceRecord& r) {
  const std::string& name = t_.HookName(r.hook);
  const gandiva::shim::HookEntry* e = gandiva::shim::FindHookByName(name.c_str());
  if (!e || e->real() == e->missing) return false;
  void* w = e->wrapper;
  const std::string n = BaseName(name);
  const auto& a = r.arg;
  const bool ok = r.result == CUDA_SUCCESS;
#define W(pfn) reinterpret_cast<pfn>(w)
  if (n == "cuInit") {
    W(PFN_cuInit_v2000)(static_cast<unsigned>(a[0]));
  } else if (n == "cuDevicePrimaryCtxRetain") {
    CUcontext c;
    W(PFN_cuDevicePrimaryCtxRetain_v7000)(&c, static_cast<CUdevice>(a[1]));
  } else if (n == "cuGetProcAddress" || n == "cuGetProcAddress_v2") {
    const std::string symbol = trace::ProcAddressSymbol(r);
    void* p = nullptr;
    CUdriverProcAddressQueryResult found;
    // A function the real driver has and the stand-in does not (most of the ~440 a
    // framework asks for) cannot be asked again here.
    if (ok && d_.get_proc(symbol.c_str(), &p, r.aux, a[4], &found) != CUDA_SUCCESS) return false;
    if (n == "cuGetProcAddress")
      W(PFN_cuGetProcAddress_v11030)(symbol.c_str(), &p, r.aux, a[4]);
    else
      W(PFN_cuGetProcAddress_v12000)(symbol.c_str(), &p, r.aux, a[4], &found);
  } else if (n == "cuLaunchKernel" || n == "cuLaunchCooperativeKernel") {
    const uint64_t g = a[1], b = a[2];
    CUfunction f = Function(a[0]);
    const unsigned shared = static_cast<unsigned>(a[4]);
    if (n == "cuLaunchKernel") W(PFN_cuLaunchKernel_v4000)
    (f, trace::Dim3At(g, 0), trace::Dim3At(g, 1), trace::Dim3At(g, 2), trace::Dim3At(b, 0),
     trace::Dim3At(b, 1), trace::Dim3At(b, 2), shared, Stream(a[3]), params_, nullptr);
    else W(PFN_cuLaunchCooperativeKernel_v9000)(
        f, trace::Dim3At(g, 0), trace::Dim3At(g, 1), trace::Dim3At(g, 2), trace::Dim3At(b, 0),
        trace::Dim3At(b, 1), trace::Dim3At(b, 2), shared, Stream(a[3]), params_);
  } else if (n == "cuLaunchKernelEx") {
    CUlaunchConfig c;
    std::memset(&c, 0, sizeof(c));
    c.gridDimX = trace::Dim3At(a[1], 0);
    c.gridDimY = trace::Dim3At(a[1], 1);
    c.gridDimZ = trace::Dim3At(a[1], 2);
    c.blockDimX = trace::Dim3At(a[2], 0);
    c.blockDimY = trace::Dim3At(a[2], 1);
    c.blockDimZ = trace::Dim3At(a[2], 2);
    c.sharedMemBytes = static_cast<unsigned>(a[4]);
    c.hStream = Stream(a[3]);
    W(PFN_cuLaunchKernelEx_v11060)(&c, Function(a[0]), params_, nullptr);
  } else if (n == "cuGraphLaunch") {
    W(PFN_cuGraphLaunch_v10000)(reinterpret_cast<CUgraphExec>(graphs_[a[0]]), Stream(a[3]));
  } else if (n == "cuCtxSynchronize") {
    if (name == "cuCtxSynchronize_v2")
      W(PFN_cuCtxSynchronize_v13000)(ctx_);
    else
      W(PFN_cuCtxSynchronize_v2000)();
  } else if (n == "cuStreamSynchronize") {
    W(PFN_cuStreamSynchronize_v2000)(Stream(a[0]));
  } else if (n == "cuEventSynchronize") {
    W(PFN_cuEventSynchronize_v2000)(Event(a[0]));
  } else if (n == "cuMemcpyDtoH_v2") {
    W(PFN_cuMemcpyDtoH_v3020)(host_.data(), Dev(a[1]), Clip(a[2]));
  } else if (n == "cuMemcpyDtoHAsync_v2") {
    W(PFN_cuMemcpyDtoHAsync_v3020)(host_.data(), Dev(a[1]), Clip(a[2]), Stream(a[3]));
  } else if (n == "cuMemcpyHtoD_v2") {
    W(PFN_cuMemcpyHtoD_v3020)(Dev(a[0]), host_.data(), Clip(a[2]));
  } else if (n == "cuMemcpyHtoDAsync_v2") {
    W(PFN_cuMemcpyHtoDAsync_v3020)(Dev(a[0]), host_.data(), Clip(a[2]), Stream(a[3]));
  } else if (n == "cuMemcpyDtoD_v2") {
    W(PFN_cuMemcpyDtoD_v3020)(Dev(a[0]), Dev(a[1]), Clip(a[2]));
  } else if (n == "cuMemcpyDtoDAsync_v2") {
    W(PFN_cuMemcpyDtoDAsync_v3020)(Dev(a[0]), Dev(a[1]), Clip(a[2]), Stream(a[3]));
  } else if (n == "cuMemcpy") {
    W(PFN_cuMemcpy_v4000)
    (reinterpret_cast<CUdeviceptr>(DevOrHost(a[0])), reinterpret_cast<CUdeviceptr>(DevOrHost(a[1])),
     Clip(a[2]));
  } else if (n == "cuMemcpyAsync") {
    W(PFN_cuMemcpyAsync_v4000)
    (reinterpret_cast<CUdeviceptr>(DevOrHost(a[0])), reinterpret_cast<CUdeviceptr>(DevOrHost(a[1])),
     Clip(a[2]), Stream(a[3]));
  } else if (n == "cuMemcpyPeer") {
    W(PFN_cuMemcpyPeer_v4000)(Dev(a[0]), ctx_, Dev(a[2]), ctx_, Clip(a[4]));
  } else if (n == "cuMemcpyPeerAsync") {  // the stream (6th argument) is not recorded
    W(PFN_cuMemcpyPeerAsync_v4000)(Dev(a[0]), ctx_, Dev(a[2]), ctx_, Clip(a[4]), nullptr);
  } else if (n == "cuMemsetD8_v2" || n == "cuMemsetD8Async") {
    if (n == "cuMemsetD8_v2")
      W(PFN_cuMemsetD8_v3020)(Dev(a[0]), static_cast<unsigned char>(a[1]), Clip(a[2]));
    else
      W(PFN_cuMemsetD8Async_v3020)
    (Dev(a[0]), static_cast<unsigned char>(a[1]), Clip(a[2]), Stream(a[3]));
  } else if (n == "cuMemsetD32_v2" || n == "cuMemsetD32Async") {
    if (n == "cuMemsetD32_v2")
      W(PFN_cuMemsetD32_v3020)(Dev(a[0]), static_cast<unsigned>(a[1]), Clip(a[2] * 4) / 4);
    else
      W(PFN_cuMemsetD32Async_v3020)
    (Dev(a[0]), static_cast<unsigned>(a[1]), Clip(a[2] * 4) / 4, Stream(a[3]));
  } else if (n == "cuMemGetInfo_v2") {
    size_t f, total;
    W(PFN_cuMemGetInfo_v3020)(&f, &total);
  } else if (n == "cuDeviceTotalMem_v2") {
    size_t bytes;
    W(PFN_cuDeviceTotalMem_v3020)(&bytes, static_cast<CUdevice>(a[1]));
  } else if (n == "cuMemAlloc_v2") {
    CUdeviceptr p = 0;
    if (W(PFN_cuMemAlloc_v3020)(&p, a[1]) == CUDA_SUCCESS && ok) MapRange(a[0], a[1], p);
  } else if (n == "cuMemAllocPitch_v2") {
    CUdeviceptr p = 0;
    size_t pitch = 0;
    if (W(PFN_cuMemAllocPitch_v3020)(&p, &pitch, a[2], a[3], r.aux) == CUDA_SUCCESS && ok)
      MapRange(a[0], a[1], p);
  } else if (n == "cuMemAllocManaged") {
    CUdeviceptr p = 0;
    if (W(PFN_cuMemAllocManaged_v6000)(&p, a[1], static_cast<unsigned>(a[2])) == CUDA_SUCCESS && ok)
      MapRange(a[0], a[1], p);
  } else if (n == "cuMemAllocAsync") {
    CUdeviceptr p = 0;
    if (W(PFN_cuMemAllocAsync_v11020)(&p, a[1], Stream(a[2])) == CUDA_SUCCESS && ok)
      MapRange(a[0], a[1], p);
  } else if (n == "cuMemFree_v2" || n == "cuMemFreeAsync") {
    const CUresult got = n == "cuMemFree_v2"
                             ? W(PFN_cuMemFree_v3020)(Dev(a[0]))
                             : W(PFN_cuMemFreeAsync_v11020)(Dev(a[0]), Stream(a[1]));
    if (got == CUDA_SUCCESS) ranges_.erase(a[0]);
  } else if (n == "cuMemCreate") {
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = static_cast<int>(a[2]);
    CUmemGenericAllocationHandle h = 0;
    if (W(PFN_cuMemCreate_v10020)(&h, a[1], &prop, a[3]) == CUDA_SUCCESS && ok) handles_[a[0]] = h;
  } else if (n == "cuMemRelease") {
    auto it = handles_.find(a[0]);
    W(PFN_cuMemRelease_v10020)(it == handles_.end() ? ~0ull : it->second);
  } else if (n == "cuMemAddressReserve") {
    CUdeviceptr p = 0;
    if (W(PFN_cuMemAddressReserve_v10020)(&p, a[1], a[2], 0, a[4]) == CUDA_SUCCESS && ok)
      MapRange(a[0], a[1], p);
  } else if (n == "cuMemAddressFree") {
    if (W(PFN_cuMemAddressFree_v10020)(Dev(a[0]), a[1]) == CUDA_SUCCESS) ranges_.erase(a[0]);
  } else if (n == "cuMemMap") {
    auto it = handles_.find(a[3]);
    W(PFN_cuMemMap_v10020)(Dev(a[0]), a[1], a[2], it == handles_.end() ? ~0ull : it->second, 0);
  } else if (n == "cuMemUnmap") {
    W(PFN_cuMemUnmap_v10020)(Dev(a[0]), a[1]);
  } else {
    return false;  // context creation, capture starts, hooks added since
  }
#undef W
  return true;
}

void Replayer::Run() {
  replayed.assign(t_.records.size(), false);
  std::set<uint16_t> threads;
  for (const TraceRecord& r : t_.records)
    if (r.kind == trace::kCall) threads.insert(r.thread);
  std::mutex mu;
  std::condition_variable cv;
  size_t next = 0;
  auto skip_marks = [&] {
    while (next < t_.records.size() && t_.records[next].kind != trace::kCall) ++next;
  };
  skip_marks();
  std::vector<std::thread> workers;
  for (uint16_t tid : threads) {
    workers.emplace_back([&, tid] {
      d_.set_current(ctx_);
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        cv.wait(lock, [&] { return next >= t_.records.size() || t_.records[next].thread == tid; });
        if (next >= t_.records.size()) return;
        const TraceRecord& r = t_.records[next];
        gandiva::shim::ThreadSlot* slot = gandiva::shim::CurrentThreadSlot();
        slot->serving_park = (r.flags & trace::kFlagServingPark) != 0;
        if (Replay(r))
          replayed[next] = true;
        else
          ++skipped[t_.HookName(r.hook)];
        slot->serving_park = false;
        ++next;
        skip_marks();
        cv.notify_all();
      }
    });
  }
  for (auto& w : workers) w.join();
}

// ---- Comparing the recorded decisions with the replay's.

struct Comparison {
  std::vector<std::string> differences;
  uint64_t calls = 0, refused = 0, refused_again = 0, boundaries = 0, marks = 0;
  void Differ(size_t i, const std::string& name, const std::string& what) {
    if (differences.size() < 1000)
      differences.push_back("record " + std::to_string(i) + " (" + name + "): " + what);
  }
};

std::string Num(uint64_t v) { return std::to_string(v); }

void CompareMark(Comparison& c, size_t i, const TraceRecord& a, const TraceRecord& r) {
  ++c.marks;
  static const char* const kWhat[] = {"tracked bytes", "swap-out bytes", "checkpoint bytes",
                                      "live allocations", "drift (made<<32|freed)"};
  for (int k = 0; k < 5; ++k)
    if (a.arg[k] != r.arg[k])
      c.Differ(i, "boundary",
               std::string(kWhat[k]) + " " + Num(a.arg[k]) + " recorded, " + Num(r.arg[k]) +
                   " replayed");
}

// "no", "yes" (inferred, not acted on: explicit marks drove), or "yes, drove".
std::string BoundaryWord(uint32_t flags) {
  if (!(flags & trace::kFlagBoundary)) return "no";
  return (flags & trace::kFlagDrove) ? "yes, drove" : "yes";
}

void CompareCall(Comparison& c, size_t i, const std::string& name, const TraceRecord& a,
                 const TraceRecord& r) {
  ++c.calls;
  if (a.result != CUDA_SUCCESS) {
    ++c.refused;
    if (r.result != CUDA_SUCCESS)
      ++c.refused_again;
    else
      c.Differ(i, name,
               "the recorded driver refused it (" + std::to_string(a.result) +
                   "), the stand-in accepted it");
  } else if (r.result != CUDA_SUCCESS) {
    c.Differ(i, name,
             "accepted when recorded, refused in the replay (" + std::to_string(r.result) + ")");
  }
  if (trace::IsSyncHook(name)) {
    if ((a.flags & trace::kFlagBoundary) != (r.flags & trace::kFlagBoundary) ||
        (a.flags & trace::kFlagDrove) != (r.flags & trace::kFlagDrove))
      c.Differ(i, name,
               "boundary " + BoundaryWord(a.flags) + " recorded, " + BoundaryWord(r.flags) +
                   " replayed");
    if (a.arg[3] != r.arg[3] || a.arg[4] != r.arg[4])
      c.Differ(i, name,
               "boundaries/period " + Num(a.arg[3]) + "/" + Num(a.arg[4]) + " recorded, " +
                   Num(r.arg[3]) + "/" + Num(r.arg[4]) + " replayed");
    c.boundaries = std::max(c.boundaries, a.arg[3]);
  }
  if (trace::IsTrackedMemoryHook(name) && a.arg[4] != r.arg[4])
    c.Differ(
        i, name,
        "device memory tracked " + Num(a.arg[4]) + " recorded, " + Num(r.arg[4]) + " replayed");
  if (name.rfind("cuGetProcAddress", 0) == 0 &&
      (a.flags & trace::kFlagWrapped) != (r.flags & trace::kFlagWrapped))
    c.Differ(i, name,
             "\"" + trace::ProcAddressSymbol(a) + "\": the shim answered with " +
                 ((a.flags & trace::kFlagWrapped) ? "its wrapper" : "the driver's") +
                 " when recorded, " +
                 ((r.flags & trace::kFlagWrapped) ? "its wrapper" : "the driver's") +
                 " in the replay");
}

// A trace's calls in order, and its boundary marks by anchor. A mark is written by the
// thread that drove the boundary after its sync returned, so another thread's call can
// land between the two in the file (as on the H200, tests/shim/traces/gpu): a mark is
// placed by its anchor, the ordinal of the last call its own thread made before it, not
// by where it sits in the file.
struct Anchored {
  std::vector<size_t> calls;
  std::map<int64_t, size_t> marks;  // anchor (-1: before the thread's first call) -> record
};

Anchored Split(const trace::Trace& t, const std::vector<size_t>& order) {
  Anchored out;
  std::map<uint16_t, int64_t> last_call;  // per thread: the ordinal of its latest call
  for (size_t i : order) {
    const TraceRecord& r = t.records[i];
    if (r.kind == trace::kMark) {
      const auto it = last_call.find(r.thread);
      out.marks.emplace(it == last_call.end() ? -1 : it->second, i);
    } else {
      last_call[r.thread] = static_cast<int64_t>(out.calls.size());
      out.calls.push_back(i);
    }
  }
  return out;
}

// Pairs the recorded calls the replay made again with the replay's calls, in order, and
// the boundary marks of both by anchor.
Comparison Compare(const trace::Trace& recorded, const std::vector<bool>& replayed,
                   const trace::Trace& replay) {
  Comparison c;
  std::vector<size_t> wanted, all;
  for (size_t i = 0; i < recorded.records.size(); ++i)
    if (recorded.records[i].kind == trace::kMark || replayed[i]) wanted.push_back(i);
  for (size_t j = 0; j < replay.records.size(); ++j) all.push_back(j);
  const Anchored a = Split(recorded, wanted), r = Split(replay, all);

  size_t k = 0;
  for (; k < a.calls.size() && k < r.calls.size(); ++k) {
    const size_t i = a.calls[k];
    const std::string& name = recorded.HookName(recorded.records[i].hook);
    const TraceRecord& again = replay.records[r.calls[k]];
    if (replay.HookName(again.hook) != name) {
      c.Differ(i, name, "the replay's call here is " + replay.HookName(again.hook));
      return c;
    }
    CompareCall(c, i, name, recorded.records[i], again);
  }
  for (size_t w = k; w < a.calls.size(); ++w) c.Differ(a.calls[w], "recorded", "not in the replay");
  for (size_t w = k; w < r.calls.size(); ++w)
    c.Differ(r.calls[w], "replay", "a call the recording lacks");

  // The recorded index a replay-only mark is reported at: its anchor's call.
  auto at = [&](int64_t anchor) {
    return anchor >= 0 && static_cast<size_t>(anchor) < a.calls.size() ? a.calls[anchor] : 0;
  };
  for (const auto& [anchor, i] : a.marks) {
    const auto it = r.marks.find(anchor);
    if (it == r.marks.end())
      c.Differ(i, "boundary", "recorded a boundary here; the replay inferred none");
    else
      CompareMark(c, i, recorded.records[i], replay.records[it->second]);
  }
  for (const auto& [anchor, j] : r.marks)
    if (!a.marks.count(anchor))
      c.Differ(at(anchor), "boundary",
               "the replay inferred a boundary here; the recording did not");
  return c;
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "shim_trace_replay: %s\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Fail("usage: shim_trace_replay TRACE [--keep FILE]");
  const std::string path = argv[1];
  std::string keep;
  if (argc == 4 && std::strcmp(argv[2], "--keep") == 0) keep = argv[3];
  const char* libcuda = std::getenv("GANDIVA_SHIM_LIBCUDA");
  if (!libcuda || !*libcuda) return Fail("GANDIVA_SHIM_LIBCUDA must name the stand-in driver");

  auto read = trace::ReadTrace(path);
  if (!read.ok()) return Fail(read.status().message());
  const trace::Trace& recorded = read.value();
  if (!recorded.complete) return Fail(path + ": the trace was not closed (its process died)");
  if (recorded.end.arg[1] != 0)
    return Fail(path + ": " + std::to_string(recorded.end.arg[1]) +
                " records were dropped when it was recorded");
  if (recorded.end.flags & trace::kFlagTruncated)
    return Fail(path + ": the trace reached its size limit when it was recorded");

  // The recorded settings that change the shim's decisions; the replay's own trace.
  const std::string settings = recorded.header.settings;
  for (size_t at = 0; at < settings.size();) {
    const size_t end = std::min(settings.find(';', at), settings.size());
    const std::string kv = settings.substr(at, end - at);
    if (const size_t eq = kv.find('='); eq != std::string::npos)
      setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    at = end + 1;
  }
  // Without --keep, the replay's trace goes in a directory of its own (mkdtemp),
  // never at a name in a shared /tmp that someone else could have put a link at.
  std::string scratch;
  if (keep.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/gd_replay.XXXXXX";
    if (!mkdtemp(tmpl.data())) return Fail("cannot make a directory for the replay's trace");
    scratch = tmpl;
  }
  const std::string out = keep.empty() ? scratch + "/replay.gdtrace" : keep;
  setenv("GANDIVA_SHIM_TRACE", out.c_str(), 1);
  setenv("GANDIVA_SHIM_TRACE_MAX_BYTES", "4294967296", 1);
  setenv("GD_STANDIN_KERNEL_NS", "0", 1);
  setenv("GD_STANDIN_DEVICE_MEM", std::to_string(1ull << 40).c_str(), 1);
  setenv("GANDIVA_LOG", "warn", 0);

  void* h = dlopen(libcuda, RTLD_NOW | RTLD_LOCAL);
  if (!h) return Fail(std::string("cannot load the stand-in: ") + dlerror());
  Standin d;
  auto get = [h](const char* n) { return dlsym(h, n); };
  d.init = reinterpret_cast<PFN_cuInit_v2000>(get("cuInit"));
  d.retain = reinterpret_cast<PFN_cuDevicePrimaryCtxRetain_v7000>(get("cuDevicePrimaryCtxRetain"));
  d.set_current = reinterpret_cast<PFN_cuCtxSetCurrent_v4000>(get("cuCtxSetCurrent"));
  d.load = reinterpret_cast<PFN_cuModuleLoadData_v2000>(get("cuModuleLoadData"));
  d.get_function = reinterpret_cast<PFN_cuModuleGetFunction_v2000>(get("cuModuleGetFunction"));
  d.set_attribute = reinterpret_cast<PFN_cuFuncSetAttribute_v9000>(get("cuFuncSetAttribute"));
  d.alloc = reinterpret_cast<PFN_cuMemAlloc_v3020>(get("cuMemAlloc_v2"));
  d.stream_create = reinterpret_cast<PFN_cuStreamCreate_v2000>(get("cuStreamCreate"));
  d.event_create = reinterpret_cast<PFN_cuEventCreate_v2000>(get("cuEventCreate"));
  d.begin_capture =
      reinterpret_cast<PFN_cuStreamBeginCapture_v10010>(get("cuStreamBeginCapture_v2"));
  d.end_capture = reinterpret_cast<PFN_cuStreamEndCapture_v10000>(get("cuStreamEndCapture"));
  d.instantiate =
      reinterpret_cast<PFN_cuGraphInstantiateWithFlags_v11040>(get("cuGraphInstantiateWithFlags"));
  d.launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(get("cuLaunchKernel"));
  d.get_proc = reinterpret_cast<PFN_cuGetProcAddress_v12000>(get("cuGetProcAddress_v2"));
  d.unload = reinterpret_cast<PFN_cuModuleUnload_v2000>(get("cuModuleUnload"));
  d.stream_destroy = reinterpret_cast<PFN_cuStreamDestroy_v4000>(get("cuStreamDestroy_v2"));
  d.event_destroy = reinterpret_cast<PFN_cuEventDestroy_v4000>(get("cuEventDestroy_v2"));
  d.exec_destroy = reinterpret_cast<PFN_cuGraphExecDestroy_v10000>(get("cuGraphExecDestroy"));
  d.graph_destroy = reinterpret_cast<PFN_cuGraphDestroy_v10000>(get("cuGraphDestroy"));
  CUcontext ctx = nullptr;
  if (!d.init || !d.launch || !d.get_proc || !d.unload || !d.stream_destroy || !d.event_destroy ||
      !d.exec_destroy || !d.graph_destroy || d.init(0) || d.retain(&ctx, 0) || d.set_current(ctx))
    return Fail("the stand-in driver did not start");
  std::ifstream in(GD_CUBIN, std::ios::binary);
  std::vector<char> cubin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (cubin.empty()) return Fail("cannot read " GD_CUBIN);
  // The shim loads the same stand-in (same handle) and starts recording the replay.
  if (!gandiva::shim::LoadDriver() || !trace::On())
    return Fail("the shim did not load the driver or did not start recording");

  Replayer replayer(recorded, d, ctx, std::move(cubin));
  if (!replayer.SetUp()) return Fail("could not set up kernels and graphs on the stand-in");
  replayer.Run();
  trace::Stop();
  auto replay = trace::ReadTrace(out);
  if (keep.empty()) {
    unlink(out.c_str());
    rmdir(scratch.c_str());
  }
  if (!replay.ok()) return Fail("the replay's trace: " + replay.status().message());
  const Comparison c = Compare(recorded, replayer.replayed, replay.value());

  std::printf(
      "replay of %s (%s): %llu calls, %llu decision records, %llu boundaries; the "
      "recorded driver refused %llu, the stand-in refused %llu of them again\n",
      path.c_str(), recorded.header.command, static_cast<unsigned long long>(c.calls),
      static_cast<unsigned long long>(c.marks), static_cast<unsigned long long>(c.boundaries),
      static_cast<unsigned long long>(c.refused), static_cast<unsigned long long>(c.refused_again));
  for (const auto& [name, count] : replayer.skipped)
    std::printf("  not replayable: %s x%d\n", name.c_str(), count);
  if (c.differences.empty()) {
    std::printf("the shim decided as recorded\n");
    return 0;
  }
  std::printf("the shim decided differently (%zu differences):\n", c.differences.size());
  for (size_t i = 0; i < c.differences.size() && i < 30; ++i)
    std::printf("  %s\n", c.differences[i].c_str());
  return 1;
}
