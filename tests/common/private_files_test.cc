// Checked directories and link-refusing opens (gandiva/common/private_files.h).
#include "gandiva/common/private_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace gandiva {
namespace {

namespace fs = std::filesystem;

class PrivateFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/gd-private-files-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  static mode_t ModeOf(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string root_;
};

TEST_F(PrivateFilesTest, MakesWhatIsMissingWithTheAskedModeWhateverTheUmask) {
  const mode_t old = umask(0077);
  auto dir = OpenPrivateDir(root_ + "/a/b/state", 0755, geteuid());
  umask(old);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(ModeOf(root_ + "/a/b/state"), 0755u);
  EXPECT_EQ(ModeOf(root_ + "/a"), 0755u);
  auto file = CreateFileAt(dir->get(), "log", O_WRONLY, 0600, "the log");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(ModeOf(root_ + "/a/b/state/log"), 0600u);
}

TEST_F(PrivateFilesTest, AnExistingDirectoryIsCheckedAndNeverChmoded) {
  const std::string dir = root_ + "/open";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  auto opened = OpenPrivateDir(dir, 0700, geteuid());
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(opened.status().message().find("mode 0777"), std::string::npos)
      << opened.status().message();
  EXPECT_EQ(ModeOf(dir), 0777u);  // left as it was

  ASSERT_EQ(chmod(dir.c_str(), 0750), 0);
  EXPECT_TRUE(OpenPrivateDir(dir, 0700, geteuid()).ok());
  EXPECT_EQ(ModeOf(dir), 0750u);  // an owner-only-writable directory is used as it is
}

TEST_F(PrivateFilesTest, ADirectoryOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  const std::string dir = root_ + "/squatted";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chown(dir.c_str(), 54321, 54321), 0);
  auto opened = OpenPrivateDir(dir, 0700, 0);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(opened.status().message().find("uid 54321"), std::string::npos)
      << opened.status().message();
  // Nor may anything lie beneath it: its owner could rename it away.
  EXPECT_FALSE(OpenPrivateDir(dir + "/below", 0700, 0).ok());
  EXPECT_FALSE(fs::exists(dir + "/below"));
  // A directory of the user it is checked for is theirs to use.
  EXPECT_TRUE(OpenPrivateDir(dir, 0700, 54321).ok());
}

TEST_F(PrivateFilesTest, AStickyAncestorIsTrustedButAWritableOneIsNot) {
  const std::string sticky = root_ + "/sticky";
  ASSERT_EQ(mkdir(sticky.c_str(), 0700), 0);
  ASSERT_EQ(chmod(sticky.c_str(), 01777), 0);
  EXPECT_TRUE(OpenPrivateDir(sticky + "/mine", 0700, geteuid()).ok());
  // The directory itself must not be writable by others, sticky or not.
  EXPECT_FALSE(OpenPrivateDir(sticky, 0700, geteuid()).ok());

  const std::string open = root_ + "/open";
  ASSERT_EQ(mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  auto below = OpenPrivateDir(open + "/mine", 0700, geteuid());
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.status().message().find(open + " (mode 0777)"), std::string::npos)
      << below.status().message();
  EXPECT_FALSE(fs::exists(open + "/mine"));
}

TEST_F(PrivateFilesTest, ALinkInPlaceOfTheDirectoryIsRefused) {
  const std::string target = root_ + "/elsewhere";
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  ASSERT_EQ(symlink(target.c_str(), (root_ + "/state").c_str()), 0);
  auto opened = OpenPrivateDir(root_ + "/state", 0700, geteuid());
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("symbolic link"), std::string::npos)
      << opened.status().message();
  EXPECT_TRUE(OpenPrivateDir(root_ + "/elsewhere", 0700, geteuid()).ok());
  EXPECT_FALSE(OpenPrivateDir("relative/dir", 0700, geteuid()).ok());
  EXPECT_FALSE(OpenPrivateDir(root_ + "/../x", 0700, geteuid()).ok());
}

TEST_F(PrivateFilesTest, CreatingNeverWritesThroughALinkNorIntoAnExistingFile) {
  const std::string victim = root_ + "/victim";
  std::ofstream(victim) << "precious";
  ASSERT_EQ(symlink(victim.c_str(), (root_ + "/job-1.stdout").c_str()), 0);
  auto dir = OpenPrivateDir(root_, 0700, geteuid());
  ASSERT_TRUE(dir.ok());
  auto through_link = CreateFileAt(dir->get(), "job-1.stdout", O_WRONLY | O_TRUNC, 0600, "log");
  EXPECT_EQ(through_link.status().code(), StatusCode::kAlreadyExists);
  auto over_file = CreateFileNoFollow(victim, O_WRONLY | O_TRUNC, 0600);
  EXPECT_EQ(over_file.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Read(victim), "precious");
  EXPECT_FALSE(CreateFileAt(dir->get(), "a/b", O_WRONLY, 0600, "x").ok());

  auto fresh = CreateFileNoFollow(root_ + "/fresh", O_WRONLY, 0640);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_NE(fcntl(fresh->get(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST_F(PrivateFilesTest, OpeningAnExistingFileRefusesLinksAndFifos) {
  const std::string victim = root_ + "/victim";
  std::ofstream(victim) << "precious";
  ASSERT_EQ(symlink(victim.c_str(), (root_ + "/link").c_str()), 0);
  auto link = OpenRegularNoFollow(root_ + "/link", O_RDWR);
  EXPECT_EQ(link.status().code(), StatusCode::kPermissionDenied);
  ASSERT_EQ(mkfifo((root_ + "/fifo").c_str(), 0600), 0);
  auto fifo = OpenRegularNoFollow(root_ + "/fifo", O_RDONLY);  // would block without the check
  EXPECT_EQ(fifo.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(OpenRegularNoFollow(root_ + "/none", O_RDONLY).status().code(), StatusCode::kNotFound);
  auto file = OpenRegularNoFollow(victim, O_RDONLY);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(fcntl(file->get(), F_GETFL) & O_NONBLOCK, 0);
}

}  // namespace
}  // namespace gandiva
