// Wire names of operation kinds, states and steps (indexed by the enums' values).
#include "migration/operation.h"

namespace gandiva::controller {

namespace {
constexpr const char* kStateNames[] = {"running", "done", "failed"};
constexpr const char* kStepNames[] = {"",        "parking",   "writing",   "preparing",
                                      "warming", "streaming", "restoring", "switching"};
static_assert(std::size(kStepNames) == static_cast<size_t>(OperationStep::kSwitching) + 1);
}  // namespace

const char* OperationKindName(OperationKind kind) {
  return kind == OperationKind::kCheckpoint ? "checkpoint" : "migrate";
}

const char* OperationStateName(OperationState state) {
  return kStateNames[static_cast<size_t>(state)];
}

const char* OperationStepName(OperationStep step) { return kStepNames[static_cast<size_t>(step)]; }

}  // namespace gandiva::controller
