// A training-loop-shaped CUDA driver-API program for the shim's tests: allocations,
// an iteration loop of launches, copies and syncs of known structure, worker threads
// that keep launching, and a final check of device memory contents. The driver's
// functions come from a Driver table, filled by direct linking or by cuGetProcAddress.
#ifndef GANDIVA_TESTS_SHIM_APPS_WORKLOAD_H_
#define GANDIVA_TESTS_SHIM_APPS_WORKLOAD_H_

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

namespace gandiva::testapp {

// Each entry: the field, its PFN type, the versioned driver name it must resolve to.
#define GD_APP_DRIVER(X)                                                 \
  X(cuInit, PFN_cuInit_v2000)                                            \
  X(cuDeviceGet, PFN_cuDeviceGet_v2000)                                  \
  X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000)        \
  X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000)                          \
  X(cuCtxSynchronize, PFN_cuCtxSynchronize_v2000)                        \
  X(cuModuleLoadData, PFN_cuModuleLoadData_v2000)                        \
  X(cuModuleGetFunction, PFN_cuModuleGetFunction_v2000)                  \
  X(cuMemAlloc_v2, PFN_cuMemAlloc_v3020)                                 \
  X(cuMemFree_v2, PFN_cuMemFree_v3020)                                   \
  X(cuMemAllocPitch_v2, PFN_cuMemAllocPitch_v3020)                       \
  X(cuMemAllocAsync, PFN_cuMemAllocAsync_v11020)                         \
  X(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020)                           \
  X(cuMemsetD32_v2, PFN_cuMemsetD32_v3020)                               \
  X(cuMemcpyHtoD_v2, PFN_cuMemcpyHtoD_v3020)                             \
  X(cuMemcpyHtoDAsync_v2, PFN_cuMemcpyHtoDAsync_v3020)                   \
  X(cuMemcpyDtoH_v2, PFN_cuMemcpyDtoH_v3020)                             \
  X(cuMemcpyDtoH_v2_ptds, PFN_cuMemcpyDtoH_v7000_ptds)                   \
  X(cuMemCreate, PFN_cuMemCreate_v10020)                                 \
  X(cuMemRelease, PFN_cuMemRelease_v10020)                               \
  X(cuMemAddressReserve, PFN_cuMemAddressReserve_v10020)                 \
  X(cuMemAddressFree, PFN_cuMemAddressFree_v10020)                       \
  X(cuMemMap, PFN_cuMemMap_v10020)                                       \
  X(cuMemUnmap, PFN_cuMemUnmap_v10020)                                   \
  X(cuMemSetAccess, PFN_cuMemSetAccess_v10020)                           \
  X(cuLaunchKernel, PFN_cuLaunchKernel_v4000)                            \
  X(cuLaunchKernel_ptsz, PFN_cuLaunchKernel_v7000_ptsz)                  \
  X(cuLaunchKernelEx, PFN_cuLaunchKernelEx_v11060)                       \
  X(cuStreamCreate, PFN_cuStreamCreate_v2000)                            \
  X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)                  \
  X(cuStreamSynchronize_ptsz, PFN_cuStreamSynchronize_v7000_ptsz)        \
  X(cuStreamBeginCapture_v2, PFN_cuStreamBeginCapture_v10010)            \
  X(cuStreamEndCapture, PFN_cuStreamEndCapture_v10000)                   \
  X(cuGraphInstantiateWithFlags, PFN_cuGraphInstantiateWithFlags_v11040) \
  X(cuGraphLaunch, PFN_cuGraphLaunch_v10000)                             \
  X(cuEventCreate, PFN_cuEventCreate_v2000)                              \
  X(cuEventRecord, PFN_cuEventRecord_v2000)                              \
  X(cuEventSynchronize, PFN_cuEventSynchronize_v2000)

struct Driver {
#define GD_FIELD(name, pfn) pfn name = nullptr;
  GD_APP_DRIVER(GD_FIELD)
#undef GD_FIELD
};

// Runs the workload (arguments: see workload.cc). Returns the process exit code.
int RunWorkload(const Driver& driver, int argc, char** argv);

}  // namespace gandiva::testapp

#endif  // GANDIVA_TESTS_SHIM_APPS_WORKLOAD_H_
