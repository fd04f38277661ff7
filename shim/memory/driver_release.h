// The second way a parked job gives its device memory back: the CUDA driver's own
// checkpoint API (cuCheckpointProcessLock + ...Checkpoint at park, ...Restore +
// ...Unlock at resume), chosen with GANDIVA_SHIM_RELEASE=driver (gandivad's
// --release driver sets it for the jobs on its GPUs). The driver then moves all of
// the process's device memory (every allocation, whoever made it: the context,
// libraries, memory the shim cannot swap) to host memory it manages and brings it
// back at the same addresses. The process calls it on its own pid from the thread
// serving the park: the driver allows it (NVIDIA's checkpoint sample does), and its
// other threads are gated by the shim anyway; their driver calls made meanwhile
// would block in the driver until the unlock.
#ifndef GANDIVA_SHIM_DRIVER_RELEASE_H_
#define GANDIVA_SHIM_DRIVER_RELEASE_H_

#include <cstdint>

#include "interpose/cuda_api.h"

namespace gandiva::shim {

enum class ReleaseMechanism { kSwap, kDriver };
// GANDIVA_SHIM_RELEASE: swap (default) or driver; read at every park (tests change it).
ReleaseMechanism CurrentReleaseMechanism();

struct DriverReleaseResult {
  CUresult status = CUDA_SUCCESS;
  const char* step = "";  // the driver call that failed
  uint64_t lock_ns = 0;   // lock (or restore) ...
  uint64_t move_ns = 0;   // ... then checkpoint (or unlock)
};

// Lock, then checkpoint this process. On failure the process is left running with
// its memory resident (a failed checkpoint is unlocked again).
DriverReleaseResult DriverReleaseOut();
// Restore, then unlock this process. CUDA_ERROR_OUT_OF_MEMORY (no room on the device)
// leaves it checkpointed: call again.
DriverReleaseResult DriverReleaseIn();
// True while this process's memory is released through the driver (between a
// successful DriverReleaseOut and DriverReleaseIn).
bool DriverReleased();

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_DRIVER_RELEASE_H_
