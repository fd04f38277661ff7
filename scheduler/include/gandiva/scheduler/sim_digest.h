// A fingerprint of everything a replay decided: every action carried out
// (SimResult::actions_digest: when, what, which job, which GPUs), each job's
// start, finish, preemptions and migrations, the utilisation series, and the
// counters of the cluster and the policy. Two runs with the same digest made the same
// decisions; the decision-digest test and the scale bench compare them across
// changes that must not alter scheduling (speed-ups).
#ifndef GANDIVA_SCHED_SIM_DIGEST_H_
#define GANDIVA_SCHED_SIM_DIGEST_H_

#include <cstdint>
#include <string>

#include "gandiva/scheduler/sim_cluster.h"

namespace gandiva::sched {

// Exact: doubles are hashed by their bits, so a change in the last place shows.
uint64_t DecisionDigest(const SimResult& result);
// 16 hex digits.
std::string DigestHex(uint64_t digest);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_SIM_DIGEST_H_
