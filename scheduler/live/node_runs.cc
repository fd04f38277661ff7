// See node_runs.h.
#include "live/node_runs.h"

namespace gandiva::sched::live {

using protocol::Json;

bool LiveOnNode(const std::string& s) { return s != "exited" && s != "failed" && s != "migrated"; }

// Two lookups an entry, not a walk over all its keys: most of an entry's
// fields are read only for the jobs that are ours and alive, and a walk
// touches every node of the entry's tree (measured: ~25% slower than looking
// up the ones needed).
NodeRuns::NodeRuns(const Json& jobs) {
  runs_.reserve(jobs.size());
  for (const Json& entry : jobs) {
    runs_.push_back({entry["id"].get<int64_t>(), &entry,
                     LiveOnNode(entry["state"].get_ref<const std::string&>())});
  }
}

const NodeRun* NodeRuns::Find(int64_t id) const {
  for (const NodeRun& r : runs_)
    if (r.id == id) return &r;
  return nullptr;
}

}  // namespace gandiva::sched::live
