// The process-wide state registry.
#include "checkpoint/registry.h"

#include "checkpoint/format.h"

namespace gandiva::checkpoint {

StateRegistry& StateRegistry::Global() {
  // Leaked on purpose: save functions may run from atexit handlers and other
  // static destructors.
  static auto* registry = new StateRegistry();
  return *registry;
}

Status StateRegistry::Register(std::string name, SaveFn save, LoadFn load) {
  if (name.empty() || name.size() > kMaxSectionName)
    return InvalidArgument("state name must be 1.." + std::to_string(kMaxSectionName) +
                           " bytes, got " + std::to_string(name.size()));
  if (!save || !load) return InvalidArgument("state '" + name + "' needs a save and a load function");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : entries_)
    if (e->name == name) return AlreadyExists("state '" + name + "' is registered already");
  entries_.push_back(std::make_shared<StateEntry>(StateEntry{std::move(name), std::move(save),
                                                             std::move(load)}));
  return Status::Ok();
}

Status StateRegistry::Unregister(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if ((*it)->name == name) {
      entries_.erase(it);
      return Status::Ok();
    }
  }
  return NotFound("no state named '" + name + "' is registered");
}

std::vector<std::shared_ptr<const StateEntry>> StateRegistry::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

std::vector<std::string> StateRegistry::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& e : entries_) names.push_back(e->name);
  return names;
}

}  // namespace gandiva::checkpoint
