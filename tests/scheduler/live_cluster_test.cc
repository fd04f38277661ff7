// LiveCluster's bookkeeping against nodes that answer from a script
// (ScriptedNodes, a test double of the node API: the real nodes are in
// tests/integration/test_scheduler.py). What these cover are the moments an
// integration test cannot aim at: a scheduler that died between recording a
// launch and hearing its reply, a job that ended while no scheduler ran, a
// left-over run of an earlier attempt, a node that stops answering.
#include "live/live_cluster.h"

#include <gtest/gtest.h>

#include "live_cluster_fixture.h"

namespace gandiva::sched::live {
namespace {

TEST_F(LiveClusterTest, StartLaunchesUnderTheAttemptsNameAndRecordsWhereItRuns) {
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  const GpuId b = 1;
  ASSERT_TRUE(c->Start(j, {&b, 1}).ok());
  ASSERT_EQ(nodes_.CallsOf(MessageType::kLaunch), 1);
  EXPECT_EQ(nodes_.calls.back().node, 1);
  EXPECT_EQ(nodes_.calls.back().fields["name"], "train.s1.a1");
  const JobRecord r = Stored(1);
  EXPECT_EQ(r.state, LiveJobState::kRunning);
  EXPECT_EQ(r.node, "b");
  EXPECT_EQ(r.node_job, 1);
  EXPECT_FALSE(c->free_gpus().IsFree(b));
  EXPECT_EQ(c->group(b).members.size(), 1u);
}

TEST_F(LiveClusterTest, ARestartAdoptsALaunchWhoseReplyItNeverHeard) {
  // Recorded as starting before the launch; then the scheduler died.
  StoreAsPlaced("train", LiveJobState::kStarting, "a", 0);
  nodes_.jobs_[0].push_back(ScriptedNodes::Record(7, "train.s1.a1", "running"));
  auto c = MakeCluster();
  auto arrived = c->Recover();
  ASSERT_TRUE(arrived.ok());
  EXPECT_TRUE(arrived->empty()) << "it runs: the policy need not place it";
  EXPECT_EQ(Stored(1).state, LiveJobState::kRunning);
  EXPECT_EQ(Stored(1).node_job, 7);
  EXPECT_EQ(nodes_.CallsOf(MessageType::kLaunch), 0) << "not started twice";
  EXPECT_FALSE(c->free_gpus().IsFree(0));
}

TEST_F(LiveClusterTest, AJobThatEndedWhileNoSchedulerRanIsFinishedNotRunAgain) {
  StoreAsPlaced("train", LiveJobState::kRunning, "a", 3);
  nodes_.jobs_[0].push_back(ScriptedNodes::Record(3, "train.s1.a1", "exited", 0));
  auto c = MakeCluster();
  ASSERT_TRUE(c->Recover().ok());
  const ClusterEvents events = c->Refresh();
  EXPECT_EQ(events.finished, std::vector<JobId>{0});
  EXPECT_EQ(Stored(1).state, LiveJobState::kFinished);
  EXPECT_EQ(nodes_.CallsOf(MessageType::kLaunch), 0);
  EXPECT_TRUE(c->free_gpus().IsFree(0));
}

TEST_F(LiveClusterTest, AJobItsNodeDoesNotKnowGoesBackToTheQueue) {
  StoreAsPlaced("train", LiveJobState::kRunning, "b", 4);
  auto c = MakeCluster();
  auto arrived = c->Recover();
  ASSERT_TRUE(arrived.ok());
  EXPECT_TRUE(arrived->empty()) << "only parked jobs arrive from Recover";
  EXPECT_EQ(c->TakeArrivals(), std::vector<JobId>{0});
  EXPECT_EQ(Stored(1).state, LiveJobState::kQueued);
  EXPECT_EQ(Stored(1).attempt, 1) << "the next launch is attempt 2";
}

TEST_F(LiveClusterTest, ALeftOverRunOfAnEarlierAttemptIsKilled) {
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  // Attempt 1 ran on a, which was cut off; the job was requeued and runs on b now.
  nodes_.jobs_[0].push_back(ScriptedNodes::Record(1, "train.s1.a1", "running"));
  JobRecord r = Stored(1);
  r.attempt = 1;
  ASSERT_TRUE(store_->Update(r).ok());
  c = MakeCluster();
  ASSERT_TRUE(c->Recover().ok());
  const GpuId b = 1;
  ASSERT_TRUE(c->Start(j, {&b, 1}).ok());
  EXPECT_EQ(nodes_.calls.back().fields["name"], "train.s1.a2");
  c->Refresh();
  bool killed = false;
  for (auto& call : nodes_.calls)
    killed |= call.type == MessageType::kKill && call.node == 0 && call.fields["job"] == 1;
  EXPECT_TRUE(killed);
  for (auto& call : nodes_.calls)
    EXPECT_FALSE(call.type == MessageType::kKill && call.node == 1) << "the current run lives";
}

TEST_F(LiveClusterTest, ASilentNodeIsDownAfterItsGraceAndItsJobsAreRetried) {
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  EXPECT_EQ(c->TakeArrivals(), std::vector<JobId>{j});
  const GpuId a = 0;
  ASSERT_TRUE(c->Start(j, {&a, 1}).ok());
  nodes_.down_[0] = true;
  now_ += 2;
  EXPECT_TRUE(c->Refresh().finished.empty()) << "silent for 2 s: not yet down";
  EXPECT_TRUE(c->node_up(0));
  now_ += 4;
  // A lost node is an infrastructure failure: the job leaves the policy and
  // comes back after the first retry's wait (10 s).
  EXPECT_EQ(c->Refresh().finished, std::vector<JobId>{j});
  EXPECT_FALSE(c->node_up(0));
  EXPECT_EQ(Stored(1).state, LiveJobState::kQueued);
  EXPECT_EQ(Stored(1).failure, FailureClass::kInfrastructure);
  EXPECT_EQ(Stored(1).retries, 1);
  EXPECT_DOUBLE_EQ(Stored(1).not_before, now_ + 10);
  EXPECT_TRUE(c->TakeArrivals().empty()) << "it waits out its backoff";
  now_ += 10;
  EXPECT_EQ(c->TakeArrivals(), std::vector<JobId>{j});
  EXPECT_FALSE(c->free_gpus().IsFree(a)) << "a down node's device takes no job";
  EXPECT_EQ(c->Attained(j), 0.0) << "no report came, so nothing was counted";
  nodes_.down_[0] = false;
  c->Refresh();
  EXPECT_TRUE(c->node_up(0));
  EXPECT_TRUE(c->free_gpus().IsFree(a));
}

TEST_F(LiveClusterTest, ALaunchTheNodeRefusesFailsTheJob) {
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  nodes_.refuse_launch = true;
  const GpuId a = 0;
  EXPECT_FALSE(c->Start(j, {&a, 1}).ok());
  EXPECT_EQ(c->TakeEndedByActions(), std::vector<JobId>{j});
  EXPECT_EQ(Stored(1).state, LiveJobState::kFailed);
  EXPECT_NE(Stored(1).detail.find("no such command"), std::string::npos);
  EXPECT_TRUE(c->free_gpus().IsFree(a));
}

TEST_F(LiveClusterTest, WhatThePolicyReadsIsWhatTheNodeMeasured) {
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  const GpuId a = 0;
  ASSERT_TRUE(c->Start(j, {&a, 1}).ok());
  c->Refresh();
  EXPECT_DOUBLE_EQ(c->Attained(j), 2.0);
  EXPECT_DOUBLE_EQ(c->RunTime(j), 3.0);
  EXPECT_DOUBLE_EQ(c->MeasuredRate(j), 0.5);
  EXPECT_FALSE(c->OracleRemaining(j).has_value());
  EXPECT_FALSE(c->Resize(j, {&a, 1}).ok());
}

// A job that ran and ended between two passes is first seen ended: its
// service is still what the node measured (CI once saw a finished job with 0).
TEST_F(LiveClusterTest, AJobFirstSeenEndedKeepsTheServiceTheNodeMeasured) {
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  const GpuId a = 0;
  ASSERT_TRUE(c->Start(j, {&a, 1}).ok());
  nodes_.jobs_[0][0] = ScriptedNodes::Record(1, "train.s1.a1", "exited", 0);
  const ClusterEvents events = c->Refresh();
  EXPECT_EQ(events.finished, std::vector<JobId>{j});
  EXPECT_EQ(Stored(1).state, LiveJobState::kFinished);
  EXPECT_DOUBLE_EQ(c->Attained(j), 2.0);
  EXPECT_DOUBLE_EQ(Stored(1).attained, 2.0);
  EXPECT_DOUBLE_EQ(Stored(1).run_time, 3.0);
}

// The policies pack by job_type: jobs of one kind share a type, other kinds
// get others, and a job of no known kind (from an older store) has none.
TEST_F(LiveClusterTest, JobsOfOneKindShareAJobType) {
  auto c = MakeCluster();
  const JobId cnn1 = c->Admit(Submitted("a", "python3 cnn.py"));
  const JobId mlp = c->Admit(Submitted("b", "python3 mlp.py"));
  const JobId cnn2 = c->Admit(Submitted("c", "python3 cnn.py"));
  const JobId unknown = c->Admit(Submitted("d"));
  EXPECT_GE(c->info(cnn1).job_type, 0);
  EXPECT_EQ(c->info(cnn1).job_type, c->info(cnn2).job_type);
  EXPECT_GE(c->info(mlp).job_type, 0);
  EXPECT_NE(c->info(mlp).job_type, c->info(cnn1).job_type);
  EXPECT_EQ(c->info(unknown).job_type, -1);
}

// A guest packed on arrival never runs alone, so its node never learns its
// speed alone: its rate is its kind's alone time, learned from a job of the
// kind its node timed alone on a device of the same type, against its
// iteration time packed. A guest of a kind never timed alone has no measured
// rate (the 1.0 MeasuredRate takes for it is not a measurement).
TEST_F(LiveClusterTest, APackedGuestIsMeasuredAgainstItsKindsSpeedAlone) {
  auto c = MakeCluster();
  const GpuId a = 0, b = 1;
  const JobId cnn1 = c->Admit(Submitted("cnn1", "python3 cnn.py"));
  const JobId mlp = c->Admit(Submitted("mlp", "python3 mlp.py"));
  ASSERT_TRUE(c->Start(cnn1, {&b, 1}).ok());
  ASSERT_TRUE(c->Start(mlp, {&a, 1}).ok());
  nodes_.jobs_[1][0]["rate_vs_alone"] = 1.0;
  nodes_.jobs_[1][0]["alone_ms"] = 20.0;  // cnn alone on a cpu device: 20 ms an iteration
  nodes_.jobs_[0][0]["rate_vs_alone"] = 1.0;
  c->Refresh();
  EXPECT_TRUE(c->RateMeasured(cnn1));

  ASSERT_TRUE(c->SetShareMode(c->group_of(mlp), ShareMode::kPack).ok());
  const JobId cnn2 = c->Admit(Submitted("cnn2", "python3 cnn.py"));
  ASSERT_TRUE(c->Start(cnn2, {&a, 1}).ok());
  ASSERT_EQ(nodes_.jobs_[0].size(), 2u);
  nodes_.jobs_[0][1]["rate_vs_alone"] = nullptr;  // never alone: its node cannot say
  c->Refresh();
  EXPECT_FALSE(c->RateMeasured(cnn2)) << "no iteration timed yet";
  EXPECT_DOUBLE_EQ(c->MeasuredRate(cnn2), 1.0) << "assumed";
  nodes_.jobs_[0][1]["ewma_ms"] = 25.0;
  c->Refresh();
  EXPECT_TRUE(c->RateMeasured(cnn2));
  EXPECT_DOUBLE_EQ(c->MeasuredRate(cnn2), 20.0 / 25.0);

  // A kind never timed alone: no rate, however long it runs packed.
  ASSERT_TRUE(c->SetShareMode(c->group_of(cnn1), ShareMode::kPack).ok());
  const JobId rnn = c->Admit(Submitted("rnn", "python3 rnn.py"));
  ASSERT_TRUE(c->Start(rnn, {&b, 1}).ok());
  nodes_.jobs_[1][1]["rate_vs_alone"] = nullptr;
  nodes_.jobs_[1][1]["ewma_ms"] = 30.0;
  c->Refresh();
  EXPECT_FALSE(c->RateMeasured(rnn));
}

// A restartable job parked for stop_parked_after_s is checkpointed; once the
// checkpoint is complete its parked run is killed and it waits in the queue,
// to restart from that checkpoint on whichever device the policy picks.
TEST_F(LiveClusterTest, AJobParkedTooLongIsCheckpointedStoppedAndRelaunchedFromIt) {
  auto c = MakeCluster(/*stop_parked_after_s=*/10);
  const JobId j = ParkRestartableJob(*c);
  const GpuId b = 1;
  now_ += 5;
  c->Refresh();
  EXPECT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 0) << "parked for less than the wait";
  now_ += 6;
  c->Refresh();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 1);
  const std::string dir = nodes_.calls.back().fields["dir"];
  c->Refresh();  // the checkpoint is still being written: the job stays parked there
  EXPECT_EQ(nodes_.CallsOf(MessageType::kKill), 0);
  EXPECT_EQ(Stored(1).state, LiveJobState::kSuspended);

