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
#include <utility>
#include <vector>

namespace gandiva::controller {
namespace {

TEST(ContainerPeerTest, ACallerInOurNamespacesNamesOurPids) {
  EXPECT_FALSE(*InContainer(getpid()));
  EXPECT_FALSE(*InContainer(-1));  // made in-process
  EXPECT_EQ(*HostPidOf(getpid(), 12345), 12345);
  EXPECT_EQ(*HostPidOf(-1, 12345), 12345);
}

// unshare(1) with `flags`, running `/bin/sh -c script` (which ends by exec'ing
// sleep); returns {the unshare tool, its child: the process in the namespaces},
// or a child of 0. Made by the unshare tool rather than clone(2) here, so that
// the sanitizer trees run these tests in a process they understand.
std::pair<pid_t, pid_t> StartInNamespaces(const std::vector<const char*>& flags,
                                          const char* script) {
  const pid_t tool = fork();
  if (tool < 0) return {0, 0};
  if (tool == 0) {
    std::vector<const char*> argv = {"unshare"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    for (const char* a : {"--fork", "/bin/sh", "-c", script}) argv.push_back(a);
    argv.push_back(nullptr);
    execv("/usr/bin/unshare", const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  pid_t child = 0;
  for (int i = 0; i < 500 && child == 0; ++i) {
    std::ifstream children("/proc/" + std::to_string(tool) + "/task/" + std::to_string(tool) +
                           "/children");
    if (!(children >> child)) child = 0;
    // Until it has exec'd sleep, the child may still be setting up.
    if (child) {
      std::ifstream comm("/proc/" + std::to_string(child) + "/comm");
      std::string name;
      if (!(comm >> name) || name != "sleep") child = 0;
    }
    if (!child) usleep(10000);
  }
  return {tool, child};
}

void Stop(std::pair<pid_t, pid_t> started) {
  if (started.second > 0) kill(started.second, SIGKILL);
  kill(started.first, SIGKILL);
  waitpid(started.first, nullptr, 0);
}

// A "container": new pid and mount namespaces with a /dev/shm of their own; its
// first process (pid 1 there) sleeps.
TEST(ContainerPeerTest, APidNamedInAnotherNamespaceIsLookedUpThere) {
  if (geteuid() != 0) GTEST_SKIP() << "new pid and mount namespaces need root";
  if (access("/usr/bin/unshare", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/unshare";
  const auto started = StartInNamespaces({"--pid", "--mount"},
                                         "mount -t tmpfs tmpfs /dev/shm && exec /bin/sleep 60");
  const pid_t child = started.second;
  ASSERT_GT(child, 0) << "unshare started no child";
  EXPECT_TRUE(*InContainer(child));
  // It calls itself 1; gandivad knows it by its pid here. Pid 1 of our own
  // namespace (init) is not taken for it.
  auto found = HostPidOf(child, 1);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, child);
  // No process 2 in its namespace: not found, not our pid 2.
  EXPECT_EQ(HostPidOf(child, 2).status().code(), StatusCode::kNotFound);
  Stop(started);
}

// Another mount namespace that keeps our /dev/shm (as `ip netns exec` makes
// one) is no container: its job's control block is in /dev/shm as any job's.
TEST(ContainerPeerTest, AnotherMountNamespaceThatSharesOurShmIsNoContainer) {
  if (geteuid() != 0) GTEST_SKIP() << "a new mount namespace needs root";
  if (access("/usr/bin/unshare", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/unshare";
  const auto started = StartInNamespaces({"--mount"}, "exec /bin/sleep 60");
  ASSERT_GT(started.second, 0) << "unshare started no child";
  EXPECT_FALSE(*InContainer(started.second));
  Stop(started);
}

}  // namespace
}  // namespace gandiva::controller
