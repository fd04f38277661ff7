// At exit, when GANDIVA_SHIM_REPORT names a file: what the shim saw, one
// "key value" per line (calls per hook, memory totals and cap, inferred boundaries).
// For tests and for debugging a job; costs nothing when unset.
#include <cstdio>
#include <cstdlib>

#include "boundary/job_link.h"
#include "boundary/thread_state.h"
#include "interpose/driver.h"
#include "interpose/hook_table.h"
#include "memory/memory_cap.h"
#include "memory/memory_tracker.h"

namespace gandiva::shim {
namespace {

__attribute__((destructor)) void WriteReport() {
  const char* path = std::getenv("GANDIVA_SHIM_REPORT");
  if (!path || !*path) return;
  FILE* f = std::fopen(path, "w");
  if (!f) return;
  int n = 0;
  const HookEntry* hooks = HookEntries(&n);
  for (int i = 0; i < n; ++i) {
    const uint64_t c = TotalCalls(static_cast<HookId>(i));
    if (c) std::fprintf(f, "calls.%s %llu\n", hooks[i].name, static_cast<unsigned long long>(c));
  }
  if (DriverLoaded()) {
    const MemoryTotals t = MemoryTracker::Get().Totals();
    std::fprintf(f,
                 "device_bytes %llu\ndevice_allocations %llu\nswapped_bytes %llu\nvmm_bytes %llu\n",
                 static_cast<unsigned long long>(t.device_bytes),
                 static_cast<unsigned long long>(t.allocations),
                 static_cast<unsigned long long>(t.swapped_bytes),
                 static_cast<unsigned long long>(t.vmm_bytes));
    const MemoryCap& cap = MemoryCap::Process();
    std::fprintf(f, "memory_cap %llu\nmemory_cap_charged %llu\nmemory_cap_refused %llu\n",
                 static_cast<unsigned long long>(cap.cap()),
                 static_cast<unsigned long long>(cap.charged()),
                 static_cast<unsigned long long>(cap.refused()));
  }
  const BoundaryReport b = CurrentBoundaryReport();
  std::fprintf(f,
               "boundaries %llu\nconfidence_pct %u\nperiod_segments %d\nlaunches_per_period "
               "%u\nexplicit %d\n",
               static_cast<unsigned long long>(b.boundaries), b.confidence_pct, b.period_segments,
               b.launches_per_period, b.explicit_marks ? 1 : 0);
  std::fclose(f);
}

}  // namespace
}  // namespace gandiva::shim
