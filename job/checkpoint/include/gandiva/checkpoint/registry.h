// The job's registered state: named sections, each with a save and a load
// function, checkpointed in registration order. The C API (gd_register_state)
// and the Python layer sit on this; so does the CUDA shim for device memory.
//
// Thread-safety: Register/Unregister/Snapshot take a mutex (never on the hot
// path). Save and load functions run on the thread that checkpoints (the
// boundary thread, or the caller of gd_checkpoint) without the lock held.
#ifndef GANDIVA_CHECKPOINT_REGISTRY_H_
#define GANDIVA_CHECKPOINT_REGISTRY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::checkpoint {

// Where a save function writes its section's bytes.
class SectionWriter {
 public:
  virtual ~SectionWriter() = default;
  // Appends data[0, n). Large writes go out without an extra copy. After the
  // first error every later call returns the same error.
  virtual Status Write(const void* data, size_t n) = 0;
  // Bytes written to this section so far.
  virtual uint64_t written() const = 0;
};

// Where a load function reads its section's bytes. The whole stream has been
// verified before any load function runs.
class SectionReader {
 public:
  virtual ~SectionReader() = default;
  // Copies up to n bytes into out; returns the count, 0 at the end of the section.
  virtual size_t Read(void* out, size_t n) = 0;
  // The next contiguous piece of the section (at most max bytes), without a
  // copy; empty at the end. Valid until the load function returns.
  virtual std::span<const uint8_t> Next(size_t max) = 0;
  virtual uint64_t size() const = 0;
  virtual uint64_t remaining() const = 0;
};

using SaveFn = std::function<Status(SectionWriter&)>;
using LoadFn = std::function<Status(SectionReader&)>;
// Optional: says whether the section can be saved now, so that a checkpoint which
// could not be restored is refused before its target is opened or a byte written.
using CheckFn = std::function<Status()>;

struct StateEntry {
  std::string name;
  SaveFn save;
  LoadFn load;
  CheckFn check;  // may be empty
  // A buffer section's memory (RegisterBuffer), else empty. A section
  // arriving on a socket is received straight into it, and its load then
  // finds the bytes in place: no copy after the stream.
  std::span<uint8_t> place{};
};

class StateRegistry {
 public:
  // The process-wide registry: one per process. Every copy of the runtime in
  // the process (libgandiva.so, the Python extension, the CUDA shim) resolves
  // the exported gandiva_state_registry_v1 and uses the first one found.
  static StateRegistry& Global();

  // Names are 1..256 bytes; AlreadyExists if taken.
  Status Register(std::string name, SaveFn save, LoadFn load, CheckFn check = nullptr);
  // A section that is exactly the `size` bytes at `data`: saved from there,
  // restored into there (a section of another size fails the restore). The
  // memory must stay valid until Unregister; `owner`, if given, is kept alive
  // as long as the entry (the Python binding keeps its buffer export there).
  Status RegisterBuffer(std::string name, void* data, size_t size,
                        std::shared_ptr<const void> owner = nullptr);
  // NotFound if no state has that name.
  Status Unregister(const std::string& name);
  // The entries in registration order. An entry stays alive while a
  // checkpoint uses it, even if it is unregistered meanwhile.
  std::vector<std::shared_ptr<const StateEntry>> Snapshot() const;
  std::vector<std::string> Names() const;
  size_t Count() const;
  // True for the first caller in the process only: the restore from
  // GANDIVA_RESTORE happens once, by whichever runtime copy reaches its first
  // boundary first (a second restore later would rewind the job).
  bool ClaimEnvironmentRestore() { return !env_restore_claimed_.exchange(true); }

 private:
  Status Add(StateEntry entry);
  std::atomic<bool> env_restore_claimed_{false};
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<const StateEntry>> entries_;
};

// Shorthands on the global registry.
inline Status RegisterState(std::string name, SaveFn save, LoadFn load, CheckFn check = nullptr) {
  return StateRegistry::Global().Register(std::move(name), std::move(save), std::move(load),
                                          std::move(check));
}

inline Status RegisterBuffer(std::string name, void* data, size_t size,
                             std::shared_ptr<const void> owner = nullptr) {
  return StateRegistry::Global().RegisterBuffer(std::move(name), data, size, std::move(owner));
}

// Runs every entry's check, in order; the first failure names its section. SaveState
// calls it before it opens the target.
Status CheckSaveable(const std::vector<std::shared_ptr<const StateEntry>>& entries);
inline Status UnregisterState(const std::string& name) {
  return StateRegistry::Global().Unregister(name);
}

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_REGISTRY_H_
