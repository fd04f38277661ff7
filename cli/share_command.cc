// `gandiva share DEVICE pack|slice|auto [--capacity N] [--window-ms N]`: how a
// device's jobs share it (set_share_mode; see docs/api.md).
#include <cstdio>

#include "node_client.h"

namespace gandiva::cli {

using protocol::Json;
using protocol::MessageType;

int ShareCommand(const Args& args) {
  NodeCommand c("gandiva share", {"capacity", "window-ms"});
  if (!c.Parse(args)) return kExitUsage;
  const auto& pos = c.flags().positionals();
  if (pos.size() != 2)
    return c.UsageError(
        "usage: gandiva share DEVICE pack|slice|auto [--capacity N] [--window-ms N]");
  if (!protocol::FromString<protocol::ShareMode>(pos[1]))
    return c.UsageError("share mode must be pack, slice or auto, not '" + pos[1] + "'");
  Json fields = {{"device", pos[0]}, {"mode", pos[1]}};
  if (c.flags().Has("capacity")) {
    auto capacity = c.flags().GetInt("capacity", 2);
    if (!capacity.ok()) return c.UsageError(capacity.status().message());
    fields["capacity"] = *capacity;
  }
  if (c.flags().Has("window-ms")) {
    auto window = c.flags().GetInt("window-ms", 3000);
    if (!window.ok()) return c.UsageError(window.status().message());
    fields["window_ms"] = *window;
  }
  auto reply = c.Call(MessageType::kSetShareMode, fields);
  if (!reply) return kExitFailed;
  if (c.json()) std::printf("%s\n", reply->dump().c_str());
  return kExitOk;
}

}  // namespace gandiva::cli
