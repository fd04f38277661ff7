// NodeRuns: a node's list_jobs reply, indexed once per pass: each entry's id
// and whether it still lives on the node, read once. A pass reads every entry
// of every node's reply; at 10,000 jobs the JSON lookups (a walk of a
// string-keyed tree each, through memory the reply was just parsed into) are
// the largest part of a busy pass, so no field is looked up twice, and none
// that the pass does not need.
#ifndef GANDIVA_SCHEDULER_LIVE_NODE_RUNS_H_
#define GANDIVA_SCHEDULER_LIVE_NODE_RUNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gandiva/protocol/codec.h"

namespace gandiva::sched::live {

// A job's state on its node is one it lives in (running, suspended, ...)
// unless it exited, failed or was migrated away.
bool LiveOnNode(const std::string& node_state);

// One entry of a list_jobs reply (which must outlive it).
struct NodeRun {
  int64_t id = 0;                         // its id on the node
  const protocol::Json* entry = nullptr;  // the whole entry, for the other fields
  bool live = false;                      // LiveOnNode(its state)
  // It ended and the node knows how (an ended job's exit status follows its
  // end by a moment: exit_reason is "none" until then).
  bool ended() const { return !live && (*entry)["exit_reason"] != "none"; }
};

class NodeRuns {
 public:
  // `jobs`: a list_jobs reply's "jobs" array, whose entries have an id and a
  // state (the node API's schema); reads both of each entry.
  explicit NodeRuns(const protocol::Json& jobs);
  // The entry with that id on the node, or nullptr. A linear search: a node
  // lists a few dozen jobs.
  const NodeRun* Find(int64_t id) const;
  const std::vector<NodeRun>& all() const { return runs_; }

 private:
  std::vector<NodeRun> runs_;
};

}  // namespace gandiva::sched::live

#endif  // GANDIVA_SCHEDULER_LIVE_NODE_RUNS_H_
