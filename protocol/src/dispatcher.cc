// Request dispatch and replies that may complete later; see dispatcher.h.
#include "gandiva/protocol/dispatcher.h"

#include <atomic>
#include <charconv>

#include "gandiva/common/log.h"

namespace gandiva::protocol {

StatusOr<std::map<std::string, std::string>> EnvFromRequest(const Json& req) {
  std::map<std::string, std::string> env;
  if (!req.contains("env")) return env;
  for (auto it = req["env"].begin(); it != req["env"].end(); ++it) {
    if (!it.value().is_string())
      return InvalidArgument("env values must be strings ('" + it.key() + "')");
    env[it.key()] = it.value().get<std::string>();
  }
  return env;
}

struct Reply::State {
  Send send;
  std::atomic<bool> sent{false};
  ~State() {
    if (!sent.load()) send(Internal("the request was dropped without a reply"));
  }
};

Reply::Reply(Send send) : state_(std::make_shared<State>()) { state_->send = std::move(send); }

void Reply::operator()(const StatusOr<Json>& result) const {
  if (!state_->sent.exchange(true)) state_->send(result);
}

bool Reply::done() const { return state_->sent.load(); }

void Dispatcher::On(protocol::MessageType type, Handler handler) {
  handlers_[type] = std::move(handler);
}

void Dispatcher::OnSync(protocol::MessageType type, SyncHandler handler) {
  handlers_[type] = [h = std::move(handler)](Call call, Reply reply) { reply(h(call)); };
}

void Dispatcher::Dispatch(Call call, Reply reply) const {
  auto it = handlers_.find(call.request.type);
  if (it == handlers_.end()) return reply(Unimplemented("request type not handled"));
  try {
    it->second(std::move(call), reply);
  } catch (const std::exception& e) {
    // A handler bug must not take the daemon down, and the client still gets its reply.
    GD_LOG(kError, "internal error while serving a request: %s", e.what());
    reply(Internal(e.what()));
  }
}

std::optional<Caller> CallerFromPeerAddress(std::string_view address) {
  // The last three fields: a host part may hold colons of its own.
  int64_t fields[3];
  for (int k = 2; k >= 0; --k) {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const std::string_view digits = address.substr(colon + 1);
    int64_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || value < 0)
      return std::nullopt;
    fields[k] = value;
    address = address.substr(0, colon);
  }
  Caller c;
  c.in_process = false;
  c.uid = fields[0];
  c.gid = fields[1];
  c.pid = fields[2];
  return c;
}

}  // namespace gandiva::protocol
