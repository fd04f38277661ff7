// `gandiva sim --pack-prediction`: how often the pack predictor
// (gandiva/scheduler/pack_prediction.h) is right on the co-location table,
// leaving each job type out in turn, against always trying; prints a table and
// writes JSON.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands.h"
#include "gandiva/common/flags.h"
#include "gandiva/scheduler/pack_prediction.h"
#include "gandiva/scheduler/perf_model.h"

namespace gandiva::cli {
namespace {

constexpr const char* kPackUsage = R"(usage: gandiva sim --pack-prediction [options]
Predicts, for every measured pair of job types in the co-location table,
whether they pack well (their speeds packed, each relative to alone, sum above
1) from their solo profiles only, learning from the pairs of the other types
(leave-one-type-out), and compares with always trying the pack.

  --colocation PATH     the table (default DATA/colocation/gavel_simulation_throughputs.json,
                        DATA from --data-dir or $GANDIVA_DATA_DIR)
  --neighbours K        nearest measured pairs averaged (default 7)
  --json PATH           JSON report (default gandiva_sim_pack.json; '-' for stdout,
                        'none' to skip)
)";

}  // namespace

bool IsPackPrediction(const Args& args) {
  return std::find(args.begin(), args.end(), "--pack-prediction") != args.end();
}

int SimPackCommand(const Args& args) {
  Flags f({"colocation", "data-dir", "neighbours", "json"}, {"pack-prediction", "help"});
  if (Status s = f.Parse(args); !s.ok()) return SimFail(s.message());
  if (f.Has("help")) {
    std::fputs(kPackUsage, stdout);
    return 0;
  }
  if (!f.positionals().empty()) return SimFail("unexpected argument '" + f.positionals()[0] + "'");
  std::string table = f.Get("colocation");
  if (table.empty()) {
    const char* env = std::getenv("GANDIVA_DATA_DIR");
    const std::string data = f.Get("data-dir", env ? env : "");
    if (data.empty())
      return SimFail("no table: pass --colocation PATH, or --data-dir DIR or GANDIVA_DATA_DIR");
    table = data + "/colocation/gavel_simulation_throughputs.json";
  }
  double neighbours = 7;
  if (Status s = FlagNumber(f, "neighbours", &neighbours, 1); !s.ok()) return SimFail(s.message());
  auto model = sched::PerfModel::Load(table);
  if (!model.ok()) return SimFail(model.status().ToString());
  const int k = static_cast<int>(neighbours);
  auto rows = sched::EvaluatePackPrediction(*model, k);
  if (!rows.ok()) return SimFail(rows.status().ToString());
  std::fputs(sched::FormatPackPredictionTable(*rows, k).c_str(), stdout);
  const std::string json_path = f.Get("json", "gandiva_sim_pack.json");
  const std::string json = sched::PackPredictionToJson(*rows, k);
  if (Status s = WriteJsonReport(json, json_path); !s.ok()) return SimFail(s.message());
  return 0;
}

}  // namespace gandiva::cli
