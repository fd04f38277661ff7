// Files gandivad makes or opens for a job of another user are made and opened
// as that user: the kernel refuses what the user could not do, and what is
// made is the user's. Needs root (CI runs as root); skipped otherwise.
#include "jobs/as_user.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace gandiva::controller {
namespace {

constexpr int64_t kNobody = 65534;  // Debian's "nobody"

class AsUserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "acting as another user needs root";
    char tmpl[] = "/tmp/gandiva-as-user-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string dir_;
};

TEST_F(AsUserTest, AUserCannotOpenWhatOnlyRootMay) {
  const std::string secret = dir_ + "/secret";
  UniqueFd fd(open(secret.c_str(), O_WRONLY | O_CREAT, 0600));
  ASSERT_TRUE(fd.valid());
  auto as_nobody = OpenAsUser(kNobody, secret, O_RDONLY);
  EXPECT_EQ(as_nobody.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(as_nobody.status().message().find("as uid 65534"), std::string::npos);
  EXPECT_TRUE(OpenAsUser(-1, secret, O_RDONLY).ok());  // gandivad's own user: as itself
}

TEST_F(AsUserTest, WhatAUserMakesIsTheirs) {
  chmod(dir_.c_str(), 0777);
  const std::string made = dir_ + "/a/b";
  ASSERT_TRUE(MakeDirsAsUser(kNobody, made, 0700).ok());
  struct stat st;
  ASSERT_EQ(stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(kNobody));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto file = OpenAsUser(kNobody, made + "/f", O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_EQ(fstat(file->get(), &st), 0);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(kNobody));
}

TEST_F(AsUserTest, ALinkPlantedForRootIsNotWrittenThrough) {
  chmod(dir_.c_str(), 0777);
  const std::string victim = dir_ + "/victim";
  UniqueFd fd(open(victim.c_str(), O_WRONLY | O_CREAT, 0644));
  ASSERT_TRUE(fd.valid());
  const std::string link = dir_ + "/manifest";
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  EXPECT_FALSE(OpenAsUser(kNobody, link, O_WRONLY | O_TRUNC).ok());  // not nobody's to write
  EXPECT_FALSE(OpenAsUser(-1, link, O_WRONLY | O_TRUNC | O_NOFOLLOW).ok());
}

TEST_F(AsUserTest, AnUnknownUserIsRefused) {
  EXPECT_EQ(MakeDirsAsUser(2'000'000'000, dir_ + "/x").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gandiva::controller
