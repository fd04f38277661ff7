// Test program: the workload fetching every driver entry point the way cudart does:
// dlopen("libcuda.so.1") (RTLD_LOCAL, invisible to symbol interposition), one
// dlsym(handle, "cuGetProcAddress_v2"), then cuGetProcAddress for each function by
// its base name and CUDA version, with the per-thread flag for _ptsz/_ptds ones.
// Not linked with libcuda. Kernels come from --image (nvcc-built).
#include <dlfcn.h>

#include <cstdio>
#include <string_view>

#include "interpose/pfn_name.h"
#include "workload.h"

int main(int argc, char** argv) {
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!libcuda) {
    std::fprintf(stderr, "procaddr_app: %s\n", dlerror());
    return 2;
  }
  auto get_proc =
      reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(libcuda, "cuGetProcAddress_v2"));
  if (!get_proc) return 2;
  gandiva::testapp::Driver d;
  bool ok = true;
  // Ask for each function as cudart would: base name, the version its PFN was
  // introduced at (at least 12000, as CUDA 12+ cudart asks), per-thread flag.
#define GD_FETCH(name, pfn)                                                                    \
  {                                                                                            \
    constexpr auto parsed = gandiva::shim::ParsePfnName(#pfn);                                 \
    const std::string base(parsed.base);                                                       \
    void* fn = nullptr;                                                                        \
    CUdriverProcAddressQueryResult found;                                                      \
    const int version =                                                                        \
        parsed.version == 13000 ? 13000 : (parsed.version >= 12000 ? parsed.version : 12000);  \
    const cuuint64_t flags = parsed.per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM \
                                               : CU_GET_PROC_ADDRESS_DEFAULT;                  \
    if (get_proc(base.c_str(), &fn, version, flags, &found) != CUDA_SUCCESS || !fn) {          \
      std::fprintf(stderr, "procaddr_app: no %s\n", #name);                                    \
      ok = false;                                                                              \
    }                                                                                          \
    d.name = reinterpret_cast<pfn>(fn);                                                        \
  }
  GD_APP_DRIVER(GD_FETCH)
#undef GD_FETCH
  if (!ok) return 2;
  return gandiva::testapp::RunWorkload(d, argc, argv);
}
