// LiveCluster with jobs across several devices of a node (--gpus N): one
// launch naming all of them, a group of several devices, Resize and resuming
// on other devices as checkpoint and relaunch. Nodes are the scripted double
// of live_cluster_fixture.h, with two devices each.
#include <gtest/gtest.h>

#include "live_cluster_fixture.h"

namespace gandiva::sched::live {
namespace {

class LiveDevicesTest : public LiveClusterTest {
 protected:
  void SetUp() override {
    LiveClusterTest::SetUp();
    nodes_.devices_per_node = 2;  // a: GPUs 0, 1; b: GPUs 2, 3
  }
  JobId Admit(LiveCluster& c, int gpus, bool restartable) {
    JobRecord r = Submitted("ddp");
    r.gpus = gpus;
    r.ranks = gpus;
    r.restartable = restartable;
    EXPECT_TRUE(store_->Update(r).ok());
    return c.Admit(r);
  }
  const ScriptedNodes::CallRecord& Last(MessageType type) const {
    for (auto it = nodes_.calls.rbegin(); it != nodes_.calls.rend(); ++it)
      if (it->type == type) return *it;
    static const ScriptedNodes::CallRecord kNone{};
    return kNone;
  }
};

TEST_F(LiveDevicesTest, AJobOfTwoDevicesIsOneLaunchAcrossThemAndOneGroup) {
  auto c = MakeCluster();
  const JobId j = Admit(*c, 2, false);
  const GpuId a01[] = {0, 1};
  ASSERT_TRUE(c->Start(j, a01).ok());
  const Json& launch = nodes_.calls.back().fields;
  EXPECT_EQ(launch["devices"], (Json{"cpu0", "cpu1"}));
  EXPECT_FALSE(launch.contains("device"));
  EXPECT_EQ(Stored(1).device, "cpu0,cpu1");
  EXPECT_EQ(c->group_of(j), 0);
  EXPECT_EQ(c->group_of_gpu(1), 0);
  EXPECT_EQ(c->group(0).gpus.size(), 2u);
  EXPECT_EQ(c->free_gpus().total_free(), 2);

  // A job of one device cannot join a group of two, nor take one of its devices.
  const JobId single = c->Admit(Submitted("mlp"));
  const GpuId one = 1;
  EXPECT_FALSE(c->Start(single, {&one, 1}).ok());
  // Devices of two nodes are never one job's.
  const JobId other = Admit(*c, 2, false);
  const GpuId across[] = {1, 2};
  EXPECT_EQ(c->Start(other, across).code(), StatusCode::kInvalidArgument);

  // Suspended and resumed where it is parked.
  ASSERT_TRUE(c->Suspend(j, Preemption::kPark).ok());
  EXPECT_EQ(c->free_gpus().total_free(), 4);
  nodes_.jobs_[0][0]["state"] = "suspended";
  ASSERT_TRUE(c->Start(j, a01).ok());
  EXPECT_EQ(nodes_.calls.back().type, MessageType::kResume);
  EXPECT_EQ(c->group(0).gpus.size(), 2u);

  // Its end frees both devices.
  nodes_.jobs_[0][0] = ScriptedNodes::Record(1, "ddp.s1.a1", "exited", 0);
  c->Refresh();
  EXPECT_EQ(Stored(1).state, LiveJobState::kFinished);
  EXPECT_EQ(c->free_gpus().total_free(), 4);
  EXPECT_EQ(c->group_of_gpu(1), kNoGroup);
}

TEST_F(LiveDevicesTest, ResizeCheckpointsThenRelaunchesOnTheNewDevicesFromIt) {
  auto c = MakeCluster();
  const JobId j = Admit(*c, 1, true);
  const GpuId a0 = 0, a01[] = {0, 1};
  ASSERT_TRUE(c->Start(j, {&a0, 1}).ok());
  c->Refresh();                           // it runs: its node's figures come in
  nodes_.jobs_[0][0]["alone_ms"] = 10.0;  // its speed alone on the device it asked for

  ASSERT_TRUE(c->Resize(j, a01).ok());
  EXPECT_EQ(nodes_.CallsOf(MessageType::kSuspend), 1);
  ASSERT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 1);
  // The policy sees it on both devices at once, stalled until it runs there.
  EXPECT_EQ(c->gpus(j).size(), 2u);
  EXPECT_EQ(c->free_gpus().total_free(), 2);
  EXPECT_EQ(c->MeasuredRate(j), 0);
  EXPECT_EQ(c->counters().resizes, 1);