  nodes_.jobs_[0][0]["operation"] = {{"kind", "checkpoint"}, {"target", dir}, {"state", "done"}};
  c->Refresh();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kKill), 1) << "the parked run, once";
  EXPECT_EQ(nodes_.calls.back().fields["job"], 1);
  const JobRecord stopped = Stored(1);
  EXPECT_EQ(stopped.state, LiveJobState::kQueued);
  EXPECT_EQ(stopped.node, "");
  EXPECT_EQ(stopped.checkpoint_dir, dir);
  EXPECT_DOUBLE_EQ(stopped.attained, 2.0) << "the parked run's service is kept";
  EXPECT_EQ(c->state(j), JobState::kPending);
  EXPECT_EQ(c->counters().stops, 1);

  ASSERT_TRUE(c->Start(j, {&b, 1}).ok());
  EXPECT_EQ(nodes_.calls.back().type, MessageType::kLaunch);
  EXPECT_EQ(nodes_.calls.back().fields["restore"], dir);
  EXPECT_EQ(nodes_.calls.back().fields["name"], "train.s1.a2");
}

// The policy says stop: the job is parked and checkpointed at once, and
// stopped as soon as that checkpoint is complete (no stop_parked_after_s).
TEST_F(LiveClusterTest, APreemptionToStopCheckpointsAtOnceAndStopsTheJob) {
  auto c = MakeCluster();
  const JobId j = StartRestartableJob(*c);
  ASSERT_TRUE(c->Suspend(j, Preemption::kStop).ok());
  ASSERT_EQ(nodes_.CallsOf(MessageType::kSuspend), 1);
  ASSERT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 1);
  const std::string dir = nodes_.calls.back().fields["dir"];
  nodes_.jobs_[0][0]["state"] = "suspended";
  nodes_.jobs_[0][0]["operation"] = {{"kind", "checkpoint"}, {"target", dir}, {"state", "done"}};
  c->Refresh();
  EXPECT_EQ(nodes_.CallsOf(MessageType::kKill), 1) << "the parked run";
  EXPECT_EQ(Stored(1).state, LiveJobState::kQueued);
  EXPECT_EQ(Stored(1).checkpoint_dir, dir);
  EXPECT_EQ(c->counters().stops, 1);
  EXPECT_EQ(c->state(j), JobState::kPending);
}

