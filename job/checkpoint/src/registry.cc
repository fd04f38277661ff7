// The process-wide state registry: one per process, shared by every copy of
// the runtime in it (libgandiva.so, the Python extension, the CUDA shim).
#include "gandiva/checkpoint/registry.h"

#include <dlfcn.h>

#include "format.h"

namespace gandiva::checkpoint {
namespace {

// A copy of the runtime shares another copy's registry only if both agree on
// its layout (they are built from the same sources; a mismatch keeps its own).
constexpr uint32_t kRegistryAbi = (1u << 24) | (sizeof(StateRegistry) << 12) | sizeof(StateEntry);

StateRegistry* OwnRegistry() {
  // Leaked on purpose: save functions may run from atexit handlers and other
  // static destructors.
  static auto* registry = new StateRegistry();
  return registry;
}

}  // namespace
}  // namespace gandiva::checkpoint

// Exported so that every copy of the runtime in the process finds the same
// registry: the first one in the global lookup order wins (the preloaded shim,
// else libgandiva.so); a copy that finds none (or another layout) uses its own.
extern "C" __attribute__((visibility("default"))) void* gandiva_state_registry_v1(uint32_t abi) {
  return abi == gandiva::checkpoint::kRegistryAbi ? gandiva::checkpoint::OwnRegistry() : nullptr;
}

namespace gandiva::checkpoint {

StateRegistry& StateRegistry::Global() {
  static StateRegistry* const registry = [] {
    using Getter = void* (*)(uint32_t);
    auto get = reinterpret_cast<Getter>(dlsym(RTLD_DEFAULT, "gandiva_state_registry_v1"));
    void* shared = get ? get(kRegistryAbi) : nullptr;
    return shared ? static_cast<StateRegistry*>(shared) : OwnRegistry();
  }();
  return *registry;
}

Status StateRegistry::Register(std::string name, SaveFn save, LoadFn load, CheckFn check) {
  if (!save || !load)
    return InvalidArgument("state '" + name + "' needs a save and a load function");
  return Add(StateEntry{std::move(name), std::move(save), std::move(load), std::move(check), {}});
}

Status StateRegistry::RegisterBuffer(std::string name, void* data, size_t size,
                                     std::shared_ptr<const void> owner) {
  if (!data || size == 0)
    return InvalidArgument("buffer state '" + name + "' needs memory (data and a size > 0)");
  const std::span<uint8_t> place(static_cast<uint8_t*>(data), size);
  SaveFn save = [place, owner = std::move(owner)](SectionWriter& w) {
    return w.Write(place.data(), place.size());
  };
  LoadFn load = [place, name](SectionReader& r) {
    if (r.size() != place.size())
      return FailedPrecondition("the checkpoint's section '" + name + "' holds " +
                                std::to_string(r.size()) + " bytes; the buffer registered here " +
                                std::to_string(place.size()));
    // Bytes received in place (stream_reader.cc) are not copied again.
    if (r.Read(place.data(), place.size()) != place.size())
      return DataLoss("section '" + name + "' ended early");
    return Status::Ok();
  };
  return Add(StateEntry{std::move(name), std::move(save), std::move(load), nullptr, place});
}

Status StateRegistry::Add(StateEntry entry) {
  if (entry.name.empty() || entry.name.size() > kMaxSectionName)
    return InvalidArgument("state name must be 1.." + std::to_string(kMaxSectionName) +
                           " bytes, got " + std::to_string(entry.name.size()));
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : entries_)
    if (e->name == entry.name)
      return AlreadyExists("state '" + entry.name + "' is registered already");
  entries_.push_back(std::make_shared<StateEntry>(std::move(entry)));
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

size_t StateRegistry::Count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

Status CheckSaveable(const std::vector<std::shared_ptr<const StateEntry>>& entries) {
  for (const auto& e : entries) {
    if (!e->check) continue;
    if (Status s = e->check(); !s.ok())
      return Status(s.code(), "section '" + e->name + "': " + s.message());
  }
  return Status::Ok();
}

}  // namespace gandiva::checkpoint
