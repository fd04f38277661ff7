// `gandiva cdi generate`: writes the Container Device Interface spec that
// brings gandiva into containers (gandiva/cdi/cdi_spec.h): the devices are
// gandivad's (list_devices) or named with --devices; the socket is the
// endpoint's; the Python package and the shim are this installation's.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "gandiva/cdi/cdi_spec.h"
#include "gandiva/contract/python_startup.h"
#include "node_client.h"

namespace gandiva::cli {

namespace {

constexpr const char* kUsage =
    "usage: gandiva cdi generate [--output FILE] [--devices gpu0,gpu1] [--endpoint ipc://PATH]\n"
    "                            [--python-package DIR] [--shim PATH] [--blocks-dir DIR]\n"
    "                            [--dev-dir DIR]\n"
    "  writes the CDI spec of kind gandiva.io/gpu (one device per node device, and 'all')\n"
    "  to FILE (written whole, then renamed into place; default: stdout), e.g.\n"
    "  /var/run/cdi/gandiva.json. Without --devices it asks gandivad for its devices.\n";

// The shim as `gandiva run` finds it: $GANDIVA_SHIM, the build tree's, the
// installed one beside this tool (<prefix>/lib); "" when there is none (a
// build without CUDA).
std::string LocateShim() {
  if (const char* s = std::getenv("GANDIVA_SHIM"); s && *s) return s;
#ifdef GANDIVA_BUILD_SHIM_PATH
  if (std::filesystem::exists(GANDIVA_BUILD_SHIM_PATH)) return GANDIVA_BUILD_SHIM_PATH;
#endif
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto installed = exe.parent_path().parent_path() / "lib" / "libgandiva_shim.so";
  if (!ec && std::filesystem::exists(installed, ec)) return installed.string();
  return "";
}

// The devices named by --devices ("gpu<N>" are GPUs), or gandivad's.
std::optional<std::vector<cdi::NodeDevice>> Devices(NodeCommand& c) {
  std::vector<cdi::NodeDevice> devices;
  if (c.flags().Has("devices")) {
    for (const std::string& name : SplitList(c.flags().Get("devices")))
      devices.push_back({name, cdi::CdiDeviceName(name) != name});
    return devices;
  }
  auto reply = c.Call(protocol::MessageType::kListDevices);
  if (!reply) return std::nullopt;
  for (const protocol::Json& d : (*reply)["devices"])
    devices.push_back({d["name"].get<std::string>(), protocol::EnumFromJson<protocol::DeviceKind>(
                                                         d["kind"]) == protocol::DeviceKind::kGpu});
  return devices;
}

}  // namespace

int CdiCommand(const Args& args) {
  if (args.empty() || args[0] != "generate") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.size() == 1 && (args[0] == "--help" || args[0] == "-h") ? kExitOk : kExitUsage;
  }
  NodeCommand c("gandiva cdi generate",
                {"output", "devices", "python-package", "shim", "blocks-dir", "dev-dir"});
  if (!c.Parse(Args(args.begin() + 1, args.end()))) return kExitUsage;
  if (!c.flags().positionals().empty()) return c.UsageError("unexpected argument; see --help");

  const std::string endpoint = c.client().endpoint();
  if (endpoint.rfind("ipc:///", 0) != 0)
    return c.UsageError("the spec needs gandivad's local ipc:// endpoint, not " + endpoint);
  const std::filesystem::path socket(endpoint.substr(6));
  cdi::HostPaths host;
  host.socket_dir = socket.parent_path().string();
  host.socket_name = socket.filename().string();
  host.python_package = c.flags().Get("python-package");
  if (host.python_package.empty()) {
    const std::string hook = runtime::FindStartupHookDirFromExecutable();  // <package>/_startup
    if (hook.empty())
      return c.UsageError("the gandiva Python package is not found: name it with --python-package");
    host.python_package = std::filesystem::path(hook).parent_path().string();
  }
  host.shim = c.flags().Has("shim") ? c.flags().Get("shim") : LocateShim();
  host.dev_dir = c.flags().Get("dev-dir", "/dev");
  std::error_code ec;
  host.cli = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) host.cli.clear();
  // Where gandivad keeps the control blocks of jobs in containers (a gandivad
  // with a state directory says so in hello), unless named.
  host.blocks_dir = c.flags().Get("blocks-dir");
  if (!c.flags().Has("blocks-dir") && !c.flags().Has("devices")) {
    auto hello = c.Call(protocol::MessageType::kHello);
    if (!hello) return kExitFailed;
    host.blocks_dir = hello->value("blocks_dir", "");
  }

  auto devices = Devices(c);
  if (!devices) return kExitFailed;
  auto spec = cdi::BuildSpec(*devices, host);
  if (!spec.ok()) {
    std::fprintf(stderr, "gandiva cdi generate: %s\n", spec.status().message().c_str());
    return kExitFailed;
  }
  const std::string output = c.flags().Get("output", "-");
  if (output == "-") {
    std::printf("%s\n", spec->dump(2).c_str());
    return kExitOk;
  }
  if (Status s = cdi::WriteSpecFile(*spec, output); !s.ok()) {
    std::fprintf(stderr, "gandiva cdi generate: %s\n", s.message().c_str());
    return kExitFailed;
  }
  std::fprintf(stderr, "wrote %s (%zu devices and 'all')\n", output.c_str(), devices->size());
  return kExitOk;
}

}  // namespace gandiva::cli
