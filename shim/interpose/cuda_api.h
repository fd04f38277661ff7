// The CUDA driver API as the shim sees it: every versioned name declared
// (cuMemAlloc_v2 and cuMemAlloc, cuLaunchKernel and cuLaunchKernel_ptsz), and the
// versioned PFN types. Include this instead of <cuda.h> anywhere in the shim.
#ifndef GANDIVA_SHIM_CUDA_API_H_
#define GANDIVA_SHIM_CUDA_API_H_

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <cudaTypedefs.h>

#endif  // GANDIVA_SHIM_CUDA_API_H_
