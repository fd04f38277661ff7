// Moves across a restart of the scheduler (scheduler/live/moves.cc): a
// migration the scheduler asked for is stored before the source is asked, and
// a scheduler restarted mid-move finishes it from what the nodes report: on
// the destination once, back on the source (parked) when it did not happen,
// never a resume of the arriving copy, never a second launch. The nodes
// answer from a script (live_cluster_fixture.h); the real ones are in
// tests/integration/test_scheduler_moves.py.
#include <gtest/gtest.h>

#include "live/live_cluster.h"
#include "live_cluster_fixture.h"

namespace gandiva::sched::live {
namespace {

class LiveMovesTest : public LiveClusterTest {
 protected:
  // Job 1 ("train", attempt 1) as a scheduler that stopped mid-move left it:
  // moving from a's cpu0 (its job 1 there) to b's cpu0.
  void StoreAsMoving() {
    JobRecord r = Submitted("train");
    r.state = LiveJobState::kRunning;
    r.attempt = 1;
    r.node = "b";
    r.device = "cpu0";
    r.node_job = 0;
    r.move = JobMove{"a", "cpu0", 1};
    ASSERT_TRUE(store_->Update(r).ok());
  }
  // a's job 1, with its migrate operation in `op_state` (none if empty).
  Json& SourceRun(const std::string& state, const std::string& op_state) {
    nodes_.jobs_[0].push_back(ScriptedNodes::Record(1, "train.s1.a1", state));
    Json& run = nodes_.jobs_[0].back();
    if (state == "migrated") run["exit_reason"] = "migrated";
    if (!op_state.empty())
      run["operation"] = {{"kind", "migrate"}, {"state", op_state}, {"to_job", 2}, {"error", ""}};
    return run;
  }
  // b's copy of it (job `id` there), migrated from a's job 1.
  Json& CopyOnB(int id, const std::string& state) {
    nodes_.jobs_[1].push_back(ScriptedNodes::Record(id, "train.s1.a1", state));
    Json& copy = nodes_.jobs_[1].back();
    copy["migrated_from"] = "a/1";
    return copy;
  }
  int CallsTo(int node, MessageType type) const {
    int k = 0;
    for (const auto& c : nodes_.calls) k += c.node == node && c.type == type;
    return k;
  }
};

TEST_F(LiveMovesTest, TheMoveIsDurableBeforeTheSourceIsAskedEvenInsideAPass) {
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  const GpuId a = 0, b = 1;
  ASSERT_TRUE(c->Start(j, {&a, 1}).ok());
  std::optional<JobRecord> seen;  // job 1 as another connection reads it when a is asked
  nodes_.before_reply = [&](int node, MessageType type, const Json&) {
    if (node != 0 || type != MessageType::kMigrate) return;
    auto other = JobStore::Open((dir_ / "scheduler.db").string());
    ASSERT_TRUE(other.ok());
    seen = (*other)->Get(1).value();
  };
  ASSERT_TRUE(store_->Begin().ok());  // a pass's batch, as the scheduler's loop opens
  ASSERT_TRUE(c->Migrate(j, {&b, 1}).ok());
  ASSERT_TRUE(store_->Commit().ok());
  ASSERT_TRUE(seen.has_value()) << "a was asked to migrate";
  ASSERT_TRUE(seen->move.has_value()) << "committed before the node was asked";
  EXPECT_EQ(*seen->move, (JobMove{"a", "cpu0", 1}));
  EXPECT_EQ(seen->node, "b");
  EXPECT_EQ(seen->node_job, 0);
}

TEST_F(LiveMovesTest, AMigrateTheSourceRefusesLeavesNoMove) {
  auto c = MakeCluster();
  const JobId j = c->Admit(Submitted("train"));
  const GpuId a = 0, b = 1;
  ASSERT_TRUE(c->Start(j, {&a, 1}).ok());
  nodes_.down_[0] = true;
  EXPECT_FALSE(c->Migrate(j, {&b, 1}).ok());
  const JobRecord r = Stored(1);
  EXPECT_FALSE(r.move.has_value());
  EXPECT_EQ(r.node, "a");
  EXPECT_EQ(r.node_job, 1);
  EXPECT_TRUE(c->free_gpus().IsFree(b));
}

TEST_F(LiveMovesTest, ARestartMidMoveFinishesItOnTheDestinationOnce) {
  StoreAsMoving();
  SourceRun("suspended", "running");  // parked for the move, its state streaming
  Json& copy = CopyOnB(2, "suspended");
  copy["held"] = true;  // arriving: its state has not loaded
  auto c = MakeCluster();
  auto arrived = c->Recover();
  ASSERT_TRUE(arrived.ok());
  EXPECT_TRUE(arrived->empty()) << "it runs, on b, as far as the policy can tell";
  EXPECT_FALSE(c->free_gpus().IsFree(1)) << "b's device is the job's";
  EXPECT_TRUE(c->free_gpus().IsFree(0));
  ClusterEvents ev = c->Refresh();
  EXPECT_TRUE(ev.finished.empty());
  EXPECT_TRUE(ev.requeued.empty());
  EXPECT_TRUE(Stored(1).move.has_value()) << "still moving";
  EXPECT_EQ(c->state(0), JobState::kRunning);

  // a's job ends migrated and b's copy is started by a's migrate_start.
  Json& src = nodes_.jobs_[0][0];
  src["state"] = "migrated";
  src["exit_reason"] = "migrated";
  src["operation"]["state"] = "done";
  copy["state"] = "running";
  copy["held"] = false;
  ev = c->Refresh();
  EXPECT_TRUE(ev.finished.empty());
  JobRecord r = Stored(1);
  EXPECT_FALSE(r.move.has_value());
  EXPECT_EQ(r.node, "b");
  EXPECT_EQ(r.node_job, 2);
  EXPECT_EQ(r.state, LiveJobState::kRunning);

  copy = ScriptedNodes::Record(2, "train.s1.a1", "exited", 0);
  ev = c->Refresh();
  EXPECT_EQ(ev.finished, std::vector<JobId>{0});
  r = Stored(1);
  EXPECT_EQ(r.state, LiveJobState::kFinished);
  EXPECT_EQ(r.attempt, 1) << "never launched again";
  for (MessageType t : {MessageType::kLaunch, MessageType::kResume, MessageType::kKill,
                        MessageType::kSuspend, MessageType::kMigrate})
    EXPECT_EQ(nodes_.CallsOf(t), 0) << "message type " << static_cast<int>(t);
}

TEST_F(LiveMovesTest, AMoveThatFailedLeavesTheJobParkedOnItsSource) {
  StoreAsMoving();
  SourceRun("running", "failed")["operation"]["error"] = "b refused the job";
  auto c = MakeCluster();
  ASSERT_TRUE(c->Recover().ok());
  const ClusterEvents ev = c->Refresh();
  EXPECT_EQ(ev.requeued, std::vector<JobId>{0}) << "back with the policy, pending";
  EXPECT_TRUE(ev.finished.empty());
  ASSERT_EQ(CallsTo(0, MessageType::kSuspend), 1);
  const JobRecord r = Stored(1);
  EXPECT_FALSE(r.move.has_value());
  EXPECT_EQ(r.state, LiveJobState::kSuspended);
  EXPECT_EQ(r.node, "a");
  EXPECT_EQ(r.device, "cpu0");
  EXPECT_EQ(r.node_job, 1);
  EXPECT_EQ(nodes_.CallsOf(MessageType::kKill), 0) << "its training is kept";
  EXPECT_TRUE(c->free_gpus().IsFree(1));
  // The policy starts it where it is parked: resumed there, not launched.
  nodes_.jobs_[0][0]["state"] = "suspended";
  const GpuId a = 0;
  ASSERT_TRUE(c->Start(0, {&a, 1}).ok());
  EXPECT_EQ(CallsTo(0, MessageType::kResume), 1);
  EXPECT_EQ(nodes_.CallsOf(MessageType::kLaunch), 0);
}

TEST_F(LiveMovesTest, AMoveTheSourceWasNeverAskedForLeavesTheJobOnItsSource) {
  StoreAsMoving();  // stored; the scheduler died before its migrate call
  SourceRun("running", "");
  auto c = MakeCluster();
  ASSERT_TRUE(c->Recover().ok());
  EXPECT_EQ(c->Refresh().requeued, std::vector<JobId>{0});
  const JobRecord r = Stored(1);
  EXPECT_FALSE(r.move.has_value());
  EXPECT_EQ(r.state, LiveJobState::kSuspended);
  EXPECT_EQ(r.node, "a");
  EXPECT_EQ(r.node_job, 1);
  EXPECT_EQ(nodes_.CallsOf(MessageType::kKill), 0);
  EXPECT_EQ(nodes_.CallsOf(MessageType::kLaunch), 0);
}

TEST_F(LiveMovesTest, WhenTheSourceForgotTheMoveTheDestinationsCopyIsTheJob) {
  StoreAsMoving();  // a's gandivad restarted since: it lists no job 1
  Json& decoy = CopyOnB(3, "running");
  decoy["migrated_from"] = "a/11";  // another job's copy, under the same name
  CopyOnB(4, "running");
  auto c = MakeCluster();
  ASSERT_TRUE(c->Recover().ok());
  const ClusterEvents ev = c->Refresh();
  EXPECT_TRUE(ev.requeued.empty());
  const JobRecord r = Stored(1);
  EXPECT_FALSE(r.move.has_value());
  EXPECT_EQ(r.node, "b");
  EXPECT_EQ(r.node_job, 4);
  EXPECT_EQ(nodes_.CallsOf(MessageType::kLaunch), 0);
  EXPECT_EQ(nodes_.CallsOf(MessageType::kResume), 0);
}

TEST_F(LiveMovesTest, AMoveWithNoTraceOnEitherNodeGoesBackToTheQueue) {
  StoreAsMoving();
  auto c = MakeCluster();
  ASSERT_TRUE(c->Recover().ok());
  EXPECT_EQ(c->Refresh().requeued, std::vector<JobId>{0});
  const JobRecord r = Stored(1);
  EXPECT_FALSE(r.move.has_value());
  EXPECT_EQ(r.state, LiveJobState::kQueued);
}

}  // namespace
}  // namespace gandiva::sched::live
