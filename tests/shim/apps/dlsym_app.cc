// Test program: the workload reaching the driver the way XLA's StreamExecutor (JAX,
// TensorFlow) does: dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL), then one
// dlsym(handle, name) per entry point, by the versioned name the library exports
// (XLA's cuda stub resolves its trampolines that way). No cuGetProcAddress, not
// linked with libcuda. Kernels come from --image (nvcc-built).
#include <dlfcn.h>

#include <cstdio>

#include "workload.h"

int main(int argc, char** argv) {
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!libcuda) {
    std::fprintf(stderr, "dlsym_app: %s\n", dlerror());
    return 2;
  }
  gandiva::testapp::Driver d;
  bool ok = true;
#define GD_LOOKUP(name, pfn)                             \
  d.name = reinterpret_cast<pfn>(dlsym(libcuda, #name)); \
  if (!d.name) {                                         \
    std::fprintf(stderr, "dlsym_app: no %s\n", #name);   \
    ok = false;                                          \
  }
  GD_APP_DRIVER(GD_LOOKUP)
#undef GD_LOOKUP
  if (!ok) return 2;
  return gandiva::testapp::RunWorkload(d, argc, argv);
}
