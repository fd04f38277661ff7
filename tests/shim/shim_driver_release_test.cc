// The driver's checkpoint API with a job under the real shim and the stand-in driver:
// a parked job releasing its device memory through it (GANDIVA_SHIM_RELEASE=driver,
// what gandivad --release driver sets), and a job that registered no state of its own
// checkpointed and restored by pid from another process (the device-memory half of a
// process checkpoint). The program checks every byte it wrote, through its original
// pointers, at its end.
#include <dlfcn.h>

#include "shim_job.h"

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <cudaTypedefs.h>

namespace gandiva::shim {
namespace {

class ShimDriverRelease : public ShimJob {
 protected:
  void StartApp(std::vector<std::string> extra_env = {}) {
    StartProgram({GD_DIRECT_APP, "--image", GD_CUBIN, "--report", dir_ + ".app", "--iterations",
                  "300", "--threads", "2", "--sleep-us", "1000", "--buffers", "5"},
                 std::move(extra_env));
  }
};

TEST_F(ShimDriverRelease, ParkedJobGivesBackAllItsDeviceMemoryThroughTheDriver) {
  StartApp({"GANDIVA_SHIM_RELEASE=driver"});
  ASSERT_TRUE(WaitFor([&] { return cb_->profile.iterations.load() >= 5; }));
  const uint64_t device_before = counters_->device_bytes.load();
  ASSERT_GT(device_before, 0u);
  cb_->swap_request.store(runtime::kSwapOut);
  runtime::RequestSuspend(cb_);
  ASSERT_TRUE(runtime::WaitForPhase(cb_, runtime::kPhaseParked, 5'000'000'000ull));
  ASSERT_TRUE(WaitFor([&] { return cb_->swap_state.load() != runtime::kSwapResident; }));
  ASSERT_EQ(cb_->swap_state.load(), runtime::kSwapSwappedOut);
  auto app = AppReport();
  // All of it, not only the VMM-backed buffers swap would move.
  EXPECT_EQ(counters_->device_bytes.load(), 0u);
  EXPECT_GT(app["expected_device_bytes"], app["expected_vmm_bytes"]);
  EXPECT_EQ(cb_->device_bytes.load(), 0u);
  EXPECT_EQ(cb_->swapped_bytes.load(), app["expected_device_bytes"]);
  const uint64_t launches = counters_->launches.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(counters_->launches.load(), launches);

  cb_->swap_request.store(runtime::kSwapIn);
  runtime::RequestResume(cb_);
  ASSERT_TRUE(WaitFor([&] { return cb_->swap_state.load() == runtime::kSwapResident; }));
  EXPECT_EQ(counters_->device_bytes.load(), device_before);
  EXPECT_EQ(cb_->device_bytes.load(), app["expected_device_bytes"]);
  EXPECT_EQ(cb_->swapped_bytes.load(), 0u);
  ASSERT_EQ(Wait(), 0) << "device memory contents differ (exit 3) or a call failed (2)";
  EXPECT_EQ(AppReport()["content_errors"], 0u);
}

// The stand-in driver, loaded into this (the controlling) process as gandivad would
// load the real one.
struct CheckpointApi {
  PFN_cuCheckpointProcessLock_v12080 lock;
  PFN_cuCheckpointProcessCheckpoint_v12080 checkpoint;
  PFN_cuCheckpointProcessRestore_v12080 restore;
  PFN_cuCheckpointProcessUnlock_v12080 unlock;
  PFN_cuCheckpointProcessGetState_v12080 state;
};

bool LoadCheckpointApi(CheckpointApi* api) {
  void* h = dlopen(GD_STANDIN_DIR "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  auto init = reinterpret_cast<PFN_cuInit_v2000>(dlsym(h, "cuInit"));
  api->lock =
      reinterpret_cast<PFN_cuCheckpointProcessLock_v12080>(dlsym(h, "cuCheckpointProcessLock"));
  api->checkpoint = reinterpret_cast<PFN_cuCheckpointProcessCheckpoint_v12080>(
      dlsym(h, "cuCheckpointProcessCheckpoint"));
  api->restore = reinterpret_cast<PFN_cuCheckpointProcessRestore_v12080>(
      dlsym(h, "cuCheckpointProcessRestore"));
  api->unlock =
      reinterpret_cast<PFN_cuCheckpointProcessUnlock_v12080>(dlsym(h, "cuCheckpointProcessUnlock"));
  api->state = reinterpret_cast<PFN_cuCheckpointProcessGetState_v12080>(
      dlsym(h, "cuCheckpointProcessGetState"));
  return init && api->lock && api->checkpoint && api->restore && api->unlock && api->state &&
         init(0) == CUDA_SUCCESS;
}

TEST_F(ShimDriverRelease, JobThatRegisteredNothingIsCheckpointedAndRestoredByPid) {
  CheckpointApi api;
  ASSERT_TRUE(LoadCheckpointApi(&api));
  StartApp();  // running, not parked: the lock stops it wherever it is
  ASSERT_TRUE(WaitFor([&] { return cb_->profile.iterations.load() >= 5; }));
  const uint64_t device_before = counters_->device_bytes.load();
  ASSERT_GT(device_before, 0u);

  ASSERT_EQ(api.lock(pid_, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(api.checkpoint(pid_, nullptr), CUDA_SUCCESS);
  CUprocessState state;
  ASSERT_EQ(api.state(pid_, &state), CUDA_SUCCESS);
  EXPECT_EQ(state, CU_PROCESS_STATE_CHECKPOINTED);
  EXPECT_EQ(counters_->device_bytes.load(), 0u);  // every byte of it off the device
  const uint64_t launches = counters_->launches.load();
  const uint64_t iterations = cb_->profile.iterations.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(counters_->launches.load(), launches);  // its calls wait in the driver
  EXPECT_LE(cb_->profile.iterations.load(), iterations + 1);

  ASSERT_EQ(api.restore(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(counters_->device_bytes.load(), device_before);
  ASSERT_EQ(api.unlock(pid_, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(Wait(), 0) << "device memory contents differ (exit 3) or a call failed (2)";
  EXPECT_EQ(AppReport()["content_errors"], 0u);
}

}  // namespace
}  // namespace gandiva::shim
