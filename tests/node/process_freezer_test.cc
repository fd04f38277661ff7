// The process freezer on real processes: a stopped tree, continued; and its
// guardian continuing what a controller stopped when that controller is killed.
#include "jobs/process_freezer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace gandiva::controller {
namespace {

TEST(ParseChildrenList, ReadsPidsAndSkipsJunk) {
  EXPECT_EQ(ParseChildrenList("12 34 \n"), (std::vector<int32_t>{12, 34}));
  EXPECT_TRUE(ParseChildrenList("").empty());
  EXPECT_EQ(ParseChildrenList("x 5 -3 0 7y 9"), (std::vector<int32_t>{5, 9}));
}

TEST(FixedPidSet, AddsOnceRemovesAndKnowsWhenFull) {
  FixedPidSet set(2);
  EXPECT_TRUE(set.Add(10));
  EXPECT_TRUE(set.Add(10));
  EXPECT_EQ(set.size(), 1u);
  EXPECT_TRUE(set.Add(11));
  EXPECT_FALSE(set.Add(12));
  set.Remove(10);
  EXPECT_FALSE(set.Contains(10));
  EXPECT_TRUE(set.Contains(11));
  EXPECT_TRUE(set.Add(12));
}

TEST(FixedPidSet, GuardianRecordsAddAndRemove) {
  FixedPidSet set(8);
  const int32_t records[] = {5, 6, 0, -5, 7, -8};
  ApplyGuardianRecords(records, 6, set);
  EXPECT_EQ(set.size(), 2u);
  EXPECT_TRUE(set.Contains(6));
  EXPECT_TRUE(set.Contains(7));
}

char StateOf(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

bool WaitState(pid_t pid, bool stopped) {
  for (int i = 0; i < 400; ++i) {
    if ((StateOf(pid) == 'T') == stopped) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A process with a child of its own (as a job with a DataLoader worker).
pid_t StartTree(pid_t* grandchild) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    const pid_t g = fork();
    if (g == 0)
      for (;;) pause();
    ssize_t n = write(fds[1], &g, sizeof g);
    (void)n;
    for (;;) pause();
  }
  EXPECT_EQ(read(fds[0], grandchild, sizeof *grandchild), static_cast<ssize_t>(sizeof(pid_t)));
  close(fds[0]);
  close(fds[1]);
  return child;
}

void EndTree(pid_t child, pid_t grandchild) {
  kill(grandchild, SIGKILL);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST(ProcessFreezer, StopsTheWholeTreeAndContinuesIt) {
  pid_t grandchild = 0;
  const pid_t child = StartTree(&grandchild);
  ProcessFreezer freezer(true);
  ASSERT_TRUE(freezer.enabled());
  ASSERT_TRUE(freezer.Freeze(1, child).ok());
  EXPECT_TRUE(freezer.IsFrozen(1));
  EXPECT_TRUE(WaitState(child, true));
  EXPECT_TRUE(WaitState(grandchild, true));
  freezer.Thaw(1);
  EXPECT_FALSE(freezer.IsFrozen(1));
  EXPECT_TRUE(WaitState(child, false));
  EXPECT_TRUE(WaitState(grandchild, false));
  EndTree(child, grandchild);
}

TEST(ProcessFreezer, OffNeverStops) {
  pid_t grandchild = 0;
  const pid_t child = StartTree(&grandchild);
  ProcessFreezer freezer(false);
  EXPECT_FALSE(freezer.enabled());
  EXPECT_FALSE(freezer.Freeze(1, child).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_NE(StateOf(child), 'T');
  EndTree(child, grandchild);
}

TEST(ProcessFreezer, AGoneProcessIsNotFound) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  ProcessFreezer freezer(true);
  EXPECT_EQ(freezer.Freeze(1, child).code(), StatusCode::kNotFound);
  EXPECT_FALSE(freezer.IsFrozen(1));
}

// Should the guardian go away, nothing could continue a stopped job if
// gandivad died too: the freezer continues every job and stops none from then on.
TEST(ProcessFreezer, ALostGuardianContinuesEverythingAndStopsNothing) {
  pid_t g1 = 0, g2 = 0;
  const pid_t first = StartTree(&g1);
  const pid_t second = StartTree(&g2);
  ProcessFreezer freezer(true);
  ASSERT_TRUE(freezer.Freeze(1, first).ok());
  EXPECT_TRUE(WaitState(first, true));
  ASSERT_EQ(kill(freezer.guardian_pid(), SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(freezer.Freeze(2, second).ok());
  EXPECT_FALSE(freezer.enabled());
  EXPECT_FALSE(freezer.IsFrozen(1));
  EXPECT_TRUE(WaitState(first, false));
  EXPECT_TRUE(WaitState(g1, false));
  EXPECT_NE(StateOf(second), 'T');
  EndTree(first, g1);
  EndTree(second, g2);
}

// The controller (a process owning a freezer) stops a job and is SIGKILLed:
// its guardian continues the job.
TEST(ProcessFreezer, GuardianContinuesJobsOfAKilledController) {
  pid_t grandchild = 0;
  const pid_t job = StartTree(&grandchild);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t controller = fork();
  if (controller == 0) {
    ProcessFreezer freezer(true);
    const char ok = freezer.Freeze(1, job).ok() ? 'y' : 'n';
    ssize_t n = write(ready[1], &ok, 1);
    (void)n;
    for (;;) pause();
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  EXPECT_TRUE(WaitState(job, true));
  EXPECT_TRUE(WaitState(grandchild, true));
  kill(controller, SIGKILL);
  waitpid(controller, nullptr, 0);
  EXPECT_TRUE(WaitState(job, false));
  EXPECT_TRUE(WaitState(grandchild, false));
  EndTree(job, grandchild);
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace gandiva::controller
