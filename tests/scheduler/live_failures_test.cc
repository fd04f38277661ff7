// LiveCluster's failure handling and pre-run validation against scripted
// nodes (live_cluster_fixture.h): which failures are retried and when, that
// the policy never hears of a job that fails its validation, and that a
// restarted scheduler picks a validation run up again. The same paths with
// real jobs and real nodes: tests/integration/test_failures.py.
#include <gtest/gtest.h>

#include "live_cluster_fixture.h"

namespace gandiva::sched::live {
namespace {

// The node's record of its run `id` on `node`, for the test to change.
Json& ScriptedRun(ScriptedNodes& nodes, int node, int64_t id) {
  for (Json& j : nodes.jobs_[node])
    if (j["id"] == id) return j;
  ADD_FAILURE() << "no run " << id << " on node " << node;
  static Json none;
  return none;
}

void EndRun(Json& run, const std::string& reason, int code, int signal = 0) {
  run["state"] = code == 0 ? "exited" : "failed";
  run["exit_reason"] = reason;
  run["exit_code"] = code;
  run["exit_signal"] = signal;
  run["exit_detail"] = signal ? "killed by signal " + std::to_string(signal)
                              : "exited with code " + std::to_string(code);
}

bool KilledOn(const ScriptedNodes& nodes, int node, int64_t id) {
  for (auto& call : nodes.calls)
    if (call.type == MessageType::kKill && call.node == node && call.fields["job"] == id)
      return true;
  return false;
}

class LiveFailuresTest : public LiveClusterTest {
 protected:
  // A job the policy took and started on node a: its run is a's job 1.
  JobId StartedOnA(LiveCluster& c) {
    const JobId j = c.Admit(Submitted("train"));
    EXPECT_EQ(c.TakeArrivals(), std::vector<JobId>{j});
    const GpuId a = 0;
    EXPECT_TRUE(c.Start(j, {&a, 1}).ok());
    return j;
  }
};

TEST_F(LiveFailuresTest, ANewJobValidatesAsAGuestAndQueuesAfterItsIterations) {
  validate_iterations_ = 3;
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  EXPECT_TRUE(c->TakeArrivals().empty()) << "the policy hears of it once validated";
  c->ValidatePending();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kLaunch), 1);
  const Json& launch = nodes_.calls.back().fields;
  EXPECT_EQ(launch["name"], "train.s1.a1");
  EXPECT_DOUBLE_EQ(launch["weight"].get<double>(), 0.25);
  const int node = nodes_.calls.back().node;
  EXPECT_EQ(Stored(1).state, LiveJobState::kValidating);
  EXPECT_TRUE(c->free_gpus().IsFree(node)) << "a guest takes no device from the policy";

  ScriptedRun(nodes_, node, 1)["iterations"] = 2;
  c->Refresh();
  EXPECT_EQ(Stored(1).state, LiveJobState::kValidating);
  EXPECT_FALSE(KilledOn(nodes_, node, 1));

  ScriptedRun(nodes_, node, 1)["iterations"] = 3;
  c->Refresh();
  EXPECT_EQ(Stored(1).state, LiveJobState::kQueued);
  EXPECT_NE(Stored(1).detail.find("validated: 3 iterations"), std::string::npos)
      << Stored(1).detail;
  EXPECT_TRUE(KilledOn(nodes_, node, 1)) << "its validation run is stopped";
  EXPECT_EQ(c->TakeArrivals(), std::vector<JobId>{j});
  EXPECT_EQ(c->counters().validated, 1);
}

TEST_F(LiveFailuresTest, ARestartableJobKeepsWhatItsValidationRunDid) {
  validate_iterations_ = 3;
  auto c = MakeCluster();
  const JobId j = AdmitRestartable(*c);
  c->ValidatePending();
  const int node = nodes_.calls.back().node;
  ScriptedRun(nodes_, node, 1)["iterations"] = 3;
  c->Refresh();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kCheckpoint), 1);
  const std::string dir = nodes_.calls.back().fields["dir"];
  EXPECT_EQ(Stored(1).state, LiveJobState::kValidating) << "until its checkpoint is complete";
  EXPECT_FALSE(KilledOn(nodes_, node, 1));
  ScriptedRun(nodes_, node, 1)["operation"] = {
      {"kind", "checkpoint"}, {"target", dir}, {"state", "done"}};
  c->Refresh();
  EXPECT_EQ(Stored(1).state, LiveJobState::kQueued);
  EXPECT_EQ(Stored(1).checkpoint_dir, dir);
  EXPECT_TRUE(KilledOn(nodes_, node, 1));
  ASSERT_EQ(c->TakeArrivals(), std::vector<JobId>{j});
  const GpuId b = 1;
  ASSERT_TRUE(c->Start(j, {&b, 1}).ok());
  EXPECT_EQ(nodes_.calls.back().fields["restore"], dir) << "it goes on from its validation";
}