// The policy stops a job while its periodic checkpoint is under way: that
// checkpoint, of an earlier state, stops nothing; the stop's own checkpoint
// is asked as soon as it ends, and a refused one again a few seconds later.
// The job never stays parked holding its device.
TEST_F(LiveClusterTest, AStopDuringAPeriodicCheckpointIsCheckpointedAfterIt) {
  checkpoint_every_s_ = 60;
  auto c = MakeCluster();
  const JobId j = StartRestartableJob(*c);
  now_ += 61;
  c->Refresh();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 1) << "the periodic checkpoint";
  const std::string periodic = nodes_.calls.back().fields["dir"];

  ASSERT_TRUE(c->Suspend(j, Preemption::kStop).ok());
  EXPECT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 1) << "one under way already";
  nodes_.jobs_[0][0]["state"] = "suspended";
  nodes_.jobs_[0][0]["operation"] = {
      {"kind", "checkpoint"}, {"target", periodic}, {"state", "running"}};
  c->Refresh();
  EXPECT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 1);

  // The periodic one ends: the job is not stopped from it, its own is asked,
  // and the node refuses it.
  nodes_.jobs_[0][0]["operation"] = {
      {"kind", "checkpoint"}, {"target", periodic}, {"state", "done"}};
  nodes_.refuse_checkpoint = true;
  c->Refresh();
  EXPECT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 2);
  EXPECT_EQ(nodes_.CallsOf(MessageType::kKill), 0);
  EXPECT_EQ(Stored(1).checkpoint_dir, periodic);
  EXPECT_EQ(Stored(1).state, LiveJobState::kSuspended);
  c->Refresh();
  EXPECT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 2) << "not asked every pass";

  nodes_.refuse_checkpoint = false;
  now_ += LiveCluster::kStopRetrySeconds;
  c->Refresh();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 3);
  const std::string own = nodes_.calls.back().fields["dir"];
  nodes_.jobs_[0][0]["operation"] = {{"kind", "checkpoint"}, {"target", own}, {"state", "done"}};
  c->Refresh();
  EXPECT_EQ(nodes_.CallsOf(MessageType::kKill), 1) << "the parked run";
  EXPECT_EQ(Stored(1).state, LiveJobState::kQueued);
  EXPECT_EQ(Stored(1).checkpoint_dir, own);
  EXPECT_EQ(c->counters().stops, 1);
}