  c->Refresh();  // still writing: nothing else happens
  EXPECT_EQ(nodes_.CallsOf(MessageType::kLaunch), 1);
  CheckpointDone();
  c->Refresh();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kLaunch), 2);
  const Json& relaunch = Last(MessageType::kLaunch).fields;
  EXPECT_EQ(relaunch["devices"], (Json{"cpu0", "cpu1"}));
  EXPECT_EQ(relaunch["restore"], Stored(1).checkpoint_dir);
  EXPECT_EQ(relaunch["name"], "ddp.s1.a2");
  EXPECT_GE(nodes_.CallsOf(MessageType::kKill), 1) << "the parked run on cpu0";
  EXPECT_EQ(Last(MessageType::kKill).fields["job"], 1);
  const JobRecord r = Stored(1);
  EXPECT_EQ(r.state, LiveJobState::kRunning);
  EXPECT_EQ(r.device, "cpu0,cpu1");
  EXPECT_EQ(r.gpus, 1) << "what it asked for is kept";
  EXPECT_DOUBLE_EQ(r.attained, 2.0) << "the first run's service is kept";
  // Twice as fast on two devices: its rate is against its speed alone on one.
  nodes_.jobs_[0][1]["ewma_ms"] = 5.0;
  nodes_.jobs_[0][1]["rate_vs_alone"] = 1.0;  // alone on its two devices now
  c->Refresh();
  EXPECT_DOUBLE_EQ(c->MeasuredRate(j), 2.0);

  // And back to one device the same way.
  ASSERT_TRUE(c->Resize(j, {&a0, 1}).ok());
  EXPECT_EQ(c->free_gpus().total_free(), 3);
}

TEST_F(LiveDevicesTest, ResizeIsRefusedWhereItCannotRestart) {
  auto c = MakeCluster();
  const JobId plain = Admit(*c, 1, false);
  const GpuId a0 = 0, a01[] = {0, 1}, b2 = 2, a0b2[] = {0, 2};
  ASSERT_TRUE(c->Start(plain, {&a0, 1}).ok());
  EXPECT_EQ(c->Resize(plain, a01).code(), StatusCode::kFailedPrecondition)
      << "not restartable: it would lose its progress";
  EXPECT_EQ(nodes_.CallsOf(MessageType::kResume), 1) << "parked to resize, resumed on refusal";
  const JobId train = Admit(*c, 1, true);
  ASSERT_TRUE(c->Start(train, {&b2, 1}).ok());
  EXPECT_EQ(c->Resize(train, a0b2).code(), StatusCode::kInvalidArgument) << "across nodes";
  EXPECT_EQ(c->Resize(train, a01).code(), StatusCode::kInvalidArgument) << "another node";
}

TEST_F(LiveDevicesTest, AParkedJobAcrossDevicesResumesElsewhereByRestartingThere) {
  auto c = MakeCluster();
  const JobId j = Admit(*c, 2, true);
  const GpuId a01[] = {0, 1}, b23[] = {2, 3};
  ASSERT_TRUE(c->Start(j, a01).ok());
  ASSERT_TRUE(c->Suspend(j, Preemption::kPark).ok());
  nodes_.jobs_[0][0]["state"] = "suspended";
  ASSERT_TRUE(c->Start(j, b23).ok());
  EXPECT_EQ(nodes_.calls.back().type, MessageType::kCheckpoint);
  EXPECT_EQ(c->state(j), JobState::kRunning);
  EXPECT_EQ(c->group_of(j), 2);
  CheckpointDone();
  c->Refresh();
  const Json& launch = Last(MessageType::kLaunch).fields;
  EXPECT_EQ(Last(MessageType::kLaunch).node, 1);
  EXPECT_EQ(launch["devices"], (Json{"cpu0", "cpu1"}));
  EXPECT_EQ(Stored(1).node, "b");
}

}  // namespace
}  // namespace gandiva::sched::live
