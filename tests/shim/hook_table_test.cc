// Unit tests of the hook table: cuGetProcAddress answers by name, version and flags.
#include "interpose/hook_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace gandiva::shim {
namespace {

std::string Answer(const char* symbol, int version, unsigned long long flags) {
  const HookEntry* e = FindHookForProcAddress(symbol, version, flags);
  return e ? e->name : "";
}

TEST(HookTableTest, VersionedNames) {
  EXPECT_EQ(Answer("cuMemAlloc", 12000, 0), "cuMemAlloc_v2");
  EXPECT_EQ(Answer("cuMemAlloc", 3000, 0), "");  // the 32-bit original is not hooked
  EXPECT_EQ(Answer("cuCtxSynchronize", 12080, 0), "cuCtxSynchronize");
  EXPECT_EQ(Answer("cuCtxSynchronize", 13000, 0), "cuCtxSynchronize_v2");
  EXPECT_EQ(Answer("cuGetProcAddress", 12000, 0), "cuGetProcAddress_v2");
  EXPECT_EQ(Answer("cuStreamBeginCapture", 12000, 0), "cuStreamBeginCapture_v2");
}

TEST(HookTableTest, PerThreadDefaultStreamVariants) {
  EXPECT_EQ(Answer("cuLaunchKernel", 12000, 2), "cuLaunchKernel_ptsz");
  EXPECT_EQ(Answer("cuLaunchKernel", 12000, 0), "cuLaunchKernel");
  EXPECT_EQ(Answer("cuLaunchKernel", 12000, 1), "cuLaunchKernel");
  EXPECT_EQ(Answer("cuMemcpyDtoH", 12000, 2), "cuMemcpyDtoH_v2_ptds");
  // No per-thread variant exists: the plain one answers.
  EXPECT_EQ(Answer("cuMemAlloc", 12000, 2), "cuMemAlloc_v2");
  EXPECT_EQ(Answer("cuEventSynchronize", 12000, 2), "cuEventSynchronize");
}

TEST(HookTableTest, EveryHookIsFoundByItsName) {
  int n = 0;
  const HookEntry* hooks = HookEntries(&n);
  ASSERT_GT(n, 60);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(FindHookByName(hooks[i].name), &hooks[i]);
    EXPECT_NE(hooks[i].wrapper, nullptr);
    EXPECT_EQ(std::strncmp(hooks[i].name, "cu", 2), 0);
  }
  EXPECT_EQ(FindHookByName("cuModuleLoad"), nullptr);
}

}  // namespace
}  // namespace gandiva::shim
