// The fixture of the LiveCluster tests: nodes that answer from a script
// (ScriptedNodes, a test double of the node API: the real nodes are in
// tests/integration/test_scheduler.py and test_failures.py) and a store in a
// temporary directory, on a clock the test moves.
#ifndef GANDIVA_TESTS_SCHEDULER_LIVE_CLUSTER_FIXTURE_H_
#define GANDIVA_TESTS_SCHEDULER_LIVE_CLUSTER_FIXTURE_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "live/live_cluster.h"

namespace gandiva::sched::live {

using protocol::Json;
using protocol::MessageType;

class ScriptedNodes final : public NodeApi {
 public:
  explicit ScriptedNodes(std::vector<std::string> names) {
    for (auto& n : names) addresses_.push_back({n, "sim://" + n, ""});
    jobs_.resize(addresses_.size());
    down_.resize(addresses_.size(), false);
  }
  int size() const override { return static_cast<int>(addresses_.size()); }
  const NodeAddress& address(int node) const override { return addresses_[node]; }
  StatusOr<Json> Call(int node, MessageType type, const Json& f) const override {
    calls.push_back({node, type, f});
    if (before_reply) before_reply(node, type, f);
    if (down_[node]) return Unavailable(addresses_[node].name + ": no reply");
    auto& jobs = jobs_[node];
    switch (type) {
      case MessageType::kListDevices: {
        Json devices = Json::array();
        for (int d = 0; d < devices_per_node; ++d)
          devices.push_back({{"name", "cpu" + std::to_string(d)},
                             {"kind", "cpu"},
                             {"model", "sim"},
                             {"memory_bytes", device_memory_bytes}});
        return Json{{"devices", devices}};
      }
      case MessageType::kListJobs:
        return Json{{"jobs", jobs}};
      case MessageType::kLaunch:
        if (refuse_launch)
          return NotFound("no such command: " + f["command"][0].get<std::string>());
        jobs.push_back(Record(static_cast<int>(jobs.size()) + 1, f["name"], "running"));
        return Json{{"job", jobs.size()}};
      case MessageType::kCheckpoint:
        if (refuse_checkpoint) return FailedPrecondition("a checkpoint is under way");
        return Json::object();
      case MessageType::kReadLog: {  // the stderr set in `stderr_of`, "" if none
        auto it = stderr_of.find({node, f["job"].get<int64_t>()});
        const std::string text =
            f.value("stream", std::string("stdout")) == "stderr" && it != stderr_of.end()
                ? it->second
                : "";
        const size_t from = std::min<size_t>(f.value("offset", size_t{0}), text.size());
        return Json{{"data", text.substr(from, f.value("max_bytes", size_t{1} << 20))},
                    {"end_offset", text.size()}};
      }
      case MessageType::kKill:  // ends at once (a node's kill ends it a moment later)
        for (Json& j : jobs)
          if (j["id"] == f["job"]) j = Record(j["id"], j["name"], "failed", -9);
        return Json::object();
      default:
        return Json::object();
    }
  }
  static Json Record(int id, const std::string& name, const std::string& state,
                     int exit_code = -1) {
    const bool ended = state == "exited" || state == "failed";
    return {{"id", id},
            {"name", name},
            {"state", state},
            {"exit_code", ended ? exit_code : -1},
            {"exit_reason", ended ? "exited" : "none"},
            {"exit_signal", 0},
            {"exit_detail", ""},
            {"iterations", 0},
            {"device_time_s", 2.0},
            {"wall_time_s", 3.0},
            {"rate_vs_alone", 0.5},
            {"operation", nullptr}};
  }
  int CallsOf(MessageType type) const {
    int k = 0;
    for (auto& c : calls) k += c.type == type;
    return k;
  }
  struct CallRecord {
    int node;
    MessageType type;
    Json fields;
  };
  mutable std::vector<CallRecord> calls;
  mutable std::vector<std::vector<Json>> jobs_;
  std::vector<bool> down_;
  bool refuse_launch = false;
  bool refuse_checkpoint = false;
  int devices_per_node = 1;                                  // cpu0..
  int64_t device_memory_bytes = 0;                           // each device's; 0: not known
  std::map<std::pair<int, int64_t>, std::string> stderr_of;  // (node, job) -> its stderr
  // Called with every call as it arrives, before the node answers it.
  std::function<void(int node, MessageType type, const Json& fields)> before_reply;

