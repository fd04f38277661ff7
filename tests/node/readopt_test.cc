// A gandivad started again on the same state directory (node_readopt.cc), with
// real child processes as the jobs: a live job is taken back under its id; a
// migration's copy whose state had not arrived, and a job that had moved to
// another node, never are (two copies of one job must not train); a copy whose
// state had loaded is, held for its source's migrate_start (it is the job).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "devices/devices.h"
#include "node.h"

extern char** environ;

namespace gandiva::controller {
namespace {

class ReadoptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.node = "r" + std::to_string(getpid());
    options_.devices = *ParseDeviceSpec("cpu:1");
    options_.lease_ms = 60000;
    options_.state_dir = ::testing::TempDir() + "gd_readopt_" + std::to_string(getpid());
    std::filesystem::remove_all(options_.state_dir);
    std::filesystem::create_directories(options_.state_dir);
  }
  void TearDown() override {
    node_.reset();
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
    std::filesystem::remove_all(options_.state_dir);
  }
  Node& StartNode() {
    node_ = std::make_unique<Node>(options_);
    EXPECT_TRUE(node_->Start().ok());
    return *node_;
  }
  // A job with a real process (sleep, until killed); a migration's copy if it
  // names where it came from.
  Job RegisterWithProcess(const std::string& migrated_from = "") {
    NewJob n;
    n.command = {"sleep", "forever"};
    n.name = "j";
    n.migrated_from = migrated_from;
    auto job = node_->Register(n);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    // Spawned (exec'ed at once): the node's threads are running.
    char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("1000"), nullptr};
    EXPECT_EQ(posix_spawnp(&child_, "sleep", nullptr, nullptr, argv, environ), 0);
    EXPECT_TRUE(node_->SetProcess(job->id, child_, /*spawned=*/false).ok());
    return *job;
  }
  // Stops the node (a plain stop keeps its jobs adoptable) and starts another.
  Node& Restart() {
    node_.reset();
    return StartNode();
  }

  NodeOptions options_;
  std::unique_ptr<Node> node_;
  pid_t child_ = -1;
};

TEST_F(ReadoptTest, ALiveJobIsTakenBackUnderItsIdAndNewIdsGoOn) {
  StartNode();
  const Job job = RegisterWithProcess();
  Node& again = Restart();
  auto back = again.jobs().Live(static_cast<int64_t>(job.id));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->pid, child_);
  EXPECT_EQ(back->name, "j");
  NewJob n;
  n.command = {"x"};
  EXPECT_EQ(again.Register(n)->id, job.id + 1);
  // Its exit is still watched: killed now, it ends here.
  kill(child_, SIGKILL);
  waitpid(child_, nullptr, 0);
  child_ = -1;
  for (int i = 0; i < 200 && !again.jobs().Find(job.id)->ended; ++i) usleep(10000);
  EXPECT_TRUE(again.jobs().Find(job.id)->ended);
}

TEST_F(ReadoptTest, AMigrationsCopyWhoseStateHadNotArrivedIsNotTakenBack) {
  StartNode();
  const Job job = RegisterWithProcess();
  job.cb()->exit_if_orphaned.store(1);  // as StartArrival leaves a warm copy
  Node& again = Restart();
  auto rec = again.jobs().Find(job.id);
  ASSERT_TRUE(rec.ok());
  EXPECT_TRUE(rec->ended);
  EXPECT_NE(rec->end.detail.find("migration's copy"), std::string::npos) << rec->end.detail;
}

TEST_F(ReadoptTest, AJobThatHadMovedToAnotherNodeIsEndedHere) {
  StartNode();
  const Job job = RegisterWithProcess();
  node_->MarkMigrated(job.id, "b/7");  // committed, but this node died before ending its process
  Node& again = Restart();
  int status = 0;
  ASSERT_EQ(waitpid(child_, &status, 0), child_);
  child_ = -1;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  auto rec = again.jobs().Find(job.id);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->State(), protocol::JobState::kMigrated);
  EXPECT_EQ(rec->end.reason, protocol::ExitReason::kMigrated);
  // Its migrate_start was never answered: the record keeps where it went, for
  // the restarted node to send it (to no peer here: nothing is sent).
  EXPECT_EQ(rec->departure, DepartureStage::kCommitted);
  EXPECT_EQ(rec->migrated_to, "b/7");
  EXPECT_FALSE(again.migrator().OperationOf(job.id).has_value());
}

TEST_F(ReadoptTest, ALoadedCopyIsTakenBackHeldUntilItsSourcesStart) {
  StartNode();
  const Job job = RegisterWithProcess("a/1");
  EXPECT_EQ(node_->ArrivalStageOf(job.id), ArrivalStage::kWarming);
  job.cb()->exit_if_orphaned.store(1);  // as StartArrival leaves a warm copy
  ASSERT_TRUE(node_->MarkLoaded(job.id).ok());
  // This node stops before its session cleared exit_if_orphaned: the record decides.
  node_.reset();
  EXPECT_NE(job.cb()->request.load(), runtime::kRequestRun)
      << "a stopping node released a copy whose source had not handed the job over";
  Node& again = StartNode();
  auto back = again.jobs().Live(static_cast<int64_t>(job.id));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->pid, child_);
  EXPECT_EQ(again.ArrivalStageOf(job.id), ArrivalStage::kLoaded);
  EXPECT_EQ(job.cb()->exit_if_orphaned.load(), 0u) << "released now, the job would exit";
  EXPECT_TRUE(again.IsHeld(job.id));
  const Status resume = again.migrator().MayResume(job.id);
  EXPECT_EQ(resume.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(resume.message().find("its source has not handed the job over"), std::string::npos)
      << resume.ToString();
}

TEST_F(ReadoptTest, OnlyAWarmingCopyIsMarkedLoaded) {
  StartNode();
  const Job job = RegisterWithProcess();
  EXPECT_EQ(node_->MarkLoaded(job.id).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(node_->ArrivalStageOf(job.id), ArrivalStage::kNone);
}

TEST_F(ReadoptTest, ASecondNodeOnTheSameStateDirectoryIsRefused) {
  StartNode();
  Node second(options_);
  const Status s = second.Start();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("another gandivad uses the state directory"), std::string::npos);
}

}  // namespace
}  // namespace gandiva::controller
