// The hooked entry points as C++ types, and the real driver behind them.
// HookId/HookTraits come from hooks.def. Real<Id>::Get() is the real driver's
// function; until the driver is loaded it is a stub that loads it (lazily, with
// dlopen("libcuda.so.1"), since a RTLD_LOCAL libcuda is invisible to RTLD_NEXT).
// Thread-safety: every function here may be called from any thread.
#ifndef GANDIVA_SHIM_DRIVER_H_
#define GANDIVA_SHIM_DRIVER_H_

#include <atomic>
#include <cstdint>

#include "interpose/cuda_api.h"
#include "interpose/pfn_name.h"

namespace gandiva::shim {

enum class HookId : int {
#define GD_HOOK(name, pfn, what) name,
#include "interpose/hooks.def"
#undef GD_HOOK
  kCount
};
inline constexpr int kNumHooks = static_cast<int>(HookId::kCount);

// The detector's name for a call: its base name, so that cuMemcpyDtoH_v2 and
// cuMemcpyDtoH_v2_ptds are the same kind of event.
constexpr uint32_t KindOf(const char* pfn) {
  uint32_t h = 2166136261u;
  for (char c : ParsePfnName(pfn).base) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

template <HookId Id>
struct HookTraits;
#define GD_HOOK(name, pfn, what)                    \
  template <>                                       \
  struct HookTraits<HookId::name> {                 \
    using Pfn = pfn;                                \
    static constexpr const char* kName = #name;     \
    static constexpr const char* kPfnName = #pfn;   \
    static constexpr uint32_t kKind = KindOf(#pfn); \
  };
#include "interpose/hooks.def"
#undef GD_HOOK

// Loads the real driver once (idempotent, thread-safe) and resolves every Real<>.
// Returns false if libcuda.so.1 cannot be loaded; hooks then return an error.
bool LoadDriver();
bool DriverLoaded();
// True once LoadDriver ran (whether or not it found the driver): one relaxed load, for
// the hooks' fast path (trace/trace_hooks.h).
extern constinit std::atomic<bool> g_driver_load_done;
// The real driver's handle (nullptr before LoadDriver succeeds).
void* DriverHandle();
// glibc's dlsym, bypassing the shim's own dlsym override.
void* RealDlsym(void* handle, const char* name);

template <HookId Id, typename Pfn = typename HookTraits<Id>::Pfn>
struct Stubs;

template <HookId Id>
struct Real;

template <HookId Id, typename R, typename... A>
struct Stubs<Id, R(CUDAAPI*)(A...)> {
  // Before the driver is loaded: load it, then call what it resolved to.
  static R CUDAAPI Lazy(A... a) {
    if (!LoadDriver()) return CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
    return Real<Id>::Get()(a...);
  }
  // The loaded driver lacks this entry point (an older driver).
  static R CUDAAPI Missing(A...) { return CUDA_ERROR_NOT_FOUND; }
};

template <HookId Id>
struct Real {
  using Pfn = typename HookTraits<Id>::Pfn;
  static Pfn Get() { return fn.load(std::memory_order_relaxed); }
  static constinit inline std::atomic<Pfn> fn{&Stubs<Id>::Lazy};
};

// Setters used by the loader (resolves every hook by its versioned name).
void ResolveAllReal(void* handle);

// Driver functions the shim calls itself but does not hook.
struct DriverExtras {
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
  PFN_cuCtxGetDevice_v2000 cuCtxGetDevice = nullptr;
  PFN_cuCtxPushCurrent_v4000 cuCtxPushCurrent = nullptr;
  PFN_cuCtxPopCurrent_v4000 cuCtxPopCurrent = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity = nullptr;
  PFN_cuMemSetAccess_v10020 cuMemSetAccess = nullptr;
  PFN_cuMemHostAlloc_v2020 cuMemHostAlloc = nullptr;
  PFN_cuMemFreeHost_v2000 cuMemFreeHost = nullptr;
};
// Valid once LoadDriver() returned true; members the driver lacks stay null.
const DriverExtras& Extras();

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_DRIVER_H_
