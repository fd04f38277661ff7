// A caller in a container: its mount namespace tells gandivad so, and a pid it
// names in its own pid namespace becomes gandivad's. The namespaced case needs
// root (CI runs as root), to start a process in new pid and mount namespaces.
#include "jobs/container_peer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace gandiva::controller {
namespace {

TEST(ContainerPeerTest, ACallerInOurNamespacesNamesOurPids) {
  EXPECT_FALSE(*InOtherMountNamespace(getpid()));
  EXPECT_FALSE(*InOtherMountNamespace(-1));  // made in-process
  EXPECT_EQ(*HostPidOf(getpid(), 12345), 12345);
  EXPECT_EQ(*HostPidOf(-1, 12345), 12345);
}

// A "container": unshare(1) in new pid and mount namespaces, whose child
// (pid 1 there) sleeps. Made by the unshare tool rather than clone(2) here, so
// that the sanitizer trees run this test in a process they understand.
TEST(ContainerPeerTest, APidNamedInAnotherNamespaceIsLookedUpThere) {
  if (geteuid() != 0) GTEST_SKIP() << "new pid and mount namespaces need root";
  if (access("/usr/bin/unshare", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/unshare";
  const pid_t tool = fork();
  ASSERT_GE(tool, 0);
  if (tool == 0) {
    execl("/usr/bin/unshare", "unshare", "--pid", "--mount", "--fork", "/bin/sleep", "60",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Its one child is the container's first process.
  pid_t child = 0;
  for (int i = 0; i < 500 && child == 0; ++i) {
    std::ifstream children("/proc/" + std::to_string(tool) + "/task/" + std::to_string(tool) +
                           "/children");
    if (!(children >> child)) child = 0;
    // Until it has exec'd sleep, the child may still be unshare's copy.
    if (child) {
      std::ifstream comm("/proc/" + std::to_string(child) + "/comm");
      std::string name;
      if (!(comm >> name) || name != "sleep") child = 0;
    }
    if (!child) usleep(10000);
  }
  ASSERT_GT(child, 0) << "unshare started no child";
  EXPECT_TRUE(*InOtherMountNamespace(child));
  // It calls itself 1; gandivad knows it by its pid here. Pid 1 of our own
  // namespace (init) is not taken for it.
  auto found = HostPidOf(child, 1);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, child);
  // No process 2 in its namespace: not found, not our pid 2.
  EXPECT_EQ(HostPidOf(child, 2).status().code(), StatusCode::kNotFound);
  kill(child, SIGKILL);
  kill(tool, SIGKILL);
  waitpid(tool, nullptr, 0);
}

}  // namespace
}  // namespace gandiva::controller
