// The live scheduler's job store: what goes in comes out, ids, listing, meta,
// and the records it refuses. Durability and damaged files: job_store_durability_test.cc.
#include "live/job_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <limits>

#include "job_store_test_util.h"

namespace gandiva::sched::live {
namespace {

using testing::QueuedJob;
using testing::TempDir;

std::unique_ptr<JobStore> OpenOrDie(const std::string& path) {
  auto store = JobStore::Open(path);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

// Every field away from its default, strings with the bytes most likely to be
// mangled (NUL, quotes, non-ASCII, '=').
JobRecord EveryFieldSet() {
  JobRecord job;
  job.name = "resnet \"50\"";
  job.user = "bob";
  job.uid = 1234567;
  job.vc = "vc-\xc3\xa9t\xc3\xa9";  // "vc-été"
  job.kind = "python3 resnet.py";
  job.gpus = 4;
  job.ranks = 2;
  job.command = {"torchrun", "--nproc_per_node=2", std::string("a\0b", 3), "", "x y"};
  job.cwd = "/work/with space";
  job.env = {{"A", "1=2"}, {"EMPTY", ""}, {"UNICODE", "\xe2\x9c\x93"}};
  job.restartable = true;
  job.submit_time = 1763900000.123456789;
  job.state = LiveJobState::kSuspended;
  job.attempt = 3;
  job.node = "node-b";
  job.device = "cpu1";
  job.node_job = (int64_t{1} << 40) + 7;
  job.checkpoint_dir = "/state/ckpt/5.a3";
  job.checkpoint_time = 1763900100.5;
  job.start_time = 1763900001.25;
  job.end_time = std::numeric_limits<double>::infinity();
  job.attained = 123.456e-3;
  job.run_time = 98765.4321;
  job.exit_code = -9;
  job.detail = "node-b went away";
  job.cancel_requested = true;
  job.move = JobMove{"node-a", "cpu0,cpu1", (int64_t{1} << 41) + 3};
  return job;
}

TEST(JobStoreTest, RoundTripsEveryField) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("jobs.db"));
  ASSERT_NE(store, nullptr);
  JobRecord job = EveryFieldSet();
  auto id = store->Add(job);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  job.id = *id;
  auto got = store->Get(job.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, job);
  EXPECT_EQ(got->command[2].size(), 3u);  // the NUL survived

  // Update replaces every field; the new values survive a reopen.
  JobRecord changed = QueuedJob(7);
  changed.id = job.id;
  changed.state = LiveJobState::kFailed;
  changed.exit_code = 137;
  changed.detail = "out of memory";
  changed.attained = 0.5;
  ASSERT_TRUE(store->Update(changed).ok());
  store.reset();
  store = OpenOrDie(dir.File("jobs.db"));
  ASSERT_NE(store, nullptr);
  got = store->Get(job.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, changed);
}

TEST(JobStoreTest, StateNamesRoundTrip) {
  for (LiveJobState s : {LiveJobState::kQueued, LiveJobState::kStarting, LiveJobState::kRunning,
                         LiveJobState::kSuspended, LiveJobState::kFinished, LiveJobState::kFailed,
                         LiveJobState::kCancelled}) {
    EXPECT_EQ(ParseLiveJobState(LiveJobStateName(s)), s) << LiveJobStateName(s);
  }
  EXPECT_STREQ(LiveJobStateName(LiveJobState::kQueued), "queued");
  EXPECT_STREQ(LiveJobStateName(LiveJobState::kCancelled), "cancelled");
  EXPECT_EQ(ParseLiveJobState("Queued"), std::nullopt);
  EXPECT_EQ(ParseLiveJobState(""), std::nullopt);
  EXPECT_TRUE(IsEnded(LiveJobState::kFailed));
  EXPECT_FALSE(IsEnded(LiveJobState::kSuspended));
}

TEST(JobStoreTest, IdsIncreaseAndAreNeverReused) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  {
    auto store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 3; ++i) {
      auto id = store->Add(QueuedJob(i));
      ASSERT_TRUE(id.ok());
      EXPECT_EQ(*id, i + 1);
    }
  }
  // Remove the newest row behind the store's back (a future pruning of ended
  // jobs would): its id must still not come back.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "DELETE FROM jobs WHERE id = 3", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);

  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  auto id = store->Add(QueuedJob(3));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 4);
  auto all = store->List(true);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].id, 4);
  EXPECT_EQ((*all)[2].name, "job-3");
}

