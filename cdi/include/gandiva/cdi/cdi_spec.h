// The Container Device Interface (CDI) spec that brings gandiva into a
// container: one CDI device per device of the node ("gandiva.io/gpu=0" for
// gpu0, "gandiva.io/gpu=cpu0" for a CPU device of a test node) plus "all".
// Requesting one gives the container what a job needs to join the node's
// gandivad: gandivad's socket directory, the `gandiva` Python package with its
// start-up hook first on PYTHONPATH, the environment naming the endpoint and
// the device, and on a GPU the CUDA shim (LD_PRELOAD) and the GPU's device nodes.
// Written by `gandiva cdi generate`; named in Allocate by the Kubernetes device
// plugin (k8s/). docs/kubernetes.md describes the layout inside the container.
#ifndef GANDIVA_CDI_CDI_SPEC_H_
#define GANDIVA_CDI_CDI_SPEC_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::cdi {

inline constexpr const char* kKind = "gandiva.io/gpu";
// The lowest CDI version that has what the spec uses (mount "type" is 0.4.0,
// device names that begin with a digit 0.5.0): runtimes reject a version newer
// than the one they know, and every runtime that knows a newer one reads 0.5.0.
inline constexpr const char* kCdiVersion = "0.5.0";
inline constexpr const char* kAllDevices = "all";

// Where things appear inside the container.
inline constexpr const char* kContainerSocketDir = "/run/gandiva";
inline constexpr const char* kContainerPythonDir = "/opt/gandiva/python";  // holds gandiva/
inline constexpr const char* kContainerShim = "/opt/gandiva/lib/libgandiva_shim.so";
inline constexpr const char* kContainerCli = "/opt/gandiva/bin/gandiva";
// Not under the socket's directory: a mount point inside that bind mount would
// be made in the host's directory.
inline constexpr const char* kContainerBlocksDir = "/run/gandiva-blocks";

// A device of the node, as gandivad names it.
struct NodeDevice {
  std::string name;  // "gpu0", "cpu1"
  bool gpu = false;
};

// What the host holds that the container gets.
struct HostPaths {
  std::string socket_dir;        // the directory of gandivad's local socket (mounted whole,
                                 // so that a gandivad restarted later is reached too)
  std::string socket_name;       // "gandivad.sock"
  std::string python_package;    // the folder `gandiva` of the Python package
  std::string shim;              // libgandiva_shim.so; "" leaves GPU devices without it
  std::string blocks_dir;        // gandivad's directory of control blocks for jobs in
                                 // containers (hello's blocks_dir); "": not mounted
  std::string cli;               // the `gandiva` tool, for `gandiva run` inside; "": not mounted
  std::string dev_dir = "/dev";  // where the GPUs' device nodes are (tests point elsewhere)
};

// "gpu3" -> "3" (the GPU's index), anything else unchanged ("cpu0").
std::string CdiDeviceName(const std::string& device);
// "gandiva.io/gpu=3".
std::string QualifiedName(const std::string& device);

// The spec as JSON. Errors: no devices, a path that is not absolute, a device
// name CDI does not allow, a GPU without its /dev/nvidiaN.
StatusOr<nlohmann::json> BuildSpec(const std::vector<NodeDevice>& devices, const HostPaths& host);

// Writes the spec to `path` as a new file renamed into place (a runtime that
// watches the CDI directory never reads half a spec), mode 0644.
Status WriteSpecFile(const nlohmann::json& spec, const std::string& path);

}  // namespace gandiva::cdi

#endif  // GANDIVA_CDI_CDI_SPEC_H_
