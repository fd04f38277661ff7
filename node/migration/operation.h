// A checkpoint or a migration of a job, as list_jobs shows it in `operation`.
// Kinds, states and steps are enums in the code; their wire names ("migrate",
// "running", "streaming", ...) are produced only where they cross the wire.
#ifndef GANDIVA_NODE_MIGRATION_OPERATION_H_
#define GANDIVA_NODE_MIGRATION_OPERATION_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>

#include "gandiva/protocol/enums.h"

namespace gandiva::controller {

// Kind and state are the schema's enums (messages.def); the step is the node's own.
using protocol::OperationKind;
using protocol::OperationState;
// What a running operation is doing now. Checkpoint: parking, writing.
// Migration source: preparing, warming, parking, streaming, restoring, switching.
enum class OperationStep {
  kNone,
  kParking,
  kWriting,
  kPreparing,
  kWarming,
  kStreaming,
  kRestoring,
  kSwitching
};

const char* OperationStepName(OperationStep step);  // "" for kNone

struct Operation {
  OperationKind kind = OperationKind::kCheckpoint;
  OperationState state = OperationState::kRunning;
  OperationStep step = OperationStep::kNone;
  std::string error;
  std::string target;  // checkpoint dir, or destination node
  uint64_t bytes = 0;
  double downtime_ms = 0;  // migrate: source parked -> destination running
  uint64_t to_job = 0;
  uint32_t start_tries = 0;  // migrate: migrate_start sent this many times (the last answered)
  uint64_t started_ns = 0, finished_ns = 0;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_OPERATION_H_
