// Device-memory swap with stable addresses, run on the boundary thread while the
// job is parked (all other issuing threads are gated). Swap-out copies every
// VMM-backed allocation to host memory (pinned, in chunks) and unmaps its physical
// memory, keeping the virtual range; swap-in maps new memory at the same addresses,
// copies back and verifies. Other allocations stay resident (see docs/shim.md).
#ifndef GANDIVA_SHIM_SWAP_H_
#define GANDIVA_SHIM_SWAP_H_

#include <cstdint>

#include "gandiva/runtime/job_runtime.h"
#include "interpose/cuda_api.h"

namespace gandiva::shim {

enum class SwapVerify { kNone, kSample, kFull };  // GANDIVA_SHIM_SWAP_VERIFY=none|sample|full

struct SwapResult {
  CUresult status = CUDA_SUCCESS;
  uint64_t bytes = 0;        // bytes copied
  uint32_t allocations = 0;  // allocations moved
  uint64_t ns = 0;           // wall time
};

// Copies out and releases every resident VMM allocation. On failure nothing is
// released: the job keeps running with its memory resident.
SwapResult SwapOutAll();
// Maps, copies back and verifies every swapped allocation. On failure (out of
// memory) the ones done stay done; call again to finish.
SwapResult SwapInAll();
SwapVerify CurrentSwapVerify();

// The park hooks the shim installs: act on cb->swap_request around a park.
runtime::ParkHooks SwapParkHooks();

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_SWAP_H_
