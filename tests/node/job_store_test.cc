// gandivad's job table on disk: what a restarted gandivad reads back is what was
// written, the table writes every change through, and a file it cannot read is
// refused with an error naming it.
#include "jobs/job_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "jobs/job_table.h"

namespace gandiva::controller {
namespace {

namespace fs = std::filesystem;

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gd-job-store-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "jobs.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<JobStore> Open() {
    auto store = JobStore::Open(path_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }
  void Sql(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }

  fs::path dir_;
  std::string path_;
};

Job FullJob() {
  Job j;
  j.id = 42;
  j.name = "resnet \"quoted\" \xc3\xa9";
  j.device = "gpu1";
  j.weight = 2.5;
  j.command = {"python3", "train.py", "--lr", "0.1", ""};
  j.cwd = "/home/u";
  j.env = {{"GANDIVA_GPU_MEMORY_BYTES", "1024"}, {"A", "b=c"}};
  j.spawned = true;
  j.pid = 4242;
  j.process_start = 123456789;
  j.launched = true;
  j.user = "alice";
  j.stdout_log = "/state/job-42.stdout";
  j.stderr_log = "/state/job-42.stderr";
  j.memory_limit = "enforced: 1 GiB";
  j.cgroup_dir = "/sys/fs/cgroup/gandiva/job-42";
  j.ended = true;
  j.failed = true;
  j.exit_code = 137;
  j.end = {protocol::ExitReason::kKilled, 9, "killed by signal 9 (Killed)"};
  j.registered_ns = 1000;
  j.ended_ns = 5000;
  j.usage_at_end.slices = 7;
  j.usage_at_end.swaps = 2;
  j.usage_at_end.device_time_ns = 3000;
  j.ranks = 4;
  j.gang_error = "rank 1 died";
  j.departure = DepartureStage::kCommitted;
  j.migrated_to = "n2/8";
  j.arrival = ArrivalStage::kStarted;
  j.migrated_from = "n1/3";
  j.managed_by = "slurm";
  runtime::IterationStats final_stats;
  final_stats.iterations = 1234;
  final_stats.mean_ms = 1.5;
  final_stats.p99_ms = 9.25;
  j.final_stats = final_stats;
  j.final_parks = 17;
  return j;
}

void ExpectSameRecord(const Job& a, const Job& b) {
  EXPECT_EQ(JobToStoredText(a), JobToStoredText(b));
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.end.reason, b.end.reason);
  EXPECT_EQ(a.usage_at_end.slices, b.usage_at_end.slices);
  EXPECT_EQ(a.process_start, b.process_start);
  EXPECT_EQ(a.departure, b.departure);
  EXPECT_EQ(a.migrated_to, b.migrated_to);
  EXPECT_EQ(a.arrival, b.arrival);
  ASSERT_EQ(a.final_stats.has_value(), b.final_stats.has_value());
  if (a.final_stats) {
    EXPECT_EQ(a.final_stats->iterations, b.final_stats->iterations);
  }
  EXPECT_EQ(a.final_parks, b.final_parks);
}

TEST_F(JobStoreTest, WhatIsWrittenIsReadBackAfterTheStoreIsOpenedAgain) {
  {
    auto store = Open();
    ASSERT_TRUE(store);
    EXPECT_EQ(store->Boot().value(), "") << "a new store belongs to no boot yet";
    ASSERT_TRUE(store->SetBoot("boot-1").ok());
    Job job = FullJob();
    store->Put(job);
    store->PutHeld(42, true);
    DeviceUsage u;
    u.slices = 11;
    u.device_time_ns = 99;
    store->PutUsage({{42, u}});
    Job other;
    other.id = 7;
    other.name = "short";
    store->Put(other);
  }
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->Boot().value(), "boot-1");
  auto all = store->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].job.id, 7u) << "in id order";
  EXPECT_FALSE((*all)[0].held);
  const StoredJob& s = (*all)[1];
  ExpectSameRecord(s.job, FullJob());
  EXPECT_TRUE(s.held);
  EXPECT_EQ(s.usage.slices, 11u);
  EXPECT_EQ(s.usage.device_time_ns, 99u);
  EXPECT_EQ(s.block_name, "") << "no control block";
}

TEST_F(JobStoreTest, ARecordWrittenAgainKeepsItsHeldFlagAndFigures) {
  auto store = Open();
  Job job = FullJob();
  store->Put(job);
  store->PutHeld(42, true);
  job.weight = 3;
  store->Put(job);
  auto all = store->LoadAll();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].job.weight, 3);
  EXPECT_TRUE((*all)[0].held);
  store->Erase(42);
  EXPECT_TRUE(store->LoadAll()->empty());
}

