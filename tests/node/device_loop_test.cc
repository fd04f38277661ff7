// A device loop slicing two joined devices with real threads (FakeJob plays
// each job's side of its control block): a job across both devices and a job
// on each take turns, the job across them never runs beside either, and the
// two single-device jobs run beside each other.
#include "devices/device_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fake_job.h"
#include "gandiva/common/clock.h"
#include "gandiva/common/units.h"

namespace gandiva::controller {
namespace {

using testing::FakeJob;
using testing::NewControlBlock;

DeviceInfo Cpu(int k) {
  DeviceInfo d;
  d.name = "cpu" + std::to_string(k);
  d.model = "host CPU";
  return d;
}

bool Runs(const std::shared_ptr<runtime::ControlBlock>& cb) {
  return cb->phase.load() == runtime::kPhaseRunning;
}

TEST(JoinedDevicesTest, AJobAcrossTwoDevicesNeverRunsBesideAJobOnEither) {
  DeviceLoop loop(Cpu(0), 20 * kMs, 1000);
  ASSERT_EQ(loop.AddDevice(Cpu(1)), 1);
  EXPECT_EQ(loop.AddDevice(Cpu(1)), 1);  // known already
  EXPECT_EQ(loop.DeviceNames(), (std::vector<std::string>{"cpu0", "cpu1"}));
  loop.Start();
  auto on0 = NewControlBlock(1), on1 = NewControlBlock(2), across = NewControlBlock(3);
  FakeJob job0(on0, "a"), job1(on1, "b"), gang(across, "c");
  loop.AddJob(1, on0, 1.0, false, {}, 0b01);
  loop.AddJob(2, on1, 1.0, false, {}, 0b10);
  loop.AddJob(3, across, 1.0, false, {}, 0b11);
  EXPECT_EQ(loop.DevicesOfJob(3), (std::vector<std::string>{"cpu0", "cpu1"}));
  EXPECT_EQ(loop.JobsOn("cpu0"), 2u);
  EXPECT_EQ(loop.JobsOn("cpu1"), 2u);

  // New jobs run until their first boundary (their start-up, unmanaged); from
  // their first park on, the loop decides.
  for (const auto& cb : {on0, on1, across})
    while (cb->parked_at_ns.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int gang_seen = 0, pair_seen = 0, overlaps = 0;
  const uint64_t until = MonotonicNowNs() + 1500 * kMs;
  while (MonotonicNowNs() < until) {
    // The three phases are not read at one instant: a job on a device counts
    // as running beside the gang only if it ran before and after the gang's read.
    const bool a1 = Runs(on0), b1 = Runs(on1);
    const bool g = Runs(across);
    const bool a = a1 && Runs(on0), b = b1 && Runs(on1);
    gang_seen += g;
    pair_seen += a && b;
    overlaps += g && (a || b);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_EQ(overlaps, 0) << "the job across both devices ran beside a job on one of them";
  EXPECT_GT(gang_seen, 100);
  EXPECT_GT(pair_seen, 100) << "the jobs on cpu0 and cpu1 never ran side by side";

  const DeviceSnapshot s0 = loop.Snapshot("cpu0"), s1 = loop.Snapshot("cpu1");
  EXPECT_EQ(s0.info.name, "cpu0");
  EXPECT_EQ(s1.info.name, "cpu1");
  EXPECT_EQ(s0.jobs, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(s1.jobs, (std::vector<uint64_t>{2, 3}));
  EXPECT_GT(s0.switch_count + s1.switch_count, 4u);
  for (const SwitchRecord& r : loop.Switches(1000, "cpu1")) EXPECT_EQ(r.device, "cpu1");
  EXPECT_GT(loop.Usage(3).slices, 2u);
  loop.Stop();
}

}  // namespace
}  // namespace gandiva::controller