// A job that is not restartable is parked, never stopped: asked to stop, the
// cluster refuses before it touches the node.
TEST_F(LiveClusterTest, AJobThatCannotRestartIsNotStopped) {
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  ASSERT_FALSE(c->info(j).restartable);
  const GpuId a = 0;
  ASSERT_TRUE(c->Start(j, {&a, 1}).ok());
  const Status s = c->Suspend(j, Preemption::kStop);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("not restartable"), std::string::npos) << s.ToString();
  EXPECT_EQ(nodes_.CallsOf(MessageType::kSuspend), 0);
  EXPECT_EQ(Stored(1).state, LiveJobState::kRunning);
}

// Whether two jobs fit in memory together comes from what the nodes measured
// each holding, against the device's memory; a device that lists none (a CPU
// device), or a job not measured yet, does not keep them apart.
TEST_F(LiveClusterTest, PairFitsMemoryFromTheMeasuredDeviceBytes) {
  nodes_.device_memory_bytes = 10'000'000'000;
  nodes_.devices_per_node = 2;  // a: devices 0 and 1; b: 2 and 3
  auto c = MakeCluster();
  const JobId x = c->Admit(Submitted("x", "big"));
  const JobId y = c->Admit(Submitted("y", "small"));
  const GpuId a0 = 0, a1 = 1, b0 = 2;
  ASSERT_TRUE(c->Start(x, {&a0, 1}).ok());
  ASSERT_TRUE(c->Start(y, {&b0, 1}).ok());
  EXPECT_TRUE(c->PairFitsMemory(x, y)) << "not measured yet";
  nodes_.jobs_[0][0]["device_bytes"] = 6'000'000'000;
  nodes_.jobs_[1][0]["device_bytes"] = 6'000'000'000;
  c->Refresh();
  EXPECT_FALSE(c->PairFitsMemory(x, y));
  EXPECT_FALSE(c->PairFitsMemory(y, x));
  nodes_.jobs_[1][0]["device_bytes"] = 3'000'000'000;  // the most seen is kept
  c->Refresh();
  EXPECT_FALSE(c->PairFitsMemory(x, y));

  // A newcomer not measured yet is taken to hold what its kind was seen
  // holding: a second "big" job does not fit beside y's 6 GB, a new kind does.
  const JobId big = c->Admit(Submitted("big2", "big"));
  const JobId other = c->Admit(Submitted("other", "other"));
  EXPECT_FALSE(c->PairFitsMemory(big, y));
  EXPECT_TRUE(c->PairFitsMemory(other, y)) << "nothing of its kind measured";
  ASSERT_TRUE(c->Start(other, {&a1, 1}).ok());
  nodes_.jobs_[0][1]["device_bytes"] = 1'000'000'000;
  c->Refresh();
  EXPECT_TRUE(c->PairFitsMemory(other, x));

  ScriptedNodes cpu_nodes{{"a", "b"}};  // devices of unknown memory
  auto topo = DiscoverTopology(cpu_nodes);
  ASSERT_TRUE(topo.ok());
  EXPECT_EQ(topo->devices[0].memory_bytes, 0);
}

