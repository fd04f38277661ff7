// The hook table (one expansion of hooks.def) and the cuGetProcAddress rewrite.
#include "interpose/hook_table.h"

#include <cstring>

#include "interpose/policies.h"

namespace gandiva::shim {
namespace {

template <HookId Id>
void* RealOf() {
  return reinterpret_cast<void*>(Real<Id>::Get());
}

const HookEntry kHooks[] = {
#define GD_HOOK(name, pfn, what)                                                                 \
  {#name, ParsePfnName(#pfn), reinterpret_cast<void*>(&Wrapper<HookId::name, policy::what>::Fn), \
   &RealOf<HookId::name>, reinterpret_cast<void*>(&Stubs<HookId::name>::Missing)},
#include "interpose/hooks.def"
#undef GD_HOOK
};
constexpr int kNumEntries = sizeof(kHooks) / sizeof(kHooks[0]);
static_assert(kNumEntries == kNumHooks);

}  // namespace

const HookEntry* HookEntries(int* n) {
  *n = kNumEntries;
  return kHooks;
}

const HookEntry* FindHookByName(const char* name) {
  for (const HookEntry& e : kHooks)
    if (std::strcmp(e.name, name) == 0) return &e;
  return nullptr;
}

const HookEntry* FindHookForProcAddress(const char* symbol, int version, unsigned long long flags) {
  const bool per_thread = WantsPerThread(flags);
  const HookEntry* best = nullptr;
  bool has_per_thread = false;
  for (const HookEntry& e : kHooks)
    if (e.pfn.base == symbol && e.pfn.per_thread) has_per_thread = true;
  for (const HookEntry& e : kHooks) {
    if (e.pfn.base != symbol || e.pfn.version > version) continue;
    if (e.pfn.per_thread != (per_thread && has_per_thread)) continue;
    if (!best || e.pfn.version > best->pfn.version) best = &e;
  }
  return best;
}

const HookEntry* FindHookByReal(void* real) {
  for (const HookEntry& e : kHooks)
    if (e.real() == real) return &e;
  return nullptr;
}

void* WrapProcAddress(const char* symbol, int version, cuuint64_t flags, void* real) {
  // The driver's answer is exact when it is one of the functions we resolved by name.
  if (const HookEntry* e = FindHookByReal(real)) return e->wrapper;
  // Otherwise match by name, version and flags: the driver may hand out an internal
  // alias of the same function.
  if (const HookEntry* e = FindHookForProcAddress(symbol, version, flags)) {
    if (e->real() != e->missing) return e->wrapper;
  }
  return real;
}

}  // namespace gandiva::shim
