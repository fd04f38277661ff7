// The memory cap's arithmetic: charges refused beyond the cap (never partly taken),
// what cuMemGetInfo and cuDeviceTotalMem report under it, the variable's parsing, and
// that concurrent charges never overshoot.
#include "memory/memory_cap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "memory/memory_tracker.h"

namespace gandiva::shim {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

TEST(MemoryCapTest, RefusesTheChargeThatWouldPassTheCapAndTakesNothing) {
  MemoryCap cap(512 * kMiB);
  EXPECT_TRUE(cap.TryCharge(256 * kMiB));
  EXPECT_TRUE(cap.TryCharge(256 * kMiB));  // exactly the cap
  EXPECT_FALSE(cap.TryCharge(1));
  EXPECT_EQ(cap.charged(), 512 * kMiB);
  cap.Release(256 * kMiB);
  EXPECT_FALSE(cap.TryCharge(256 * kMiB + 1));
  EXPECT_EQ(cap.charged(), 256 * kMiB);
  EXPECT_TRUE(cap.TryCharge(256 * kMiB));
  EXPECT_EQ(cap.refused(), 2u);
}

TEST(MemoryCapTest, ChargesNearTheLimitOfTheTypeDoNotWrapAround) {
  MemoryCap cap(512 * kMiB);
  EXPECT_TRUE(cap.TryCharge(100));
  EXPECT_FALSE(cap.TryCharge(UINT64_MAX));
  EXPECT_FALSE(cap.TryCharge(UINT64_MAX - 50));
  EXPECT_EQ(cap.charged(), 100u);
}

TEST(MemoryCapTest, WithoutACapEveryChargeIsCountedAndNoneRefused) {
  MemoryCap cap(0);
  EXPECT_FALSE(cap.enabled());
  EXPECT_TRUE(cap.TryCharge(64ull << 30));
  EXPECT_TRUE(cap.TryCharge(64ull << 30));
  EXPECT_EQ(cap.charged(), 128ull << 30);
  size_t free_bytes = 3 * kMiB, total = 80ull << 30;
  cap.Report(&free_bytes, &total);
  EXPECT_EQ(free_bytes, 3 * kMiB);  // the driver's answer, untouched
  EXPECT_EQ(total, 80ull << 30);
  EXPECT_EQ(cap.Total(80ull << 30), 80ull << 30);
}

TEST(MemoryCapTest, ReportsTheCapAsTotalAndWhatIsLeftOfItAsFree) {
  MemoryCap cap(4096 * kMiB);
  ASSERT_TRUE(cap.TryCharge(1024 * kMiB));
  size_t free_bytes = 70000 * kMiB, total = 80000 * kMiB;  // a roomy device
  cap.Report(&free_bytes, &total);
  EXPECT_EQ(total, 4096 * kMiB);
  EXPECT_EQ(free_bytes, 3072 * kMiB);
  EXPECT_EQ(cap.Total(80000 * kMiB), 4096 * kMiB);
}

TEST(MemoryCapTest, FreeIsTheDevicesWhenNeighboursLeaveLessThanTheCap) {
  MemoryCap cap(4096 * kMiB);
  ASSERT_TRUE(cap.TryCharge(1024 * kMiB));
  size_t free_bytes = 500 * kMiB, total = 80000 * kMiB;
  cap.Report(&free_bytes, &total);
  EXPECT_EQ(free_bytes, 500 * kMiB);  // min(real free, cap - used)
  EXPECT_EQ(total, 4096 * kMiB);
}

TEST(MemoryCapTest, ACapAboveTheDeviceIsTheDevice) {
  MemoryCap cap(200000 * kMiB);
  size_t free_bytes = 70000 * kMiB, total = 80000 * kMiB;
  cap.Report(&free_bytes, &total);
  EXPECT_EQ(total, 80000 * kMiB);
  EXPECT_EQ(free_bytes, 70000 * kMiB);
}

TEST(MemoryCapTest, AFullCapReportsNothingFree) {
  MemoryCap cap(256 * kMiB);
  ASSERT_TRUE(cap.TryCharge(256 * kMiB));
  size_t free_bytes = 70000 * kMiB, total = 80000 * kMiB;
  cap.Report(&free_bytes, &total);
  EXPECT_EQ(free_bytes, 0u);
  cap.Report(nullptr, nullptr);  // the driver refuses null pointers; nothing to write here
}

TEST(MemoryCapTest, ConcurrentChargesNeverPassTheCap) {
  constexpr int kThreads = 8;
  constexpr int kTries = 20000;
  MemoryCap cap(1000 * 4096);
  std::atomic<uint64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kTries; ++i) {
        if (!cap.TryCharge(4096)) continue;
        granted.fetch_add(1);
        if (i % 3 == 0) {  // some are freed again, so the counter moves both ways
          cap.Release(4096);
          granted.fetch_sub(1);
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 1000u);  // every slot ends up taken, none twice
  EXPECT_EQ(cap.charged(), 1000u * 4096);
}

TEST(MemoryCapTest, ParsesAPositiveDecimalByteCountOnly) {
  bool bad = true;
  EXPECT_EQ(ParseCapBytes("4294967296", &bad), 4294967296u);
  EXPECT_FALSE(bad);
  EXPECT_EQ(ParseCapBytes(nullptr, &bad), 0u);
  EXPECT_FALSE(bad);  // absent: no cap, nothing to warn about
  EXPECT_EQ(ParseCapBytes("", &bad), 0u);
  EXPECT_FALSE(bad);
  for (const char* text : {"0", "4GiB", "-1", "12 ", "0x100", "99999999999999999999999"}) {
    EXPECT_EQ(ParseCapBytes(text, &bad), 0u) << text;
    EXPECT_TRUE(bad) << text;
  }
  EXPECT_EQ(ParseCapBytes("18446744073709551615", &bad), UINT64_MAX);
}

TEST(MemoryCapTest, AnAllocationIsChargedWhatTheDeviceGivesIt) {
  Allocation vmm;
  vmm.size = 3 * kMiB;
  vmm.mapped_size = 4 * kMiB;  // rounded up to the 2 MiB granularity
  EXPECT_EQ(CapCharge(vmm), 4 * kMiB);
  vmm.swapped = true;  // swapped out: still the job's, still charged
  EXPECT_EQ(CapCharge(vmm), 4 * kMiB);
  Allocation plain;
  plain.size = 4096;
  EXPECT_EQ(CapCharge(plain), 4096u);
}

}  // namespace
}  // namespace gandiva::shim
