// The migrator's state machines against a fake node (JobHost), fake jobs on
// control blocks in memory, and a fake peer: a migration that succeeds, a peer
// that fails at each step (the source is released and trains on), a corrupt
// chunk made by the fault-injection wrapper, a migrate_start sent again until
// answered (by a restarted source too), and the destination side whose
// requests never make the API thread wait and whose loaded copy is the job.
#include "migration/migrator.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <filesystem>
#include <future>
#include <map>
#include <thread>

#include "fake_job.h"
#include "gandiva/common/clock.h"
#include "migration/bulk_channel.h"

namespace gandiva::controller {
namespace {

using protocol::MessageType;
using testing::FakeJob;
using testing::NewControlBlock;

constexpr size_t kStateBytes = (10 << 20) + 123;  // three 4 MiB chunks, the last one short

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131) ^ (i >> 12));
  return s;
}

// A node with jobs on fake control blocks; job 1 is the one to move.
class FakeHost : public JobHost {
 public:
  struct Entry {
    std::shared_ptr<runtime::ControlBlock> cb;
    std::unique_ptr<FakeJob> job;
    bool held = false, migrated = false, ended = false, killed = false;
    std::string managed_by;
    std::string migrated_to;  // "node/job", once committed
    bool handed_over = false;
    ArrivalStage arrival = ArrivalStage::kNone;
  };
  FakeHost() { Add(1, Pattern(kStateBytes)); }
  void Add(uint64_t id, std::string state, std::chrono::milliseconds load_delay = {}) {
    std::lock_guard lock(mu_);
    auto& e = jobs_[id];
    e.cb = NewControlBlock(id);
    e.job = std::make_unique<FakeJob>(e.cb, std::move(state), load_delay);
  }
  Entry& at(uint64_t id) {
    std::lock_guard lock(mu_);
    return jobs_.at(id);
  }
  StatusOr<MovableJob> LiveJob(int64_t id) override {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return NotFound("no job " + std::to_string(id));
    if (it->second.ended) return FailedPrecondition("job " + std::to_string(id) + " has exited");
    return MovableJob{
        static_cast<uint64_t>(id), "j", {"train"}, "/", {{"A", "1"}}, 1.0, 4242, it->second.cb,
        it->second.managed_by};
  }
  void SetHeld(uint64_t id, bool held) override {
    std::lock_guard lock(mu_);
    jobs_.at(id).held = held;
    if (held)
      runtime::RequestSuspend(jobs_.at(id).cb.get());
    else
      runtime::RequestResume(jobs_.at(id).cb.get());
  }
  bool IsHeld(uint64_t id) override { return at(id).held; }
  void MarkMigrated(uint64_t id, const std::string& to) override {
    std::lock_guard lock(mu_);
    jobs_.at(id).migrated = true;
    jobs_.at(id).migrated_to = to;
  }
  void MarkHandedOver(uint64_t id) override {
    std::lock_guard lock(mu_);
    jobs_.at(id).handed_over = true;
  }
  void EndMigrated(uint64_t id) override {
    std::lock_guard lock(mu_);
    jobs_.at(id).ended = true;
  }
  StatusOr<Arrival> StartArrival(const ArrivingJob& job) override {
    arriving = job;
    Add(2, "", load_delay);
    SetHeld(2, true);
    at(2).cb->exit_if_orphaned.store(1);  // as the node leaves a warm copy
    Stage(2, ArrivalStage::kWarming);
    return Arrival{2, at(2).cb, "/tmp/job-2.log"};
  }
  Status MarkLoaded(uint64_t id) override {
    std::lock_guard lock(mu_);
    if (jobs_.at(id).arrival != ArrivalStage::kWarming) return FailedPrecondition("not warming");
    jobs_.at(id).arrival = ArrivalStage::kLoaded;
    return Status::Ok();
  }
  void MarkStarted(uint64_t id) override { Stage(id, ArrivalStage::kStarted); }
  ArrivalStage ArrivalStageOf(uint64_t id) override {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    return it == jobs_.end() ? ArrivalStage::kNone : it->second.arrival;
  }
  void Stage(uint64_t id, ArrivalStage stage) {
    std::lock_guard lock(mu_);
    jobs_.at(id).arrival = stage;
  }
  // Read under the lock: the migrator's threads kill jobs while a test looks.
  bool Killed(uint64_t id) {
    std::lock_guard lock(mu_);
    return jobs_.at(id).killed;
  }
  Status KillJob(uint64_t id) override {
    std::lock_guard lock(mu_);
    if (!jobs_.count(id)) return NotFound("no job " + std::to_string(id));
    jobs_.at(id).killed = true;
    return Status::Ok();
  }
  Status RequestTransfer(uint64_t id, runtime::Request kind, const std::string& target) override {
    std::lock_guard lock(mu_);
    if (!jobs_.count(id)) return NotFound("no job " + std::to_string(id));
    if (!runtime::RequestTransfer(jobs_.at(id).cb.get(), kind, target.c_str()))
      return InvalidArgument("target too long");
    return Status::Ok();
  }