TEST(JobStoreTest, ABatchIsOneTransactionVisibleToOthersOnlyOnceCommitted) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  auto id = store->Add(QueuedJob(0));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store->Begin().ok());
  EXPECT_EQ(store->Begin().code(), StatusCode::kFailedPrecondition);
  JobRecord r = store->Get(*id).value();
  r.state = LiveJobState::kStarting;
  r.node = "a";
  ASSERT_TRUE(store->Update(r).ok());
  EXPECT_EQ(store->Get(*id)->state, LiveJobState::kStarting) << "the writer sees its own batch";
  {
    auto other = OpenOrDie(path);  // another connection: the batch is not there yet
    ASSERT_NE(other, nullptr);
    EXPECT_EQ(other->Get(*id)->state, LiveJobState::kQueued);
  }
  ASSERT_TRUE(store->Commit().ok());
  EXPECT_EQ(store->Commit().code(), StatusCode::kFailedPrecondition);
  auto other = OpenOrDie(path);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->Get(*id)->state, LiveJobState::kStarting);
  EXPECT_EQ(other->Get(*id)->node, "a");
}

// Flush inside a batch: what it holds is durable (another connection sees it)
// and the calls after it are batched again, until Commit.
TEST(JobStoreTest, FlushCommitsTheBatchSoFarAndKeepsBatching) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  auto id = store->Add(QueuedJob(0));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store->Flush().ok()) << "outside a batch: nothing to do";
  EXPECT_FALSE(store->in_batch());
  ASSERT_TRUE(store->Begin().ok());
  JobRecord r = store->Get(*id).value();
  r.state = LiveJobState::kRunning;
  r.node = "b";
  r.move = JobMove{"a", "cpu0", 4};
  ASSERT_TRUE(store->UpdateRun(r).ok());
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_TRUE(store->in_batch());
  {
    auto other = OpenOrDie(path);
    ASSERT_NE(other, nullptr);
    EXPECT_EQ(other->Get(*id)->move, r.move) << "durable at the flush";
  }
  r.move.reset();
  ASSERT_TRUE(store->UpdateRun(r).ok());
  {
    auto other = OpenOrDie(path);
    ASSERT_NE(other, nullptr);
    EXPECT_TRUE(other->Get(*id)->move.has_value()) << "the write after it waits for Commit";
  }
  ASSERT_TRUE(store->Commit().ok());
  auto other = OpenOrDie(path);
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(other->Get(*id)->move.has_value());
}

TEST(JobStoreTest, UnknownIdIsNotFound) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("jobs.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Add(QueuedJob(0)).ok());
  auto got = store->Get(2);
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("no job 2"), std::string::npos);
  JobRecord ghost = QueuedJob(1);
  ghost.id = 42;
  EXPECT_EQ(store->Update(ghost).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Get(0).status().code(), StatusCode::kNotFound);
  auto list = store->List(true);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);  // the failed Update added nothing
}

TEST(JobStoreTest, ListLeavesOutEndedJobsOnlyWhenAsked) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("jobs.db"));
  ASSERT_NE(store, nullptr);
  const LiveJobState states[] = {LiveJobState::kFinished, LiveJobState::kQueued,
                                 LiveJobState::kRunning,  LiveJobState::kCancelled,
                                 LiveJobState::kStarting, LiveJobState::kFailed,
                                 LiveJobState::kSuspended};
  for (int i = 0; i < 7; ++i) {
    JobRecord job = QueuedJob(i);
    job.state = states[i];
    ASSERT_TRUE(store->Add(job).ok());
  }
  auto live = store->List(false);
  ASSERT_TRUE(live.ok());
  std::vector<int64_t> ids;
  for (const JobRecord& j : *live) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<int64_t>{2, 3, 5, 7}));
  auto all = store->List(true);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ((*all)[i].state, states[i]);

  // A job that ends leaves the short list; one that is requeued comes back.
  JobRecord ended = (*live)[0];
  ended.state = LiveJobState::kFinished;
  ASSERT_TRUE(store->Update(ended).ok());
  JobRecord requeued = (*all)[0];
  requeued.state = LiveJobState::kQueued;
  ASSERT_TRUE(store->Update(requeued).ok());
  live = store->List(false);
  ASSERT_TRUE(live.ok());
  ids.clear();
  for (const JobRecord& j : *live) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 3, 5, 7}));
}

