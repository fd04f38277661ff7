// gandivad takes a process from a user only if the user could signal it
// (kill(2)'s rule), and signals it through a pidfd.
#include "jobs/process_identity.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gandiva::controller {
namespace {

TEST(ProcessIdentityTest, AProcessIsTakenOnlyForAUserWhoCouldSignalIt) {
  const int64_t me = getuid();
  EXPECT_TRUE(OpenProcessOf(getpid(), me).ok());
  EXPECT_TRUE(OpenProcessOf(getpid(), -1).ok());  // gandivad's own user: checks nothing more
  auto other = OpenProcessOf(getpid(), me + 12345);
  EXPECT_EQ(other.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(other.status().message().find("could signal itself"), std::string::npos);
  EXPECT_EQ(OpenProcessOf(0, me).status().code(), StatusCode::kNotFound);
}

TEST(ProcessIdentityTest, ASignalGoesToTheHeldProcessOnly) {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  auto held = OpenProcessOf(child, getuid());
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(SignalProcess(*held, SIGKILL));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(SignalProcess(*held, SIGKILL));  // reaped: the pidfd reaches no other process
  EXPECT_FALSE(SignalProcess(UniqueFd(), SIGKILL));
}

}  // namespace
}  // namespace gandiva::controller
