// The plugin's file accesses as the job's user (slurm/spank/as_user.h).
#include "as_user.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

namespace gandiva::slurm {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;

// Opens it, as the file system checks this thread (access() would ask for the
// real uid, which stays root).
bool CanRead(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

TEST(FilesAsUserTest, FilesAreTouchedWithTheUsersPermissionsAndRootsComeBack) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (slurmstepd's) to act as another user";
  std::string tmpl = "/tmp/gd-as-user-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string root_only = tmpl + "/root-only";
  ASSERT_EQ(mkdir(root_only.c_str(), 0700), 0);
  std::ofstream(root_only + "/.state.gdck.tmp.1") << "root's";
  ASSERT_EQ(chmod(tmpl.c_str(), 0755), 0);
  // A thread of slurmstepd's that exists already (one started later from the
  // switched thread would inherit its identity, as threads do).
  std::promise<void> switched;
  auto other_thread = std::async(std::launch::async, [&, go = switched.get_future()]() mutable {
    go.wait();
    return CanRead(root_only);
  });
  {
    auto as_user = FilesAsUser::Enter(kNobody, kNobody);
    ASSERT_TRUE(as_user.ok()) << as_user.status().ToString();
    std::error_code ec;
    EXPECT_FALSE(fs::remove(root_only + "/.state.gdck.tmp.1", ec));
    EXPECT_FALSE(CanRead(root_only));
    // Every other thread of the process is still root.
    switched.set_value();
    EXPECT_TRUE(other_thread.get());
    EXPECT_EQ(geteuid(), 0u);
  }
  EXPECT_TRUE(CanRead(root_only));
  EXPECT_TRUE(fs::exists(root_only + "/.state.gdck.tmp.1"));
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace gandiva::slurm
