// The gandiva policy over LiveCluster, on the scripted nodes of
// live_cluster_fixture.h: its introspective decisions (grow or not, keep a
// pack or not) wait for rates the nodes measured, never the 1.0 that
// MeasuredRate takes for a job not timed yet.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gandiva/scheduler/policy.h"
#include "live_cluster_fixture.h"

namespace gandiva::sched::live {
namespace {

class LivePolicyTest : public LiveClusterTest {
 protected:
  // The gandiva policy, an introspection round every 2 s, over MakeCluster().
  void Start() {
    cluster_ = MakeCluster();
    PolicyOptions o;
    o.gandiva_interval = 2;
    auto policy = MakePolicy("gandiva", o);
    ASSERT_TRUE(policy.ok()) << policy.status().ToString();
    policy_ = std::move(policy).value();
  }
  JobId Arrive(const std::string& name, const std::string& kind, bool restartable = false) {
    JobRecord r = Submitted(name, kind);
    r.restartable = restartable;
    EXPECT_TRUE(store_->Update(r).ok());
    const JobId j = cluster_->Admit(r);
    policy_->OnArrival(*cluster_, j);
    return j;
  }
  // A scheduler pass 2.5 s after the last, as SchedulerService::Pass runs one.
  void Pass() {
    now_ += 2.5;
    cluster_->Refresh();
    cluster_->clear_wake();
    policy_->Schedule(*cluster_);
    cluster_->LaunchPlanned();
  }
  std::vector<std::string> ShareModesSet() const {
    std::vector<std::string> modes;
    for (const auto& call : nodes_.calls)
      if (call.type == MessageType::kSetShareMode) modes.push_back(call.fields["mode"]);
    return modes;
  }
  int LastLaunchNode() const {
    int node = -1;
    for (const auto& call : nodes_.calls)
      if (call.type == MessageType::kLaunch) node = call.node;
    return node;
  }

  std::unique_ptr<LiveCluster> cluster_;
  std::unique_ptr<Policy> policy_;
};

// A job that starts slowly (a Python process importing torch) would
// otherwise be grown, and shrunk back, on the 1.0 taken for a speed not yet
// known, and checkpointed before its first step each time.
TEST_F(LivePolicyTest, GrowingWaitsForMeasuredRatesBeforeAndAfter) {
  nodes_.devices_per_node = 2;
  Start();
  LiveCluster& c = *cluster_;
  const JobId j = Arrive("train", "python3 train.py", /*restartable=*/true);
  Pass();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kLaunch), 1);
  EXPECT_FALSE(c.RateMeasured(j)) << "nothing came from its node yet";

  nodes_.jobs_[0][0]["rate_vs_alone"] = nullptr;  // started, not timed yet
  for (int round = 0; round < 3; ++round) Pass();
  EXPECT_FALSE(c.RateMeasured(j));
  EXPECT_EQ(nodes_.CallsOf(MessageType::kSuspend), 0) << "grown on an assumed speed";

  nodes_.jobs_[0][0]["rate_vs_alone"] = 1.0;
  nodes_.jobs_[0][0]["alone_ms"] = 10.0;
  c.Refresh();
  EXPECT_TRUE(c.RateMeasured(j));
  Pass();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kSuspend), 1) << "timed, alone, a device idle: grown";
  EXPECT_EQ(c.gpus(j).size(), 2u);
  EXPECT_FALSE(c.RateMeasured(j)) << "resizing";
  CheckpointDone();
  Pass();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kLaunch), 2);

  nodes_.jobs_[0][1]["rate_vs_alone"] = nullptr;  // the grown run, not timed yet
  for (int round = 0; round < 3; ++round) Pass();
  EXPECT_EQ(nodes_.CallsOf(MessageType::kSuspend), 1) << "judged before it was measured";
  EXPECT_EQ(c.gpus(j).size(), 2u);

  // Timed on two devices as fast as on one: growing did not pay.
  nodes_.jobs_[0][1]["rate_vs_alone"] = 1.0;
  nodes_.jobs_[0][1]["ewma_ms"] = 10.0;
  Pass();
  EXPECT_EQ(nodes_.CallsOf(MessageType::kSuspend), 2) << "shrunk back";
  EXPECT_EQ(c.gpus(j).size(), 1u);
}

// A job of a kind never timed alone, packed on arrival beside a running job:
// its node cannot measure it packed, so after an interval the pair takes
// turns until the node has timed it alone, then packs again, and the trial
// is decided on rates both measured.
TEST_F(LivePolicyTest, APackTrialWhoseGuestCannotBeMeasuredSlicesUntilItIs) {
  Start();  // nodes a and b, one device each
  Arrive("cnn1", "python3 cnn.py");
  Arrive("cnn2", "python3 cnn.py");
  Pass();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kLaunch), 2) << "one on each node";
  for (int n = 0; n < 2; ++n) nodes_.jobs_[n][0]["rate_vs_alone"] = 1.0;

  Arrive("rnn", "python3 rnn.py");
  Pass();
  ASSERT_EQ(nodes_.CallsOf(MessageType::kLaunch), 3) << "packed beside a cnn job";
  ASSERT_EQ(ShareModesSet(), std::vector<std::string>{"pack"});
  const int node = LastLaunchNode();
  ASSERT_EQ(nodes_.jobs_[node].size(), 2u);
  Json& guest = nodes_.jobs_[node][1];
  guest["rate_vs_alone"] = nullptr;  // never alone; no job of its kind ever was
  guest["ewma_ms"] = 30.0;
  Pass();
  Pass();
  EXPECT_EQ(ShareModesSet(), (std::vector<std::string>{"pack", "slice"}))
      << "an interval unmeasured: taking turns so that its node times it alone";
  Pass();
  EXPECT_EQ(ShareModesSet().size(), 2u) << "still not timed";
  EXPECT_TRUE(policy_->stats().pack_trials.empty());

  guest["rate_vs_alone"] = 0.5;  // timed alone in its slices
  guest["alone_ms"] = 15.0;
  Pass();
  EXPECT_EQ(ShareModesSet(), (std::vector<std::string>{"pack", "slice", "pack"}));
  EXPECT_TRUE(policy_->stats().pack_trials.empty()) << "the trial starts over, packed";
  guest["rate_vs_alone"] = 0.8;
  for (int round = 0; round < 2 && policy_->stats().pack_trials.empty(); ++round) Pass();
  ASSERT_EQ(policy_->stats().pack_trials.size(), 1u);
  EXPECT_DOUBLE_EQ(policy_->stats().pack_trials[0].guest_rate, 0.8);
  EXPECT_TRUE(policy_->stats().pack_trials[0].kept) << "0.8 + 1.0 together";
}

}  // namespace
}  // namespace gandiva::sched::live
