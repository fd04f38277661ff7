#include "gandiva/cdi/cdi_spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace gandiva::cdi {

using nlohmann::json;

namespace {

// The GPU's index ("gpu3" -> "3"), or "" for a device that is not "gpu<digits>".
std::string GpuIndex(const std::string& device) {
  if (device.size() <= 3 || device.compare(0, 3, "gpu") != 0) return "";
  for (size_t i = 3; i < device.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(device[i]))) return "";
  return device.substr(3);
}

// CDI's rule for a device name: alphanumerics, '-', '_', '.', beginning and
// ending with an alphanumeric.
bool ValidDeviceName(const std::string& name) {
  if (name.empty()) return false;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  for (char c : name)
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

// A device node as CDI describes it, from the node on the host (type and
// numbers read off it, so a runtime need not look them up).
StatusOr<json> DeviceNode(const std::string& host_path, const std::string& container_path) {
  struct stat st {};
  if (stat(host_path.c_str(), &st) != 0) return NotFound(host_path + ": " + std::strerror(errno));
  if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
    return InvalidArgument(host_path + " is not a device node");
  return json{{"path", container_path},
              {"hostPath", host_path},
              {"type", S_ISCHR(st.st_mode) ? "c" : "b"},
              {"major", major(st.st_rdev)},
              {"minor", minor(st.st_rdev)}};
}

json BindMount(const std::string& host, const std::string& container, bool read_only) {
  return json{{"hostPath", host},
              {"containerPath", container},
              {"type", "bind"},
              {"options", {"rbind", read_only ? "ro" : "rw", "nosuid", "nodev"}}};
}

// The edits one device brings: its name in GANDIVA_DEVICES, and on a GPU the
// shim and the device nodes (the GPU's own and the driver's shared ones).
StatusOr<json> DeviceEdits(const std::vector<NodeDevice>& devices, const HostPaths& host) {
  std::string names;
  bool any_gpu = false;
  json nodes = json::array();
  for (const NodeDevice& d : devices) {
    names += (names.empty() ? "" : ",") + d.name;
    if (!d.gpu) continue;
    any_gpu = true;
    const std::string index = GpuIndex(d.name);
    if (index.empty()) return InvalidArgument("GPU device '" + d.name + "' is not named gpu<N>");
    auto node = DeviceNode(host.dev_dir + "/nvidia" + index, "/dev/nvidia" + index);
    if (!node.ok())
      return NotFound(
          d.name + ": no device node (is the NVIDIA driver loaded?): " + node.status().message());
    nodes.push_back(*node);
  }
  json edits = {{"env", {std::string("GANDIVA_DEVICES=") + names}}};
  if (!any_gpu) return edits;
  // The driver's shared nodes, where this node has them (nvidia-uvm appears
  // once something loaded the module).
  for (const char* shared : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
    auto node = DeviceNode(host.dev_dir + "/" + shared, std::string("/dev/") + shared);
    if (node.ok()) nodes.push_back(*node);
  }
  edits["deviceNodes"] = nodes;
  if (!host.shim.empty()) {
    edits["env"].push_back(std::string("LD_PRELOAD=") + kContainerShim);
    edits["mounts"] = {BindMount(host.shim, kContainerShim, true)};
  }
  return edits;
}

Status CheckAbsolute(const char* what, const std::string& path, bool may_be_empty) {
  if (path.empty() && may_be_empty) return Status::Ok();
  if (path.empty() || path.front() != '/')
    return InvalidArgument(std::string(what) + " must be an absolute path, not '" + path + "'");
  return Status::Ok();
}

}  // namespace

std::string CdiDeviceName(const std::string& device) {
  const std::string index = GpuIndex(device);
  return index.empty() ? device : index;
}

std::string QualifiedName(const std::string& device) {
  return std::string(kKind) + "=" + CdiDeviceName(device);
}

StatusOr<json> BuildSpec(const std::vector<NodeDevice>& devices, const HostPaths& host) {
  if (devices.empty()) return InvalidArgument("no devices: a CDI spec needs at least one");
  GD_RETURN_IF_ERROR(CheckAbsolute("the socket directory", host.socket_dir, false));
  GD_RETURN_IF_ERROR(CheckAbsolute("the Python package", host.python_package, false));
  GD_RETURN_IF_ERROR(CheckAbsolute("the shim", host.shim, true));
  GD_RETURN_IF_ERROR(CheckAbsolute("the blocks directory", host.blocks_dir, true));
  GD_RETURN_IF_ERROR(CheckAbsolute("the gandiva tool", host.cli, true));
  if (host.socket_name.empty() || host.socket_name.find('/') != std::string::npos)
    return InvalidArgument("the socket's name must be a file name, not '" + host.socket_name + "'");
  json spec_devices = json::array();
  for (const NodeDevice& d : devices) {
    const std::string name = CdiDeviceName(d.name);
    if (!ValidDeviceName(name) || name == kAllDevices)
      return InvalidArgument("device '" + d.name + "' has no valid CDI name");
    GD_ASSIGN_OR_RETURN(json edits, DeviceEdits({d}, host));
    spec_devices.push_back({{"name", name}, {"containerEdits", edits}});
  }
  GD_ASSIGN_OR_RETURN(json all, DeviceEdits(devices, host));
  spec_devices.push_back({{"name", kAllDevices}, {"containerEdits", all}});

  const std::string python = kContainerPythonDir;
  // What every device brings: gandivad's socket directory and the Python
  // package, with the start-up hook (gandiva/_startup) first on PYTHONPATH.
  json common = {
      {"env",
       {std::string("GANDIVA_ENDPOINT=ipc://") + kContainerSocketDir + "/" + host.socket_name,
        "PYTHONPATH=" + python + "/gandiva/_startup:" + python}},
      {"mounts",
       {BindMount(host.socket_dir, kContainerSocketDir, false),
        BindMount(host.python_package, python + "/gandiva", true)}}};
  if (!host.blocks_dir.empty()) {
    common["env"].push_back(std::string("GANDIVA_BLOCKS_DIR=") + kContainerBlocksDir);
    common["mounts"].push_back(BindMount(host.blocks_dir, kContainerBlocksDir, false));
  }
  if (!host.cli.empty()) common["mounts"].push_back(BindMount(host.cli, kContainerCli, true));
  return json{{"cdiVersion", kCdiVersion},
              {"kind", kKind},
              {"devices", spec_devices},
              {"containerEdits", common}};
}

Status WriteSpecFile(const json& spec, const std::string& path) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable(tmp + ": " + std::strerror(errno));
  const std::string text = spec.dump(2) + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      close(fd);
      unlink(tmp.c_str());
      return Unavailable(tmp + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  fchmod(fd, 0644);  // whatever the umask: runtimes read it as other users
  const bool synced = fsync(fd) == 0;
  if (close(fd) != 0 || !synced || rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    return Unavailable(path + ": " + std::strerror(e));
  }
  return Status::Ok();
}

}  // namespace gandiva::cdi