TEST_F(JobStoreTest, TheJobTableWritesEveryChangeThroughAndErasesWhatItDrops) {
  auto store = Open();
  JobTable table(/*max_ended=*/1);
  table.SetStore(store.get());
  for (int i = 0; i < 3; ++i) {
    Job job;
    job.id = table.ReserveId();
    job.name = "j" + std::to_string(job.id);
    table.Insert(job);
  }
  ASSERT_TRUE(table
                  .UpdateLive(2,
                              [](Job& j) {
                                j.weight = 4;
                                return Status::Ok();
                              })
                  .ok());
  ASSERT_TRUE(
      table.SetExitCode(3, 5, {protocol::ExitReason::kExited, 0, "exited with code 5"}).ok());
  ASSERT_TRUE(table.End(1, false, 0, {}).has_value());
  ASSERT_TRUE(table.End(3, true, 5, {}).has_value());  // drops ended job 1 (max_ended 1)
  auto all = store->LoadAll();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].job.id, 2u);
  EXPECT_EQ((*all)[0].job.weight, 4);
  EXPECT_FALSE((*all)[0].job.ended);
  EXPECT_EQ((*all)[1].job.id, 3u);
  EXPECT_TRUE((*all)[1].job.ended);
  EXPECT_EQ((*all)[1].job.exit_code, 5);

  // A table filled back from it goes on with the next id.
  JobTable again;
  for (StoredJob& s : *all) again.Restore(std::move(s.job), UniqueFd());
  EXPECT_EQ(again.ReserveId(), 4u);
  EXPECT_TRUE(again.Find(3).value().ended);
  EXPECT_TRUE(again.Live(2).ok());
}

TEST_F(JobStoreTest, AFileThatIsNotADatabaseIsRefusedAndLeftAsItWas) {
  {
    std::ofstream f(path_);
    f << std::string(4096, 'x');
  }
  auto store = JobStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kDataLoss) << store.status().ToString();
  EXPECT_NE(store.status().message().find(path_), std::string::npos);
  EXPECT_EQ(fs::file_size(path_), 4096u);
}

TEST_F(JobStoreTest, AnotherProgramsDatabaseIsRefused) {
  Sql("CREATE TABLE t (x INTEGER)");
  auto store = JobStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("is not a gandivad job table"), std::string::npos)
      << store.status().ToString();
}

TEST_F(JobStoreTest, ATableFromANewerGandivaIsRefused) {
  ASSERT_TRUE(Open());
  Sql("UPDATE gandiva_schema SET value = '99' WHERE key = 'schema_version'");
  auto store = JobStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("newer gandiva"), std::string::npos);
}

TEST_F(JobStoreTest, ARecordThatCannotBeReadIsDataLossNamingTheJob) {
  {
    auto store = Open();
    store->Put(FullJob());
  }
  for (const char* record : {"not json", "{\"id\": 42}", "[1, 2]", "{\"id\": 42, \"name\": 5}"}) {
    Sql(std::string("UPDATE jobs SET record = '") + record + "' WHERE id = 42");
    auto store = Open();
    auto all = store->LoadAll();
    ASSERT_FALSE(all.ok()) << record;
    EXPECT_EQ(all.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(all.status().message().find("job 42"), std::string::npos) << all.status().ToString();
  }
}

TEST_F(JobStoreTest, StoredTextOfEveryExitReasonRoundTrips) {
  for (int r = 0; r <= static_cast<int>(protocol::ExitReason::kMigrated); ++r) {
    Job j = FullJob();
    j.end.reason = static_cast<protocol::ExitReason>(r);
    auto back = JobFromStoredText(JobToStoredText(j));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->end.reason, j.end.reason);
  }
  Job j = FullJob();
  std::string text = JobToStoredText(j);
  const std::string reason = "\"end_reason\":" + std::to_string(static_cast<int>(j.end.reason));
  text.replace(text.find(reason), reason.size(), "\"end_reason\":99");
  EXPECT_EQ(JobFromStoredText(text).status().code(), StatusCode::kDataLoss);
}

// A migration's stages are what a restarted gandivad acts on (node_readopt.cc):
// each one reads back as written; a record from before they were kept, which
// says only "migrated", was handed over; a stage this gandiva does not know is
// refused, not taken for none.
TEST_F(JobStoreTest, MigrationStagesRoundTripAndOlderRecordsReadAsHandedOver) {
  for (auto d : {DepartureStage::kNone, DepartureStage::kCommitted, DepartureStage::kHandedOver})
    for (auto a : {ArrivalStage::kNone, ArrivalStage::kWarming, ArrivalStage::kLoaded,
                   ArrivalStage::kStarted}) {
      Job j = FullJob();
      j.departure = d;
      j.arrival = a;
      auto back = JobFromStoredText(JobToStoredText(j));
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(back->departure, d);
      EXPECT_EQ(back->arrival, a);
      EXPECT_EQ(back->migrated(), d != DepartureStage::kNone);
    }
  Job j = FullJob();
  j.departure = DepartureStage::kHandedOver;
  std::string text = JobToStoredText(j);
  const std::string stage = "\"departure\":\"handed_over\",";
  ASSERT_NE(text.find(stage), std::string::npos) << text;
  text.erase(text.find(stage), stage.size());
  auto older = JobFromStoredText(text);
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  EXPECT_EQ(older->departure, DepartureStage::kHandedOver);
  text = JobToStoredText(FullJob());
  const std::string arrival = "\"arrival\":\"started\"";
  ASSERT_NE(text.find(arrival), std::string::npos) << text;
  text.replace(text.find(arrival), arrival.size(), "\"arrival\":\"halfway\"");
  EXPECT_EQ(JobFromStoredText(text).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace gandiva::controller
