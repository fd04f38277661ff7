// The Alibaba 2023 task and node lists: columns found by name in the header,
// every row checked, the first bad one reported as FILE:LINE: why.
#include "cluster/alibaba_trace.h"

#include <functional>

#include "cluster/csv.h"

namespace gandiva::sched {
namespace {

// Looks columns up by header name; remembers the first one missing.
class HeaderColumns {
 public:
  explicit HeaderColumns(const std::vector<std::string>& header) : header_(header) {}
  int Required(const char* name) {
    for (size_t i = 0; i < header_.size(); ++i)
      if (header_[i] == name) return static_cast<int>(i);
    if (missing_.empty()) missing_ = name;
    return -1;
  }
  int Optional(const char* name) {
    for (size_t i = 0; i < header_.size(); ++i)
      if (header_[i] == name) return static_cast<int>(i);
    return -1;
  }
  const std::string& missing() const { return missing_; }

 private:
  const std::vector<std::string>& header_;
  std::string missing_;
};

// A whole number in [min, max] from field `f`, or why not.
std::string ParseBounded(const std::string& f, const char* what, long min, long max, long* out) {
  if (!csv::ParseInt(f, out) || *out < min || *out > max)
    return std::string(what) + " must be an integer in [" + std::to_string(min) + ", " +
           std::to_string(max) + "], got '" + f + "'";
  return "";
}

// Runs `row` (which returns why a row is bad, or "") over every data line after
// the header; `header` gets the header's fields first and returns why it is bad.
Status ForEachRow(const std::string& text, const std::string& name,
                  const std::function<std::string(const std::vector<std::string>&)>& header,
                  const std::function<std::string(const std::vector<std::string>&)>& row) {
  auto where = [&](int line) { return name + ":" + std::to_string(line) + ": "; };
  std::vector<std::string> fields;
  size_t columns = 0;
  bool have_header = false;
  csv::Lines lines(text);
  for (std::string_view line; lines.Next(&line);) {
    std::string_view t = csv::Trim(line);
    if (t.empty() || t[0] == '#') continue;
    csv::Split(line, &fields);
    std::string why;
    if (!have_header) {
      have_header = true;
      columns = fields.size();
      why = header(fields);
    } else if (fields.size() != columns) {
      why = "expected " + std::to_string(columns) + " fields, got " + std::to_string(fields.size());
    } else {
      why = row(fields);
    }
    if (!why.empty()) return InvalidArgument(where(lines.number()) + why);
  }
  if (!have_header) return InvalidArgument(name + ": empty file, no header line");
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<AlibabaTask>> ParseAlibabaTasks(const std::string& text,
                                                     const std::string& name) {
  std::vector<AlibabaTask> tasks;
  int c_name = -1, c_cpu = -1, c_mem = -1, c_gpus = -1, c_milli = -1, c_spec = -1, c_created = -1,
      c_deleted = -1;
  auto header = [&](const std::vector<std::string>& h) -> std::string {
    HeaderColumns cols(h);
    c_name = cols.Required("name");
    c_cpu = cols.Required("cpu_milli");
    c_mem = cols.Required("memory_mib");
    c_gpus = cols.Required("num_gpu");
    c_milli = cols.Required("gpu_milli");
    c_created = cols.Required("creation_time");
    c_spec = cols.Optional("gpu_spec");
    c_deleted = cols.Optional("deletion_time");
    if (!cols.missing().empty()) return "the header has no '" + cols.missing() + "' column";
    return "";
  };
  auto row = [&](const std::vector<std::string>& f) -> std::string {
    AlibabaTask t;
    long gpus = 0, milli = 0;
    t.name = f[c_name];
    if (auto why = ParseBounded(f[c_cpu], "cpu_milli", 0, 1L << 40, &t.cpu_milli); !why.empty())
      return why;
    if (auto why = ParseBounded(f[c_mem], "memory_mib", 0, 1L << 40, &t.memory_mib); !why.empty())
      return why;
    if (auto why = ParseBounded(f[c_gpus], "num_gpu", 0, 1024, &gpus); !why.empty()) return why;
    if (auto why = ParseBounded(f[c_milli], "gpu_milli", 0, 1000, &milli); !why.empty()) return why;
    if (gpus == 0 && milli != 0) return "gpu_milli " + f[c_milli] + " without a GPU (num_gpu 0)";
    if (gpus > 0 && milli == 0) return "num_gpu " + f[c_gpus] + " with gpu_milli 0";
    if (gpus > 1 && milli != 1000)
      return "a share of a GPU (gpu_milli " + f[c_milli] + ") must ask for one GPU, not " +
             f[c_gpus];
    t.num_gpu = static_cast<int>(gpus);
    t.gpu_milli = static_cast<int>(milli);
    if (!csv::ParseDouble(f[c_created], &t.creation_time) || t.creation_time < 0)
      return "creation_time must be a number >= 0, got '" + f[c_created] + "'";
    if (c_deleted >= 0 && !f[c_deleted].empty() &&
        !csv::ParseDouble(f[c_deleted], &t.deletion_time))
      return "deletion_time must be a number, got '" + f[c_deleted] + "'";
    if (c_spec >= 0) t.gpu_spec = f[c_spec];
    tasks.push_back(std::move(t));
    return "";
  };
  GD_RETURN_IF_ERROR(ForEachRow(text, name, header, row));
  return tasks;
}

StatusOr<std::vector<AlibabaNode>> ParseAlibabaNodes(const std::string& text,
                                                     const std::string& name) {
  std::vector<AlibabaNode> nodes;
  int c_name = -1, c_cpu = -1, c_mem = -1, c_gpus = -1, c_model = -1;
  auto header = [&](const std::vector<std::string>& h) -> std::string {
    HeaderColumns cols(h);
    c_name = cols.Required("sn");
    c_cpu = cols.Required("cpu_milli");
    c_mem = cols.Required("memory_mib");
    c_gpus = cols.Required("gpu");
    c_model = cols.Optional("model");
    if (!cols.missing().empty()) return "the header has no '" + cols.missing() + "' column";
    return "";
  };
  auto row = [&](const std::vector<std::string>& f) -> std::string {
    AlibabaNode n;
    long gpus = 0;
    n.name = f[c_name];
    if (auto why = ParseBounded(f[c_cpu], "cpu_milli", 0, 1L << 40, &n.cpu_milli); !why.empty())
      return why;
    if (auto why = ParseBounded(f[c_mem], "memory_mib", 0, 1L << 40, &n.memory_mib); !why.empty())
      return why;
    if (auto why = ParseBounded(f[c_gpus], "gpu", 0, 64, &gpus); !why.empty()) return why;
    n.gpus = static_cast<int>(gpus);
    if (c_model >= 0) n.model = f[c_model];
    nodes.push_back(std::move(n));
    return "";
  };
  GD_RETURN_IF_ERROR(ForEachRow(text, name, header, row));
  return nodes;
}

StatusOr<std::vector<AlibabaTask>> ReadAlibabaTasks(const std::string& path) {
  std::string text;
  if (!csv::ReadFile(path, &text)) return NotFound("cannot open task list " + path);
  return ParseAlibabaTasks(text, path);
}

StatusOr<std::vector<AlibabaNode>> ReadAlibabaNodes(const std::string& path) {
  std::string text;
  if (!csv::ReadFile(path, &text)) return NotFound("cannot open node list " + path);
  return ParseAlibabaNodes(text, path);
}

}  // namespace gandiva::sched
