// A caller in a container: its mount namespace tells gandivad so, and a pid it
// names in its own pid namespace becomes gandivad's. The namespaced case needs
// root (CI runs as root), to make a child in new pid and mount namespaces.
#include "jobs/container_peer.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gandiva::controller {
namespace {

TEST(ContainerPeerTest, ACallerInOurNamespacesNamesOurPids) {
  EXPECT_FALSE(*InOtherMountNamespace(getpid()));
  EXPECT_FALSE(*InOtherMountNamespace(-1));  // made in-process
  EXPECT_EQ(*HostPidOf(getpid(), 12345), 12345);
  EXPECT_EQ(*HostPidOf(-1, 12345), 12345);
}

// The child of a "container": pid 1 of its own pid namespace, in its own mount namespace.
int PauseAsContainer(void*) {
  for (;;) pause();
  return 0;
}

TEST(ContainerPeerTest, APidNamedInAnotherNamespaceIsLookedUpThere) {
  if (geteuid() != 0) GTEST_SKIP() << "new pid and mount namespaces need root";
  alignas(16) static char stack[64 * 1024];
  const pid_t child =
      clone(PauseAsContainer, stack + sizeof stack, CLONE_NEWPID | CLONE_NEWNS | SIGCHLD, nullptr);
  ASSERT_GT(child, 0) << "clone: " << std::strerror(errno);
  EXPECT_TRUE(*InOtherMountNamespace(child));
  // It calls itself 1; gandivad knows it by its pid here. Pid 1 of our own
  // namespace (init) is not taken for it.
  auto found = HostPidOf(child, 1);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, child);
  // No process 2 in its namespace: not found, not our pid 2.
  EXPECT_EQ(HostPidOf(child, 2).status().code(), StatusCode::kNotFound);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace gandiva::controller