// UpdateRun writes what a scheduler changes after a submission, and leaves
// the submitted fields as Add wrote them.
TEST(JobStoreTest, UpdateRunWritesTheRunFieldsOnly) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("jobs.db"));
  ASSERT_NE(store, nullptr);
  JobRecord job = QueuedJob(3);
  auto id = store->Add(job);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  job.id = *id;

  JobRecord run = EveryFieldSet();  // every run field away from its default
  run.id = job.id;
  run.failure = FailureClass::kInfrastructure;
  run.retries = 2;
  run.not_before = 1763900200.75;
  ASSERT_TRUE(store->UpdateRun(run).ok());
  store.reset();
  store = OpenOrDie(dir.File("jobs.db"));
  ASSERT_NE(store, nullptr);
  auto got = store->Get(job.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  JobRecord want = run;  // the run fields of `run`, the submitted ones of `job`
  want.name = job.name;
  want.user = job.user;
  want.uid = job.uid;
  want.vc = job.vc;
  want.kind = job.kind;
  want.gpus = job.gpus;
  want.ranks = job.ranks;
  want.command = job.command;
  want.cwd = job.cwd;
  want.env = job.env;
  want.restartable = job.restartable;
  want.submit_time = job.submit_time;
  EXPECT_EQ(*got, want);

  run.not_before = std::nan("");
  EXPECT_EQ(store->UpdateRun(run).code(), StatusCode::kInvalidArgument);
  JobRecord ghost = run;
  ghost.id = 42;
  ghost.not_before = 0;
  EXPECT_EQ(store->UpdateRun(ghost).code(), StatusCode::kNotFound);
  ghost.state = LiveJobState::kFinished;
  EXPECT_EQ(store->UpdateRun(ghost).code(), StatusCode::kNotFound);
}

// UpdateRun keeps the short list (List(false)) right: a job that ends leaves
// it, one written as not ended over a row stored as ended comes back to it.
TEST(JobStoreTest, UpdateRunKeepsTheListOfJobsNotEnded) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("jobs.db"));
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->Add(QueuedJob(i)).ok());
  auto ids = [&] {
    std::vector<int64_t> out;
    auto live = store->List(false);
    EXPECT_TRUE(live.ok());
    if (live.ok())
      for (const JobRecord& j : *live) out.push_back(j.id);
    return out;
  };
  auto get = [&](int64_t id) {
    auto r = store->Get(id);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : JobRecord{};
  };
  JobRecord running = get(2);
  running.state = LiveJobState::kRunning;
  running.node = "n1";
  ASSERT_TRUE(store->UpdateRun(running).ok());
  EXPECT_EQ(ids(), (std::vector<int64_t>{1, 2, 3}));
  JobRecord done = running;
  done.state = LiveJobState::kFinished;
  ASSERT_TRUE(store->UpdateRun(done).ok());
  EXPECT_EQ(ids(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(get(2).state, LiveJobState::kFinished);
  JobRecord again = done;
  again.state = LiveJobState::kQueued;
  ASSERT_TRUE(store->UpdateRun(again).ok());
  EXPECT_EQ(ids(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(get(2), again);
}

TEST(JobStoreTest, MetaIsKeptAcrossReopen) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  {
    auto store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    auto missing = store->GetMeta("clock_origin");
    ASSERT_TRUE(missing.ok());
    EXPECT_EQ(*missing, std::nullopt);
    ASSERT_TRUE(store->SetMeta("clock_origin", "1763900000.5").ok());
    ASSERT_TRUE(store->SetMeta("clock_origin", "1763900001.5").ok());  // overwrites
    ASSERT_TRUE(store->SetMeta("empty", "").ok());
  }
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  auto origin = store->GetMeta("clock_origin");
  ASSERT_TRUE(origin.ok());
  EXPECT_EQ(*origin, "1763900001.5");
  auto empty = store->GetMeta("empty");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
}

TEST(JobStoreTest, RefusesRecordsItCannotKeep) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("jobs.db"));
  ASSERT_NE(store, nullptr);
  JobRecord with_id = QueuedJob(0);
  with_id.id = 9;
  JobRecord no_gpus = QueuedJob(0);
  no_gpus.gpus = 0;
  JobRecord no_ranks = QueuedJob(0);
  no_ranks.ranks = 0;
  JobRecord no_command = QueuedJob(0);
  no_command.command.clear();
  JobRecord nan_time = QueuedJob(0);
  nan_time.attained = std::nan("");
  JobRecord bad_utf8 = QueuedJob(0);
  bad_utf8.command.push_back("\xff\xfe");
  JobRecord bad_env = QueuedJob(0);
  bad_env.env["K"] = "\xc3";
  JobRecord move_from_nowhere = QueuedJob(0);
  move_from_nowhere.move = JobMove{"", "cpu0", 3};
  JobRecord move_of_no_job = QueuedJob(0);
  move_of_no_job.move = JobMove{"a", "cpu0", 0};
  for (const JobRecord& job : {with_id, no_gpus, no_ranks, no_command, nan_time, bad_utf8, bad_env,
                               move_from_nowhere, move_of_no_job}) {
    auto id = store->Add(job);
    EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument) << id.status().ToString();
  }
  auto list = store->List(true);
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  // Update checks the same, and leaves the stored job as it was.
  auto id = store->Add(QueuedJob(1));
  ASSERT_TRUE(id.ok());
  bad_utf8.id = *id;
  EXPECT_EQ(store->Update(bad_utf8).code(), StatusCode::kInvalidArgument);
  auto got = store->Get(*id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->command, QueuedJob(1).command);
}

}  // namespace
}  // namespace gandiva::sched::live