  ArrivingJob arriving;
  std::chrono::milliseconds load_delay{0};

 private:
  std::mutex mu_;
  std::map<uint64_t, Entry> jobs_;
};

enum class PeerStep { kNone, kPrepare, kState, kBegin, kHandOver, kCommit, kStart };

// What the fake peer saw; shared with the test.
struct PeerRecord {
  std::mutex mu;
  std::string received;
  std::string expected;  // what the source holds: a mismatch fails the commit, as a checksum would
  Status read;           // how reading the bulk connection ended
  bool handed_over = false;
  bool aborted = false, started = false;
  int lost_starts = 0;  // this many migrate_starts get no answer first
  int starts_sent = 0;  // migrate_starts the peer was sent (answered or not)
  Status start_answer;  // what an answered migrate_start says
};

class FakePeer : public Peer {
 public:
  FakePeer(std::shared_ptr<PeerRecord> record, PeerStep fail_at)
      : record_(std::move(record)), fail_at_(fail_at) {}
  const std::string& name() const override { return name_; }
  StatusOr<uint64_t> Prepare(const Json& fields) override {
    if (fail_at_ == PeerStep::kPrepare) return Unavailable("b: no reply from peer");
    EXPECT_EQ(fields["source_job"], 1);
    return 7;
  }
  StatusOr<JobState> JobStateOf(uint64_t job) override {
    if (fail_at_ == PeerStep::kState) return Unavailable("no reply from peer b");
    return ++polls_ < 3 ? JobState::kStarting : JobState::kSuspended;
  }
  // The bulk connection is a socket pair here; the source job gets one end
  // and writes sealed frames into it, a thread of ours reads the other.
  Status Begin(uint64_t) override {
    GD_RETURN_IF_ERROR(Fails(PeerStep::kBegin));
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      return Internal("socketpair");
    source_end_.Reset(pair[0]);
    dest_end_.Reset(pair[1]);
    key_ = *sealed::NewBulkKey();
    return Status::Ok();
  }
  Status HandOver(int job_socket, uint32_t test_flags) override {
    GD_RETURN_IF_ERROR(Fails(PeerStep::kHandOver));
    GD_RETURN_IF_ERROR(sealed::SendHandoff(job_socket, source_end_.get(), key_, 0, test_flags));
    source_end_.Reset();
    {
      std::lock_guard lock(record_->mu);
      record_->handed_over = true;
    }
    reader_ = std::thread([this, fd = std::move(dest_end_)]() mutable {
      sealed::SealedReader reader(std::move(fd), key_, 0);
      std::string got;
      char buf[1 << 16];
      Status read;
      for (;;) {
        auto n = reader.Read(buf, sizeof buf, 10'000);
        if (!n.ok()) read = n.status();
        if (!n.ok() || *n == 0) break;
        got.append(buf, *n);
      }
      std::lock_guard lock(record_->mu);
      record_->received = std::move(got);
      record_->read = read;
    });
    return Status::Ok();
  }
  ~FakePeer() override {
    if (reader_.joinable()) reader_.join();
  }
  void EndBulk() override {
    if (source_end_.valid()) shutdown(source_end_.get(), SHUT_RDWR);
  }
  StatusOr<uint64_t> Commit(uint64_t) override {
    GD_RETURN_IF_ERROR(Fails(PeerStep::kCommit));
    if (reader_.joinable()) reader_.join();
    std::lock_guard lock(record_->mu);
    if (!record_->read.ok())
      return DataLoss("b: the job could not load the state: " + record_->read.message());
    if (record_->received != record_->expected)
      return DataLoss("b: the job could not load the state: chunk 0 checksum mismatch");
    return record_->received.size();
  }
  Status Start(uint64_t job) override {
    EXPECT_EQ(job, 7u);
    std::lock_guard lock(record_->mu);
    ++record_->starts_sent;
    GD_RETURN_IF_ERROR(Fails(PeerStep::kStart));
    if (record_->lost_starts > 0) {
      --record_->lost_starts;
      return Unavailable("no reply from peer b within 3000 ms");
    }
    GD_RETURN_IF_ERROR(record_->start_answer);
    record_->started = true;
    return Status::Ok();
  }
  Status Abort(uint64_t job) override {
    EXPECT_EQ(job, 7u);
    if (source_end_.valid()) shutdown(source_end_.get(), SHUT_RDWR);
    std::lock_guard lock(record_->mu);
    record_->aborted = true;
    return Status::Ok();
  }

 private:
  Status Fails(PeerStep step) const {
    return fail_at_ == step ? Unavailable("peer b went away") : Status::Ok();
  }
  std::string name_ = "b";
  std::shared_ptr<PeerRecord> record_;
  PeerStep fail_at_;
  int polls_ = 0;
  sealed::BulkKey key_{};
  UniqueFd source_end_, dest_end_;
  std::thread reader_;
};

// No test waits for one of these to expire: they only bound a test that hangs.
// Generous, as the sanitizer builds run several times slower on a loaded machine.
MigrationTimeouts ShortTimeouts() {
  MigrationTimeouts t;
  t.park_ns = t.warm_ns = t.checkpoint_ns = t.written_ns = t.load_ns = 30'000 * kMs;
  t.warm_poll_ns = 1 * kMs;
  t.stream_ms = t.receive_accept_ms = t.receive_write_ms = 30'000;
  return t;
}

class MigratorTest : public ::testing::Test {
 protected:
  // A directory of the test's own for the transfer sockets and checkpoints: their
  // names (xfer-out-1-1.sock) are the same in every test, and two tests may run at
  // once (ctest -j, or a second suite on the machine).
  void SetUp() override {
    record_->expected = Pattern(kStateBytes);
    std::string pattern = ::testing::TempDir() + "gd_migrator_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::unique_ptr<Migrator> MakeMigrator(PeerStep fail_at, PeerFault fault = PeerFault::kNone) {
    MigratorOptions o;
    o.node = "a";
    o.state_dir = dir_;
    o.peers["b"] = PeerInfo{"b", "tcp://127.0.0.1:1", "key"};
    o.has_key = true;
    o.timeouts = timeouts_;
    o.connect = [this, fail_at, fault](const PeerInfo&) -> std::unique_ptr<Peer> {
      auto peer = std::make_unique<FakePeer>(record_, fail_at);
      if (fault == PeerFault::kNone) return peer;
      return std::make_unique<FaultInjectionPeer>(std::move(peer), fault);
    };
    return std::make_unique<Migrator>(&host_, std::move(o));
  }

