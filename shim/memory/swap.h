// Device-memory swap with stable addresses, run on the boundary thread while the
// job is parked (all other issuing threads are gated). Swap-out copies every
// VMM-backed allocation to host memory and unmaps its physical memory, keeping the
// virtual range; swap-in maps new memory at the same addresses, copies back and
// verifies. The copies go through a ring of reused pinned buffers, overlapped with
// the host-side memcpy, or straight into a pinned image (see docs/shim.md).
#ifndef GANDIVA_SHIM_SWAP_H_
#define GANDIVA_SHIM_SWAP_H_

#include <cstdint>

#include "gandiva/runtime/job_runtime.h"
#include "interpose/cuda_api.h"
#include "memory/memory_tracker.h"

namespace gandiva::shim {

enum class SwapVerify { kNone, kSample, kFull };  // GANDIVA_SHIM_SWAP_VERIFY=none|sample|full

// Where the host copy lives (GANDIVA_SHIM_SWAP_HOST):
//  kStaged: pageable memory; device<->host through a ring of pinned buffers (allocated
//           once, reused), async copies on the shim's stream overlapped with the
//           pinned<->pageable memcpy (split over a few threads).
//  kPinned: the whole image in pinned memory, copied by DMA directly; pinning costs
//           about as much as the copy (H100: 4 GiB in 0.24 s), so it pays only when
//           the image is kept across swap cycles (GANDIVA_SHIM_SWAP_KEEP_HOST=1).
//  kSync:   the old path: synchronous cuMemcpyDtoH/HtoD per chunk (for comparison).
enum class SwapHost { kStaged, kPinned, kSync };

struct SwapConfig {
  SwapHost host = SwapHost::kStaged;
  size_t chunk_bytes = 16ull << 20;  // GANDIVA_SHIM_SWAP_CHUNK_BYTES (page multiple)
  int ring = 4;                      // GANDIVA_SHIM_SWAP_RING: pinned buffers of chunk_bytes
  int threads = 4;                   // GANDIVA_SHIM_SWAP_THREADS: memcpy threads (kStaged)
  bool keep_host = true;             // GANDIVA_SHIM_SWAP_KEEP_HOST: keep host images across cycles
};
// The configuration from the environment, read at every swap (tests and the bench change it).
SwapConfig CurrentSwapConfig();
const char* SwapHostName(SwapHost host);

struct SwapResult {
  CUresult status = CUDA_SUCCESS;
  uint64_t bytes = 0;          // bytes copied
  uint32_t allocations = 0;    // allocations moved
  uint64_t ns = 0;             // wall time
  uint64_t host_alloc_ns = 0;  // of which: making host images (pinning, first touch)
};

// Copies out and releases every resident VMM allocation. On failure nothing is
// released: the job keeps running with its memory resident.
SwapResult SwapOutAll();
// Maps, copies back and verifies every swapped allocation. On failure (out of
// memory) the ones done stay done; call again to finish.
SwapResult SwapInAll();
SwapVerify CurrentSwapVerify();

// Frees an allocation's host image (swapped out, or kept from an earlier cycle).
void ReleaseHostImage(Allocation* a);

// The park hooks the shim installs: act on cb->swap_request around a park.
runtime::ParkHooks SwapParkHooks();

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_SWAP_H_
