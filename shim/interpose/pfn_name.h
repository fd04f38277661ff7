// Reads what a cudaTypedefs.h type name says about an entry point:
// "PFN_cuMemcpyDtoH_v7000_ptds" -> base "cuMemcpyDtoH", version 7000, per-thread.
// Shared by the shim and the stand-in driver so both answer cuGetProcAddress alike.
#ifndef GANDIVA_SHIM_PFN_NAME_H_
#define GANDIVA_SHIM_PFN_NAME_H_

#include <string_view>

namespace gandiva::shim {

struct PfnName {
  std::string_view base;    // the name cuGetProcAddress is asked for
  int version = 0;          // first CUDA version with this signature
  bool per_thread = false;  // a _ptds/_ptsz (per-thread default stream) variant
};

constexpr PfnName ParsePfnName(std::string_view pfn) {
  PfnName out;
  if (pfn.substr(0, 4) == "PFN_") pfn.remove_prefix(4);
  const std::string_view tail = pfn.size() >= 5 ? pfn.substr(pfn.size() - 5) : std::string_view();
  if (tail == "_ptds" || tail == "_ptsz") {  // (C++17: nvcc-compiled tests include this)
    out.per_thread = true;
    pfn.remove_suffix(5);
  }
  const size_t v = pfn.rfind("_v");
  if (v == std::string_view::npos) {
    out.base = pfn;
    return out;
  }
  for (char c : pfn.substr(v + 2)) out.version = out.version * 10 + (c - '0');
  out.base = pfn.substr(0, v);
  return out;
}

static_assert(ParsePfnName("PFN_cuMemAlloc_v3020").base == "cuMemAlloc");
static_assert(ParsePfnName("PFN_cuMemAlloc_v3020").version == 3020);
static_assert(ParsePfnName("PFN_cuLaunchKernel_v7000_ptsz").per_thread);
static_assert(ParsePfnName("PFN_cuLaunchKernel_v7000_ptsz").base == "cuLaunchKernel");

// cuGetProcAddress flags (CU_GET_PROC_ADDRESS_*): bit 1 asks for per-thread variants.
constexpr bool WantsPerThread(unsigned long long flags) { return (flags & 2ull) != 0; }

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_PFN_NAME_H_
