// The API dispatch: unknown types, handlers that throw, replies given later or
// never; and the node's own handlers through it: unknown jobs, bad input,
// and the replies of a job's life (register, suspend, resume, exit).
#include "gandiva/protocol/dispatcher.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <thread>

#include "devices/devices.h"
#include "node.h"

namespace gandiva::controller {

using protocol::Call;
using protocol::Dispatcher;
using protocol::Json;
using protocol::Reply;
namespace {

using protocol::MessageType;

StatusOr<Json> Dispatch(const Dispatcher& d, MessageType type,
                        const Json& fields = Json::object()) {
  auto request = protocol::DecodeRequest(protocol::EncodeRequest(type, fields));
  if (!request.ok()) return request.status();
  std::promise<StatusOr<Json>> reply;
  auto future = reply.get_future();
  d.Dispatch(Call{*request, {}}, Reply([&reply](const StatusOr<Json>& r) { reply.set_value(r); }));
  return future.get();
}

TEST(DispatcherTest, UnknownTypeGetsAnError) {
  Dispatcher d;
  auto r = Dispatch(d, MessageType::kHello);
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
}

TEST(DispatcherTest, SyncHandlerReplies) {
  Dispatcher d;
  d.OnSync(MessageType::kHello, [](const Call&) -> StatusOr<Json> { return Json{{"x", 1}}; });
  auto r = Dispatch(d, MessageType::kHello);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["x"], 1);
}

TEST(DispatcherTest, AThrowingHandlerIsAnInternalError) {
  Dispatcher d;
  d.OnSync(MessageType::kHello, [](const Call&) -> StatusOr<Json> {
    return Json::array().at(3);  // a bug: throws
  });
  auto r = Dispatch(d, MessageType::kHello);
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(DispatcherTest, AReplyMayComeFromAnotherThreadLater) {
  Dispatcher d;
  std::thread worker;
  d.On(MessageType::kHello, [&worker](Call, Reply reply) {
    worker = std::thread([reply] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      reply(Json{{"late", true}});
      reply(Json{{"twice", true}});  // ignored: one reply per request
    });
  });
  auto r = Dispatch(d, MessageType::kHello);
  worker.join();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r).contains("late"));
}

TEST(DispatcherTest, ADroppedReplyStillAnswersTheClient) {
  Dispatcher d;
  d.On(MessageType::kHello, [](Call, Reply) {});  // forgets to reply
  auto r = Dispatch(d, MessageType::kHello);
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

class NodeHandlersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    NodeOptions o;
    o.node = "t" + std::to_string(getpid());
    o.devices = *ParseDeviceSpec("cpu:2");
    o.state_dir = ::testing::TempDir() + "gd_node_" + std::to_string(getpid());
    mkdir(o.state_dir.c_str(), 0700);  // its own: launched jobs' logs go there
    node_ = std::make_unique<Node>(o);
    ASSERT_TRUE(node_->Start().ok());
  }
  void TearDown() override {
    const std::string dir = node_->options().state_dir;
    node_.reset();
    std::filesystem::remove_all(dir);
  }
  StatusOr<Json> Call(MessageType type, const Json& fields = Json::object()) {
    auto request = protocol::DecodeRequest(protocol::EncodeRequest(type, fields));
    if (!request.ok()) return request.status();
    std::promise<StatusOr<Json>> reply;
    auto future = reply.get_future();
    node_->Handle(controller::Call{*request, {}},
                  Reply([&reply](const StatusOr<Json>& r) { reply.set_value(r); }));
    return future.get();
  }
  Json Job(uint64_t id) { return (*Call(MessageType::kListJobs, {{"job", id}}))["jobs"][0]; }
  std::unique_ptr<Node> node_;
};

TEST_F(NodeHandlersTest, UnknownJobsAndDevicesAreNotFound) {
  for (auto type : {MessageType::kSuspend, MessageType::kResume, MessageType::kKill,
                    MessageType::kListJobs, MessageType::kCheckpoint, MessageType::kMigrateBegin}) {
    Json fields = {{"job", 42}};
    if (type == MessageType::kCheckpoint) fields["dir"] = "/tmp";
    if (type == MessageType::kMigrateBegin) fields["bulk_key"] = std::string(64, '0');
    auto r = Call(type, fields);
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << protocol::WireName(type);
    EXPECT_EQ(r.status().message(), "no job 42");
  }
  EXPECT_EQ(Call(MessageType::kSetSlice, {{"device", "gpu9"}, {"ms", 100}}).status().message(),
            "no device 'gpu9'");
}

