// The job store across a kill -9 of the process writing it, and on files that
// are not (or no longer) a sound gandiva scheduler database.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "job_store_test_util.h"
#include "live/job_store.h"

namespace gandiva::sched::live {
namespace {

using testing::QueuedJob;
using testing::TempDir;

// Runs `body` in a forked child that ends by SIGKILL (as a crash or `kill -9`
// would end the scheduler) or, if the body fails, exits 3. The parent waits.
template <typename Body>
void RunInKilledChild(Body body) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!body()) _exit(3);
    raise(SIGKILL);
    _exit(4);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(JobStoreDurabilityTest, JobsAddedBeforeAKill9AreAllThere) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  constexpr int kJobs = 40;
  RunInKilledChild([&] {
    auto store = JobStore::Open(path);
    if (!store.ok()) return false;
    for (int i = 0; i < kJobs; ++i) {
      if (!(*store)->Add(QueuedJob(i)).ok()) return false;
    }
    return (*store)->SetMeta("last", std::to_string(kJobs - 1)).ok();
    // SIGKILL right after the last call returned: no close, no WAL checkpoint.
  });
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto jobs = (*store)->List(true);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), static_cast<size_t>(kJobs));
  for (int i = 0; i < kJobs; ++i) {
    JobRecord want = QueuedJob(i);
    want.id = i + 1;
    EXPECT_EQ((*jobs)[i], want);
  }
  auto last = (*store)->GetMeta("last");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, std::to_string(kJobs - 1));
}

// The parent kills the writer at an arbitrary moment, mid-Add most likely:
// every Add it heard returned is there, and the file opens clean.
TEST(JobStoreDurabilityTest, KillAtAnyMomentLosesNoAcknowledgedJob) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    auto store = JobStore::Open(path);
    if (!store.ok()) _exit(3);
    for (int i = 0;; ++i) {
      auto id = (*store)->Add(QueuedJob(i));
      if (!id.ok()) _exit(3);
      int64_t acknowledged = *id;
      if (write(fds[1], &acknowledged, sizeof acknowledged) != sizeof acknowledged) _exit(3);
    }
  }
  close(fds[1]);
  int64_t last_acknowledged = 0;
  for (int n = 0; n < 150; ++n) {
    ASSERT_EQ(read(fds[0], &last_acknowledged, sizeof last_acknowledged),
              static_cast<ssize_t>(sizeof last_acknowledged));
  }
  kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  // Acknowledgements still in the pipe were sent before the kill too.
  for (int64_t id; read(fds[0], &id, sizeof id) == sizeof id;) last_acknowledged = id;
  close(fds[0]);

  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto jobs = (*store)->List(true);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_GE(jobs->size(), static_cast<size_t>(last_acknowledged));
  // Ids 1..n with no gap (an Add the kill cut short may or may not be there).
  for (size_t i = 0; i < jobs->size(); ++i) {
    EXPECT_EQ((*jobs)[i].id, static_cast<int64_t>(i + 1));
    EXPECT_EQ((*jobs)[i].name, "job-" + std::to_string(i));
  }
  auto next = (*store)->Add(QueuedJob(0));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, static_cast<int64_t>(jobs->size() + 1));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void ExpectDataLossNaming(const std::string& path) {
  auto store = JobStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kDataLoss) << store.status().ToString();
  EXPECT_NE(store.status().message().find(path), std::string::npos) << store.status().ToString();
}

TEST(JobStoreDurabilityTest, GarbageFileIsDataLossAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  std::string garbage;
  for (int i = 0; i < 200; ++i)
    garbage += "this is not a database, line " + std::to_string(i) + "\n";
  std::ofstream(path, std::ios::binary) << garbage;
  ExpectDataLossNaming(path);
  EXPECT_EQ(ReadFile(path), garbage);
}

TEST(JobStoreDurabilityTest, SomeOtherSqliteDatabaseIsDataLoss) {
  TempDir dir;
  const std::string path = dir.File("other.db");
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(raw, "CREATE TABLE photos (id INTEGER, name TEXT)", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(raw);
  const std::string before = ReadFile(path);
  ExpectDataLossNaming(path);
  auto store = JobStore::Open(path);
  EXPECT_NE(store.status().message().find("not a gandiva scheduler database"), std::string::npos);
  EXPECT_EQ(ReadFile(path), before);  // not switched to WAL, no tables added
}

TEST(JobStoreDurabilityTest, NewerSchemaVersionIsRefused) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  ASSERT_TRUE(JobStore::Open(path).ok());
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE gandiva_schema SET value = '99' WHERE key = 'schema_version'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  auto store = JobStore::Open(path);
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition) << store.status().ToString();
  EXPECT_NE(store.status().message().find("version 99"), std::string::npos);
}

