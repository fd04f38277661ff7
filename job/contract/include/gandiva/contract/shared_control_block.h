// A control block in shared memory. The controller creates and removes it; the job
// opens it by the name the controller put in GANDIVA_CONTROL_BLOCK. A name is
// either a POSIX shared-memory name, "/gandiva.<node>.<pid>.<job>" (a file in
// /dev/shm, for a job that shares gandivad's /dev/shm), or an absolute path of a
// file, "/STATE/blocks/gandiva.<node>.<pid>.<job>" (IsFileName: for a job in a
// container, whose /dev/shm is its own; gandivad's blocks directory is mounted
// into the container, docs/containers.md). Both are mapped the same way.
#ifndef GANDIVA_RUNTIME_SHARED_CONTROL_BLOCK_H_
#define GANDIVA_RUNTIME_SHARED_CONTROL_BLOCK_H_

#include <memory>
#include <string>

#include "gandiva/contract/control_block.h"
#include "gandiva/status.h"

namespace gandiva::runtime {

class SharedControlBlock {
 public:
  // Creates (or replaces) the named block, initialised for `job_id`. Owner-only
  // (0600); owned by `owner_uid` when given (>= 0) and not ours: a job that runs
  // as another user (a Slurm job under a gandivad running as root). Giving it
  // away needs root: PermissionDenied otherwise, with nothing left behind.
  static StatusOr<std::unique_ptr<SharedControlBlock>> Create(const std::string& name,
                                                              uint64_t job_id, uint64_t lease_ns,
                                                              const std::string& node,
                                                              int64_t owner_uid = -1);
  // Opens an existing block and checks its magic and version.
  static StatusOr<std::unique_ptr<SharedControlBlock>> Open(const std::string& name);
  // Unlinks the name; existing mappings stay valid until unmapped.
  static void Remove(const std::string& name);
  // Whether `name` is a file path (a '/' after its first character), not a
  // shared-memory name.
  static bool IsFileName(const std::string& name);
  // The file behind `name`: the path itself, or /dev/shm/NAME.
  static std::string PathOf(const std::string& name);

  ~SharedControlBlock();
  SharedControlBlock(const SharedControlBlock&) = delete;
  SharedControlBlock& operator=(const SharedControlBlock&) = delete;

  ControlBlock* get() const { return cb_; }
  const std::string& name() const { return name_; }

  // For a controller whose blocks belong to other users (gandivad as root):
  // from now on a block whose file its owner cuts short (ftruncate) reads as
  // zeros where it faulted, instead of ending this process with SIGBUS, and
  // cut_short() says so; the controller then trusts nothing of it again.
  // Installs a process-wide SIGBUS handler that passes other faults on.
  static Status GuardAgainstShrinking();
  bool cut_short() const;

 private:
  struct Mapping;
  SharedControlBlock(std::string name, std::unique_ptr<Mapping> mapping);

  std::string name_;
  std::unique_ptr<Mapping> mapping_;
  ControlBlock* cb_ = nullptr;
  int guard_slot_ = -1;  // shrink_guard.h
};

}  // namespace gandiva::runtime

#endif  // GANDIVA_RUNTIME_SHARED_CONTROL_BLOCK_H_
