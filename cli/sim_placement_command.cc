// `gandiva sim --alibaba DIR --placement first-fit,best-fit,fgd`: the
// fragmentation experiment on the Alibaba 2023 GPU-sharing trace (placement
// only, no time); prints a table and writes JSON.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands.h"
#include "gandiva/common/flags.h"
#include "gandiva/scheduler/fractional_experiment.h"

namespace gandiva::cli {
namespace {

constexpr const char* kPlacementUsage =
    R"(usage: gandiva sim --alibaba DIR --placement P1,P2,... [options]
Places the tasks of the Alibaba 2023 GPU-sharing trace on its GPU nodes, one
after another with none finishing, under each placement policy, and reports
the GPU capacity allocated when the first task cannot be placed, the unplaced
GPU demand and the fragmented GPU capacity (docs/simulator.md).

  --alibaba DIR         folder with openb_pod_list_default.csv and
                        openb_node_list_gpu_node.csv (default DATA/alibaba,
                        DATA from --data-dir or $GANDIVA_DATA_DIR)
  --placement P,...     first-fit|best-fit|fgd (default all three)
  --order O             random (shuffled, one run per seed) | trace (creation
                        order, one run) (default random)
  --seeds S,...         seeds of the shuffles (default 1,2,3,4,5)
  --inflate X           draw the trace again until the GPU demand is X times
                        the trace's (default 1; random order only)
  --mix M               FGD's task distribution: trace (all GPU tasks of the
                        trace) | seen (those arrived so far) (default trace)
  --json PATH           JSON report (default gandiva_sim_placement.json; '-' for
                        stdout, 'none' to skip)
  --threads N           runs in parallel (default 2)
)";

Status ParseSeeds(const std::string& list, std::vector<int>* seeds) {
  seeds->clear();
  for (const auto& s : SplitList(list)) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || v < 0 || v > 1000000000)
      return InvalidArgument("--seeds: '" + s + "' is not a seed (an integer >= 0)");
    seeds->push_back(static_cast<int>(v));
  }
  return seeds->empty() ? InvalidArgument("--seeds: no seed given") : Status::Ok();
}

Status ParseArgs(const Args& args, sched::FractionalOptions* o, std::string* json_path) {
  Flags f(
      {"alibaba", "data-dir", "placement", "order", "seeds", "inflate", "mix", "json", "threads"},
      {});
  GD_RETURN_IF_ERROR(f.Parse(args));
  if (!f.positionals().empty())
    return InvalidArgument("unexpected argument '" + f.positionals()[0] +
                           "' (see gandiva sim --placement --help)");
  std::string dir = f.Get("alibaba");
  if (dir.empty()) {
    const char* env = std::getenv("GANDIVA_DATA_DIR");
    const std::string data = f.Get("data-dir", env ? env : "");
    if (data.empty())
      return InvalidArgument(
          "no trace: pass --alibaba DIR (the folder of openb_pod_list_default.csv), or "
          "--data-dir DIR or GANDIVA_DATA_DIR with an alibaba/ folder");
    dir = data + "/alibaba";
  }
  o->tasks_path = dir + "/openb_pod_list_default.csv";
  o->nodes_path = dir + "/openb_node_list_gpu_node.csv";
  if (f.Has("placement")) o->policies = SplitList(f.Get("placement"));
  o->order = f.Get("order", o->order);
  if (f.Has("seeds")) GD_RETURN_IF_ERROR(ParseSeeds(f.Get("seeds"), &o->seeds));
  GD_RETURN_IF_ERROR(FlagNumber(f, "inflate", &o->inflate, 1));
  o->mix = f.Get("mix", o->mix);
  GD_RETURN_IF_ERROR(FlagCount(f, "threads", &o->threads, 1));
  *json_path = f.Get("json", *json_path);
  return Status::Ok();
}

}  // namespace

bool IsPlacementExperiment(const Args& args) {
  for (const auto& a : args)
    if (a == "--alibaba" || a == "--placement" || a.rfind("--alibaba=", 0) == 0 ||
        a.rfind("--placement=", 0) == 0)
      return true;
  return false;
}

int SimPlacementCommand(const Args& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::fputs(kPlacementUsage, stdout);
      return 0;
    }
  sched::FractionalOptions o;
  std::string json_path = "gandiva_sim_placement.json";
  if (Status s = ParseArgs(args, &o, &json_path); !s.ok()) return SimFail(s.message());
  auto report = sched::RunFractionalExperiment(o);
  if (!report.ok()) return SimFail(report.status().ToString());
  std::fputs(sched::FormatFractionalTable(*report).c_str(), stdout);
  const std::string json = sched::FractionalReportToJson(*report);
  if (Status s = WriteJsonReport(json, json_path); !s.ok()) return SimFail(s.message());
  return 0;
}

}  // namespace gandiva::cli
