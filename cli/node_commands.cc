// The node commands that are one API call each: ps, devices, suspend, resume,
// kill, slice, weight, assign, switches, top; and `gandiva daemon`.
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "gandiva/node/daemon.h"
#include "node_client.h"
#include "table.h"

namespace gandiva::cli {

using protocol::EnumFromJson;
using protocol::JobState;
using protocol::Json;
using protocol::MessageType;
using protocol::OperationKind;
using protocol::OperationState;

int DaemonCommand(const Args& args) { return controller::RunDaemon(args); }

namespace {

// The latest checkpoint or migration, in a few words ("migrated to b/3, 38.1 ms down").
// `j` is a job record of a checked list_jobs reply.
std::string OperationNote(const Json& j) {
  const Json& op = j["operation"];
  std::string note;
  if (op.is_object()) {
    const std::string kind = op["kind"].get<std::string>();
    const auto state = EnumFromJson<OperationState>(op["state"]);
    if (state == OperationState::kRunning) {
      note = kind + ": " + op["step"].get<std::string>();
    } else if (state == OperationState::kFailed) {
      note = kind + " failed";
    } else if (EnumFromJson<OperationKind>(op["kind"]) == OperationKind::kMigrate) {
      note = "to " + op["target"].get<std::string>() + "/" + op["to_job"].dump() + ", " +
             Fixed(op["downtime_ms"].get<double>(), 1) + " ms down";
    } else {
      note = "checkpointed " + Bytes(op["bytes"].get<double>());
    }
  }
  const std::string from = j.value("migrated_from", "");
  if (!from.empty()) note = "from " + from + (note.empty() ? "" : "; " + note);
  return note.empty() ? "-" : note;
}

// What the job holds on its device, and of what cap ("1.0 GiB/4.0 GiB") when it has one.
std::string DeviceMemory(const Json& j) {
  const std::string held = Bytes(j["device_bytes"].get<double>());
  const uint64_t cap = j.value("gpu_memory_bytes", uint64_t{0});  // older daemons: none
  return cap == 0 ? held : held + "/" + Bytes(static_cast<double>(cap));
}

std::string JobsTable(const Json& jobs, bool all) {
  Table t({"ID", "NAME", "DEVICE", "STATE", "W", "ITERS", "IT/S", "MEAN_MS", "P99_MS", "ALONE_MS",
           "VS_ALONE", "SLICES", "DEV_TIME_S", "DEV_MEM", "PID", "LAST_MOVE"});
  auto maybe = [](const Json& v, int digits) {
    return v.is_number() ? Fixed(v.get<double>(), digits) : std::string("-");
  };
  for (const auto& j : jobs) {
    const std::string state = j["state"].get<std::string>();
    if (!all && protocol::HasEnded(*EnumFromJson<JobState>(j["state"]))) continue;
    t.Add({j["id"].dump(), j["name"].get<std::string>(), j["device"].get<std::string>(),
           state + (j["held"].get<bool>() ? "*" : ""), Fixed(j["weight"].get<double>(), 1),
           j["iterations"].dump(), Fixed(j["iterations_per_s"].get<double>(), 1),
           Fixed(j["mean_ms"].get<double>(), 2), Fixed(j["p99_ms"].get<double>(), 2),
           maybe(j["alone_ms"], 2), maybe(j["rate_vs_alone"], 2), j["slices"].dump(),
           Fixed(j["device_time_s"].get<double>(), 2), DeviceMemory(j), j["pid"].dump(),
           OperationNote(j)});
  }
  return t.Render();
}

// "pack x2", "slice", "auto: pack (1.62 vs 0.98)": how the device's jobs share it.
std::string ShareNote(const Json& d) {
  const std::string mode = d["share_mode"].get<std::string>();
  const std::string cap = " x" + d["capacity"].dump();
  if (mode == "pack") return mode + cap;
  if (mode == "slice") return mode;
  const Json& dec = d["share_decision"];
  if (!dec.is_object() || d["share_phase"].get<std::string>() != "decided")
    return "auto" + cap + ": " + d["share_phase"].get<std::string>();
  std::string note = "auto" + cap + ": " + dec["mode"].get<std::string>();
  if (dec["pack_rate"].is_number())
    note += " (" + Fixed(dec["pack_rate"].get<double>(), 2) + " packed vs " +
            Fixed(dec["slice_rate"].get<double>(), 2) + ")";
  return note;
}

std::string DevicesTable(const Json& devices) {
  Table t({"DEVICE", "KIND", "MODEL", "SHARE", "SLICE_MS", "JOBS", "RUNNING", "SWITCHES",
           "HANDOVER_MS"});
  for (const auto& d : devices) {
    std::string jobs, running;
    for (const auto& j : d["jobs"]) jobs += (jobs.empty() ? "" : ",") + j.dump();
    for (const auto& j : d["running"]) running += (running.empty() ? "" : ",") + j.dump();
    t.Add({d["name"].get<std::string>(), d["kind"].get<std::string>(),
           d["model"].get<std::string>(), ShareNote(d), d["slice_ms"].dump(),
           jobs.empty() ? "-" : jobs, running.empty() ? "-" : running, d["switches"].dump(),
           Fixed(d["mean_handover_ms"].get<double>(), 3)});
  }
  return t.Render();
}

}  // namespace

int PsCommand(const Args& args) {
  NodeCommand c("gandiva ps", {}, {"all"});
  if (!c.Parse(args)) return kExitUsage;
  if (!c.flags().positionals().empty()) return c.UsageError("takes no arguments");
  auto reply = c.Call(MessageType::kListJobs);
  if (!reply) return kExitFailed;
  if (c.json()) {
    std::printf("%s\n", (*reply)["jobs"].dump(2).c_str());
  } else {
    std::fputs(JobsTable((*reply)["jobs"], c.flags().Has("all")).c_str(), stdout);
    // Jobs gandiva cannot manage: too long for a column, said below the table.
    for (const auto& j : (*reply)["jobs"])
      if (const std::string w = j.value("boundary_warning", ""); !w.empty())
        std::printf("job %s (%s): %s\n", j["id"].dump().c_str(),
                    j["name"].get<std::string>().c_str(), w.c_str());
  }
  return kExitOk;
}

int DevicesCommand(const Args& args) {
  NodeCommand c("gandiva devices");
  if (!c.Parse(args)) return kExitUsage;
  auto reply = c.Call(MessageType::kListDevices);
  if (!reply) return kExitFailed;
  if (c.json())
    std::printf("%s\n", (*reply)["devices"].dump(2).c_str());
  else
    std::fputs(DevicesTable((*reply)["devices"]).c_str(), stdout);
  // Other devices-like facts of the node, for people (the JSON stays the device list).
  if (auto hello = c.Call(MessageType::kHello); hello && !c.json()) {
    std::printf("memory limits of launched jobs: %s\n",
                (*hello)["memory_limits"].get<std::string>().c_str());
    // What a container mounts for its jobs' control blocks (docs/containers.md).
    if (hello->contains("blocks_dir"))
      std::printf("control blocks of jobs in containers: %s\n",
                  (*hello)["blocks_dir"].get<std::string>().c_str());
  }
  return kExitOk;
}

int JobActionCommand(const std::string& action, const Args& args) {
  NodeCommand c("gandiva " + action,
                action == "kill" ? std::set<std::string>{"signal"} : std::set<std::string>{});
  if (!c.Parse(args)) return kExitUsage;
  if (c.flags().positionals().size() != 1) return c.UsageError("usage: gandiva " + action + " JOB");
  auto id = ParseJobId(c.flags().positionals()[0]);
  if (!id) return c.UsageError("'" + c.flags().positionals()[0] + "' is not a job id");
  Json fields = {{"job", *id}};
  MessageType type = action == "suspend"  ? MessageType::kSuspend
                     : action == "resume" ? MessageType::kResume
                                          : MessageType::kKill;
  if (action == "kill" && c.flags().Has("signal")) {
    auto sig = c.flags().GetInt("signal", 15);
    if (!sig.ok()) return c.UsageError(sig.status().message());
    fields["signal"] = *sig;
  }
  auto reply = c.Call(type, fields);
  if (!reply) return kExitFailed;
  if (c.json()) std::printf("%s\n", reply->dump().c_str());
  return kExitOk;
}

int SliceCommand(const Args& args) {
  NodeCommand c("gandiva slice", {"device", "ms"});
  if (!c.Parse(args)) return kExitUsage;
  if (!c.flags().Has("device") || !c.flags().Has("ms"))
    return c.UsageError("usage: gandiva slice --device D --ms N");
  auto ms = c.flags().GetInt("ms", 0);
  if (!ms.ok()) return c.UsageError(ms.status().message());
  return c.Call(MessageType::kSetSlice, {{"device", c.flags().Get("device")}, {"ms", *ms}})
             ? kExitOk
             : kExitFailed;
}

int WeightCommand(const Args& args) {
  NodeCommand c("gandiva weight");
  if (!c.Parse(args)) return kExitUsage;
  if (c.flags().positionals().size() != 2) return c.UsageError("usage: gandiva weight JOB W");
  auto id = ParseJobId(c.flags().positionals()[0]);
  if (!id) return c.UsageError("'" + c.flags().positionals()[0] + "' is not a job id");
  char* end = nullptr;
  const std::string& w_text = c.flags().positionals()[1];
  double w = std::strtod(w_text.c_str(), &end);
  if (w_text.empty() || *end) return c.UsageError("'" + w_text + "' is not a number");
  return c.Call(MessageType::kSetWeight, {{"job", *id}, {"weight", w}}) ? kExitOk : kExitFailed;
}

int AssignCommand(const Args& args) {
  NodeCommand c("gandiva assign", {"device"});
  if (!c.Parse(args)) return kExitUsage;
  if (c.flags().positionals().size() != 1 || !c.flags().Has("device"))
    return c.UsageError("usage: gandiva assign JOB --device D");
  auto id = ParseJobId(c.flags().positionals()[0]);
  if (!id) return c.UsageError("'" + c.flags().positionals()[0] + "' is not a job id");
  return c.Call(MessageType::kAssignDevice, {{"job", *id}, {"device", c.flags().Get("device")}})
             ? kExitOk
             : kExitFailed;
}

int SwitchesCommand(const Args& args) {
  NodeCommand c("gandiva switches", {"device", "limit"});
  if (!c.Parse(args)) return kExitUsage;
  Json fields = Json::object();
  if (c.flags().Has("device")) fields["device"] = c.flags().Get("device");
  auto limit = c.flags().GetInt("limit", 20);
  if (!limit.ok()) return c.UsageError(limit.status().message());
  fields["limit"] = *limit;
  auto reply = c.Call(MessageType::kListSwitches, fields);
  if (!reply) return kExitFailed;
  if (c.json()) {
    std::printf("%s\n", (*reply)["switches"].dump(2).c_str());
    return kExitOk;
  }
  Table t({"DEVICE", "FROM", "TO", "AT_S", "HANDOVER_MS"});
  for (const auto& s : (*reply)["switches"])
    t.Add({s["device"].get<std::string>(), s["from"].dump(), s["to"].dump(),
           Fixed(s["at_s"].get<double>(), 3), Fixed(s["handover_ms"].get<double>(), 3)});
  t.Print();
  return kExitOk;
}

int TopCommand(const Args& args) {
  NodeCommand c("gandiva top", {"interval", "count"}, {"all"});
  if (!c.Parse(args)) return kExitUsage;
  auto interval = c.flags().GetInt("interval", 1000);
  auto count = c.flags().GetInt("count", 0);
  if (!interval.ok()) return c.UsageError(interval.status().message());
  if (!count.ok()) return c.UsageError(count.status().message());
  const bool tty = isatty(1);
  for (long long i = 0; *count == 0 || i < *count; ++i) {
    auto devices = c.Call(MessageType::kListDevices);
    auto jobs = devices ? c.Call(MessageType::kListJobs) : std::nullopt;
    if (!devices || !jobs) return kExitFailed;
    std::string screen = DevicesTable((*devices)["devices"]) + "\n" +
                         JobsTable((*jobs)["jobs"], c.flags().Has("all"));
    if (tty) std::fputs("\033[H\033[2J", stdout);
    std::fputs(screen.c_str(), stdout);
    if (!tty) std::fputs("\n", stdout);
    std::fflush(stdout);
    if (*count != 0 && i + 1 == *count) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(*interval));
  }
  return kExitOk;
}

}  // namespace gandiva::cli