// Resumed while its stop checkpoint is being written: it runs on, not stopped.
TEST_F(LiveClusterTest, AParkedJobResumedDuringItsStopCheckpointIsNotStopped) {
  auto c = MakeCluster(/*stop_parked_after_s=*/10);
  const JobId j = ParkRestartableJob(*c);
  const GpuId a = 0;
  now_ += 11;
  c->Refresh();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 1);
  const std::string dir = nodes_.calls.back().fields["dir"];
  ASSERT_TRUE(c->Start(j, {&a, 1}).ok());
  EXPECT_EQ(nodes_.calls.back().type, MessageType::kResume);
  nodes_.jobs_[0][0]["state"] = "running";
  nodes_.jobs_[0][0]["operation"] = {{"kind", "checkpoint"}, {"target", dir}, {"state", "done"}};
  c->Refresh();
  EXPECT_EQ(nodes_.CallsOf(MessageType::kKill), 0);
  EXPECT_EQ(Stored(1).state, LiveJobState::kRunning);
  EXPECT_EQ(Stored(1).checkpoint_dir, dir) << "a complete checkpoint is kept all the same";
}

// A migrated job keeps the service its source run had: the destination
// counts its own run from zero, and the policy must not see the job as new.
TEST_F(LiveClusterTest, AMigratedJobKeepsTheServiceOfItsSourceRun) {
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  const GpuId a = 0, b = 1;
  ASSERT_TRUE(c->Start(j, {&a, 1}).ok());
  c->Refresh();
  EXPECT_DOUBLE_EQ(c->Attained(j), 2.0);  // the scripted node's device_time_s
  ASSERT_TRUE(c->Migrate(j, {&b, 1}).ok());
  nodes_.jobs_[0][0]["state"] = "migrated";
  nodes_.jobs_[0][0]["operation"] = {{"kind", "migrate"}, {"state", "done"}, {"to_job", 1}};
  nodes_.jobs_[1].push_back(ScriptedNodes::Record(1, "train.s1.a1", "running"));
  nodes_.jobs_[1][0]["device_time_s"] = 0.5;
  nodes_.jobs_[1][0]["wall_time_s"] = 0.5;
  c->Refresh();
  c->Refresh();  // the destination's run, read in a pass after the move
  EXPECT_EQ(Stored(1).node, "b");
  EXPECT_DOUBLE_EQ(Stored(1).attained, 2.0) << "kept at the move";
  EXPECT_DOUBLE_EQ(c->Attained(j), 2.5);
  EXPECT_DOUBLE_EQ(c->RunTime(j), 3.5);
}

TEST_F(LiveClusterTest, AJobThatFinishesWhileItsMigrationStartsEndsAndIsNotRunAgain) {
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  const GpuId a = 0, b = 1;
  ASSERT_TRUE(c->Start(j, {&a, 1}).ok());
  ASSERT_TRUE(c->Migrate(j, {&b, 1}).ok());
  // The job exits with 0 on a; the migration fails for that reason.
  Json& rec = nodes_.jobs_[0][0];
  rec = ScriptedNodes::Record(1, "train.s1.a1", "exited", 0);
  rec["operation"] = {{"kind", "migrate"}, {"state", "failed"}, {"error", "the job exited"}};
  const ClusterEvents ev = c->Refresh();
  EXPECT_TRUE(ev.requeued.empty());
  ASSERT_EQ(ev.finished.size(), 1u);
  const JobRecord r = Stored(1);
  EXPECT_EQ(r.state, LiveJobState::kFinished);
  EXPECT_EQ(r.attempt, 1);
  EXPECT_EQ(r.node, "a");
  EXPECT_EQ(nodes_.CallsOf(MessageType::kLaunch), 1);
}

}  // namespace
}  // namespace gandiva::sched::live