 private:
  std::vector<NodeAddress> addresses_;
};

class LiveClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("live_cluster_test." + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = JobStore::Open((dir_ / "scheduler.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A cluster over nodes a and b (one device each), clock `now_`.
  std::unique_ptr<LiveCluster> MakeCluster(double stop_parked_after_s = 0) {
    auto topo = DiscoverTopology(nodes_);
    EXPECT_TRUE(topo.ok());
    LiveClusterOptions o;
    o.stop_parked_after_s = stop_parked_after_s;
    o.checkpoint_root = (dir_ / "checkpoints").string();
    o.node_dead_after_s = 5;
    o.wall_now = [this] { return now_; };
    o.validate_iterations = validate_iterations_;
    o.checkpoint_every_s = checkpoint_every_s_;
    o.validate_timeout_s = 60;
    return std::make_unique<LiveCluster>(&nodes_, store_.get(), std::move(topo).value(), o, 1000);
  }
  JobRecord Submitted(const std::string& name, const std::string& kind = "") {
    JobRecord r;
    r.name = name;
    r.kind = kind;
    r.command = {"/bin/true"};
    r.cwd = "/";
    r.submit_time = now_;
    if (validate_iterations_ > 0) r.state = LiveJobState::kValidating;  // as Submit does
    auto id = store_->Add(r);
    EXPECT_TRUE(id.ok());
    r.id = *id;
    return r;
  }
  JobRecord Stored(int64_t id) { return store_->Get(id).value(); }
  // The checkpoint the last call asked for is complete on node a's first job.
  void CheckpointDone() {
    std::string dir;
    for (const auto& call : nodes_.calls)
      if (call.type == MessageType::kCheckpoint) dir = call.fields["dir"];
    nodes_.jobs_[0][0]["operation"] = {{"kind", "checkpoint"}, {"target", dir}, {"state", "done"}};
  }
  // A restartable job "train", submitted and admitted.
  JobId AdmitRestartable(LiveCluster& c) {
    JobRecord r = Submitted("train");
    r.restartable = true;
    EXPECT_TRUE(store_->Update(r).ok());
    return c.Admit(r);
  }
  // A restartable job started on node a's cpu0.
  JobId StartRestartableJob(LiveCluster& c) {
    const JobId j = AdmitRestartable(c);
    const GpuId a = 0;
    EXPECT_TRUE(c.Start(j, {&a, 1}).ok());
    return j;
  }
  // A restartable job started on node a's cpu0, then suspended: parked there.
  JobId ParkRestartableJob(LiveCluster& c) {
    const JobId j = StartRestartableJob(c);
    EXPECT_TRUE(c.Suspend(j, Preemption::kPark).ok());
    nodes_.jobs_[0][0]["state"] = "suspended";
    return j;
  }
  // A job the store says was placed (attempt 1, on `node`'s cpu0) by a
  // scheduler that is gone.
  void StoreAsPlaced(const std::string& name, LiveJobState state, const std::string& node,
                     int64_t node_job) {
    JobRecord r = Submitted(name);
    r.state = state;
    r.attempt = 1;
    r.node = node;
    r.device = "cpu0";
    r.node_job = node_job;
    ASSERT_TRUE(store_->Update(r).ok());
  }

  std::filesystem::path dir_;
  std::unique_ptr<JobStore> store_;
  ScriptedNodes nodes_{{"a", "b"}};
  double now_ = 1000;
  int validate_iterations_ = 0;    // MakeCluster's --validate
  double checkpoint_every_s_ = 0;  // MakeCluster's --checkpoint-every
};

}  // namespace gandiva::sched::live

#endif  // GANDIVA_TESTS_SCHEDULER_LIVE_CLUSTER_FIXTURE_H_
