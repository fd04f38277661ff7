// Device memory in the job's checkpoint: the shim registers one section,
// "cuda.device_memory", holding every allocation it tracks (size, how it was made,
// bytes), so that a checkpoint, a restart with `gandiva run --restore` and a
// migration carry the device state together with the host state the job registered.
// Save and load run on the checkpointing thread while the job is at a boundary;
// neither is on the launch path.
#ifndef GANDIVA_SHIM_DEVICE_CHECKPOINT_H_
#define GANDIVA_SHIM_DEVICE_CHECKPOINT_H_

#include <cstdint>

#include "gandiva/checkpoint/registry.h"
#include "gandiva/status.h"

namespace gandiva::shim {

inline constexpr const char* kDeviceSectionName = "cuda.device_memory";

// Registers the section in the process's state registry (once; the same registry
// libgandiva.so and the Python extension use). Off with GANDIVA_SHIM_CHECKPOINT=0.
void RegisterDeviceCheckpoint();

// OK when a checkpoint of the device memory could be restored: the live allocations
// are those the job had at its first iteration boundary (nothing made or freed
// since) and none was mapped by the program itself. Else FailedPrecondition saying
// what to register instead. Runs before the checkpoint's target is opened.
Status CheckDeviceMemory();

// Synchronises every context, then writes a table of all tracked allocations in
// allocation order followed by their bytes, copied device->host in chunks through
// the real driver. Fails (nothing is hidden) if the program mapped physical memory
// with cuMemCreate itself: those mappings are not tracked by address.
Status SaveDeviceMemory(checkpoint::SectionWriter& w);
// Matches the saved allocations to this process's live ones by rank in allocation
// order, checks count, sizes and kinds before touching any memory, then copies the
// bytes host->device. A mismatch is FailedPrecondition, naming the first difference.
Status LoadDeviceMemory(checkpoint::SectionReader& r);

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_DEVICE_CHECKPOINT_H_
