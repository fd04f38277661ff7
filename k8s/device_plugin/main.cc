// gandiva-k8s-device-plugin: kubelet's device plugin for gandiva (API v1beta1,
// gRPC over Unix sockets). Offers each device of the node's gandivad as
// --shares shares of the resource gandiva.io/gpu, registers with kubelet,
// follows gandivad and the health marks (node_view.h), and answers Allocate
// with the CDI device that `gandiva cdi generate` wrote (docs/kubernetes.md).
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "gandiva/common/flags.h"
#include "gandiva/common/log.h"
#include "node_view.h"
#include "plugin_service.h"

namespace {

using namespace gandiva;
using namespace gandiva::k8s;

constexpr const char* kUsage = R"(usage: gandiva-k8s-device-plugin [flags]
  --kubelet-dir DIR     kubelet's device-plugin directory (/var/lib/kubelet/device-plugins):
                        its kubelet.sock, and this plugin's socket beside it
  --socket-name NAME    this plugin's socket in DIR (gandiva.sock)
  --resource NAME       the extended resource (gandiva.io/gpu)
  --shares N            shares offered per device (4)
  --endpoint EP         gandivad's endpoint (default $GANDIVA_ENDPOINT or the local socket)
  --health-dir DIR      a file DIR/<device> marks that device unhealthy (its text the reason)
  --poll-ms MS          how often gandivad and DIR are read (1000)
  --nvidia-cdi          also name NVIDIA's CDI device of a GPU (nvidia.com/gpu=N) in Allocate
)";

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

struct Config {
  std::string kubelet_dir = "/var/lib/kubelet/device-plugins";
  std::string socket_name = "gandiva.sock";
  std::string resource = "gandiva.io/gpu";
  std::string endpoint;
  std::string health_dir;
  int poll_ms = 1000;
  PluginOptions plugin;
};

// Tells kubelet where this plugin listens; kubelet then connects to it.
Status Register(const Config& c) {
  auto channel = grpc::CreateChannel("unix://" + c.kubelet_dir + "/kubelet.sock",
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest req;
  req.set_version("v1beta1");
  req.set_endpoint(c.socket_name);
  req.set_resource_name(c.resource);
  req.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  const grpc::Status s = stub->Register(&ctx, req, &reply);
  if (!s.ok()) return Unavailable("kubelet refused or did not answer: " + s.error_message());
  return Status::Ok();
}

ino_t InodeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// One life of the plugin's server: until a signal, or until kubelet removed
// our socket (kubelet restarted: it clears its directory, and a plugin serves
// and registers again). Returns false on a signal.
bool ServeOnce(const Config& c, ApiClient& gandivad, std::vector<DeviceView>& known) {
  const std::string socket = c.kubelet_dir + "/" + c.socket_name;
  unlink(socket.c_str());  // an earlier run's
  PluginService service(c.plugin);
  known = Advertised(known, ReadNode(gandivad), c.health_dir);
  service.Update(known);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    GD_LOG(kError, "cannot serve on %s", socket.c_str());
    return !g_stop;  // tried again after a pause
  }
  const ino_t ours = InodeOf(socket);
  GD_LOG(kInfo, "serving %s on %s: %zu device(s), %d share(s) each", c.resource.c_str(),
         socket.c_str(), known.size(), c.plugin.shares_per_device);
  bool registered = false;
  unsigned failed_registrations = 0;
  auto next_poll = std::chrono::steady_clock::now();
  while (!g_stop) {
    if (std::chrono::steady_clock::now() >= next_poll) {
      next_poll += std::chrono::milliseconds(c.poll_ms);
      if (InodeOf(socket) != ours) {
        GD_LOG(kInfo, "%s was removed (kubelet restarted?): serving again", socket.c_str());
        break;
      }
      if (!registered) {
        if (Status s = Register(c); s.ok()) {
          registered = true;
          GD_LOG(kInfo, "registered %s with kubelet", c.resource.c_str());
        } else if (failed_registrations++ % 30 == 0) {  // the first, then every 30th
          GD_LOG(kWarn, "%s (trying again every %d ms)", s.message().c_str(), c.poll_ms);
        }
      }
      known = Advertised(known, ReadNode(gandivad), c.health_dir);
      service.Update(known);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  service.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (g_stop) unlink(socket.c_str());
  return !g_stop;
}

}  // namespace

int main(int argc, char** argv) {
  log::SetTag("gandiva-k8s-device-plugin");
  Flags flags(
      {"kubelet-dir", "socket-name", "resource", "shares", "endpoint", "health-dir", "poll-ms"},
      {"nvidia-cdi", "help"});
  Config c;
  Status parsed = flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (parsed.ok() && flags.Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (parsed.ok()) parsed = FlagCount(flags, "shares", &c.plugin.shares_per_device, 1);
  if (parsed.ok()) parsed = FlagCount(flags, "poll-ms", &c.poll_ms, 10);
  if (parsed.ok() && !flags.positionals().empty()) parsed = InvalidArgument("unexpected argument");
  if (!parsed.ok()) {
    std::fprintf(stderr, "gandiva-k8s-device-plugin: %s\n%s", parsed.message().c_str(), kUsage);
    return 2;
  }
  c.kubelet_dir = flags.Get("kubelet-dir", c.kubelet_dir);
  c.socket_name = flags.Get("socket-name", c.socket_name);
  c.resource = flags.Get("resource", c.resource);
  c.endpoint = flags.Get("endpoint", DefaultEndpoint());
  c.health_dir = flags.Get("health-dir");
  c.plugin.nvidia_cdi = flags.Has("nvidia-cdi");
  if (c.socket_name.empty() || c.socket_name.find('/') != std::string::npos) {
    std::fprintf(stderr, "gandiva-k8s-device-plugin: --socket-name is a file name\n");
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  ApiClient gandivad(c.endpoint, 2000);
  std::vector<DeviceView> known;
  while (ServeOnce(c, gandivad, known))
    for (int i = 0; i < 50 && !g_stop; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  GD_LOG(kInfo, "stopped");
  return 0;
}
