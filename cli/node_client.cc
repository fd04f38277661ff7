// See node_client.h.
#include "node_client.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "gandiva/common/private_files.h"
#include "gandiva/contract/environment.h"

extern char** environ;

namespace gandiva::cli {

namespace {

// A local socket is trusted only in a directory of root's or the caller's own
// that no one else may write, nor any directory above it (the Slurm plugin's
// rule): in one another user controls, that user could stand in for gandivad
// and be handed what the CLI sends (a job's whole environment). A directory
// that does not exist is left to the connection to report.
Status CheckSocketDir(const std::string& endpoint) {
  if (endpoint.rfind("ipc:///", 0) != 0) return Status::Ok();
  const std::string path = endpoint.substr(6);
  const std::string dir = path.substr(0, std::max<size_t>(path.rfind('/'), 1));
  const Status s = CheckPrivateDir(dir, getuid());
  if (s.ok() || s.code() == StatusCode::kNotFound) return Status::Ok();
  return PermissionDenied("will not trust the socket " + path + ": " + s.message());
}

}  // namespace

NodeCommand::NodeCommand(std::string name, std::set<std::string> valued,
                         std::set<std::string> boolean)
    : name_(std::move(name)), flags_([&] {
        valued.insert("endpoint");
        valued.insert("key");
        valued.insert("server-key");
        boolean.insert("json");
        return Flags(valued, boolean);
      }()) {}

bool NodeCommand::Parse(const Args& args, bool stop_at_positional) {
  if (Status s = flags_.Parse(args, stop_at_positional); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", name_.c_str(), s.message().c_str());
    return false;
  }
  const bool scheduler = to_scheduler_ || flags_.Has("scheduler");
  const std::string endpoint =
      flags_.Get("endpoint", scheduler ? DefaultSchedulerEndpoint() : DefaultEndpoint());
  if (Status s = CheckSocketDir(endpoint); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", name_.c_str(), s.message().c_str());
    return false;
  }
  client_ = std::make_unique<ApiClient>(endpoint);
  if (flags_.Has("key") != flags_.Has("server-key")) {
    std::fprintf(stderr, "%s: --key and --server-key go together\n", name_.c_str());
    return false;
  }
  if (flags_.Has("key")) {
    auto keys = protocol::ReadCurveClientKeys(flags_.Get("key"), flags_.Get("server-key"));
    if (!keys.ok()) {
      std::fprintf(stderr, "%s: %s\n", name_.c_str(), keys.status().message().c_str());
      return false;
    }
    client_->SetCurve(std::move(keys).value());
  }
  return true;
}

StatusOr<protocol::Json> CheckedReply(protocol::MessageType type, StatusOr<protocol::Json> reply) {
  if (!reply.ok()) return reply;
  if (Status s = protocol::ValidateReply(type, *reply, protocol::UnknownFields::kAllow); !s.ok())
    return Status(s.code(), "gandivad's " + s.message() + " (a gandivad of another version?)");
  return reply;
}

std::optional<protocol::Json> NodeCommand::Call(protocol::MessageType type,
                                                const protocol::Json& fields) {
  auto reply = CheckedReply(type, client_->Call(type, fields));
  if (!reply.ok()) {
    std::fprintf(stderr, "%s: %s\n", name_.c_str(), reply.status().message().c_str());
    return std::nullopt;
  }
  return std::move(reply).value();
}

int NodeCommand::UsageError(const std::string& message) const {
  std::fprintf(stderr, "%s: %s\n", name_.c_str(), message.c_str());
  return kExitUsage;
}

std::optional<int64_t> ParseJobId(const std::string& text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v <= 0) return std::nullopt;
  return v;
}

protocol::Json CurrentEnvironment() {
  protocol::Json env = protocol::Json::object();
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (auto eq = kv.find('='); eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  env.erase(checkpoint::kEnvRestore);  // a migrated copy restores from the stream, not from DIR
  return env;
}

void PrependEnv(const char* name, const std::string& value, char sep) {
  const char* old = std::getenv(name);
  std::string v = value;
  if (old && *old) v += sep + std::string(old);
  setenv(name, v.c_str(), 1);
}

}  // namespace gandiva::cli
