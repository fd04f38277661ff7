// The hooks as data, for the dlsym and cuGetProcAddress overrides: name, parsed PFN
// (base name, version, per-thread), the shim's wrapper and the real entry point.
#ifndef GANDIVA_SHIM_HOOK_TABLE_H_
#define GANDIVA_SHIM_HOOK_TABLE_H_

#include "interpose/driver.h"
#include "interpose/pfn_name.h"

namespace gandiva::shim {

struct HookEntry {
  const char* name;  // exported, versioned name, e.g. "cuMemAlloc_v2"
  PfnName pfn;       // from the PFN type: base "cuMemAlloc", version 3020
  void* wrapper;     // the shim's function
  void* (*real)();   // the real driver's function (after LoadDriver)
  void* missing;     // what real() is when the driver lacks the entry point
};

// All hooks, in hooks.def order.
const HookEntry* HookEntries(int* n);
const HookEntry* FindHookByName(const char* name);
// The hook the driver would answer cuGetProcAddress(symbol, version, flags) with.
const HookEntry* FindHookForProcAddress(const char* symbol, int version, unsigned long long flags);
const HookEntry* FindHookByReal(void* real);

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_HOOK_TABLE_H_