TEST_F(NodeHandlersTest, BadInputGetsAClearError) {
  auto slice = Call(MessageType::kSetSlice, {{"device", "cpu0"}, {"ms", 10}});
  EXPECT_EQ(slice.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(slice.status().message(), "slice must be 50..250 ms, not 10");
  auto env = Call(MessageType::kRegisterJob, {{"command", {"x"}}, {"env", {{"A", 1}}}});
  EXPECT_EQ(env.status().message(), "env values must be strings ('A')");
  auto empty = Call(MessageType::kRegisterJob, {{"command", Json::array()}});
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  auto weight = Call(MessageType::kRegisterJob, {{"command", {"x"}}, {"weight", 17}});
  EXPECT_EQ(weight.status().message(), "weight must be in (0, 16]");
  auto missing = Call(MessageType::kSuspend);  // no job field: refused by the schema
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(NodeHandlersTest, AJobsLifeThroughTheApi) {
  auto reg = Call(MessageType::kRegisterJob, {{"command", {"train"}}, {"name", "n"}});
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_EQ((*reg)["job"], 1);
  EXPECT_EQ((*reg)["device_kind"], "cpu");
  EXPECT_EQ(Job(1)["state"], "starting");
  EXPECT_EQ(Job(1)["held"], false);
  ASSERT_TRUE(Call(MessageType::kSuspend, {{"job", 1}}).ok());
  EXPECT_EQ(Job(1)["held"], true);
  ASSERT_TRUE(Call(MessageType::kAssignDevice, {{"job", 1}, {"device", "cpu1"}}).ok());
  EXPECT_EQ(Job(1)["device"], "cpu1");
  EXPECT_EQ(Job(1)["held"], true) << "a hold moves with the job";
  ASSERT_TRUE(Call(MessageType::kResume, {{"job", 1}}).ok());
  EXPECT_EQ(Job(1)["held"], false);
  auto again = Call(MessageType::kResume, {{"job", 1}});
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.status().message(), "job 1 is not suspended");
  ASSERT_TRUE(Call(MessageType::kJobExited, {{"job", 1}, {"exit_code", 3}}).ok());
  EXPECT_EQ(Job(1)["state"], "failed");
  EXPECT_EQ(Job(1)["exit_code"], 3);
  EXPECT_EQ(Call(MessageType::kSuspend, {{"job", 1}}).status().message(), "job 1 has failed");
  auto devices = Call(MessageType::kListDevices);
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ((*devices)["devices"].size(), 2u);
  EXPECT_TRUE((*devices)["devices"][1]["jobs"].empty());
}

TEST_F(NodeHandlersTest, JobStartedWithAProcessThatIsGoneEndsTheJob) {
  ASSERT_TRUE(Call(MessageType::kRegisterJob, {{"command", {"x"}}}).ok());
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  auto r = Call(MessageType::kJobStarted, {{"job", 1}, {"pid", child}});
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Job(1)["state"], "failed");
}

TEST_F(NodeHandlersTest, ALaunchedJobRunsUnderTheNodeAndItsEndIsRecorded) {
  const std::string cwd = ::testing::TempDir();
  auto r = Call(MessageType::kLaunch, {{"command", {"sh", "-c", "echo hi; exit 4"}},
                                       {"cwd", cwd},
                                       {"env", {{"PATH", "/usr/bin:/bin"}}},
                                       {"user", "ada"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const uint64_t id = (*r)["job"];
  EXPECT_GT((*r)["pid"].get<int>(), 0);
  EXPECT_EQ((*r)["memory_limit"], "");
  for (int i = 0; i < 500 && Job(id)["exit_reason"] == "none"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(Job(id)["exit_reason"], "exited");
  EXPECT_EQ(Job(id)["exit_code"], 4);
  EXPECT_EQ(Job(id)["user"], "ada");
  auto log = Call(MessageType::kReadLog, {{"job", id}});
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ((*log)["data"], "hi\n");
  EXPECT_EQ((*log)["ended"], true);

  auto missing = Call(MessageType::kLaunch, {{"command", {"no-such-command-gd"}}, {"cwd", cwd}});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  const uint64_t failed = id + 1;
  EXPECT_EQ(missing.status().message(), "job " + std::to_string(failed) +
                                            ": cannot start 'no-such-command-gd': No such file "
                                            "or directory");
  EXPECT_EQ(Job(failed)["exit_reason"], "failed_to_start");
  EXPECT_EQ(Job(failed)["exit_code"], 127);
  EXPECT_EQ(Job(failed)["state"], "failed");
}

TEST_F(NodeHandlersTest, BadLaunchesRegisterNothing) {
  const std::string cwd = ::testing::TempDir() + "gd_bad_launch_" + std::to_string(getpid());
  mkdir(cwd.c_str(), 0700);  // empty: no checkpoint in it
  EXPECT_EQ(Call(MessageType::kLaunch, {{"command", {"true"}}, {"cwd", cwd}, {"device", "gpu3"}})
                .status()
                .message(),
            "no device 'gpu3' on node " + node_->options().node);
  EXPECT_EQ(Call(MessageType::kLaunch, {{"command", {"true"}}, {"cwd", "rel"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Call(MessageType::kLaunch, {{"command", {"true"}}, {"cwd", cwd}, {"restore", cwd}})
                .status()
                .message(),
            "restore: no checkpoint at " + cwd + "/state.gdck");
  EXPECT_EQ(
      Call(MessageType::kLaunch, {{"command", {"true"}}, {"cwd", cwd}, {"memory_limit_bytes", -1}})
          .status()
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ((*Call(MessageType::kListJobs))["jobs"].size(), 0u);
  EXPECT_EQ(Call(MessageType::kReadLog, {{"job", 5}}).status().code(), StatusCode::kNotFound);
  rmdir(cwd.c_str());
}

}  // namespace
}  // namespace gandiva::controller
