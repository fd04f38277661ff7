// A control block cut short under its controller (its owner's ftruncate):
// with the guard on, the controller reads zeros and is told, instead of dying
// of SIGBUS; a SIGBUS anywhere else still ends the process as it would have.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gandiva/contract/shared_control_block.h"

namespace gandiva::runtime {
namespace {

std::string ShrinkTestName(const char* tag) {
  return "/gandiva.test." + std::to_string(getpid()) + "." + tag;
}

void Cut(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  close(fd);
}

TEST(ShrinkGuardTest, ABlockCutShortReadsAsZerosAndSaysSo) {
  ASSERT_TRUE(SharedControlBlock::GuardAgainstShrinking().ok());
  const std::string name = ShrinkTestName("cut");
  auto block = SharedControlBlock::Create(name, 7, 1'000'000'000, "node");
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  ControlBlock* cb = (*block)->get();
  EXPECT_EQ(cb->magic, kControlBlockMagic);
  EXPECT_FALSE((*block)->cut_short());
  Cut(name);
  EXPECT_EQ(cb->magic, 0u);  // the fault, taken and answered with a zero page
  EXPECT_TRUE((*block)->cut_short());
  Heartbeat(cb, 123);  // writes land in the private page: no fault
  EXPECT_EQ(cb->heartbeat_ns.load(), 123u);
  SharedControlBlock::Remove(name);
}

TEST(ShrinkGuardTest, AnotherBlockIsNotTouched) {
  ASSERT_TRUE(SharedControlBlock::GuardAgainstShrinking().ok());
  auto a = SharedControlBlock::Create(ShrinkTestName("a"), 1, 1'000'000'000, "node");
  auto b = SharedControlBlock::Create(ShrinkTestName("b"), 2, 1'000'000'000, "node");
  ASSERT_TRUE(a.ok() && b.ok());
  Cut(ShrinkTestName("a"));
  EXPECT_EQ((*a)->get()->job_id, 0u);
  EXPECT_EQ((*b)->get()->job_id, 2u);
  EXPECT_FALSE((*b)->cut_short());
  SharedControlBlock::Remove(ShrinkTestName("a"));
  SharedControlBlock::Remove(ShrinkTestName("b"));
}

// Any other mapping cut short is not ours to answer: the process dies as it
// would without the guard (of SIGBUS; under a sanitizer, by its report).
constexpr int kSetupFailed = 70;

TEST(ShrinkGuardDeathTest, OtherMappingsStillFault) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer answers that SIGBUS itself, and its report of the expected
  // crash would fail the run (scripts/test_sanitized.sh fails on any report).
  GTEST_SKIP() << "a sanitizer takes the fault first";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        (void)SharedControlBlock::GuardAgainstShrinking();
        char path[] = "/tmp/gandiva-shrink-XXXXXX";
        const int fd = mkstemp(path);
        unlink(path);
        if (fd < 0 || ftruncate(fd, 4096) != 0) std::_Exit(kSetupFailed);
        auto* p = static_cast<volatile char*>(
            mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        if (ftruncate(fd, 0) != 0) std::_Exit(kSetupFailed);
        p[0] = 1;
        std::_Exit(0);
      },
      [](int status) {
        return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
                                       WEXITSTATUS(status) != kSetupFailed);
      },
      "");
}

}  // namespace
}  // namespace gandiva::runtime