  // Migrates job 1 to b and waits for the operation to end.
  Operation MigrateAndWait(Migrator& m) {
    EXPECT_TRUE(m.Migrate({{"job", 1}, {"to", "b"}}).ok());
    const uint64_t deadline = MonotonicNowNs() + 60'000 * kMs;
    while (m.Busy(1) && MonotonicNowNs() < deadline) usleep(1000);
    EXPECT_FALSE(m.Busy(1)) << "the migration did not end";
    return *m.OperationOf(1);
  }

  void ExpectSourceTrainsOn() {
    EXPECT_FALSE(host_.at(1).held);
    EXPECT_FALSE(host_.at(1).migrated);
    EXPECT_FALSE(host_.at(1).ended);
    EXPECT_FALSE(host_.Killed(1));
    const uint64_t deadline = MonotonicNowNs() + 10'000 * kMs;
    while (host_.at(1).job->phase() != runtime::kPhaseRunning && MonotonicNowNs() < deadline)
      usleep(1000);
    EXPECT_EQ(host_.at(1).job->phase(), runtime::kPhaseRunning) << "the source was not resumed";
  }

  std::string dir_;
  MigrationTimeouts timeouts_ = ShortTimeouts();
  FakeHost host_;
  std::shared_ptr<PeerRecord> record_ = std::make_shared<PeerRecord>();
};

TEST_F(MigratorTest, MigratesTheStateAndEndsTheSource) {
  auto m = MakeMigrator(PeerStep::kNone);
  Operation op = MigrateAndWait(*m);
  EXPECT_EQ(op.state, OperationState::kDone) << op.error;
  EXPECT_EQ(op.kind, OperationKind::kMigrate);
  EXPECT_EQ(op.step, OperationStep::kNone);
  EXPECT_EQ(op.to_job, 7u);
  EXPECT_EQ(op.bytes, kStateBytes);
  EXPECT_GT(op.downtime_ms, 0);
  EXPECT_EQ(record_->received, record_->expected);
  EXPECT_TRUE(record_->handed_over);
  EXPECT_TRUE(record_->started);
  EXPECT_FALSE(record_->aborted);
  EXPECT_TRUE(host_.at(1).migrated);
  EXPECT_TRUE(host_.Killed(1));
  EXPECT_TRUE(host_.at(1).ended);
}

class PeerFailureTest : public MigratorTest, public ::testing::WithParamInterface<PeerStep> {};

TEST_P(PeerFailureTest, SourceIsReleasedAndResumed) {
  auto m = MakeMigrator(GetParam());
  Operation op = MigrateAndWait(*m);
  EXPECT_EQ(op.state, OperationState::kFailed);
  EXPECT_NE(op.error.find("b"), std::string::npos) << op.error;
  ExpectSourceTrainsOn();
  // Once the peer has a copy, it is told to drop it.
  EXPECT_EQ(record_->aborted, GetParam() != PeerStep::kPrepare);
  EXPECT_FALSE(record_->started);
}

INSTANTIATE_TEST_SUITE_P(EachStep, PeerFailureTest,
                         ::testing::Values(PeerStep::kPrepare, PeerStep::kState, PeerStep::kBegin,
                                           PeerStep::kHandOver, PeerStep::kCommit));

TEST_F(MigratorTest, AStartNeverAnsweredLeavesTheStateOnThePeerAndSaysSo) {
  timeouts_.start_retry_poll_ns = 20 * kMs;
  timeouts_.start_retry_ns = 300 * kMs;
  auto m = MakeMigrator(PeerStep::kStart);
  Operation op = MigrateAndWait(*m);
  EXPECT_EQ(op.state, OperationState::kFailed);
  EXPECT_NE(op.error.find("the state is on b (job 7, parked) but it did not start (migrate_start "
                          "sent "),
            std::string::npos)
      << op.error;
  EXPECT_GT(op.start_tries, 1u) << "sent once, never again";
  EXPECT_EQ(static_cast<int>(op.start_tries), record_->starts_sent);
  EXPECT_FALSE(record_->aborted) << "the only copy of the state is there now";
  EXPECT_TRUE(host_.at(1).ended);  // never both running
  EXPECT_EQ(host_.at(1).migrated_to, "b/7");
  EXPECT_FALSE(host_.at(1).handed_over) << "a restarted node must send it again";
}

TEST_F(MigratorTest, AStartWithoutAnswerIsSentAgainUntilItIsAnswered) {
  timeouts_.start_retry_poll_ns = 10 * kMs;
  record_->lost_starts = 2;
  auto m = MakeMigrator(PeerStep::kNone);
  Operation op = MigrateAndWait(*m);
  EXPECT_EQ(op.state, OperationState::kDone) << op.error;
  EXPECT_EQ(op.start_tries, 3u);
  EXPECT_TRUE(record_->started);
  EXPECT_TRUE(host_.Killed(1)) << "ended before the first start";
  EXPECT_EQ(host_.at(1).migrated_to, "b/7");
  EXPECT_TRUE(host_.at(1).handed_over);
}

TEST_F(MigratorTest, ARefusedStartIsAnAnswerAndIsNotSentAgain) {
  timeouts_.start_retry_poll_ns = 10 * kMs;
  record_->start_answer = FailedPrecondition("b: job 7 has exited");
  auto m = MakeMigrator(PeerStep::kNone);
  Operation op = MigrateAndWait(*m);
  EXPECT_EQ(op.state, OperationState::kFailed);
  EXPECT_EQ(op.start_tries, 1u);
  EXPECT_NE(op.error.find("job 7 has exited"), std::string::npos) << op.error;
  EXPECT_FALSE(host_.at(1).handed_over);
}

// A source restarted after its job's state loaded on b (node_readopt.cc)
// sends migrate_start again, as an operation of the job.
TEST_F(MigratorTest, ARestartedSourceSendsTheStartAgain) {
  timeouts_.start_retry_poll_ns = 10 * kMs;
  record_->lost_starts = 1;
  host_.MarkMigrated(1, "b/7");
  host_.EndMigrated(1);
  auto m = MakeMigrator(PeerStep::kNone);
  m->ResumeHandOver(1, "nowhere/7");  // no such peer: logged, nothing sent
  EXPECT_FALSE(m->OperationOf(1).has_value());
  m->ResumeHandOver(1, "b/7");
  const uint64_t deadline = MonotonicNowNs() + 60'000 * kMs;
  while (m->Busy(1) && MonotonicNowNs() < deadline) usleep(1000);
  Operation op = *m->OperationOf(1);
  EXPECT_EQ(op.kind, OperationKind::kMigrate);
  EXPECT_EQ(op.state, OperationState::kDone) << op.error;
  EXPECT_EQ(op.target, "b");
  EXPECT_EQ(op.to_job, 7u);
  EXPECT_EQ(op.start_tries, 2u);
  EXPECT_TRUE(record_->started);
  EXPECT_TRUE(host_.at(1).handed_over);
}

TEST_F(MigratorTest, CorruptChunkFromTheFaultWrapperAbortsAndTheSourceTrainsOn) {
  auto m = MakeMigrator(PeerStep::kNone, PeerFault::kCorruptChunk);
  Operation op = MigrateAndWait(*m);
  EXPECT_EQ(op.state, OperationState::kFailed);
  EXPECT_NE(op.error.find("checksum"), std::string::npos) << op.error;
  EXPECT_TRUE(record_->aborted);
  ExpectSourceTrainsOn();
  // Exactly one bit of the first chunk was flipped on the way; the job's state is untouched.
  ASSERT_EQ(record_->received.size(), record_->expected.size());
  size_t differing = 0;
  for (size_t i = 0; i < record_->expected.size(); ++i)
    differing += record_->received[i] != record_->expected[i];
  EXPECT_EQ(differing, 1u);
  EXPECT_EQ(host_.at(1).job->state(), record_->expected);
}

TEST_F(MigratorTest, RefusesASecondOperationWhileOneRuns) {
  auto m = MakeMigrator(PeerStep::kNone);
  host_.SetHeld(1, false);
  ASSERT_TRUE(m->Checkpoint({{"job", 1}, {"dir", dir_}}).ok());
  auto second = m->Migrate({{"job", 1}, {"to", "b"}});
  // Refused while the checkpoint runs. It may have ended before this call (it
  // writes 10 MiB): then the migration was accepted, and Busy(1) is that
  // migration's, so the reply is what tells the two apart.
  if (!second.ok()) {
    EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(second.status().message().find("busy: checkpoint"), std::string::npos);
  }
  EXPECT_EQ(m->Migrate({{"job", 1}, {"to", "nowhere"}}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m->Migrate({{"job", 9}, {"to", "b"}}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m->Checkpoint({{"job", 1}, {"dir", "relative"}}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(MigratorTest, RefusesToMoveAJobThatRegisteredNoState) {
  auto m = MakeMigrator(PeerStep::kNone);
  host_.at(1).cb->registered_states.store(0);  // past its first boundary with nothing registered
  auto refused = m->Migrate({{"job", 1}, {"to", "b"}});
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("job 1 registered no state: call "
                                            "gandiva.torch.register(model, optimizer, ...)"),
            std::string::npos)
      << refused.status().ToString();
  EXPECT_FALSE(m->Busy(1));
  EXPECT_FALSE(m->OperationOf(1).has_value()) << "nothing was started";
  EXPECT_FALSE(record_->handed_over);
  ExpectSourceTrainsOn();
}

// A Slurm job's processes are Slurm's: a copy started elsewhere would run
// beside the one Slurm still owns.
TEST_F(MigratorTest, RefusesToMoveAJobAnotherSystemManages) {
  auto m = MakeMigrator(PeerStep::kNone);
  host_.at(1).managed_by = "slurm";
  auto refused = m->Migrate({{"job", 1}, {"to", "b"}});
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("job 1 is managed by slurm"), std::string::npos)
      << refused.status().ToString();
  EXPECT_FALSE(m->OperationOf(1).has_value()) << "nothing was started";
  ExpectSourceTrainsOn();
}

TEST_F(MigratorTest, AJobWhoseSaveFailsBeforeItConnectsEndsTheMigrationAtOnce) {
  auto m = MakeMigrator(PeerStep::kNone);
  host_.at(1).job->refuse_save = true;
  const uint64_t start = MonotonicNowNs();
  Operation op = MigrateAndWait(*m);
  // Told through the control block, not by the stream timeout (30 s here).
  EXPECT_LT(MonotonicNowNs() - start, 10'000 * kMs);
  EXPECT_EQ(op.state, OperationState::kFailed);
  EXPECT_NE(op.error.find("the job could not write its state: fake job: refused to save"),
            std::string::npos)
      << op.error;
  EXPECT_TRUE(record_->aborted);
  EXPECT_FALSE(record_->started);
  ExpectSourceTrainsOn();
}

TEST_F(MigratorTest, ChecksPointsToAFileAndReleasesTheJob) {
  auto m = MakeMigrator(PeerStep::kNone);
  ASSERT_TRUE(m->Checkpoint({{"job", 1}, {"dir", dir_}}).ok());
  const uint64_t deadline = MonotonicNowNs() + 60'000 * kMs;
  while (m->Busy(1) && MonotonicNowNs() < deadline) usleep(1000);
  Operation op = *m->OperationOf(1);
  EXPECT_EQ(op.kind, OperationKind::kCheckpoint);
  EXPECT_EQ(op.state, OperationState::kDone) << op.error;
  EXPECT_EQ(op.bytes, kStateBytes);
  ExpectSourceTrainsOn();
}

// ------------------------------------------------------------ destination side

class ArrivalTest : public MigratorTest {
 protected:
  // Dispatches one request; returns how long Dispatch itself took and a future reply.
  std::pair<double, std::future<StatusOr<Json>>> Send(MessageType type, Json fields) {
    auto request = protocol::DecodeRequest(protocol::EncodeRequest(type, fields));
    EXPECT_TRUE(request.ok()) << request.status().ToString();
    auto promise = std::make_shared<std::promise<StatusOr<Json>>>();
    auto future = promise->get_future();
    controller::Call call{*request, {}};
    const uint64_t t0 = MonotonicNowNs();
    dispatcher_.Dispatch(std::move(call),
                         Reply([promise](const StatusOr<Json>& r) { promise->set_value(r); }));
    return {(MonotonicNowNs() - t0) / 1e6, std::move(future)};
  }
  StatusOr<Json> Call(MessageType type, Json fields) {
    auto [ms, reply] = Send(type, std::move(fields));
    return reply.get();
  }
  void Prepare() {
    migrator_ = MakeMigrator(PeerStep::kNone);
    migrator_->RegisterHandlers(dispatcher_);
    auto prepared = Call(MessageType::kMigratePrepare, {{"name", "j"},
                                                        {"command", {"train"}},
                                                        {"cwd", "/"},
                                                        {"env", {{"A", "1"}}},
                                                        {"source_node", "a"},
                                                        {"source_job", 1}});
    ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
    ASSERT_EQ((*prepared)["job"], 2);
    EXPECT_EQ(host_.arriving.migrated_from, "a/1");
    EXPECT_EQ(host_.arriving.env.at("A"), "1");
    const uint64_t deadline = MonotonicNowNs() + 10'000 * kMs;
    while (host_.at(2).job->phase() != runtime::kPhaseParked && MonotonicNowNs() < deadline)
      usleep(1000);
  }

  // migrate_begin with a fresh key, then the source job's end of the bulk
  // connection, as the source job gets it from its node.
  void BeginBulk(std::unique_ptr<sealed::SealedWriter>* sender) {
    const BulkKey key = *sealed::NewBulkKey();
    auto begun =
        Call(MessageType::kMigrateBegin, {{"job", 2}, {"bulk_key", sealed::BulkKeyToHex(key)}});
    ASSERT_TRUE(begun.ok()) << begun.status().ToString();
    auto connected = ConnectBulk("127.0.0.1", (*begun)["bulk_port"].get<int>(), key, 2, 30000);
    ASSERT_TRUE(connected.ok()) << connected.status().ToString();
    *sender = std::move(connected).value();
  }

  // The whole state over a fresh bulk connection, as the source job sends it.
  void SendState() {
    std::unique_ptr<sealed::SealedWriter> sender;
    ASSERT_NO_FATAL_FAILURE(BeginBulk(&sender));
    const std::string state = Pattern(kStateBytes);
    ASSERT_TRUE(sender->Write(state.data(), state.size()).ok());
    ASSERT_TRUE(sender->Finish().ok());
  }

  Dispatcher dispatcher_;
  std::unique_ptr<Migrator> migrator_;
};

TEST_F(ArrivalTest, StepsRunOnAWorkerAndReplyWhenDone) {
  host_.load_delay = std::chrono::milliseconds(300);  // the job takes its time to load
  Prepare();
  const std::string state = Pattern(kStateBytes);
  {
    // As the source job does with the connection its node hands it.
    std::unique_ptr<sealed::SealedWriter> sender;
    ASSERT_NO_FATAL_FAILURE(BeginBulk(&sender));
    ASSERT_TRUE(sender->Write(state.data(), state.size()).ok());
    ASSERT_TRUE(sender->Finish().ok());
  }
  auto [dispatch_ms, committed] = Send(MessageType::kMigrateCommit, {{"job", 2}});
  EXPECT_LT(dispatch_ms, 100) << "the handler waited for the job to load";
  EXPECT_EQ(committed.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  auto bytes = committed.get();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ((*bytes)["bytes"], kStateBytes);
  EXPECT_EQ(host_.at(2).job->state(), state);
  auto started = Call(MessageType::kMigrateStart, {{"job", 2}});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  EXPECT_EQ((*started)["state"], "running");
  EXPECT_FALSE(host_.at(2).held);
}

TEST_F(ArrivalTest, ATamperedStreamFailsTheCommitWithTheReason) {
  Prepare();
  {
    std::unique_ptr<sealed::SealedWriter> sender;
    ASSERT_NO_FATAL_FAILURE(BeginBulk(&sender));
    sender->TamperWithNextFrame();
    (void)sender->Write("state", 5);
    (void)sender->Finish();
  }
  // The (fake) job could not open the frame: it failed its restore, and the
  // commit says so.
  auto committed = Call(MessageType::kMigrateCommit, {{"job", 2}});
  EXPECT_EQ(committed.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(committed.status().message().find("could not load the state"), std::string::npos)
      << committed.status().ToString();
  EXPECT_TRUE(host_.at(2).held) << "the copy stays parked until its source aborts it";
}

TEST_F(ArrivalTest, ARejectedStreamIsClosedAtOnceSoItsWriterStops) {
  Prepare();
  std::unique_ptr<sealed::SealedWriter> sender;
  ASSERT_NO_FATAL_FAILURE(BeginBulk(&sender));
  sender->TamperWithNextFrame();
  // Far more than the sockets hold: were the connection left open, the writer
  // would block until its 30 s deadline.
  const std::string chunk(4 << 20, 'x');
  const uint64_t t0 = MonotonicNowNs();
  Status wrote = Status::Ok();
  for (int i = 0; i < 64 && wrote.ok(); ++i) wrote = sender->Write(chunk.data(), chunk.size());
  EXPECT_FALSE(wrote.ok()) << "256 MiB went into a rejected stream";
  EXPECT_LT((MonotonicNowNs() - t0) / kMs, 10'000u) << wrote.ToString();
  auto committed = Call(MessageType::kMigrateCommit, {{"job", 2}});
  EXPECT_EQ(committed.status().code(), StatusCode::kDataLoss) << committed.status().ToString();
}

TEST_F(ArrivalTest, ACopyIsNotResumedBeforeItIsHandedOver) {
  Prepare();
  Status early = migrator_->MayResume(2);
  EXPECT_EQ(early.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(early.message().find("state has not loaded"), std::string::npos) << early.ToString();
  const BulkKey key = *sealed::NewBulkKey();
  auto begun =
      Call(MessageType::kMigrateBegin, {{"job", 2}, {"bulk_key", sealed::BulkKeyToHex(key)}});
  ASSERT_TRUE(begun.ok()) << begun.status().ToString();
  EXPECT_FALSE(migrator_->MayResume(2).ok()) << "resumed while its state streams in";
  {
    auto sender = ConnectBulk("127.0.0.1", (*begun)["bulk_port"].get<int>(), key, 2, 30000);
    ASSERT_TRUE(sender.ok()) << sender.status().ToString();
    const std::string state = Pattern(kStateBytes);
    ASSERT_TRUE((*sender)->Write(state.data(), state.size()).ok());
    ASSERT_TRUE((*sender)->Finish().ok());
  }
  ASSERT_TRUE(Call(MessageType::kMigrateCommit, {{"job", 2}}).ok());
  Status loaded = migrator_->MayResume(2);
  EXPECT_NE(loaded.message().find("both nodes"), std::string::npos) << loaded.ToString();
  ASSERT_TRUE(Call(MessageType::kMigrateStart, {{"job", 2}}).ok());
  EXPECT_TRUE(migrator_->MayResume(2).ok());
}

// Once migrate_commit has answered, the copy is the job (its source ends its
// own): recorded as loaded, it no longer exits when orphaned, and stays held
// until migrate_start, which may come more than once.
TEST_F(ArrivalTest, ACommittedCopyIsTheJobAndItsStartIsIdempotent) {
  Prepare();
  EXPECT_EQ(host_.ArrivalStageOf(2), ArrivalStage::kWarming);
  EXPECT_EQ(host_.at(2).cb->exit_if_orphaned.load(), 1u);
  auto early = Call(MessageType::kMigrateStart, {{"job", 2}});
  EXPECT_EQ(early.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(early.status().message().find("state has not loaded"), std::string::npos)
      << early.status().ToString();
  EXPECT_TRUE(host_.at(2).held) << "released before its state came";
  ASSERT_NO_FATAL_FAILURE(SendState());
  ASSERT_TRUE(Call(MessageType::kMigrateCommit, {{"job", 2}}).ok());
  EXPECT_EQ(host_.ArrivalStageOf(2), ArrivalStage::kLoaded);
  EXPECT_EQ(host_.at(2).cb->exit_if_orphaned.load(), 0u);
  EXPECT_TRUE(host_.at(2).held);
  auto started = Call(MessageType::kMigrateStart, {{"job", 2}});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  EXPECT_EQ(host_.ArrivalStageOf(2), ArrivalStage::kStarted);
  EXPECT_FALSE(host_.at(2).held);
  // Its answer lost, the source sends it again: answered as a started job.
  auto again = Call(MessageType::kMigrateStart, {{"job", 2}});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE((*again)["state"] == "running" || (*again)["state"] == "queued") << *again;
}

// A gandivad restarted with a loaded copy (node_readopt.cc) hands it a session
// that waits for the source's migrate_start; resume stays refused until then.
TEST_F(ArrivalTest, ALoadedCopyTakenBackAfterARestartWaitsForItsSourcesStart) {
  migrator_ = MakeMigrator(PeerStep::kNone);
  migrator_->RegisterHandlers(dispatcher_);
  host_.Add(2, "");
  host_.SetHeld(2, true);
  host_.Stage(2, ArrivalStage::kLoaded);
  migrator_->AdoptLoadedArrival(2, host_.at(2).cb, "a/1");
  Status resume = migrator_->MayResume(2);
  EXPECT_EQ(resume.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(resume.message().find("both nodes"), std::string::npos) << resume.ToString();
  EXPECT_EQ(Call(MessageType::kMigrateCommit, {{"job", 2}}).status().code(),
            StatusCode::kFailedPrecondition);
  auto started = Call(MessageType::kMigrateStart, {{"job", 2}});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  EXPECT_FALSE(host_.at(2).held);
  EXPECT_EQ(host_.ArrivalStageOf(2), ArrivalStage::kStarted);
  EXPECT_TRUE(migrator_->MayResume(2).ok());
  EXPECT_TRUE(Call(MessageType::kMigrateStart, {{"job", 2}}).ok());
}

TEST_F(ArrivalTest, ACopyWhoseSourceWentSilentIsDropped) {
  timeouts_.arrival_silence_ns = 300 * kMs;
  Prepare();  // and then nothing more from the source
  const uint64_t deadline = MonotonicNowNs() + 10'000 * kMs;
  while (!host_.Killed(2) && MonotonicNowNs() < deadline) usleep(10'000);
  EXPECT_TRUE(host_.Killed(2)) << "the copy is held forever";
  EXPECT_FALSE(Call(MessageType::kMigrateCommit, {{"job", 2}}).ok());
}

TEST_F(ArrivalTest, ALoadedCopyIsKeptHoweverLongItsSourceIsSilent) {
  // Long enough for the 10 MiB stream below under TSan (300 ms was not): the
  // silence counts steps only, so the stream must end within it.
  timeouts_.arrival_silence_ns = 3000 * kMs;
  Prepare();
  ASSERT_NO_FATAL_FAILURE(SendState());
  ASSERT_TRUE(Call(MessageType::kMigrateCommit, {{"job", 2}}).ok());
  usleep(4'000'000);  // the source may have ended its job: this copy is the job now
  EXPECT_FALSE(host_.Killed(2));
  EXPECT_TRUE(Call(MessageType::kMigrateStart, {{"job", 2}}).ok());
}

TEST_F(ArrivalTest, BadKeysAndUnknownJobsGetClearErrors) {
  Prepare();
  auto early = Call(MessageType::kMigrateCommit, {{"job", 2}});
  EXPECT_EQ(early.status().message(), "job is not receiving state");
  auto bad_key = Call(MessageType::kMigrateBegin, {{"job", 2}, {"bulk_key", "xyz"}});
  EXPECT_EQ(bad_key.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_key.status().message(), "bulk_key must be 64 hex digits");
  EXPECT_EQ(Call(MessageType::kMigrateBegin, {{"job", 9}, {"bulk_key", std::string(64, 'a')}})
                .status()
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(Call(MessageType::kMigrateStart, {{"job", 1}}).status().message(),
            "job did not arrive by migration");
}

TEST_F(ArrivalTest, AbortKillsTheCopyAndFailsLaterSteps) {
  Prepare();
  auto begun = Call(MessageType::kMigrateBegin, {{"job", 2}, {"bulk_key", std::string(64, 'a')}});
  ASSERT_TRUE(begun.ok()) << begun.status().ToString();
  // The session now waits for the bulk connection; the abort must not wait for it.
  auto [ms, aborted] = Send(MessageType::kMigrateAbort, {{"job", 2}});
  EXPECT_TRUE(aborted.get().ok());
  EXPECT_TRUE(host_.Killed(2));
  auto commit = Call(MessageType::kMigrateCommit, {{"job", 2}});
  EXPECT_FALSE(commit.ok());
  EXPECT_EQ(Call(MessageType::kMigrateAbort, {{"job", 9}}).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gandiva::controller
