// Memory caps under the real shim and the stand-in driver: two capped jobs on one
// device (the stand-in's counters file shared, so they share its memory), one asking
// beyond its cap and refused while the other keeps its buffers and its share; and a
// job at its cap exactly, swapped out and in, which the cap must not stop.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "shim_job.h"

namespace gandiva::shim {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kDevice = 1024 * kMiB;
constexpr uint64_t kKeeperCap = 256 * kMiB;
constexpr uint64_t kHogCap = 384 * kMiB;

std::string CapEnv(uint64_t bytes) { return "GANDIVA_GPU_MEMORY_BYTES=" + std::to_string(bytes); }
std::string DeviceEnv() { return "GD_STANDIN_DEVICE_MEM=" + std::to_string(kDevice); }

using ShimMemoryCap = ShimJob;

// The hog asks beyond its cap on a device with room for it, in every capped call, and
// is refused each time; it is told its cap as the device's memory, and fills it
// exactly. Meanwhile the keeper's buffers stay byte-identical and the rest of its cap
// stays its own (memcap_app checks both and exits 1 if either fails).
TEST_F(ShimMemoryCap, AJobBeyondItsCapIsRefusedAndItsNeighbourKeepsItsShare) {
  const std::string ready = dir_ + ".ready", go = dir_ + ".go";
  StartProgram({GD_MEMCAP_APP, "--role", "keeper", "--ready", ready, "--go", go},
               {CapEnv(kKeeperCap), DeviceEnv()});
  const pid_t keeper = pid_;
  ASSERT_TRUE(WaitFor([&] { return access(ready.c_str(), F_OK) == 0; }));
  EXPECT_EQ(counters_->device_bytes.load(), 3 * kKeeperCap / 4);

  ASSERT_NE(OtherControlBlock(), nullptr);
  StartProgram({GD_MEMCAP_APP, "--role", "hog"}, {CapEnv(kHogCap), DeviceEnv()}, true, other_name_);
  EXPECT_EQ(Wait(), 0) << "the hog was given memory beyond its cap or told a wrong total";
  auto shim = ShimReport();  // the hog's (the keeper writes its own when it ends)
  EXPECT_EQ(shim["memory_cap"], kHogCap);
  EXPECT_EQ(shim["memory_cap_charged"], 0u);
  // Five calls beyond the cap, then four beyond what was left of it (memcap_app).
  EXPECT_EQ(shim["memory_cap_refused"], 9u);
  EXPECT_EQ(shim["calls.cuDeviceTotalMem_v2"], 1u);  // reached through cuGetProcAddress
  EXPECT_GT(shim["calls.cuMemGetInfo_v2"], 0u);
  // Everything the hog had is back, and none of the keeper's memory went anywhere.
  EXPECT_EQ(counters_->device_bytes.load(), 3 * kKeeperCap / 4);

  pid_ = keeper;
  FILE* f = std::fopen(go.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  EXPECT_EQ(Wait(), 0) << "the keeper's buffers or share changed while the hog ran";
  EXPECT_EQ(counters_->device_bytes.load(), 0u);
}

// A job whose cap is exactly its footprint swaps out and back in (its own memory,
// within its cap, returns to the same addresses through the real driver, never
// through a capped hook) and finishes with every byte intact; one byte less of cap and
// its set-up is refused, so the cap really is that tight.
TEST_F(ShimMemoryCap, SwapInOfAJobAtItsCapIsNotRefused) {
  const std::vector<std::string> workload = {GD_DIRECT_APP, "--image",   GD_CUBIN, "--report",
                                             dir_ + ".app", "--buffers", "5"};
  std::vector<std::string> measure = workload;
  measure.insert(measure.end(), {"--iterations", "300"});
  StartProgram(measure, {}, /*managed=*/false);
  ASSERT_EQ(Wait(), 0);
  const uint64_t footprint = AppReport()["expected_cap_bytes"];
  ASSERT_GT(footprint, 16 * kMiB);

  std::vector<std::string> run = workload;
  run.insert(run.end(), {"--iterations", "300", "--threads", "2", "--sleep-us", "1000"});
  StartProgram(run, {CapEnv(footprint)});
  ASSERT_TRUE(WaitFor([&] { return cb_->profile.iterations.load() >= 5; }));
  SwapCycle();
  ASSERT_EQ(Wait(), 0) << "memory differs after swap (exit 3) or a call was refused (2)";
  EXPECT_EQ(AppReport()["content_errors"], 0u);

  StartProgram(measure, {CapEnv(footprint - 1)}, /*managed=*/false);
  EXPECT_EQ(Wait(), 2) << "a cap one byte below the footprint did not refuse an allocation";
}

}  // namespace
}  // namespace gandiva::shim
