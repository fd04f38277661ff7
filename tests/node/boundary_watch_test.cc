// Jobs that show no iteration boundary (node/jobs/boundary_watch.h): warned
// about once they have marked none for the wait, not before, not once they
// marked one, and logged once.
#include "jobs/boundary_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "gandiva/contract/shared_control_block.h"

namespace gandiva::controller {
namespace {

constexpr uint64_t kS = 1000000000ull;

class BoundaryWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "/gandiva.boundary-watch-test." + std::to_string(getpid());
    auto block = runtime::SharedControlBlock::Create(name_, 7, 0, "node");
    ASSERT_TRUE(block.ok()) << block.status().ToString();
    job_.id = 7;
    job_.pid = 1234;
    job_.registered_ns = 100 * kS;
    job_.block = std::move(block).value();
  }
  void TearDown() override { runtime::SharedControlBlock::Remove(name_); }

  std::string name_;
  Job job_;
};

TEST_F(BoundaryWatchTest, WarnsOnlyAfterTheWaitWithoutABoundary) {
  EXPECT_EQ(NoBoundaryWarning(job_, 129 * kS, 30 * kS), "");
  const std::string w = NoBoundaryWarning(job_, 131 * kS, 30 * kS);
  EXPECT_EQ(w.rfind("no iteration boundaries seen: none in the 31 s since it registered", 0), 0u)
      << w;
  EXPECT_NE(w.find("gandiva.step()"), std::string::npos) << "says what to do";
}

TEST_F(BoundaryWatchTest, NoWarningOnceItMarkedOneOrWhenOff) {
  job_.cb()->phase.store(runtime::kPhaseRunning);
  EXPECT_EQ(NoBoundaryWarning(job_, 200 * kS, 30 * kS), "");
  job_.cb()->phase.store(runtime::kPhaseParked);
  EXPECT_EQ(NoBoundaryWarning(job_, 200 * kS, 30 * kS), "");
  job_.cb()->phase.store(runtime::kPhaseStarting);
  EXPECT_EQ(NoBoundaryWarning(job_, 200 * kS, 0), "") << "--boundary-wait-s 0: never";
  job_.pid = 0;  // registered, its process not started yet
  EXPECT_EQ(NoBoundaryWarning(job_, 200 * kS, 30 * kS), "");
  job_.pid = 1234;
  job_.ended = true;
  EXPECT_EQ(NoBoundaryWarning(job_, 200 * kS, 30 * kS), "");
}

TEST_F(BoundaryWatchTest, NotesEachJobOnceWhileItLasts) {
  BoundaryWatch watch(30 * kS);
  EXPECT_EQ(watch.Note(job_, 120 * kS), "");
  watch.EndBeat();
  EXPECT_NE(watch.Note(job_, 140 * kS), "");  // newly warned: logged
  watch.EndBeat();
  EXPECT_EQ(watch.Note(job_, 141 * kS), "");  // still warned: not again
  watch.EndBeat();
  job_.cb()->phase.store(runtime::kPhaseRunning);  // it marked one
  EXPECT_EQ(watch.Note(job_, 142 * kS), "");
  watch.EndBeat();
}

}  // namespace
}  // namespace gandiva::controller