// A database from before jobs had a kind (schema version 1: the same tables
// without jobs.kind, nor the failure columns of version 3, nor the uid of
// version 4, nor the move columns of version 5) is upgraded in place and
// keeps every job (none of them moving).
TEST(JobStoreDurabilityTest, SchemaVersion1IsUpgradedKeepingItsJobs) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  {
    auto store = JobStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Add(QueuedJob(1)).ok());
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw,
                         "ALTER TABLE jobs DROP COLUMN kind;"
                         "ALTER TABLE jobs DROP COLUMN failure;"
                         "ALTER TABLE jobs DROP COLUMN retries;"
                         "ALTER TABLE jobs DROP COLUMN not_before;"
                         "ALTER TABLE jobs DROP COLUMN uid;"
                         "ALTER TABLE jobs DROP COLUMN move_from_node;"
                         "ALTER TABLE jobs DROP COLUMN move_from_device;"
                         "ALTER TABLE jobs DROP COLUMN move_from_job;"
                         "UPDATE gandiva_schema SET value = '1' WHERE key = 'schema_version'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);

  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto old = (*store)->Get(1);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  JobRecord expected = QueuedJob(1);
  expected.id = 1;
  expected.kind = "";  // unknown for the jobs of an older build
  EXPECT_EQ(*old, expected);
  JobRecord typed = QueuedJob(2);
  typed.kind = "python3 train.py";
  auto id = (*store)->Add(typed);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ((*store)->Get(*id)->kind, "python3 train.py");
  store->reset();
  auto reopened = JobStore::Open(path);  // now at the current version: opens as is
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->List(true)->size(), 2u);
}

// A store of `jobs` jobs with long details (many pages), closed cleanly so the
// main file holds everything.
void FillStore(const std::string& path, int jobs) {
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (int i = 0; i < jobs; ++i) {
    JobRecord job = QueuedJob(i);
    job.detail = std::string(600, static_cast<char>('a' + i % 26));
    ASSERT_TRUE((*store)->Add(job).ok());
  }
}

TEST(JobStoreDurabilityTest, TruncatedDatabaseIsDataLoss) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  FillStore(path, 60);
  const auto size = std::filesystem::file_size(path);
  ASSERT_GT(size, 8u * 4096);
  std::filesystem::resize_file(path, size / 2);
  ExpectDataLossNaming(path);
}

TEST(JobStoreDurabilityTest, OverwrittenPageIsDataLoss) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  FillStore(path, 60);
  const auto size = std::filesystem::file_size(path);
  // Scribble over the middle pages (b-tree pages of the jobs table).
  int fd = open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  std::string noise(3 * 4096, '\x5a');
  ASSERT_EQ(pwrite(fd, noise.data(), noise.size(), (size / 2) & ~off_t{4095}),
            static_cast<ssize_t>(noise.size()));
  close(fd);
  ExpectDataLossNaming(path);
}

// Rows edited behind the store's back into something it never writes.
TEST(JobStoreDurabilityTest, UndecodableRowIsDataLoss) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  {
    auto store = JobStore::Open(path);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*store)->Add(QueuedJob(i)).ok());
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw,
                         "UPDATE jobs SET command = '[\"a\", 1]' WHERE id = 1;"
                         "UPDATE jobs SET command = 'python train.py' WHERE id = 2;"
                         "UPDATE jobs SET env = '{\"A\": {\"B\": \"c\"}}' WHERE id = 3;"
                         "UPDATE jobs SET state = 'exploded' WHERE id = 4;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (int64_t id = 1; id <= 4; ++id) {
    auto job = (*store)->Get(id);
    EXPECT_EQ(job.status().code(), StatusCode::kDataLoss) << id << ": " << job.status().ToString();
    EXPECT_NE(job.status().message().find("job " + std::to_string(id)), std::string::npos);
  }
  EXPECT_TRUE((*store)->Get(5).ok());
  EXPECT_EQ((*store)->List(true).status().code(), StatusCode::kDataLoss);
}

TEST(JobStoreDurabilityTest, MissingDirectoryIsAClearError) {
  TempDir dir;
  const std::string path = dir.File("no/such/dir/jobs.db");
  auto store = JobStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(path), std::string::npos) << store.status().ToString();
}

}  // namespace
}  // namespace gandiva::sched::live
