// Who may do what on a shared node: the caller read off ZeroMQ's Peer-Address,
// and the policy's answers for owners, other users, admins and remote callers.
#include "api/access.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gandiva::controller {
namespace {

using protocol::Call;
using protocol::Caller;
using protocol::CallerFromPeerAddress;
using protocol::Json;
using protocol::MessageType;

TEST(AccessTest, TheCallerIsReadFromTheUnixPeerAddress) {
  auto c = CallerFromPeerAddress("localhost:1000:100:4242");
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->in_process);
  EXPECT_FALSE(c->remote);
  EXPECT_EQ(c->uid, 1000);
  EXPECT_EQ(c->gid, 100);
  EXPECT_EQ(c->pid, 4242);
  EXPECT_EQ(CallerFromPeerAddress("::1:0:0:7")->uid, 0) << "the host part may hold colons";
  for (const char* bad : {"", "localhost", "127.0.0.1", "h:1:2", "h:1:2:x", "h:-1:2:3", "h:1:2:"})
    EXPECT_FALSE(CallerFromPeerAddress(bad).has_value()) << bad;
}

Caller Local(int64_t uid) {
  Caller c;
  c.in_process = false;
  c.uid = uid;
  c.gid = uid;
  return c;
}

Call MakeCall(MessageType type, Json body, Caller caller) {
  Call call;
  call.request.type = type;
  call.request.body = std::move(body);
  call.caller = caller;
  return call;
}

// A uid that is neither root nor this test's own (the admins by default).
constexpr int64_t kAlice = 61001;
constexpr int64_t kBob = 61002;

std::optional<int64_t> AliceOwnsJob1(uint64_t job) {
  return job == 1 ? std::optional<int64_t>(kAlice) : std::nullopt;
}

TEST(AccessTest, AUserActsOnTheirOwnJobOnly) {
  AccessPolicy policy;
  for (MessageType t : {MessageType::kSuspend, MessageType::kResume, MessageType::kKill,
                        MessageType::kCheckpoint, MessageType::kReadLog, MessageType::kJobExited}) {
    Call mine = MakeCall(t, {{"job", 1}}, Local(kAlice));
    EXPECT_TRUE(policy.Authorize(mine, AliceOwnsJob1).ok());
    Call theirs = MakeCall(t, {{"job", 1}}, Local(kBob));
    Status s = policy.Authorize(theirs, AliceOwnsJob1);
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
    EXPECT_NE(s.message().find("job 1 belongs to"), std::string::npos) << s.ToString();
  }
  // An unknown job is the handler's to refuse (not_found), not the policy's.
  Call unknown = MakeCall(MessageType::kSuspend, {{"job", 9}}, Local(kBob));
  EXPECT_TRUE(policy.Authorize(unknown, AliceOwnsJob1).ok());
}

TEST(AccessTest, ReadingIsForEveryoneAndTheNodeForAdmins) {
  AccessPolicy policy;
  for (MessageType t : {MessageType::kHello, MessageType::kListJobs, MessageType::kListDevices,
                        MessageType::kListSwitches}) {
    Call call = MakeCall(t, Json::object(), Local(kBob));
    EXPECT_TRUE(policy.Authorize(call, AliceOwnsJob1).ok());
  }
  for (MessageType t :
       {MessageType::kSetSlice, MessageType::kSetShareMode, MessageType::kSetWeight,
        MessageType::kAssignDevice, MessageType::kMigrate, MessageType::kMigrateBegin}) {
    Call call = MakeCall(t, {{"job", 1}}, Local(kAlice));
    EXPECT_EQ(policy.Authorize(call, AliceOwnsJob1).code(), StatusCode::kPermissionDenied);
  }
}

TEST(AccessTest, RootTheDaemonsUserOperatorsAndInProcessCallersAreAdmins) {
  AccessPolicy policy;
  Caller remote;  // an operator's key (--authorized-keys)
  remote.in_process = false;
  remote.remote = true;
  remote.key_name = "ops";
  for (const Caller& c : {Local(0), Local(geteuid()), remote, Caller{}}) {
    EXPECT_TRUE(policy.IsAdmin(c));
    Call call = MakeCall(MessageType::kSetSlice, Json::object(), c);
    EXPECT_TRUE(policy.Authorize(call, AliceOwnsJob1).ok());
  }
  EXPECT_FALSE(policy.IsAdmin(Local(-1))) << "a local caller the kernel did not name";
  EXPECT_FALSE(policy.IsAdmin(Local(kBob)));
  // The admin group: by the caller's primary group here.
  AccessPolicy with_group(static_cast<gid_t>(kBob));
  EXPECT_TRUE(with_group.IsAdmin(Local(kBob)));
}

