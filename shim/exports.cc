// What the shim exports, and nothing else (see libgandiva_shim.map): every hook in
// hooks.def under its driver name, dlsym, and the park hooks for other runtime copies.
// Each export is an IFUNC declared with the PFN's function type: a PFN that does not
// match cuda.h's declaration of the name fails to compile, and a direct caller jumps
// straight to the typed wrapper (no trampoline).
#include <dlfcn.h>

#include <atomic>
#include <type_traits>

#include "interpose/driver.h"
#include "interpose/hook_table.h"
#include "interpose/policies.h"
#include "memory/swap.h"

#define GD_SHIM_EXPORT __attribute__((visibility("default")))

using gandiva::shim::HookId;
using gandiva::shim::Wrapper;
namespace policy = gandiva::shim::policy;

#define GD_HOOK(name, pfn, what)                                                          \
  extern "C" pfn gd_resolve_##name() { return &Wrapper<HookId::name, policy::what>::Fn; } \
  extern "C" GD_SHIM_EXPORT std::remove_pointer_t<pfn> name                               \
      __attribute__((ifunc("gd_resolve_" #name)));
#include "interpose/hooks.def"
#undef GD_HOOK

namespace {

using DlsymFn = void* (*)(void*, const char*);
std::atomic<DlsymFn> g_real_dlsym{nullptr};

DlsymFn FindDlsym() {
  void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  auto fn = reinterpret_cast<DlsymFn>(p);
  g_real_dlsym.store(fn, std::memory_order_relaxed);
  return fn;
}
__attribute__((constructor)) void FindDlsymEarly() { FindDlsym(); }

thread_local bool t_in_dlsym = false;

// A hooked name looked up in the real driver: hand out the shim's wrapper instead.
void* HookedLookup(void* handle, const char* name, const gandiva::shim::HookEntry* e) {
  void* p = gandiva::shim::RealDlsym(handle, name);
  if (!p || p == e->wrapper || t_in_dlsym) return p;
  t_in_dlsym = true;  // the driver's own start-up may look things up
  const bool loaded = gandiva::shim::LoadDriver();
  t_in_dlsym = false;
  return loaded && p == e->real() ? e->wrapper : p;
}

}  // namespace

// Interposes dlsym: cudart and PyTorch find the driver with dlopen("libcuda.so.1")
// and dlsym(handle, "cuGetProcAddress_v2"), which symbol interposition never sees.
// Everything else goes straight to glibc as a tail call, so that glibc still sees
// the original caller (RTLD_NEXT is relative to it). Compiled with -O2 always.
extern "C" GD_SHIM_EXPORT void* dlsym(void* handle, const char* name) {
  if (handle != RTLD_NEXT && name[0] == 'c' && name[1] == 'u') {
    if (const gandiva::shim::HookEntry* e = gandiva::shim::FindHookByName(name))
      return HookedLookup(handle, name, e);
  }
  DlsymFn real = g_real_dlsym.load(std::memory_order_relaxed);
  if (__builtin_expect(real == nullptr, 0)) real = FindDlsym();  // before our constructor
  return real(handle, name);
}

// Park hooks for copies of the job runtime outside the shim (libgandiva.so, the
// Python extension): their explicit boundaries swap device memory too, and the
// thread serving their parks (checkpoints: torch.save's copies) is not gated.
extern "C" GD_SHIM_EXPORT const gandiva::runtime::ParkHooks* gandiva_shim_park_hooks() {
  static const gandiva::runtime::ParkHooks hooks = gandiva::shim::ParkHooks();
  return &hooks;
}
