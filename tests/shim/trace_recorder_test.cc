// The driver-call recorder (GANDIVA_SHIM_TRACE) and its reader, without a driver:
// records appended by several threads at once all reach the file, each thread's in
// its order; the size bound stops recording and says so; the reader refuses what is
// not a whole trace.
#include "trace/trace_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "trace/trace_reader.h"

namespace gandiva::shim::trace {
namespace {

const char* const kNames[] = {"cuInit", "cuLaunchKernel", "cuStreamSynchronize"};

std::string TempPath(const char* name) {
  return ::testing::TempDir() + "gd_trace_" + std::to_string(getpid()) + "_" + name;
}

Options TestOptions(const std::string& path, uint64_t max_bytes = 64ull << 20) {
  Options o;
  o.path = path;
  o.max_bytes = max_bytes;
  o.hook_names = kNames;
  o.hooks = 3;
  o.command = "trace_recorder_test";
  o.settings = "GANDIVA_SHIM_VMM=0;";
  return o;
}

// What a hook appends: t_ns from the recorder's clock, the thread's own sequence in arg[0].
// `pace`: waits while the thread's ring is half full, as driver calls between records
// leave the writer time (a tight loop of appends may outrun it, and drops).
void AppendCalls(int thread, int n, bool pace = false) {
  for (int i = 0; i < n; ++i) {
    if (Ring* ring = ThreadRing(); pace && ring) {
      while (ring->head.load() - ring->tail.load() >= kRingRecords / 2) usleep(200);
    }
    TraceRecord r{};
    r.t_ns = NowNs();
    r.hook = 1;
    r.kind = kCall;
    r.arg[0] = static_cast<uint64_t>(i);
    r.arg[1] = static_cast<uint64_t>(thread);
    if (Ring* ring = ThreadRing()) Append(ring, r);
  }
}

TEST(TraceRecorderTest, EveryRecordOfEveryThreadReachesTheFileInItsThreadsOrder) {
  const std::string path = TempPath("threads");
  ASSERT_TRUE(Start(TestOptions(path)));
  ASSERT_TRUE(On());
  constexpr int kThreads = 4, kEach = 2 * static_cast<int>(kRingRecords) + 100;  // wraps each ring
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(AppendCalls, t, kEach, true);
  for (auto& t : threads) t.join();
  Stop();
  EXPECT_FALSE(On());
  auto read = ReadTrace(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  const Trace& t = read.value();
  ASSERT_TRUE(t.complete);
  EXPECT_EQ(t.end.arg[1], 0u) << "records dropped";
  EXPECT_EQ(t.end.arg[0], uint64_t{kThreads} * kEach);
  ASSERT_EQ(t.records.size(), size_t{kThreads} * kEach);
  EXPECT_EQ(std::string(t.header.command), "trace_recorder_test");
  EXPECT_EQ(std::string(t.header.settings), "GANDIVA_SHIM_VMM=0;");
  ASSERT_EQ(t.hook_names.size(), 3u);
  EXPECT_EQ(t.HookName(2), "cuStreamSynchronize");
  std::vector<uint64_t> next(kThreads, 0);
  uint64_t last_t = 0;
  for (const TraceRecord& r : t.records) {
    ASSERT_LT(r.arg[1], uint64_t{kThreads});
    EXPECT_EQ(r.arg[0], next[r.arg[1]]++) << "thread " << r.arg[1] << " out of order";
    EXPECT_GE(r.t_ns, last_t);
    last_t = r.t_ns;
  }
  std::remove(path.c_str());
}

// Threads that append faster than the writer drains lose records, never block, and
// the end record counts every one lost.
TEST(TraceRecorderTest, CountsEveryRecordItDrops) {
  const std::string path = TempPath("drops");
  ASSERT_TRUE(Start(TestOptions(path, 1ull << 30)));
  constexpr int kThreads = 3, kEach = 4 * static_cast<int>(kRingRecords);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(AppendCalls, t, kEach, false);
  for (auto& t : threads) t.join();
  Stop();
  auto read = ReadTrace(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  const Trace& t = read.value();
  ASSERT_TRUE(t.complete);
  EXPECT_EQ(t.records.size() + t.end.arg[1], uint64_t{kThreads} * kEach);
  std::vector<int64_t> last(kThreads, -1);
  for (const TraceRecord& r : t.records) {  // what was kept is still in order
    EXPECT_GT(static_cast<int64_t>(r.arg[0]), last[r.arg[1]]);
    last[r.arg[1]] = static_cast<int64_t>(r.arg[0]);
  }
  std::remove(path.c_str());
}

TEST(TraceRecorderTest, StopsAtItsSizeBoundAndSaysSo) {
  const std::string path = TempPath("bound");
  const uint64_t header = (sizeof(TraceHeader) + 3 * kHookNameBytes + 63) / 64 * 64;
  const uint64_t max_bytes = header + 100 * sizeof(TraceRecord) + 17;
  ASSERT_TRUE(Start(TestOptions(path, max_bytes)));
  std::thread([] { AppendCalls(0, 1000); }).join();
  // The writer turns recording off once the bound is reached.
  for (int i = 0; i < 1000 && On(); ++i) usleep(1000);
  EXPECT_FALSE(On());
  Stop();
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  EXPECT_LE(static_cast<uint64_t>(in.tellg()), max_bytes);
  auto read = ReadTrace(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  const Trace& t = read.value();
  ASSERT_TRUE(t.complete);
  EXPECT_TRUE(t.end.flags & kFlagTruncated);
  EXPECT_EQ(t.records.size(), 99u);  // 100 records of room, one kept for the end record
  EXPECT_EQ(t.end.arg[0], 99u);
  EXPECT_EQ(t.end.arg[1], 1000u - 99u);
  std::remove(path.c_str());
}

TEST(TraceRecorderTest, ReaderRefusesWhatIsNotAWholeTrace) {
  const std::string path = TempPath("bad");
  ASSERT_TRUE(Start(TestOptions(path)));
  std::thread([] { AppendCalls(0, 10); }).join();
  Stop();
  std::ifstream in(path, std::ios::binary);
  std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  };
  std::string bad = good;
  bad[0] = 'X';
  write(bad);
  EXPECT_NE(ReadTrace(path).status().message().find("not a gandiva shim trace"), std::string::npos);
  bad = good;
  bad[8] = 9;  // version
  write(bad);
  EXPECT_NE(ReadTrace(path).status().message().find("version 9"), std::string::npos);
  write(good.substr(0, good.size() - 10));
  EXPECT_NE(ReadTrace(path).status().message().find("cut mid-record"), std::string::npos);
  write(good.substr(0, 100));
  EXPECT_FALSE(ReadTrace(path).ok());
  // Without its end record (the process died): read, and said so.
  write(good.substr(0, good.size() - sizeof(TraceRecord)));
  auto read = ReadTrace(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_FALSE(read.value().complete);
  EXPECT_EQ(read.value().records.size(), 10u);
  EXPECT_FALSE(ReadTrace(path + ".missing").ok());
  std::remove(path.c_str());
}

TEST(TraceRecorderTest, RecordsNothingWhenOff) {
  EXPECT_FALSE(On());
  std::thread([] { AppendCalls(0, 5); }).join();  // no ring before Start: nothing to write into
  SUCCEED();
}

TEST(TraceFormatTest, LaunchGeometryRoundTrips) {
  const uint64_t p = PackDim3(2147483647u & ((1u << 21) - 1), 65535, 1);
  EXPECT_EQ(Dim3At(p, 0), (1u << 21) - 1);
  EXPECT_EQ(Dim3At(p, 1), 65535u);
  EXPECT_EQ(Dim3At(p, 2), 1u);
}

}  // namespace
}  // namespace gandiva::shim::trace
