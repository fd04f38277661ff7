// The job table: ids, lookups with the API's errors, ending a job.
#include "jobs/job_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "gandiva/common/clock.h"

namespace gandiva::controller {
namespace {

Job MakeJob(JobTable& table, const std::string& name) {
  Job job;
  job.id = table.ReserveId();
  job.name = name;
  job.device = "cpu0";
  job.registered_ns = MonotonicNowNs();
  table.Insert(job);
  return job;
}

// The cap gandivad packs by is the one the shim enforces: decimal bytes in the
// job's environment, anything else none (the shim then runs the job uncapped).
TEST(JobTableTest, TheGpuMemoryCapIsReadFromTheJobsEnvironmentAsTheShimReadsIt) {
  Job job;
  EXPECT_EQ(job.GpuMemoryCap(), 0u);
  job.env["GANDIVA_GPU_MEMORY_BYTES"] = "4294967296";
  EXPECT_EQ(job.GpuMemoryCap(), 4294967296u);
  for (const char* text : {"", "4GiB", "-1", "+5", "12 ", "99999999999999999999999"}) {
    job.env["GANDIVA_GPU_MEMORY_BYTES"] = text;
    EXPECT_EQ(job.GpuMemoryCap(), 0u) << text;
  }
}

TEST(JobTableTest, IdsStartAtOneAndAreNeverReused) {
  JobTable table;
  EXPECT_EQ(MakeJob(table, "a").id, 1u);
  EXPECT_EQ(MakeJob(table, "b").id, 2u);
  ASSERT_TRUE(table.End(1, false, 0, {}).has_value());
  EXPECT_EQ(MakeJob(table, "c").id, 3u);
  EXPECT_EQ(table.All().size(), 3u);  // ended jobs stay listed
  EXPECT_EQ(table.LiveJobs().size(), 2u);
}

TEST(JobTableTest, OnlyTheNewestEndedRecordsAreKept) {
  JobTable table(/*max_ended=*/3);
  for (int i = 0; i < 6; ++i) MakeJob(table, "j" + std::to_string(i));
  for (uint64_t id : {2, 1, 4, 5}) ASSERT_TRUE(table.End(id, false, 0, {}).has_value());
  // Ended in the order 2, 1, 4, 5: the first to end (2) is dropped, the live stay.
  EXPECT_EQ(table.Find(2).status().code(), StatusCode::kNotFound);
  for (uint64_t id : {1, 3, 4, 5, 6}) EXPECT_TRUE(table.Find(id).ok()) << id;
  EXPECT_EQ(table.All().size(), 5u);
  EXPECT_EQ(MakeJob(table, "next").id, 7u) << "ids are still never reused";
}

TEST(JobTableTest, UnknownJobsAreNotFound) {
  JobTable table;
  MakeJob(table, "a");
  EXPECT_EQ(table.Find(7).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(table.Find(7).status().message(), "no job 7");
  EXPECT_EQ(table.Live(0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(table.Live(-3).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(table.Live(1).ok());
  EXPECT_EQ(table.Live(1)->name, "a");
}

TEST(JobTableTest, EndedJobsAreNotLive) {
  JobTable table;
  MakeJob(table, "ok");
  MakeJob(table, "crashed");
  ASSERT_TRUE(table.End(1, false, 0, {}));
  ASSERT_TRUE(table.End(2, true, -1, {}));
  EXPECT_EQ(table.Live(1).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(table.Live(1).status().message(), "job 1 has exited");
  EXPECT_EQ(table.Live(2).status().message(), "job 2 has failed");
  EXPECT_FALSE(table.End(1, true, 3, {}).has_value()) << "a job ends once";
  EXPECT_EQ(table.Find(1)->State(), JobState::kExited);
  EXPECT_EQ(table.UpdateLive(1, [](Job&) { return Status::Ok(); }).code(),
            StatusCode::kFailedPrecondition);
}

TEST(JobTableTest, EndFreezesTheDeviceFiguresWithTheCurrentSlice) {
  JobTable table;
  MakeJob(table, "a");
  DeviceUsage usage;
  usage.slices = 4;
  usage.device_time_ns = 1'000;
  usage.running_since_ns = MonotonicNowNs() - 5'000'000;
  auto ended = table.End(1, false, 0, usage);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->job.usage_at_end.slices, 4u);
  EXPECT_GE(ended->job.usage_at_end.device_time_ns, 5'001'000u);
  EXPECT_EQ(ended->job.usage_at_end.running_since_ns, 0u);
}

TEST(JobTableTest, ExitCodeReportedAfterTheEndIsKept) {
  JobTable table;
  MakeJob(table, "a");
  ASSERT_TRUE(table.End(1, true, -1, {}));  // the monitor saw it die first
  ASSERT_TRUE(table.SetExitCode(1, 0).ok());
  EXPECT_EQ(table.Find(1)->exit_code, 0);
  EXPECT_EQ(table.Find(1)->State(), JobState::kExited);
  EXPECT_EQ(table.SetExitCode(9, 0).code(), StatusCode::kNotFound);
}

TEST(JobTableTest, OwnsTheProcessFdUntilTheJobEnds) {
  JobTable table;
  MakeJob(table, "a");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[1]);
  ASSERT_TRUE(table.SetProcess(1, 1234, UniqueFd(fds[0]), true).ok());
  EXPECT_EQ(table.Find(1)->pid, 1234);
  EXPECT_TRUE(table.Find(1)->spawned);
  auto ended = table.End(1, false, 0, {});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->pidfd.get(), fds[0]) << "handed back for the caller to unwatch and close";
  EXPECT_EQ(table.SetProcess(1, 99, UniqueFd(), false).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gandiva::controller
