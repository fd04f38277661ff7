// Wire names of operation steps (indexed by the enum's values).
#include "migration/operation.h"

namespace gandiva::controller {

namespace {
constexpr const char* kStepNames[] = {"",        "parking",   "writing",   "preparing",
                                      "warming", "streaming", "restoring", "switching"};
static_assert(std::size(kStepNames) == static_cast<size_t>(OperationStep::kSwitching) + 1);
}  // namespace

const char* OperationStepName(OperationStep step) { return kStepNames[static_cast<size_t>(step)]; }

}  // namespace gandiva::controller