TEST_F(LiveFailuresTest, ARunThatReportsNoIterationsPassesAfterTheTimeout) {
  validate_iterations_ = 5;
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  c->ValidatePending();
  const int node = nodes_.calls.back().node;
  ScriptedRun(nodes_, node, 1)["wall_time_s"] = 59.0;
  c->Refresh();
  EXPECT_EQ(Stored(1).state, LiveJobState::kValidating);
  ScriptedRun(nodes_, node, 1)["wall_time_s"] = 60.0;
  c->Refresh();
  EXPECT_EQ(Stored(1).state, LiveJobState::kQueued);
  EXPECT_EQ(c->TakeArrivals(), std::vector<JobId>{j});
}

TEST_F(LiveFailuresTest, AJobThatCrashesInValidationFailsAndThePolicyNeverSeesIt) {
  validate_iterations_ = 3;
  auto c = MakeCluster();
  c->Admit(Submitted("train"));
  c->ValidatePending();
  const int node = nodes_.calls.back().node;
  nodes_.stderr_of[{node, 1}] =
      "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
      "    import torchvisionn\nModuleNotFoundError: No module named 'torchvisionn'\n";
  EndRun(ScriptedRun(nodes_, node, 1), "exited", 1);
  const ClusterEvents events = c->Refresh();
  EXPECT_TRUE(events.finished.empty()) << "the policy never knew it";
  const JobRecord r = Stored(1);
  EXPECT_EQ(r.state, LiveJobState::kFailed);
  EXPECT_EQ(r.failure, FailureClass::kUser);
  EXPECT_EQ(r.retries, 0) << "a user error is not retried";
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.detail.find("import error"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("validation"), std::string::npos) << r.detail;
  EXPECT_TRUE(c->TakeArrivals().empty());
  EXPECT_EQ(c->counters().failed_validation, 1);
}

TEST_F(LiveFailuresTest, ADeviceErrorInValidationIsRetriedAfterItsBackoff) {
  validate_iterations_ = 3;
  auto c = MakeCluster();
  c->Admit(Submitted("train"));
  c->ValidatePending();
  const int node = nodes_.calls.back().node;
  nodes_.stderr_of[{node, 1}] = "RuntimeError: CUDA error: uncorrectable ECC error encountered\n";
  EndRun(ScriptedRun(nodes_, node, 1), "exited", 1);
  c->Refresh();
  JobRecord r = Stored(1);
  EXPECT_EQ(r.state, LiveJobState::kValidating);
  EXPECT_EQ(r.failure, FailureClass::kInfrastructure);
  EXPECT_EQ(r.retries, 1);
  EXPECT_TRUE(r.node.empty());
  EXPECT_DOUBLE_EQ(r.not_before, now_ + 10);
  c->ValidatePending();
  EXPECT_EQ(nodes_.CallsOf(MessageType::kLaunch), 1) << "not before its wait is over";
  now_ += 10;
  c->ValidatePending();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kLaunch), 2);
  EXPECT_EQ(nodes_.calls.back().fields["name"], "train.s1.a2");
}

TEST_F(LiveFailuresTest, AUserErrorOfARunningJobEndsItAtOnce) {
  auto c = MakeCluster();
  const JobId j = StartedOnA(*c);
  nodes_.stderr_of[{0, 1}] =
      "Traceback (most recent call last):\n  File \"train.py\", line 40\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n";
  EndRun(ScriptedRun(nodes_, 0, 1), "exited", 1);
  EXPECT_EQ(c->Refresh().finished, std::vector<JobId>{j});
  const JobRecord r = Stored(1);
  EXPECT_EQ(r.state, LiveJobState::kFailed);
  EXPECT_EQ(r.failure, FailureClass::kUser);
  EXPECT_NE(r.detail.find("GPU out of memory"), std::string::npos) << r.detail;
  EXPECT_TRUE(c->free_gpus().IsFree(0));
}

TEST_F(LiveFailuresTest, AJobWhoseExitStatusWasLostIsNeverRunTwice) {
  // gandivad restarted while both ran: neither's exit status reached it.
  auto c = MakeCluster();
  StartedOnA(*c);
  const JobId unknown = c->Admit(Submitted("other"));
  EXPECT_EQ(c->TakeArrivals(), std::vector<JobId>{unknown});
  const GpuId b = 1;
  ASSERT_TRUE(c->Start(unknown, {&b, 1}).ok());
  EndRun(ScriptedRun(nodes_, 0, 1), "lost", -1);
  ScriptedRun(nodes_, 0, 1)["state"] = "exited";  // it detached cleanly
  EndRun(ScriptedRun(nodes_, 1, 1), "lost", -1);  // it did not: it may still run
  const ClusterEvents events = c->Refresh();
  EXPECT_EQ(events.finished.size(), 2u);
  EXPECT_EQ(Stored(1).state, LiveJobState::kFinished) << Stored(1).detail;
  EXPECT_NE(Stored(1).detail.find("exit status was lost"), std::string::npos);
  const JobRecord r = Stored(2);
  EXPECT_EQ(r.state, LiveJobState::kFailed);
  EXPECT_EQ(r.failure, FailureClass::kUnknown);
  EXPECT_EQ(r.retries, 0);
  EXPECT_TRUE(c->TakeArrivals().empty());
}

