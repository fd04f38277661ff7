// Memory limits for launched jobs through cgroup v2: each limited job gets its
// own cgroup with memory.max, under one cgroup gandivad makes for its jobs below
// its own. Probed once at start-up; where the node cannot do it (no cgroup v2
// hierarchy, no memory controller in it: a cgroup v1 or hybrid system, or one
// gandivad may not enable controllers in), it says why, and limits are reported
// as not enforced rather than pretended.
//
// The job joins its cgroup right after it starts (launcher.h): what it allocates
// in its first instants, before the move, is charged to gandivad's cgroup. In a
// cgroup of its own (systemd Delegate=yes), gandivad first moves itself into a
// leaf `<own>/gandivad`, as cgroup v2 hands controllers only to the children of
// a cgroup with no process in it.
#ifndef GANDIVA_NODE_JOBS_MEMORY_CGROUPS_H_
#define GANDIVA_NODE_JOBS_MEMORY_CGROUPS_H_

#include <cstdint>
#include <string>

#include "gandiva/status.h"

namespace gandiva::controller {

class MemoryCgroups {
 public:
  // Finds the cgroup v2 mount and gandivad's cgroup in it, checks the memory
  // controller and makes the jobs' parent cgroup `<own>/<name>`.
  static MemoryCgroups Probe(const std::string& name);
  MemoryCgroups() = default;

  bool enforced() const { return !parent_.empty(); }
  // "enforced: cgroup v2 memory.max under DIR" or "not enforced: <why>".
  const std::string& status() const { return status_; }

  // The job's own cgroup, its memory.max set to `bytes`; its path.
  StatusOr<std::string> CreateForJob(uint64_t job, uint64_t bytes) const;
  // Removes an (empty) cgroup; the jobs' parent too when the node stops.
  static void Remove(const std::string& dir);
  void RemoveParent() const { Remove(parent_); }

 private:
  std::string parent_;  // "" when limits are not enforced
  std::string status_ = "not enforced: not probed";
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_MEMORY_CGROUPS_H_
