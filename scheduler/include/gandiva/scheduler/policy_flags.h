// The policies' knobs (PolicyOptions) as command-line flags, the same for
// `gandiva sim` and `gandiva scheduler`: a policy runs live as it was simulated.
#ifndef GANDIVA_SCHED_POLICY_FLAGS_H_
#define GANDIVA_SCHED_POLICY_FLAGS_H_

#include <set>
#include <string>

#include "gandiva/common/flags.h"
#include "gandiva/scheduler/policy.h"
#include "gandiva/status.h"

namespace gandiva::sched {

// The flags' lines for a usage text, under a " policies:" heading.
extern const char* const kPolicyFlagsUsage;
std::set<std::string> PolicyValuedFlags();
std::set<std::string> PolicyBooleanFlags();
// Sets the options the flags name; invalid_argument naming a bad flag.
Status ApplyPolicyFlags(const Flags& f, PolicyOptions* p);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_POLICY_FLAGS_H_