TEST_F(LiveFailuresTest, APreemptedJobIsRetriedWithGrowingWaitsThenGivenUp) {
  auto c = MakeCluster();
  const JobId j = StartedOnA(*c);
  double waits[] = {10, 20, 40};
  for (int retry = 1; retry <= 3; ++retry) {
    const int64_t run = Stored(1).node_job;
    EndRun(ScriptedRun(nodes_, 0, run), "killed", 137, 9);
    EXPECT_EQ(c->Refresh().finished, std::vector<JobId>{j}) << "retry " << retry;
    const JobRecord r = Stored(1);
    ASSERT_EQ(r.state, LiveJobState::kQueued) << r.detail;
    EXPECT_EQ(r.failure, FailureClass::kPreempted);
    EXPECT_EQ(r.retries, retry);
    EXPECT_DOUBLE_EQ(r.not_before, now_ + waits[retry - 1]);
    EXPECT_TRUE(c->TakeArrivals().empty());
    now_ += waits[retry - 1];
    EXPECT_EQ(c->TakeArrivals(), std::vector<JobId>{j});
    const GpuId a = 0;
    ASSERT_TRUE(c->Start(j, {&a, 1}).ok());
    EXPECT_EQ(Stored(1).attempt, retry + 1);
  }
  EndRun(ScriptedRun(nodes_, 0, Stored(1).node_job), "killed", 137, 9);
  EXPECT_EQ(c->Refresh().finished, std::vector<JobId>{j});
  const JobRecord r = Stored(1);
  EXPECT_EQ(r.state, LiveJobState::kFailed);
  EXPECT_NE(r.detail.find("gave up after 3 retries"), std::string::npos) << r.detail;
  EXPECT_TRUE(c->TakeArrivals().empty());
}

TEST_F(LiveFailuresTest, AJobShorterThanItsValidationFinishesInIt) {
  validate_iterations_ = 100;
  auto c = MakeCluster();
  c->Admit(Submitted("train"));
  c->ValidatePending();
  EndRun(ScriptedRun(nodes_, nodes_.calls.back().node, 1), "exited", 0);
  EXPECT_TRUE(c->Refresh().finished.empty());
  EXPECT_EQ(Stored(1).state, LiveJobState::kFinished);
}

TEST_F(LiveFailuresTest, ARestartFollowsAValidationRunOrStartsItAgain) {
  validate_iterations_ = 3;
  // Job 1's run is on a (the reply was never heard); job 2's never reached b.
  for (const char* name : {"one", "two"}) {
    JobRecord r = Submitted(name);
    r.attempt = 1;
    r.node = r.id == 1 ? "a" : "b";
    r.device = "cpu0";
    ASSERT_TRUE(store_->Update(r).ok());
  }
  nodes_.jobs_[0].push_back(ScriptedNodes::Record(5, "one.s1.a1", "running"));
  auto c = MakeCluster();
  ASSERT_TRUE(c->Recover().ok());
  EXPECT_EQ(Stored(1).node_job, 5);
  EXPECT_EQ(Stored(2).node, "");
  c->ValidatePending();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kLaunch), 1) << "only the lost one is launched again";
  EXPECT_EQ(nodes_.calls.back().fields["name"], "two.s2.a2");
  ScriptedRun(nodes_, 0, 5)["iterations"] = 3;
  c->Refresh();
  EXPECT_EQ(Stored(1).state, LiveJobState::kQueued);
}

TEST_F(LiveFailuresTest, CancellingAValidatingJobEndsIt) {
  validate_iterations_ = 3;
  auto c = MakeCluster();
  const JobId waiting = c->Admit(Submitted("one"));
  auto ended = c->Cancel(waiting);
  ASSERT_TRUE(ended.ok());
  EXPECT_FALSE(*ended) << "the policy never knew it";
  EXPECT_EQ(Stored(1).state, LiveJobState::kCancelled);
  const JobId running = c->Admit(Submitted("two"));
  c->ValidatePending();
  const int node = nodes_.calls.back().node;
  ASSERT_TRUE(c->Cancel(running).ok());
  EXPECT_TRUE(KilledOn(nodes_, node, 1));
  EXPECT_TRUE(c->Refresh().finished.empty());
  EXPECT_EQ(Stored(2).state, LiveJobState::kCancelled);
}

}  // namespace
}  // namespace gandiva::sched::live
