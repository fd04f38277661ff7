// Shared plumbing of the node commands: flags with --endpoint and --json, one
// API call whose reply is checked against the schema, with a clear error on
// failure, exit codes (0 ok, 1 failed, 2 usage).
#ifndef GANDIVA_CLI_NODE_CLIENT_H_
#define GANDIVA_CLI_NODE_CLIENT_H_

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "commands.h"
#include "gandiva/common/flags.h"
#include "gandiva/protocol/client.h"
#include "gandiva/protocol/codec.h"

namespace gandiva::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

class NodeCommand {
 public:
  // `name` for messages ("gandiva ps"); extra valued and boolean flags beyond
  // --endpoint and --json.
  NodeCommand(std::string name, std::set<std::string> valued = {},
              std::set<std::string> boolean = {});

  // The command talks to the cluster scheduler: its endpoint is the default
  // (as it is for a command given --scheduler).
  void TalkToScheduler() { to_scheduler_ = true; }
  // Parses args; on error prints it and returns false (exit with kExitUsage).
  bool Parse(const Args& args, bool stop_at_positional = false);
  const Flags& flags() const { return flags_; }
  bool json() const { return flags_.Has("json"); }

  // One API call; on error prints "gandiva ps: <message>" and returns nullopt.
  // The reply has every field of its schema (messages.def), of its type, so a
  // command may read them without checking (CheckedReply).
  std::optional<protocol::Json> Call(protocol::MessageType type,
                                     const protocol::Json& fields = protocol::Json::object());
  // Prints a usage error and returns kExitUsage.
  int UsageError(const std::string& message) const;
  ApiClient& client() { return *client_; }

 private:
  std::string name_;
  Flags flags_;
  std::unique_ptr<ApiClient> client_;  // made by Parse, once the endpoint is known
  bool to_scheduler_ = false;
};

// A reply of `type` as Call returns it, or the status that says why it does not
// match the schema. Fields the schema does not name are let through: a newer
// gandivad may add some.
StatusOr<protocol::Json> CheckedReply(protocol::MessageType type, StatusOr<protocol::Json> reply);

// This process's environment as a request's "env" object, less GANDIVA_RESTORE
// (a migrated or restarted copy restores from elsewhere).
protocol::Json CurrentEnvironment();
// Puts `value` in front of the variable NAME's value, separated by `sep`.
void PrependEnv(const char* name, const std::string& value, char sep);

// Parses a job id argument ("3"); nullopt if it is not a positive integer.
std::optional<int64_t> ParseJobId(const std::string& text);

}  // namespace gandiva::cli

#endif  // GANDIVA_CLI_NODE_CLIENT_H_
