// Wire names of operation kinds, states and steps.
#include "migration/operation.h"

namespace gandiva::controller {

const char* OperationKindName(OperationKind kind) {
  return kind == OperationKind::kCheckpoint ? "checkpoint" : "migrate";
}

const char* OperationStateName(OperationState state) {
  switch (state) {
    case OperationState::kRunning:
      return "running";
    case OperationState::kDone:
      return "done";
    case OperationState::kFailed:
      return "failed";
  }
  return "?";
}

const char* OperationStepName(OperationStep step) {
  switch (step) {
    case OperationStep::kNone:
      return "";
    case OperationStep::kParking:
      return "parking";
    case OperationStep::kWriting:
      return "writing";
    case OperationStep::kPreparing:
      return "preparing";
    case OperationStep::kWarming:
      return "warming";
    case OperationStep::kStreaming:
      return "streaming";
    case OperationStep::kRestoring:
      return "restoring";
    case OperationStep::kSwitching:
      return "switching";
  }
  return "?";
}

}  // namespace gandiva::controller
