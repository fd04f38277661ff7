// Cluster topologies: building one, and loading the Philly and PAI machine lists.
#include "gandiva/scheduler/topology.h"

#include <algorithm>
#include <functional>
#include <map>

#include "cluster/csv.h"

namespace gandiva::sched {
namespace {

// Rank used to decide which GPU types are "high-end": table class first, then memory.
int ClassRank(const std::string& c) { return c == "v100" ? 3 : c == "p100" ? 2 : 1; }

void MarkHighEnd(std::vector<GpuType>* types) {
  int best_rank = 0, worst_rank = 4;
  for (const auto& t : *types) {
    best_rank = std::max(best_rank, ClassRank(t.perf_class));
    worst_rank = std::min(worst_rank, ClassRank(t.perf_class));
  }
  double best_mem = 0;
  for (const auto& t : *types)
    if (ClassRank(t.perf_class) == best_rank) best_mem = std::max(best_mem, t.mem_gb);
  // Different classes: the best class is high-end; one class: the most memory is.
  for (auto& t : *types)
    t.high_end =
        ClassRank(t.perf_class) == best_rank && (best_rank != worst_rank || t.mem_gb == best_mem);
  // A single-type cluster has no tier to reserve.
  if (types->size() == 1) (*types)[0].high_end = false;
}

// One row of a machine list: a machine and its GPUs (none: the row is skipped).
// GPU types are told apart by name; a type's first row describes it.
struct MachineRow {
  std::string machine;
  GpuType type;
  int gpus = 0;
};

// Reads a CSV machine list (`what` names it in errors), one row at a time
// through parse, into a topology. Blank lines are skipped before parse sees them.
StatusOr<Topology> LoadMachineList(
    const std::string& path, const std::string& what,
    const std::function<StatusOr<MachineRow>(int line_no, const std::vector<std::string>& fields)>&
        parse) {
  std::string text;
  if (!csv::ReadFile(path, &text)) return NotFound("cannot open " + what + " " + path);
  std::vector<GpuType> types;
  std::map<std::string, int> type_index;
  std::vector<Machine> machines;
  std::vector<std::string> f;
  csv::Lines lines(text);
  for (std::string_view line; lines.Next(&line);) {
    const int line_no = lines.number();
    if (csv::Trim(line).empty()) continue;
    csv::Split(line, &f);
    GD_ASSIGN_OR_RETURN(MachineRow row, parse(line_no, f));
    if (row.gpus == 0) continue;
    auto it = type_index.find(row.type.name);
    if (it == type_index.end()) {
      it = type_index.emplace(row.type.name, static_cast<int>(types.size())).first;
      types.push_back(std::move(row.type));
    }
    machines.push_back({row.machine, it->second, 0, row.gpus});
  }
  if (machines.empty()) return InvalidArgument(path + ": no machines with GPUs");
  MarkHighEnd(&types);
  return Topology::Build(std::move(types), std::move(machines));
}

}  // namespace

Topology Topology::Build(std::vector<GpuType> types, std::vector<Machine> machines) {
  Topology t;
  t.types_ = std::move(types);
  t.machines_ = std::move(machines);
  GpuId next = 0;
  for (size_t m = 0; m < t.machines_.size(); ++m) {
    auto& mc = t.machines_[m];
    mc.first_gpu = next;
    for (int i = 0; i < mc.num_gpus; ++i) t.gpu_machine_.push_back(static_cast<int>(m));
    next += mc.num_gpus;
    t.max_per_machine_ = std::max(t.max_per_machine_, mc.num_gpus);
  }
  return t;
}

Topology Topology::Uniform(int machines, int gpus_per_machine) {
  std::vector<Machine> ms;
  for (int i = 0; i < machines; ++i)
    ms.push_back({"m" + std::to_string(i), 0, 0, gpus_per_machine});
  return Build({{"gpu", "p100", 16, false}}, std::move(ms));
}

StatusOr<Topology> LoadPhillyMachines(const std::string& path) {
  return LoadMachineList(
      path, "machine list",
      [&](int line_no, const std::vector<std::string>& f) -> StatusOr<MachineRow> {
        MachineRow row;
        if (line_no == 1) return row;  // header
        long gpus = 0;
        if (f.size() < 3 || !csv::ParseInt(f[1], &gpus) || gpus < 0 || gpus > 64)
          return InvalidArgument(path + ":" + std::to_string(line_no) +
                                 ": expected machineId,GPUs,memory");
        if (gpus == 0) return row;
        const std::string& mem = f[2];
        double mem_gb = 0;
        std::string digits = mem.substr(0, mem.find_first_not_of("0123456789."));
        if (!csv::ParseDouble(digits, &mem_gb))
          return InvalidArgument(path + ":" + std::to_string(line_no) + ": bad GPU memory '" + mem +
                                 "'");
        // Philly's 12 GB and 24 GB GPUs are both of the P100/P40 generation.
        row = {f[0], {mem, "p100", mem_gb, false}, static_cast<int>(gpus)};
        return row;
      });
}

StatusOr<Topology> LoadPaiMachines(const std::string& path) {
  // PAI GPU models mapped to the nearest co-location table class.
  static const std::map<std::string, std::pair<std::string, double>> kClass = {
      {"V100", {"v100", 16}},
      {"V100M32", {"v100", 32}},
      {"P100", {"p100", 16}},
      {"T4", {"p100", 16}},
      {"MISC", {"k80", 12}}};
  return LoadMachineList(
      path, "machine spec",
      [&](int line_no, const std::vector<std::string>& f) -> StatusOr<MachineRow> {
        MachineRow row;
        long gpus = 0;
        double dgpus = 0;
        if (f.size() < 5 ||
            !(csv::ParseInt(f[4], &gpus) ||
              (csv::ParseDouble(f[4], &dgpus) && (gpus = long(dgpus), true))) ||
            gpus < 0 || gpus > 64)
          return InvalidArgument(path + ":" + std::to_string(line_no) +
                                 ": expected machine,gpu_type,cpu,mem,gpus");
        if (gpus == 0 || f[1] == "CPU") return row;
        auto c = kClass.find(f[1]);
        auto cls = c == kClass.end() ? std::pair<std::string, double>{"k80", 12} : c->second;
        row = {f[0], {f[1], cls.first, cls.second, false}, static_cast<int>(gpus)};
        return row;
      });
}

}  // namespace gandiva::sched
