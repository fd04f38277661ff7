// Loading the real libcuda and resolving the hooks' real entry points.
#include "interpose/driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "boundary/job_link.h"
#include "gandiva/common/log.h"
#include "trace/trace_hooks.h"

namespace gandiva::shim {
namespace {

std::atomic<void*> g_handle{nullptr};
std::atomic<bool> g_loaded{false};
thread_local bool t_loading = false;
DriverExtras g_extras;

using DlsymFn = void* (*)(void*, const char*);

DlsymFn FindRealDlsym() {
  // dlvsym is not interposed; GLIBC_2.2.5 is dlsym's base version on x86-64
  // (GLIBC_2.34 on newer links names the same function).
  auto fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (!fn) fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  return fn;
}

}  // namespace

constinit std::atomic<bool> g_driver_load_done{false};

void* RealDlsym(void* handle, const char* name) {
  static const DlsymFn real = FindRealDlsym();
  return real ? real(handle, name) : nullptr;
}

void ResolveAllReal(void* handle) {
#define GD_HOOK(name, pfn, what)                                                               \
  {                                                                                            \
    void* p = handle ? RealDlsym(handle, #name) : nullptr;                                     \
    Real<HookId::name>::fn.store(p ? reinterpret_cast<pfn>(p) : &Stubs<HookId::name>::Missing, \
                                 std::memory_order_release);                                   \
  }
#include "interpose/hooks.def"
#undef GD_HOOK
}

bool LoadDriver() {
  if (g_loaded.load(std::memory_order_acquire)) return g_handle.load() != nullptr;
  if (t_loading) return false;  // re-entered from the driver's own start-up
  static std::once_flag once;
  std::call_once(once, [] {
    t_loading = true;
    const char* path = std::getenv("GANDIVA_SHIM_LIBCUDA");
    void* h = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) GD_LOG(kError, "shim: cannot load the CUDA driver: %s", dlerror());
    ResolveAllReal(h);
    if (h) {
      auto get = [h](const char* n) { return RealDlsym(h, n); };
      g_extras.cuCtxGetCurrent =
          reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(get("cuCtxGetCurrent"));
      g_extras.cuCtxGetDevice = reinterpret_cast<PFN_cuCtxGetDevice_v2000>(get("cuCtxGetDevice"));
      g_extras.cuCtxPushCurrent =
          reinterpret_cast<PFN_cuCtxPushCurrent_v4000>(get("cuCtxPushCurrent_v2"));
      g_extras.cuCtxPopCurrent =
          reinterpret_cast<PFN_cuCtxPopCurrent_v4000>(get("cuCtxPopCurrent_v2"));
      g_extras.cuMemGetAllocationGranularity =
          reinterpret_cast<PFN_cuMemGetAllocationGranularity_v10020>(
              get("cuMemGetAllocationGranularity"));
      g_extras.cuMemSetAccess = reinterpret_cast<PFN_cuMemSetAccess_v10020>(get("cuMemSetAccess"));
      g_extras.cuMemHostAlloc = reinterpret_cast<PFN_cuMemHostAlloc_v2020>(get("cuMemHostAlloc"));
      g_extras.cuMemFreeHost = reinterpret_cast<PFN_cuMemFreeHost_v2000>(get("cuMemFreeHost"));
    }
    // Before the first call returns, so that it is in the trace (GANDIVA_SHIM_TRACE).
    if (h) StartTraceFromEnv();
    g_handle.store(h, std::memory_order_release);
    g_loaded.store(true, std::memory_order_release);
    g_driver_load_done.store(true, std::memory_order_release);
    t_loading = false;
    if (h) AttachJob();
  });
  return g_handle.load(std::memory_order_acquire) != nullptr;
}

const DriverExtras& Extras() { return g_extras; }

bool DriverLoaded() { return g_loaded.load(std::memory_order_acquire); }
void* DriverHandle() { return g_handle.load(std::memory_order_acquire); }

}  // namespace gandiva::shim
