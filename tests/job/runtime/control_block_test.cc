// The shared-memory control block: creation, opening by name, validation, the
// controller-side operations.
#include "gandiva/contract/control_block.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/contract/shared_control_block.h"

namespace gandiva::runtime {
namespace {

std::string UniqueName(const char* tag) {
  return "/gandiva.test." + std::to_string(getpid()) + "." + tag;
}

TEST(SharedControlBlockTest, CreateThenOpenSharesTheSameMemory) {
  const std::string name = UniqueName("share");
  auto created = SharedControlBlock::Create(name, 42, 3'000'000'000, "nodeA");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto opened = SharedControlBlock::Open(name);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->get()->job_id, 42u);
  EXPECT_STREQ((*opened)->get()->node, "nodeA");
  RequestSuspend((*created)->get());
  EXPECT_EQ((*opened)->get()->request.load(), kRequestSuspend);
  SharedControlBlock::Remove(name);
}

TEST(SharedControlBlockTest, OpenUnknownNameIsNotFound) {
  auto opened = SharedControlBlock::Open(UniqueName("missing"));
  EXPECT_EQ(opened.status().code(), StatusCode::kNotFound);
}

TEST(SharedControlBlockTest, OpenRejectsABlockWithBadMagicOrVersion) {
  const std::string name = UniqueName("corrupt");
  auto created = SharedControlBlock::Create(name, 1, 0, "n");
  ASSERT_TRUE(created.ok());
  (*created)->get()->version = kControlBlockVersion + 1;
  EXPECT_EQ(SharedControlBlock::Open(name).status().code(), StatusCode::kFailedPrecondition);
  (*created)->get()->magic = 0xdeadbeef;
  EXPECT_EQ(SharedControlBlock::Open(name).status().code(), StatusCode::kDataLoss);
  SharedControlBlock::Remove(name);
}

// A job running as another user (a Slurm job under a root gandivad) gets its
// block; a controller that is not root cannot give it away and says why.
TEST(SharedControlBlockTest, ABlockIsGivenToTheJobsUserOnlyByRoot) {
  const std::string name = UniqueName("owner");
  const uid_t nobody = 65534;
  auto created = SharedControlBlock::Create(name, 1, 0, "n", nobody);
  struct stat st {};
  if (geteuid() == 0) {
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    ASSERT_EQ(stat(("/dev/shm" + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, nobody);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  } else {
    ASSERT_EQ(created.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(created.status().message().find("root"), std::string::npos);
    EXPECT_NE(stat(("/dev/shm" + name).c_str(), &st), 0) << "nothing left behind";
  }
  SharedControlBlock::Remove(name);
  // Our own uid is no change at all, root or not.
  auto own = SharedControlBlock::Create(name, 1, 0, "n", geteuid());
  EXPECT_TRUE(own.ok()) << own.status().ToString();
  SharedControlBlock::Remove(name);
}

// A job in a container gets its block as a file in gandivad's blocks directory
// (a path, not a /dev/shm name): created afresh, owner-only, mapped as the same memory.
TEST(SharedControlBlockTest, ABlockMayBeAFileAtAPath) {
  char dir_template[] = "/tmp/gd-blocks-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string name = dir + "/gandiva.test." + std::to_string(getpid()) + ".7";
  EXPECT_TRUE(SharedControlBlock::IsFileName(name));
  EXPECT_FALSE(SharedControlBlock::IsFileName(UniqueName("x")));
  EXPECT_EQ(SharedControlBlock::PathOf(name), name);
  EXPECT_EQ(SharedControlBlock::PathOf("/gandiva.a.1.2"), "/dev/shm/gandiva.a.1.2");
  // A link planted at the name is replaced, never written through.
  const std::string target = dir + "/target";
  ASSERT_EQ(symlink(target.c_str(), name.c_str()), 0);
  auto created = SharedControlBlock::Create(name, 7, 0, "nodeC");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  struct stat st {};
  EXPECT_NE(stat(target.c_str(), &st), 0) << "created through the link";
  ASSERT_EQ(lstat(name.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto opened = SharedControlBlock::Open(name);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->get()->job_id, 7u);
  RequestSuspend((*created)->get());
  EXPECT_EQ((*opened)->get()->request.load(), kRequestSuspend);
  SharedControlBlock::Remove(name);
  EXPECT_NE(lstat(name.c_str(), &st), 0);
  EXPECT_EQ(SharedControlBlock::Open(name).status().code(), StatusCode::kNotFound);
  // Opening does not follow a link either.
  ASSERT_EQ(symlink(target.c_str(), name.c_str()), 0);
  EXPECT_FALSE(SharedControlBlock::Open(name).ok());
  unlink(name.c_str());
  rmdir(dir.c_str());
}

TEST(ControlBlockTest, WaitForPhaseTimesOutThenSeesTheChange) {
  ControlBlock cb;
  InitControlBlock(&cb, 1, 0, "n");
  const uint64_t t0 = MonotonicNowNs();
  EXPECT_FALSE(WaitForPhase(&cb, kPhaseParked, 20'000'000));
  EXPECT_GE(MonotonicNowNs() - t0, 19'000'000u);
  std::thread parker([&] {
    cb.phase.store(kPhaseParked);
    FutexWakeAll(&cb.phase);
  });
  EXPECT_TRUE(WaitForPhase(&cb, kPhaseParked, 5'000'000'000));
  parker.join();
}

TEST(ControlBlockTest, ReleaseForeverResumesAndMarksTheControllerGone) {
  ControlBlock cb;
  InitControlBlock(&cb, 1, 0, "n");
  RequestSuspend(&cb);
  ReleaseForever(&cb);
  EXPECT_EQ(cb.request.load(), kRequestRun);
  EXPECT_EQ(cb.controller_gone.load(), 1u);
}

}  // namespace
}  // namespace gandiva::runtime
