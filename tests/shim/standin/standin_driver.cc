// TEST DOUBLE: initialisation, devices, contexts, errors and cuGetProcAddress of
// the stand-in libcuda.so.1.
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "interpose/pfn_name.h"
#include "standin.h"

namespace gandiva::standin {
namespace {

std::atomic<bool> g_initialized{false};

struct Context {
  CUdevice device = 0;
};
Context g_primary[2];
thread_local std::vector<CUcontext> t_ctx_stack;

Counters* MapCounters() {
  const char* path = std::getenv("GD_STANDIN_COUNTERS");
  if (path && *path) {
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd >= 0 && ftruncate(fd, 4096) == 0) {
      void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (p != MAP_FAILED) return static_cast<Counters*>(p);
    }
  }
  static Counters local{};
  return &local;
}

struct ProcEntry {
  const char* name;
  gandiva::shim::PfnName pfn;
  void* fn;
};

}  // namespace

Counters& GetCounters() {
  static Counters* c = MapCounters();
  return *c;
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

uint64_t KernelNs() {
  static const uint64_t ns = [] {
    const char* v = std::getenv("GD_STANDIN_KERNEL_NS");
    return v ? std::strtoull(v, nullptr, 10) : 5000ull;
  }();
  return ns;
}

std::mutex& GlobalMutex() {
  static std::mutex mu;
  return mu;
}

bool Initialized() { return g_initialized.load(std::memory_order_acquire); }

CUcontext CurrentContext() { return t_ctx_stack.empty() ? nullptr : t_ctx_stack.back(); }

}  // namespace gandiva::standin

using namespace gandiva::standin;

#define GD_STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// The stand-in's one GPU, as CUDA_VISIBLE_DEVICES may name it: ordinal 0,
// or (a prefix of) this made-up UUID.
constexpr std::string_view kStandinUuid = "GPU-5374616e-6420-496e-2047-505530303030";

// As NVIDIA's driver reads CUDA_VISIBLE_DEVICES: the GPUs listed, in order, up
// to the first entry that names none. With one GPU, the first entry decides.
bool StandinGpuVisible() {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!env) return true;
  std::string_view first(env);
  first = first.substr(0, first.find(','));
  while (!first.empty() && first.front() == ' ') first.remove_prefix(1);
  while (!first.empty() && first.back() == ' ') first.remove_suffix(1);
  if (first == "0") return true;
  return first.size() > 4 && first.substr(0, 4) == "GPU-" && kStandinUuid.starts_with(first);
}

}  // namespace

GD_STANDIN_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // A process that may see no GPU cannot initialise: gpu1 of a one-GPU machine.
  if (!StandinGpuVisible()) return CUDA_ERROR_NO_DEVICE;
  g_initialized.store(true, std::memory_order_release);
  GetCounters();
  StartCheckpointService();
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuDriverGetVersion(int* v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = CUDA_VERSION;
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuGetErrorString(CUresult e, const char** s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = e == CUDA_SUCCESS ? "no error" : "stand-in driver error";
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuGetErrorName(CUresult e, const char** s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = e == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_STANDIN";
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!d || ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuDeviceGetCount(int* n) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  *n = 1;
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  if (!name || len <= 0 || d != 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, len, "gandiva stand-in device (test double)");
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  const char* v = std::getenv("GD_STANDIN_DEVICE_MEM");
  *bytes = v ? std::strtoull(v, nullptr, 0) : (8ull << 30);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice d) {
  if (!value || d != 0) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      *value = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 8;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = 108;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = 1024;
      break;
    default:
      *value = 0;
  }
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!ctx || d != 0) return CUDA_ERROR_INVALID_VALUE;
  *ctx = reinterpret_cast<CUcontext>(&g_primary[0]);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  return d == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

GD_STANDIN_EXPORT CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int, CUdevice d) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!ctx || d != 0) return CUDA_ERROR_INVALID_VALUE;
  *ctx = reinterpret_cast<CUcontext>(new Context{d});
  t_ctx_stack.push_back(*ctx);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuCtxCreate_v4(CUcontext* ctx, CUctxCreateParams*, unsigned int flags,
                                          CUdevice d) {
  return cuCtxCreate_v2(ctx, flags, d);
}

GD_STANDIN_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  std::erase(t_ctx_stack, ctx);
  if (ctx != reinterpret_cast<CUcontext>(&g_primary[0])) delete reinterpret_cast<Context*>(ctx);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (t_ctx_stack.empty()) {
    if (ctx) t_ctx_stack.push_back(ctx);
  } else if (ctx) {
    t_ctx_stack.back() = ctx;
  } else {
    t_ctx_stack.pop_back();
  }
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = CurrentContext();
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  t_ctx_stack.push_back(ctx);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  if (t_ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx) *ctx = t_ctx_stack.back();
  t_ctx_stack.pop_back();
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuCtxGetDevice(CUdevice* d) {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = CurrentContext();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *d = reinterpret_cast<Context*>(ctx)->device;
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuCtxSynchronize() {
  ApiGate gate;
  if (!CurrentContext()) return CUDA_ERROR_INVALID_CONTEXT;
  WaitAllStreams();
  return StickyError();
}

GD_STANDIN_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  ApiGate gate;
  if (!ctx && !CurrentContext()) return CUDA_ERROR_INVALID_CONTEXT;
  WaitAllStreams();
  return CUDA_SUCCESS;
}

// ---- cuGetProcAddress: answers from standin_functions.def by name, version, flags.

namespace {

#define GD_STANDIN(name, pfn) static_assert(std::is_same_v<decltype(&::name), pfn>, #name);
#include "standin_functions.def"
#undef GD_STANDIN

const ProcEntry kProcTable[] = {
#define GD_STANDIN(name, pfn) \
  {#name, gandiva::shim::ParsePfnName(#pfn), reinterpret_cast<void*>(&::name)},
#include "standin_functions.def"
#undef GD_STANDIN
};

CUresult Lookup(const char* symbol, void** pfn, int version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  const bool per_thread = gandiva::shim::WantsPerThread(flags);
  bool has_per_thread = false, any_version = false;
  for (const ProcEntry& e : kProcTable)
    if (e.pfn.base == symbol && e.pfn.per_thread) has_per_thread = true;
  const ProcEntry* best = nullptr;
  for (const ProcEntry& e : kProcTable) {
    if (e.pfn.base != symbol || e.pfn.per_thread != (per_thread && has_per_thread)) continue;
    any_version = true;
    if (e.pfn.version <= version && (!best || e.pfn.version > best->pfn.version)) best = &e;
  }
  *pfn = best ? best->fn : nullptr;
  if (status) {
    *status = best          ? CU_GET_PROC_ADDRESS_SUCCESS
              : any_version ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                            : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

}  // namespace

GD_STANDIN_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                               cuuint64_t flags,
                                               CUdriverProcAddressQueryResult* status) {
  return Lookup(symbol, pfn, version, flags, status);
}

GD_STANDIN_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version,
                                            cuuint64_t flags) {
  return Lookup(symbol, pfn, version, flags, nullptr);
}
