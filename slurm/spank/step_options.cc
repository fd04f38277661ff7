// See step_options.h.
#include "step_options.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "gandiva/contract/checkpoint_layout.h"
#include "gandiva/contract/environment.h"

namespace gandiva::slurm {

namespace fs = std::filesystem;

namespace {
constexpr double kMaxWeight = 16;  // gandivad's limit (register_job's weight)

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The local time of a file's last write, "2026-11-23 20:15:02", or "".
std::string WrittenAt(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return "";
  std::tm tm{};
  localtime_r(&st.st_mtime, &tm);
  char text[64];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

// Removes what saves killed part-way left (".state.gdck.tmp.<pid>"); how many.
int RemoveIncompleteSaves(const fs::path& dir) {
  const std::string prefix = std::string(".") + checkpoint::kCheckpointFileName + ".tmp.";
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!StartsWith(it->path().filename().string(), prefix)) continue;
    std::error_code rm;
    if (fs::remove(it->path(), rm)) ++removed;
  }
  return removed;
}
}  // namespace

StatusOr<PluginArgs> ParsePluginArgs(const std::vector<std::string>& args) {
  PluginArgs out;
  for (const std::string& a : args) {
    if (StartsWith(a, "endpoint=")) {
      out.endpoint = a.substr(9);
      if (!StartsWith(out.endpoint, "ipc://") && !StartsWith(out.endpoint, "tcp://"))
        return InvalidArgument("endpoint=" + out.endpoint + ": not an ipc:// or tcp:// endpoint");
    } else if (StartsWith(a, "shim=")) {
      out.shim = a.substr(5);
    } else if (StartsWith(a, "timeout_ms=")) {
      const std::string v = a.substr(11);
      int ms = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), ms);
      if (ec != std::errc() || end != v.data() + v.size() || ms <= 0 || ms > 60000)
        return InvalidArgument("timeout_ms=" + v + ": not a number of milliseconds in 1..60000");
      out.timeout_ms = ms;
    } else {
      return InvalidArgument("unknown argument '" + a +
                             "' (known: endpoint=URL, shim=PATH, timeout_ms=N)");
    }
  }
  return out;
}

StatusOr<std::optional<double>> ParseWeight(const char* text) {
  // "(null)": see the header; an srun in a `sbatch --gandiva` job would fail else.
  if (!text || !*text || std::strcmp(text, "(null)") == 0) return std::optional<double>();
  char* end = nullptr;
  const double w = std::strtod(text, &end);
  if (*end != '\0' || !std::isfinite(w) || w <= 0 || w > kMaxWeight)
    return InvalidArgument(std::string("invalid weight '") + text +
                           "': a number greater than 0 and at most 16 (the step's share of its "
                           "device against the others there)");
  return std::optional<double>(w);
}

double StepWeight(std::optional<double> given, const char* shards_on_node) {
  if (given) return *given;
  if (shards_on_node && *shards_on_node) {
    char* end = nullptr;
    const long shards = std::strtol(shards_on_node, &end, 10);
    if (*end == '\0' && shards > 0)
      return std::min<double>(static_cast<double>(shards), kMaxWeight);
  }
  return 1;
}

Status CheckCheckpointDir(const std::string& dir) {
  if (dir.empty() || dir[0] != '/')
    return InvalidArgument("checkpoint directory '" + dir +
                           "' is not an absolute path (the job may start again on another node)");
  std::error_code ec;
  fs::path p(dir);
  if (fs::exists(p, ec)) {
    if (!fs::is_directory(p, ec)) return InvalidArgument(dir + " exists and is not a directory");
    if (access(p.c_str(), W_OK | X_OK) != 0)
      return PermissionDenied(dir + " is not writable by this user");
    return Status::Ok();
  }
  // It will be created: its nearest existing ancestor must let us.
  for (fs::path up = p.parent_path(); !up.empty(); up = up.parent_path()) {
    if (!fs::exists(up, ec)) {
      if (up == up.parent_path()) break;
      continue;
    }
    if (!fs::is_directory(up, ec) || access(up.c_str(), W_OK | X_OK) != 0)
      return PermissionDenied(dir + " does not exist and cannot be created: " + up.string() +
                              " is not writable by this user");
    return Status::Ok();
  }
  return InvalidArgument(dir + ": no existing parent directory");
}

std::string ExpandNodeName(const std::string& endpoint, const std::string& node) {
  std::string out;
  for (size_t i = 0; i < endpoint.size(); ++i) {
    if (endpoint[i] == '%' && i + 1 < endpoint.size()) {
      if (endpoint[i + 1] == 'n') {
        out += node;
        ++i;
        continue;
      }
      if (endpoint[i + 1] == '%') {
        out += '%';
        ++i;
        continue;
      }
    }
    out += endpoint[i];
  }
  return out;
}

std::optional<std::string> DeviceOfSlurmGpus(const char* gpus) {
  if (!gpus || !*gpus) return std::nullopt;
  const std::string text(gpus);
  const std::string first = text.substr(0, text.find(','));
  if (first.empty() || !std::all_of(first.begin(), first.end(), ::isdigit)) return std::nullopt;
  return "gpu" + first;
}

RestorePlan PlanRestore(const std::string& dir, unsigned restart_count) {
  RestorePlan plan;
  const fs::path root(dir);
  const fs::path file = root / checkpoint::kCheckpointFileName;
  const int incomplete = RemoveIncompleteSaves(root);
  const std::string killed =
      incomplete ? "; the last run was killed before its save on SIGTERM completed (grace time "
                   "too short?)"
                 : "";
  if (checkpoint::CheckRestoreDir(dir, 1).ok()) {
    plan.restore = true;
    plan.message = "gandiva: restoring from " + file.string() + ", saved " + WrittenAt(file) +
                   (incomplete ? killed + ", so this is the checkpoint before it" : "");
  } else if (restart_count > 0 || incomplete) {
    plan.message = "gandiva: no checkpoint in " + dir + " to restore from" + killed +
                   ": starting from the beginning";
  }
  return plan;
}

}  // namespace gandiva::slurm