// One node's key is not root on its peers: it may carry out the destination's
// side of a migration, and read; nothing else.
TEST(AccessTest, APeerNodesKeyMayOnlyMigrateHere) {
  AccessPolicy policy;
  Caller peer;
  peer.in_process = false;
  peer.remote = true;
  peer.peer_node = true;
  peer.key_name = "node-b";
  EXPECT_FALSE(policy.IsAdmin(peer));
  for (MessageType t : {MessageType::kMigratePrepare, MessageType::kMigrateBegin,
                        MessageType::kMigrateCommit, MessageType::kMigrateStart,
                        MessageType::kMigrateAbort, MessageType::kListJobs, MessageType::kHello}) {
    Call call = MakeCall(t, {{"job", 1}}, peer);
    EXPECT_TRUE(policy.Authorize(call, AliceOwnsJob1).ok()) << protocol::WireName(t);
  }
  for (MessageType t : {MessageType::kLaunch, MessageType::kKill, MessageType::kRegisterJob,
                        MessageType::kJobStarted, MessageType::kMigrate, MessageType::kSetSlice,
                        MessageType::kCheckpoint, MessageType::kReadLog}) {
    Call call = MakeCall(t, {{"job", 1}, {"command", {"x"}}}, peer);
    const Status s = policy.Authorize(call, AliceOwnsJob1);
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << protocol::WireName(t);
    EXPECT_NE(s.message().find("peer node node-b may only migrate"), std::string::npos)
        << s.message();
  }
}

// A launched job runs as the user it is launched for: a user launches for
// themselves only, never as gandivad's user (root) or another.
TEST(AccessTest, AUserLaunchesJobsAsThemselvesOnly) {
  AccessPolicy policy;
  Call plain = MakeCall(MessageType::kLaunch, {{"command", {"x"}}, {"cwd", "/"}}, Local(kAlice));
  ASSERT_TRUE(policy.Authorize(plain, AliceOwnsJob1).ok());
  EXPECT_EQ(plain.body().at("uid"), kAlice) << "the caller's uid is filled in";
  Call as_root =
      MakeCall(MessageType::kLaunch, {{"command", {"x"}}, {"cwd", "/"}, {"uid", 0}}, Local(kAlice));
  const Status s = policy.Authorize(as_root, AliceOwnsJob1);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("may launch jobs for itself only"), std::string::npos) << s.message();
}

TEST(AccessTest, AUserRegistersJobsForThemselvesOnly) {
  AccessPolicy policy;
  Call plain = MakeCall(MessageType::kRegisterJob, {{"command", {"x"}}}, Local(kAlice));
  ASSERT_TRUE(policy.Authorize(plain, AliceOwnsJob1).ok());
  EXPECT_EQ(plain.body().at("uid"), kAlice) << "the caller's uid is filled in";
  Call own =
      MakeCall(MessageType::kRegisterJob, {{"command", {"x"}}, {"uid", kAlice}}, Local(kAlice));
  EXPECT_TRUE(policy.Authorize(own, AliceOwnsJob1).ok());
  Call other =
      MakeCall(MessageType::kRegisterJob, {{"command", {"x"}}, {"uid", kAlice}}, Local(kBob));
  EXPECT_EQ(policy.Authorize(other, AliceOwnsJob1).code(), StatusCode::kPermissionDenied);
  Call by_root =
      MakeCall(MessageType::kRegisterJob, {{"command", {"x"}}, {"uid", kAlice}}, Local(0));
  EXPECT_TRUE(policy.Authorize(by_root, AliceOwnsJob1).ok()) << "Slurm's plugin, as root";
}

// A child process that runs as `uid` until killed; -1 if it cannot be made
// (the test is not root).
pid_t ChildRunningAs(int64_t uid) {
  int ready[2];
  if (geteuid() != 0 || pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    const char ok = setresuid(uid, uid, uid) == 0 ? 1 : 0;
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    for (;;) pause();
  }
  close(ready[1]);
  char ok = 0;
  const bool became = pid > 0 && read(ready[0], &ok, 1) == 1 && ok == 1;
  close(ready[0]);
  if (pid > 0 && !became) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

TEST(AccessTest, AUserReportsOnlyAProcessTheyCouldSignalThemselves) {
  const pid_t alices = ChildRunningAs(kAlice);
  if (alices < 0) GTEST_SKIP() << "needs root, to run a process as another user";
  AccessPolicy policy;
  auto started = [](pid_t pid, Caller by) {
    return MakeCall(MessageType::kJobStarted, {{"job", 1}, {"pid", pid}}, by);
  };
  Call own = started(alices, Local(kAlice));
  EXPECT_TRUE(policy.Authorize(own, AliceOwnsJob1).ok());
  // Root's own process (this test): what the attack on a shared node named.
  Call roots = started(getpid(), Local(kAlice));
  const Status refused = policy.Authorize(roots, AliceOwnsJob1);
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("could signal itself"), std::string::npos) << refused.message();
  // A pid past int's range, which a cast would have made root's.
  Call wrapped = MakeCall(MessageType::kJobStarted,
                          {{"job", 1}, {"pid", (int64_t{1} << 32) + getpid()}}, Local(kAlice));
  EXPECT_EQ(policy.Authorize(wrapped, AliceOwnsJob1).code(), StatusCode::kInvalidArgument);
  // An admin (Slurm's plugin, as root) reports a task before it drops root.
  Call by_root = started(getpid(), Local(0));
  EXPECT_TRUE(policy.Authorize(by_root, AliceOwnsJob1).ok());
  kill(alices, SIGKILL);
  waitpid(alices, nullptr, 0);
  Call gone = started(alices, Local(kAlice));
  EXPECT_EQ(policy.Authorize(gone, AliceOwnsJob1).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gandiva::controller
